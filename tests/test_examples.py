"""The scripts in examples/ run and succeed (they check their own results)."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    return e


def test_api_example():
    proc = subprocess.run([sys.executable, os.path.join(REPO, "examples", "api_example.py"), "--n", "48"],
                          capture_output=True, text=True, timeout=300, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("bitwise equal") == 3
    assert "DIFFERENT" not in proc.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_hdf5_workflow(tmp_path):
    e = dict(env(), OZHPC=f"{sys.executable} -m ozhpc", N="48")
    proc = subprocess.run(["bash", os.path.join(REPO, "examples", "hdf5_workflow.sh"), str(tmp_path / "wf")],
                          capture_output=True, text=True, timeout=300, env=e)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "bitwise equal: one process (gemm.json) and the job file run (job.json)" in proc.stdout
    assert "ozhpc max / native max" in proc.stdout
    for name in ("in.h5", "gemm.h5", "job.h5", "gemm.json", "job.json", "job.toml"):
        assert (tmp_path / "wf" / name).exists(), name


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not found (pip install mpich)")
def test_pdgemm_example():
    proc = subprocess.run([shutil.which("mpiexec"), "-n", "4", sys.executable,
                           os.path.join(REPO, "examples", "pdgemm_example.py"), "--n", "30"],
                          capture_output=True, text=True, timeout=300, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pdgemm on a 2x2 grid" in proc.stdout
    assert "bitwise equal to ozhpc.gemm on one process" in proc.stdout
