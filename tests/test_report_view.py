"""Run reports explain themselves: every field documented in docs/batch.md, the summary shows
only what applies and where the report went, ``ozhpc report`` reads one or compares two."""
import json
import os
import pathlib
import re

import pytest

from conftest import REPO, run_cli

BATCH_MD = pathlib.Path(REPO) / "docs" / "batch.md"
OPAQUE = {"config"}
"""Fields whose inner keys are the run's own options (documented with the options, not here)."""


def documented() -> set[str]:
    """The names in backticks in docs/batch.md's section on the JSON report."""
    text = BATCH_MD.read_text()
    section = text[text.index("## The JSON report"):]
    section = section[:section.index("\n## ", 1)]
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", section))


def keys(report: dict) -> set[str]:
    found = set()
    for key, value in report.items():
        found.add(key)
        if isinstance(value, dict) and key not in OPAQUE:
            found |= set(value)
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs of one product (blocks 256 and 8, and 7 fixed slices) and one of another: (report, stdout)."""
    d = tmp_path_factory.mktemp("reports")
    for name, shape, seed in (("A", "40x30", 1), ("B", "30x20", 2), ("B2", "30x20", 3)):
        assert run_cli(["gen", "--shape", shape, "--seed", seed, f"{d}/in.h5:/{name}"]).returncode == 0
    out = {}
    for tag, b, extra in (("one", "B", []), ("blocks", "B", ["--block", "8"]), ("other", "B2", []),
                          ("fixed", "B", ["--slices", "7"])):
        r = run_cli(["gemm", f"{d}/in.h5:/A", f"{d}/in.h5:/{b}", "-o", f"{d}/out.h5:/{tag}",
                     "--report", d / f"{tag}.json", "--engine", "numpy", "--progress", "off", *extra], cwd=d)
        assert r.returncode == 0, r.stderr
        out[tag] = (d / f"{tag}.json", r.stdout)
    return d, out


def test_every_report_field_is_documented(runs, tmp_path):
    from ozhpc.io.h5io import DatasetRef
    from ozhpc.run.config import RunConfig
    from ozhpc.run.runner import execute

    d, out = runs
    report = json.loads(out["one"][0].read_text())
    dry = execute(RunConfig(a=DatasetRef(str(d / "in.h5"), "/A"), b=DatasetRef(str(d / "in.h5"), "/B"),
                            out=DatasetRef(str(tmp_path / "x.h5"), "/C"), dry_run=True, progress="off"))
    missing = sorted((keys(report) | keys(dry)) - documented())
    assert missing == [], f"report fields not documented in docs/batch.md, 'The JSON report': {missing}"
    assert {"startup", "compute", "comm", "comm_exposed", "certificate"} <= set(report["seconds"])


def test_summary_shows_what_applies_and_where_the_report_went(runs):
    d, out = runs
    path, stdout = out["one"]
    lines = stdout.splitlines()
    assert lines[0] == f"C = 40x20 (k = 30) -> {d}/out.h5:/one"
    assert lines[-1] == f"  report: {path} (read it with: ozhpc report {path})"
    assert "communication" not in stdout and "comm_exposed" not in stdout and "overlap" not in stdout  # 1 rank
    assert ", 1 rank\n" in stdout and "the rate a native FP64 GEMM would need to take as long" in stdout


def test_report_reads_one_report_in_words(runs):
    d, out = runs
    r = run_cli(["report", out["one"][0]])
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.splitlines()[1] == f"C = A B; A = {d}/in.h5:/A, B = {d}/in.h5:/B"
    # the summary as gemm printed it, less the line that says where the report is
    assert r.stdout.splitlines()[2:] == out["one"][1].splitlines()[:-1]


def test_the_plans_a_priori_bound_only_where_nothing_was_certified(runs):
    _, out = runs
    fixed = run_cli(["report", out["fixed"][0]]).stdout
    report = json.loads(out["fixed"][0].read_text())
    assert "certified: not checked (fixed --slices)" in fixed
    bound = report["error_bound"]
    assert fixed.splitlines()[-1] == (f"  a-priori error bound of the plan: |C_ij - (AB)_ij| <= 2^(e_i+f_j) ("
                                      f"{bound['truncation']:.2e} truncation + {bound['combine']:.2e} combine) + "
                                      f"{bound['rounding']:.2e} |C_ij|  (e_i, f_j: the row and column scales)")
    assert "error bound" not in run_cli(["report", out["one"][0]]).stdout   # certified: the certificate's bound


def test_product_line_spells_alpha_beta_and_transposes():
    from ozhpc.commands.report import product_line

    cfg = {"alpha": 2.0, "beta": -1.0, "transa": True, "transb": False, "a": "i.h5:/A", "b": "i.h5:/B", "c": "i.h5:/C0"}
    assert product_line(cfg) == "C = 2 A^T B - C0; A = i.h5:/A, B = i.h5:/B, C0 = i.h5:/C0"
    cfg.update(alpha=-1.0, beta=0.5, transa=False, transb=True)
    assert product_line(cfg) == "C = -A B^T + 0.5 C0; A = i.h5:/A, B = i.h5:/B, C0 = i.h5:/C0"


def test_report_compares_two(runs):
    _, out = runs
    r = run_cli(["report", out["one"][0], out["blocks"][0]])
    assert r.returncode == 0, r.stderr
    assert "result: the same C, bit for bit (same fingerprint)" in r.stdout
    assert "  block: [256, 256] -> [8, 8]" in r.stdout and "  m:" not in r.stdout
    assert re.search(r"^  total +\d+\.\d{3} +\d+\.\d{3} +(\d+\.\d\d|-)$", r.stdout, re.M)
    r = run_cli(["report", out["one"][0], out["other"][0]])
    assert "result: C differs (the fingerprints differ)" in r.stdout and "setup: the same" in r.stdout


def test_report_refuses_what_is_not_a_report(runs, tmp_path):
    _, out = runs
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"a": 1}')
    cases = {tmp_path / "none.json": "does not exist",
             tmp_path / "bad.json": "is not JSON",
             tmp_path / "other.json": "is not an ozhpc run report"}
    for path, words in cases.items():
        r = run_cli(["report", path])
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.startswith(f"ozhpc report: error: report '{path}'") and words in r.stderr
        assert r.stderr.count("\n") == 1
    os.mkfifo(tmp_path / "fifo.json")   # opened for reading, a FIFO would wait for a writer forever
    for path in (tmp_path / "fifo.json", "/dev/zero"):
        r = run_cli(["report", path], timeout=30)
        assert (r.returncode, r.stdout, r.stderr) == (2, "", f"ozhpc report: error: report '{path}' is not a "
                                                              "regular file\n")
    r = run_cli(["report", *[out["one"][0]] * 3])
    assert r.returncode == 2 and r.stderr == "ozhpc report: error: give one report, or two to compare (got 3)\n"


def test_report_config_paths_are_absolute(tmp_path):
    """``gemm`` with paths relative to the current directory: the report's config names them
    absolutely (docs/batch.md), as a job file's already are."""
    for name, shape, seed in (("A", "6x5", 1), ("B", "5x4", 2)):
        assert run_cli(["gen", "--shape", shape, "--seed", seed, f"{tmp_path}/in.h5:/{name}"]).returncode == 0
    r = run_cli(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", "--report", "r.json", "--progress", "off"],
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "r.json").read_text())["config"]
    assert (cfg["a"], cfg["b"], cfg["out"]) == (f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B", f"{tmp_path}/out.h5:/C")


def test_report_records_the_library_versions(runs):
    import importlib.metadata

    import h5py

    from ozhpc.parallel import mpi

    report = json.loads(runs[1]["one"][0].read_text())
    assert report["h5py"] == h5py.__version__
    assert report["mpi"] == (None if mpi.MISSING else " ".join(mpi.MPI.Get_library_version().splitlines()[0].split()))
    assert report["cuda_tile"] == importlib.metadata.version("cuda-tile")   # a test dependency
    assert "cupy" in report


def test_report_compare_lists_the_wire_and_no_ratio_to_a_zero_time(runs):
    """A phase of 0.000 s gets '-' rather than a ratio against a rounded zero; a changed wire is listed."""
    from ozhpc.commands.report import Fields, compare

    _, out = runs
    a = json.loads(out["one"][0].read_text())
    b = json.loads(out["one"][0].read_text())
    a["seconds"]["split"], b["seconds"]["split"] = 0.0001, 0.7705
    b["wire"] = "planes" if a["wire"] == "fp64" else "fp64"
    lines = compare(Fields(a), Fields(b))
    assert f"  wire: {a['wire']} -> {b['wire']}" in lines
    assert f"  {'split':<22}{0.0:>10.3f}{0.7705:>10.3f}{'-':>8}" in lines


def test_report_compare_checks_and_lists_the_version(runs, tmp_path):
    """Compared, a report is checked as when read alone (a version that is not a string: one line,
    exit 2), and a version that differs is listed with the setup."""
    _, out = runs
    good = json.loads(out["one"][0].read_text())
    for version, path in ((5, tmp_path / "five.json"), ("0.0.1", tmp_path / "old.json")):
        path.write_text(json.dumps(dict(good, ozhpc_version=version)))
    r = run_cli(["report", out["one"][0], tmp_path / "five.json"])
    assert (r.returncode, r.stderr) == (2, f"ozhpc report: error: report {str(tmp_path / 'five.json')!r} field "
                                           "'ozhpc_version' must be a string, got integer 5\n")
    r = run_cli(["report", out["one"][0], tmp_path / "old.json"])
    assert r.returncode == 0 and f"  ozhpc_version: {good['ozhpc_version']} -> 0.0.1" in r.stdout.splitlines()
    assert f"b: {tmp_path / 'old.json'}: " in r.stdout and "(ozhpc 0.0.1, " in r.stdout



def test_the_mpi_version_line_carries_no_nul(monkeypatch):
    """Open MPI ends its library version with a NUL; the report's and ``ozhpc info``'s line do not."""
    from ozhpc.parallel import mpi

    if mpi.MISSING is not None:
        pytest.skip("no MPI library here")
    monkeypatch.setattr(mpi.MPI, "Get_library_version",
                        lambda: "Open MPI v4.1.6, package: Debian OpenMPI, ident: 4.1.6\x00")
    assert mpi.library_version() == "Open MPI v4.1.6, package: Debian OpenMPI, ident: 4.1.6"
