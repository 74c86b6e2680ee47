"""Real ``mpiexec`` jobs (1 to 4 ranks, oversubscribed) spawned from pytest with timeouts.

Many configurations run inside one job per rank count (tests/helpers/mpi_worker.py), since
starting a job costs about 0.3 s. Failure cases assert, under 2 and 4 ranks: every
rank ends (no hang), exit status 2, exactly one error line naming the culprit, and
no output file (final or temporary).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from ozhpc.run.matrices import standard_matrix

from helpers.anyinput_cases import cases

pytestmark = pytest.mark.mpi

MPIEXEC = shutil.which("mpiexec")
WORKER = os.path.join(os.path.dirname(__file__), "helpers", "mpi_worker.py")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M, K, N = 157, 301, 96
JOB_TIMEOUT = 240

if MPIEXEC is None:
    pytest.skip("mpiexec not found (pip install mpich)", allow_module_level=True)


def mpiexec(n, args, timeout=JOB_TIMEOUT, env=None, cwd=None):
    cmd = [MPIEXEC, "-n", str(n), sys.executable] + list(args)
    full_env = dict(os.environ)
    # This checkout's ozhpc, not an installed copy (the worker's sys.path[0] is tests/).
    full_env["PYTHONPATH"] = REPO + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd)
    return proc, time.monotonic() - t0


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("mpi")
    a = standard_matrix(M, K, 1.0, 1)
    b = standard_matrix(K, N, 1.0, 2)
    with h5py.File(d / "in.h5", "w") as f:
        f["A"], f["AT"] = a, a.T
        f["B"], f["BT"] = b, b.T
        f["C0"] = standard_matrix(M, N, 0.5, 3)
        f["A3"] = np.zeros((4, 5, 6))
        f["S"] = np.zeros((K, N), dtype="S4")
        f["I"] = np.zeros((K, N), dtype=np.int64)
        f["I"][K - 1, N - 1] = 2**53 + 1   # an integer FP64 cannot hold, in one rank's blocks
        f["Bshort"] = np.zeros((K - 1, N))
        f.create_group("grp")
    return d


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_bitwise_reproducible_across_grids_and_blocks(ranks):
    """C bit for bit equal to single-process ozhpc.gemm for every grid/block/transpose case."""
    proc, _ = mpiexec(ranks, [WORKER, "repro"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [] and result["cases"] > 0


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_complex_products_are_bitwise_the_same_on_every_grid(ranks, tmp_path):
    """Complex SUMMA (ops N/T/C, mixed real/complex, complex alpha/beta, both schemes and wires) and
    complex HDF5 runs: C bit for bit equal to one-process ozhpc.gemm, report and attributes say so."""
    proc, _ = mpiexec(ranks, [WORKER, "complex", str(tmp_path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [] and result["cases"] > 0


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_wire_formats_give_the_same_bits(ranks):
    """FP64 panels split on arrival and int8-plane panels: C bit for bit equal to ozhpc.gemm, both
    schemes, certified "auto" with extra passes, bytes sent exactly the model's."""
    proc, _ = mpiexec(ranks, [WORKER, "wire"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [] and result["cases"] == 16 * {1: 1, 2: 2, 3: 2, 4: 3}[ranks]


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_every_finite_input_certified_with_the_same_bits(ranks):
    """Inputs no single scale per row reaches (tests/helpers/anyinput_cases.py: levels of scales,
    exact dots), both schemes and guarantees, every grid, FP64 and int8-plane panels: certified,
    C bit for bit equal to ozhpc.gemm's."""
    proc, _ = mpiexec(ranks, [WORKER, "anyinput"], timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [] and result["cases"] == len(cases()) * 4 * 2 * {1: 1, 2: 2, 3: 2, 4: 3}[ranks]


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_in_fact_passes_give_the_same_bits_on_every_grid(ranks):
    """Sparse, banded and triangular operands, where the default also checks accuracy in fact (its
    bounds passes and wider plans read only global values): the same plans and C bit for bit on
    every grid and layout as ozhpc.gemm."""
    proc, _ = mpiexec(ranks, [WORKER, "infact"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [] and result["cases"] == 3 * 2 * 2 * {1: 1, 2: 2, 3: 2, 4: 3}[ranks]


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_hdf5_block_cyclic_io(data, ranks, tmp_path):
    """runner.execute: block-cyclic reads/writes, transposed datasets, report sha256 = file sha256."""
    shutil.copy(data / "in.h5", tmp_path / "in.h5")
    proc, _ = mpiexec(ranks, [WORKER, "io", str(tmp_path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [] and result["cases"] > 0


def test_ranks_with_different_engines_all_refuse():
    """An "auto" choice that differs between ranks ends every rank with the same error, no hang."""
    proc, seconds = mpiexec(2, [WORKER, "mismatch"], timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [], result
    assert "rank 0 uses engine numpy and transport mpi-host, rank 1 engine numpy-other" in result["message"]
    assert seconds < 30


def _gemm_args(data, out, *extra, a="A", b="B"):
    a, b = (x if ":" in x else f"{data}/in.h5:/{x}" for x in (a, b))
    return ["-m", "ozhpc", "gemm", a, b, "-o", f"{out}:/C",
            "--engine", "numpy", "--progress", "off", *extra]


FAILURES = {
    "missing file": (dict(a="nowhere.h5:/A"), [], "'nowhere.h5' does not exist"),
    "missing C file": (dict(), ["--c", "nowhere.h5:/C0", "--beta", "1"], "'nowhere.h5' does not exist"),
    "missing dataset": (dict(a="nope"), [], "'/nope' not found"),
    "group not dataset": (dict(a="grp"), [], "is a group"),
    "not 2-D": (dict(a="A3"), [], "must be 2-D"),
    "string dtype": (dict(b="S"), [], "must hold real or complex numbers (floating point, integers or"),
    "integer too wide for FP64": (dict(b="I"), [], "holds the integer 9007199254740993, which FP64 cannot"),
    "shape mismatch": (dict(b="Bshort"), [], "shape mismatch"),
    "grid mismatch": (dict(), ["--grid", "3x1"], "--grid 3x1 needs 3 MPI ranks"),
    "bad option": (dict(), ["--block", "0"], "--block"),
    "unknown option": (dict(), ["--blok", "3"], "--blok"),
    "groups below 1": (dict(), ["--groups", "0"], "--groups must be at least 1, got 0"),
    "groups above 2s-1": (dict(), ["--slices", "4", "--groups", "9"], "--groups 9 is more than the 7 groups"),
    "slices with scheme ozaki2": (dict(), ["--scheme", "ozaki2", "--slices", "6"],
                                  "--slices 6 is an option of --scheme ozaki1; with --scheme ozaki2 leave it out"),
    "GPU transport, CPU engine": (dict(), ["--transport", "nccl"], "--transport nccl moves GPU panels"),
}


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("case", list(FAILURES))
def test_user_errors_end_every_rank(data, tmp_path, ranks, case):
    names, extra, needle = FAILURES[case]
    out = tmp_path / "out.h5"
    proc, seconds = mpiexec(ranks, _gemm_args(data, out, *extra, **names), timeout=60, cwd=tmp_path)
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode == 2, proc.stderr
    assert len(errors) == 1, proc.stderr
    assert needle in errors[0]
    assert "Traceback" not in proc.stderr
    assert seconds < 30
    assert os.listdir(tmp_path) == []


DIFFERENT_RUNS = {
    # rank 0's extra options, the other ranks', the option named: its value on rank 0, on the rank
    "block": ([], ["--block", "8"], "--block is 256x256 on rank 0 but 8x8 on rank 1"),
    "alpha": (["--alpha", "2"], [], "--alpha is 2.0 on rank 0 but 1.0 on rank 1"),
    "dry run": ([], ["--dry-run"], "--dry-run is False on rank 0 but True on rank 1"),
    "directory": ([], [], "input A is {d}/r0/in.h5:/A on rank 0 but {d}/r1/in.h5:/A on rank 1"),
}


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("case", list(DIFFERENT_RUNS))
def test_ranks_started_with_different_runs_all_refuse(data, tmp_path, ranks, case):
    """MPMD launches (``mpiexec -n 1 ... : -n 3 ...``) where ranks got other options or another
    working directory (relative paths read other files): C would be wrong, or a rank would wait
    forever. Every rank ends with one line naming the option and the ranks, nothing written."""
    first, rest, needle = DIFFERENT_RUNS[case]
    for name in ("r0", "r1"):
        (tmp_path / name).mkdir()
        shutil.copy(data / "in.h5", tmp_path / name / "in.h5")
    rank0 = _gemm_args(data, "out.h5", *first, a="in.h5:/A")
    others = _gemm_args(data, "out.h5", *rest, a="in.h5:/A")
    cmd = [MPIEXEC, "-n", "1", "-wdir", str(tmp_path / "r0"), sys.executable, *rank0, ":",
           "-n", str(ranks - 1), "-wdir", str(tmp_path / ("r1" if case == "directory" else "r0")),
           sys.executable, *others]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode == 2, proc.stderr
    assert errors == ["ozhpc gemm: error: the ranks were started with different runs: "
                      + needle.format(d=tmp_path) + "; start every rank with the same options, in the same directory"]
    assert time.monotonic() - t0 < 30
    assert sorted(os.listdir(tmp_path / "r0")) == sorted(os.listdir(tmp_path / "r1")) == ["in.h5"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_existing_output_needs_force(data, tmp_path, ranks):
    out = tmp_path / "out.h5"
    proc, _ = mpiexec(ranks, _gemm_args(data, out, "--block", "32"))
    assert proc.returncode == 0, proc.stderr
    before = out.read_bytes()
    proc, _ = mpiexec(ranks, _gemm_args(data, out, "--block", "32"))
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode == 2 and len(errors) == 1 and "--force" in errors[0]
    assert out.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["out.h5"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_exception_on_one_rank_aborts_the_job(data, tmp_path, ranks):
    """Rank 1 raises in the middle of its panel loop (tests/helpers/failing_rank.py): the job must abort."""
    out = tmp_path / "out.h5"
    args = _gemm_args(data, out, "--block", "16", "--panel", "16")
    args[:2] = [os.path.join(os.path.dirname(__file__), "helpers", "failing_rank.py")]
    proc, seconds = mpiexec(ranks, args, timeout=60)
    assert proc.returncode != 0
    assert "[rank 1]" in proc.stderr and "simulated failure" in proc.stderr
    assert seconds < 30
    assert os.listdir(tmp_path) == []
