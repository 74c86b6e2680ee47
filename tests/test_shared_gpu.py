"""Ranks sharing one GPU: 2 and 4 ranks of the cuTile engine on a single device, both
schemes, both wire formats, certified "auto" with its extra passes: C bit for bit equal to one
process's (tests/helpers/mpi_worker.py "wire cutile"), with "auto" transport avoiding NCCL and saying why.

Marked ``gpu``; skips cleanly without CuPy, cuda.tile or mpiexec. Run on one H200:
``CUDA_VISIBLE_DEVICES=0 python3 -m pytest -q -m gpu tests/test_shared_gpu.py``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(os.path.dirname(__file__), "helpers", "mpi_worker.py")


def _gpus() -> int:
    try:
        import cupy
        import cuda.tile  # noqa: F401
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001
        return 0


@pytest.mark.parametrize("ranks", [2, 4])
def test_ranks_sharing_one_gpu_give_one_ranks_bits(ranks):
    if _gpus() < 1 or shutil.which("mpiexec") is None:
        pytest.skip("needs a GPU with CuPy and cuda.tile, and mpiexec")
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from common import mpiexec_cmd, useful

    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), NCCL_NVLS_ENABLE="0",
               CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
    proc = subprocess.run(mpiexec_cmd(ranks) + ["--oversubscribe"] * ("Open MPI" in _mpi_version()) +
                          [sys.executable, WORKER, "wire", "cutile"], capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + useful(proc.stderr)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [] and result["cases"] == 20 * {2: 2, 4: 3}[ranks]
    assert result["transports"] and not any(t.startswith("nccl") for t in result["transports"])
    assert all("share GPU" in t for t in result["transports"]), result["transports"]


def _mpi_version() -> str:
    try:
        return subprocess.run([shutil.which("mpiexec"), "--version"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
