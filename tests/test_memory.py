"""The memory model (ozhpc.run.resources.estimate_memory) against the measured peak of real runs.

Each run is a child process that reports its own peak RSS (``ru_maxrss``) after
``ozhpc gemm``; the model, fed the run's local shapes and panel width, must be within 25%.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import h5py
import pytest

from ozhpc.ozaki.settings import OzakiSettings
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.resources import estimate_memory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = """
import resource, sys
from ozhpc.cli import main
code = main(sys.argv[1:])
print("MAXRSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, code)
"""


@pytest.mark.parametrize("n,scheme,extra,wire", [
    (1000, "ozaki1", [], "planes"), (1600, "ozaki1", ["--slices", "8"], "fp64"),
    (1000, "ozaki2", ["--bits", "56"], "planes"), (1600, "ozaki2", [], "planes"), (1600, "ozaki2", [], "fp64"),
])
def test_estimate_within_25_percent_of_the_measured_peak(tmp_path, n, scheme, extra, wire):
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = standard_matrix(n, n, 0.5, 1), standard_matrix(n, n, 0.5, 2)
    report = tmp_path / "run.json"
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", CHILD, "gemm", f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B",
                           "-o", f"{tmp_path}/out.h5:/C", "--engine", "numpy", "--scheme", scheme,
                           "--progress", "off", "--report", str(report), "--wire", wire, *extra],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    measured = int(next(line for line in proc.stdout.splitlines() if line.startswith("MAXRSS")).split()[1])
    run = json.loads(report.read_text())
    settings = OzakiSettings(scheme, **{opt.lstrip("-"): int(val) for opt, val in zip(extra[::2], extra[1::2])})
    assert run["wire"] == wire
    model = estimate_memory((n, n), (n, n), run["kb"], n, settings, wire=wire)
    assert 0.75 * measured <= model.host <= 1.25 * measured, (model.host / 2**20, measured / 2**20)


def test_dry_run_states_the_estimate_and_writes_nothing(tmp_path):
    from conftest import run_cli

    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = standard_matrix(300, 200, 0.5, 1), standard_matrix(200, 100, 0.5, 2)
        f.create_dataset("H", shape=(2_000_000, 2_000_000), dtype="f8", chunks=(1000, 1000))
    before = sorted(os.listdir(tmp_path))
    r = run_cli(["gemm", f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B", "-o", f"{tmp_path}/out.h5:/C",
                 "--engine", "numpy", "--scheme", "ozaki2", "--bits", "40", "--dry-run", "--report", "r.json"],
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = estimate_memory((300, 200), (100, 200), 200, 200, OzakiSettings("ozaki2", bits=40), wire="fp64")
    assert "dry run: C = 300x100 (k = 200)" in r.stdout and want.describe() in r.stdout
    assert "wire fp64" in r.stdout   # one rank: "auto" makes planes per panel only
    assert sorted(os.listdir(tmp_path)) == before  # no output, no report
    r = run_cli(["gemm", f"{tmp_path}/in.h5:/H", f"{tmp_path}/in.h5:/H", "-o", f"{tmp_path}/out.h5:/C",
                 "--engine", "numpy", "--dry-run"], cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "ozhpc gemm: error: not enough memory: peak per rank: host" in r.stderr


def test_run_dry_run_checks_the_job_and_writes_nothing(tmp_path):
    """``ozhpc run JOB.toml --dry-run`` is ``gemm --dry-run`` for a job file: the plan and the
    estimate, nothing read or written (no C, no report), exit 0; a job that cannot fit: one line, exit 2."""
    from conftest import run_cli

    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = standard_matrix(300, 200, 0.5, 1), standard_matrix(200, 100, 0.5, 2)
        f.create_dataset("H", shape=(2_000_000, 2_000_000), dtype="f8", chunks=(1000, 1000))
    job = ('[inputs]\na = "in.h5:/{a}"\nb = "in.h5:/{b}"\n[output]\nc = "out.h5:/C"\nreport = "r.json"\n'
           '[ozaki]\nscheme = "ozaki2"\nbits = 40\nengine = "numpy"\n')
    (tmp_path / "job.toml").write_text(job.format(a="A", b="B"))
    (tmp_path / "huge.toml").write_text(job.format(a="H", b="H"))
    before = sorted(os.listdir(tmp_path))
    r = run_cli(["run", "job.toml", "--dry-run"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = estimate_memory((300, 200), (100, 200), 200, 200, OzakiSettings("ozaki2", bits=40), wire="fp64")
    assert r.stdout.startswith(f"dry run: C = 300x100 (k = 200) -> {tmp_path}/out.h5:/C")
    assert want.describe() in r.stdout and "report:" not in r.stdout
    assert sorted(os.listdir(tmp_path)) == before
    r = run_cli(["run", "huge.toml", "--dry-run"], cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("ozhpc run: error: not enough memory: peak per rank: host")
    assert sorted(os.listdir(tmp_path)) == before
