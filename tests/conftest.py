import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def run_cli(args, cwd=None, env=None, timeout=120):
    """Run ``python -m ozhpc ARGS`` in a subprocess; returns the CompletedProcess."""
    import subprocess

    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = REPO + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "ozhpc", *map(str, args)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def _summa_product(A, B, C=None, *, info=False, engine="numpy", **options):
    """The distributed path on one rank: SUMMA over a 1x1 grid with small blocks and several
    k-panels (the multi-rank grids run under mpiexec in tests/test_mpi.py)."""
    from mpi4py import MPI

    from ozhpc.parallel import ProcessGrid, dist_gemm

    with ProcessGrid(MPI.COMM_SELF) as grid:
        out = dist_gemm(grid, A, B, C, block=(7, 5), kb=9, engine=engine, info=info, **options)
        out, meta = out if info else (out, None)
        whole = out.gather(0)
    return (whole, meta) if info else whole


@pytest.fixture(params=["gemm", "summa"])
def product(request):
    """The shared product pipeline through ``ozhpc.gemm`` and through SUMMA, with the same
    signature as ``ozhpc.gemm`` (engine "numpy" unless given)."""
    import ozhpc

    if request.param == "gemm":
        return lambda A, B, C=None, **kw: ozhpc.gemm(A, B, C, **{"engine": "numpy", **kw})
    return _summa_product


@pytest.fixture
def jobdir(tmp_path):
    """A directory with in.h5:/A (13x11), /B (11x7), /C0 (13x7), /V (a vector): job-file tests."""
    import h5py

    from ozhpc.matrices import standard_matrix

    d = tmp_path / "job"
    d.mkdir()
    with h5py.File(d / "in.h5", "w") as f:
        f["A"] = standard_matrix(13, 11, 0.5, 1)
        f["B"] = standard_matrix(11, 7, 0.5, 2)
        f["C0"] = standard_matrix(13, 7, 0.5, 3)
        f["V"] = np.zeros(5)
    return d


@pytest.fixture(scope="module")
def gpu():
    """(cuTile engine, cupy), or a clean skip without a GPU, CuPy or cuda.tile."""
    from ozhpc.engines import EngineUnavailable, get_engine

    try:
        engine = get_engine("cutile")
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    import cupy
    return engine, cupy
