"""The bits of C for a fixed set of products (tests/pinned_cases.py), pinned by SHA-256.

One process (``ozhpc.gemm``) and SUMMA under real ``mpiexec`` on grids 1x1, 2x2 and 1x3
with several block and panel sizes must all give exactly these hashes: a refactor, a new
engine path or a new transport that changes one bit of C fails here.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import ozhpc
from ozhpc.report import sha256_of_matrix

sys.path.insert(0, os.path.dirname(__file__))
from pinned_cases import CASES, gemm_kwargs, operands  # noqa: E402

PINNED = {
    "s1-auto": "714c64b08c00e6b806b5a34efd58a2896427f273f0b0b98850709298dcebb619",
    "s1-auto-phi2-ta": "935b472c71a1d4db33ac49b7c92e40353f67a0d646c897d4c85e5b71c5dc0553",
    "s1-6all-tb": "8255241ebf014aaa07e825e94343f70d1388aa03c8c1d8ff58667ec950dfff91",
    "s1-8-alphabeta": "3cb5b7438fdd9bd1157aab80613054e7910f6e7712cfc1e9c217bf5bfcc51b82",
    "s1-auto-special": "4f63d4d979c5c35b7b7a4508f026816a24ebadbf092f74c5a9c115a196a604b0",
    "s1-3x4": "45d15b193b071216c7b24f605eff5252856d50f2c3600a1a3b1193c8a4715460",
    "s2-auto": "7d27f361afb4536069e1a66f6f99e45d2c4daf0ba9645145338e4a06950874fb",
    "s2-30-alphabeta-t": "9b3c2caabac4c5d1c085b62be4570a5ac8e7edb4892f51d84021846f65a190a2",
    "s2-53-phi1": "9048c955424ccc84016b15e12c240370047fdc8e069d9f9f1ce16543fcb57656",
    "s2-auto-special": "2d3cb55b506eb71cfe3046644b616850008b437023f18781f6e29fc71d375fbc",
}

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(os.path.dirname(__file__), "mpi_worker.py")


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_process_bits_pinned(name):
    A, B, C0 = operands(CASES[name])
    assert sha256_of_matrix(ozhpc.gemm(A, B, C0, engine="numpy", **gemm_kwargs(CASES[name]))) == PINNED[name]


@pytest.mark.mpi
@pytest.mark.parametrize("grid", ["1x1", "2x2", "1x3"])
def test_summa_bits_pinned(grid):
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec not found (pip install mpich)")
    p, q = (int(x) for x in grid.split("x"))
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([mpiexec, "-n", str(p * q), sys.executable, WORKER, "pinned", grid],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["cases"] == 3 * len(CASES)
    assert result["failures"] == []
    for name, digests in result["digests"].items():
        assert set(digests) == {PINNED[name]}, name


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_cutile_engine_bits_pinned(name):
    """The cuTile engine, one process and SUMMA on a 1x1 grid with several k-panels."""
    from mpi4py import MPI

    from ozhpc.engines import EngineUnavailable, get_engine
    from ozhpc.parallel import ProcessGrid, dist_gemm

    try:
        engine = get_engine("cutile")
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    A, B, C0 = operands(CASES[name])
    kw = gemm_kwargs(CASES[name])
    assert sha256_of_matrix(ozhpc.gemm(A, B, C0, engine=engine, **kw)) == PINNED[name]
    with ProcessGrid(MPI.COMM_SELF) as grid:
        out = dist_gemm(grid, A, B, C0, block=(13, 7), kb=16, engine=engine, **kw).gather(0)
    assert sha256_of_matrix(out) == PINNED[name]
