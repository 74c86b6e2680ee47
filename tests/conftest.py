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

    from ozhpc.run.matrices import standard_matrix

    d = tmp_path / "job"
    d.mkdir()
    with h5py.File(d / "in.h5", "w") as f:
        f["A"] = standard_matrix(13, 11, 0.5, 1)
        f["B"] = standard_matrix(11, 7, 0.5, 2)
        f["C0"] = standard_matrix(13, 7, 0.5, 3)
        f["V"] = np.zeros(5)
    return d


def _gpu_missing() -> str | None:
    """Why the cuTile engine cannot run here, in a few words (None when it can)."""
    from ozhpc.engines import EngineUnavailable, get_engine

    try:
        get_engine("cutile")
    except EngineUnavailable as exc:  # "engine 'cutile' is not available: CuPy is not installed (...). ..."
        return str(exc).split(" available: ", 1)[-1].split(" (")[0].split(". ")[0]
    return None


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip with one short, shared reason when the cuTile engine cannot run
    (``-ra`` then folds them into one line per file)."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    why = _gpu_missing() if gpu_items else None
    if why is not None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"no GPU engine here: {why}"))


def pytest_terminal_summary(terminalreporter):
    """Skips as one line per reason, with the files (pyproject's ``-r`` leaves out pytest's own
    list of skips, one line per test location)."""
    groups: dict[str, list] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        path, _, reason = rep.longrepr if isinstance(rep.longrepr, tuple) else ("?", 0, str(rep.longrepr))
        entry = groups.setdefault(reason.removeprefix("Skipped: "), [0, {}])
        entry[0] += 1
        entry[1][os.path.basename(path)] = None
    if groups:
        terminalreporter.section("skipped, by reason", sep="-")
    for reason, (count, files) in sorted(groups.items(), key=lambda g: -g[1][0]):
        terminalreporter.write_line(f"SKIPPED [{count}] {reason} ({', '.join(files)})")


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
