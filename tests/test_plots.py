"""The figures' data: every transcribed figure is on the Markdown line it names; bench/plots.py
redraws small PNGs from it (when matplotlib is installed: pip install ".[bench]")."""
import json
import os
import pathlib

import pytest

from conftest import REPO

RESULTS = pathlib.Path(REPO) / "bench" / "results"


def source_line(ref: str) -> str:
    path, line = ref.rsplit(":", 1)
    return (pathlib.Path(REPO) / path).read_text().splitlines()[int(line) - 1]


def test_speed_figures_are_on_their_source_lines():
    rows = json.loads((RESULTS / "speed_h200_2026-12-01.json").read_text())["rows"]
    assert len(rows) >= 20
    for r in rows:
        cells = [c.strip() for c in source_line(r["source"]).strip("|").split("|")]
        assert cells[0] == str(r["n"]) and cells[4] == f"{r['tflops']:.1f}", r
        assert cells[5] == f"{r['x_dgemm']:.2f}" and cells[6] == f"{r['error']:.2e}", r


def test_accuracy_figures_are_on_their_source_lines():
    rows = json.loads((RESULTS / "accuracy_cpu_2026-12-01.json").read_text())["rows"]
    assert len(rows) == 10
    for r in rows:
        for key in ("source", "source ozaki2"):
            cells = [c.strip() for c in source_line(r[key]).strip("|").split("|")]
            assert float(cells[0]) == r["phi"] and int(cells[1]) == r["k"] and cells[2] == f"{r['native']:.2e}", r


def test_plots_redraw_small_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    import runpy

    plots = runpy.run_path(os.path.join(REPO, "bench", "plots.py"))
    assert plots["main"](["--out", str(tmp_path)]) == 0
    for name in ("speed_h200.png", "accuracy_phi.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) < 100_000
        assert (pathlib.Path(REPO) / "docs" / "figures" / name).exists()
