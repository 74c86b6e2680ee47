"""Multi-GPU SUMMA: 2 ranks on 2 GPUs, every usable transport, bits equal to 1 GPU and CPU.

Marked ``gpu``; skips cleanly without CuPy, cuda.tile, mpiexec or two GPUs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gpus() -> int:
    try:
        import cupy
        import cuda.tile  # noqa: F401
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001
        return 0


def test_two_gpus_bitwise_all_transports():
    if _gpus() < 2:
        pytest.skip("needs 2 GPUs with CuPy and cuda.tile")
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from common import mpiexec_cmd, useful

    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), NCCL_NVLS_ENABLE="0")
    proc = subprocess.run(mpiexec_cmd(2) + [sys.executable, os.path.join(REPO, "bench", "scaling", "multi_gpu.py"), "--check"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + useful(proc.stderr)
    result = json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])
    assert result["failures"] == [] and result["cases"] > 0
    assert "nccl" in result["transports"]


def test_nccl_transport_one_rank_and_int32_accumulator():
    """One rank: NCCL transport has nothing to move; SUMMA with many panels equals ozhpc.gemm."""
    if _gpus() < 1:
        pytest.skip("needs a GPU with CuPy and cuda.tile")
    import cupy as cp
    import numpy as np
    from mpi4py import MPI

    import ozhpc
    from ozhpc.parallel import ProcessGrid, Summa
    from ozhpc.parallel.transport_choice import nccl_available
    from ozhpc.run.matrices import standard_matrix

    if nccl_available() is not None:
        pytest.skip(nccl_available())
    a, b = standard_matrix(200, 1000, 0.5, 1), standard_matrix(1000, 150, 0.5, 2)
    want = ozhpc.gemm(a, b, engine="numpy", slices=7)
    with ProcessGrid(MPI.COMM_SELF) as grid, Summa(grid, 200, 150, 1000, block=32, kb=128, engine="cutile",
                                                    transport="nccl", slices=7) as summa:
        da, dbt, _ = summa.distribute(a, b)
        da.local, dbt.local = cp.asarray(da.local), cp.asarray(dbt.local)
        c = summa(da, dbt)
        assert summa.info.transport == "nccl" and summa.info.panels == 8
    assert np.array_equal(cp.asnumpy(c.local).view(np.int64), want.view(np.int64))
