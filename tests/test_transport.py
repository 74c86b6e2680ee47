"""Transport selection and auto-detection, without a GPU (CuPy / NCCL / CUDA-aware MPI mocked)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import types

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.errors import InputError, OptionError, cli_spelling
from ozhpc.parallel import ProcessGrid
from ozhpc.parallel import transport_choice as tr
from ozhpc.parallel.gpu_transport import NVLS_ENV, ensure_nvls_off
from ozhpc.parallel.summa import default_kb, overlap_fraction
from ozhpc.run.config import RunConfig, parse_panel

GPU_ENGINE = types.SimpleNamespace(name="cutile", on_device=True, k_align=16)
TWO = types.SimpleNamespace(size=2)


@pytest.fixture
def no_gpu_libs(monkeypatch):
    monkeypatch.setattr(tr, "nccl_available", lambda: "cupy.cuda.nccl cannot be imported (mocked)")
    monkeypatch.setattr(tr, "mpi_cuda_support", lambda: False)


def test_auto_cpu_engine_is_host_staged(no_gpu_libs):
    assert tr.choose_transport("auto", TWO, NumpyEngine())[0] == "mpi-host"
    assert tr.choose_transport(None, TWO, None)[0] == "mpi-host"


def test_auto_gpu_prefers_nccl_then_cuda_mpi_then_host(monkeypatch):
    monkeypatch.setattr(tr, "nccl_available", lambda: None)
    monkeypatch.setattr(tr, "mpi_cuda_support", lambda: True)
    assert tr.choose_transport("auto", TWO, GPU_ENGINE)[0] == "nccl"
    monkeypatch.setattr(tr, "nccl_available", lambda: "no nccl")
    assert tr.choose_transport("auto", TWO, GPU_ENGINE)[0] == "cuda-mpi"
    monkeypatch.setattr(tr, "mpi_cuda_support", lambda: False)
    name, why = tr.choose_transport("auto", TWO, GPU_ENGINE)
    assert name == "mpi-host" and "no NCCL" in why
    # one rank: nothing to move, whatever is installed
    monkeypatch.setattr(tr, "nccl_available", lambda: None)
    assert tr.choose_transport("auto", types.SimpleNamespace(size=1), GPU_ENGINE)[0] == "mpi-host"


def test_explicit_gpu_transports_raise_clearly(no_gpu_libs):
    with pytest.raises(tr.TransportUnavailable, match="nccl.*not available"):
        tr.choose_transport("nccl", TWO, GPU_ENGINE)
    with pytest.raises(tr.TransportUnavailable, match="CUDA support"):
        tr.choose_transport("cuda-mpi", TWO, GPU_ENGINE)
    with pytest.raises(tr.TransportUnavailable, match="cutile engine"):
        tr.choose_transport("nccl", TWO, NumpyEngine())
    with pytest.raises(ValueError, match="unknown transport"):
        tr.choose_transport("tcp", TWO, NumpyEngine())
    assert tr.choose_transport("mpi-host", TWO, GPU_ENGINE) == ("mpi-host", "requested")


def test_detection_helpers_without_cupy(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    monkeypatch.setitem(sys.modules, "cupy.cuda", None)
    assert "cannot be imported" in tr.nccl_available()
    monkeypatch.setattr(MPI, "Query_cuda_support", lambda: True, raising=False)
    assert tr.mpi_cuda_support() is True
    monkeypatch.delattr(MPI, "Query_cuda_support", raising=False)
    assert tr.mpi_cuda_support() is False


def test_get_transport_auto_on_cpu_and_reason():
    with ProcessGrid(MPI.COMM_SELF) as grid:
        t = tr.get_transport("auto", grid, NumpyEngine())
        assert isinstance(t, tr.HostMPITransport) and t.reason.startswith("auto")
        stats = t.stats()
        assert stats["transport"] == "mpi-host" and stats["comm_seconds"] == 0.0


def test_nvls_stays_off():
    env = {}
    assert ensure_nvls_off(env) == "0" and env[NVLS_ENV] == "0"
    env = {NVLS_ENV: "0"}
    assert ensure_nvls_off(env) == "0"


def test_gpu_panel_width_default():
    assert default_kb(10_000, (2, 2), NumpyEngine()) == 1024  # CPUs: not NB (test_grid_summa)
    assert default_kb(100, (1, 2), NumpyEngine()) == 64
    assert default_kb(32768, (1, 2), GPU_ENGINE) == 4096
    assert default_kb(1000, (1, 2), GPU_ENGINE) == 512
    assert default_kb(5, (1, 1), GPU_ENGINE) == 16
    assert default_kb(0, (1, 1), GPU_ENGINE) == 16


def test_overlap_fraction():
    assert overlap_fraction({"comm": 0.0}) is None
    assert overlap_fraction({"comm": 1.0, "comm_exposed": 0.25}) == 0.75
    assert overlap_fraction({"comm": 1.0, "comm_exposed": 3.0}) == 0.0


def test_config_transport_and_panel(tmp_path):
    from ozhpc.io.h5io import DatasetRef

    ref = DatasetRef.parse(f"{tmp_path}/x.h5:/A")
    cfg = RunConfig(a=ref, b=ref, out=ref, transport="nccl", panel=4096)
    assert cfg.describe()["transport"] == "nccl" and cfg.describe()["kb"] == 4096
    with pytest.raises(InputError, match="transport"):
        RunConfig(a=ref, b=ref, out=ref, transport="tcp")
    assert parse_panel("auto") is None and parse_panel("128") == 128
    with pytest.raises(OptionError, match="^panel must be 'auto' or an integer between 1 and 2147483647, got 'wide'"):
        parse_panel("wide")
    with pytest.raises(OptionError, match="^panel must be 'auto' or an integer between 1 and 2147483647, got 0") as err:
        RunConfig(a=ref, b=ref, out=ref, panel=parse_panel("0"))
    assert str(err.value.spelled(cli_spelling)).startswith("--panel must be 'auto'")  # the command line's words


def test_summa_kb_any_width_same_bits():
    """Panel width (GPU-style wide panels included) never changes the bits (NumPy engine, 1 rank)."""
    import ozhpc
    from ozhpc.parallel import dist_gemm
    from ozhpc.run.matrices import standard_matrix

    a, b = standard_matrix(70, 300, 0.5, 1), standard_matrix(300, 50, 0.5, 2)
    want = ozhpc.gemm(a, b, engine="numpy", slices=7)
    with ProcessGrid(MPI.COMM_SELF) as grid:
        for kb in (16, 100, 4096):
            c, info = dist_gemm(grid, a, b, block=(32, 32), kb=kb, slices=7, transport="auto", info=True)
            assert np.array_equal(c.gather(), want)
            assert info.transport == "mpi-host" and info.seconds["compute"] >= 0.0


def _gpus(*bus_ids, host="node7"):
    """Every rank's device identity, as agree_on_setup gathers it (the facts a GPU run would give)."""
    return [None if b is None else {"host": host, "bus_id": b, "index": int(b[-1])} for b in bus_ids]


SHARED = _gpus("0000:00:00.0", "0000:00:00.0", "0000:00:00.1", "0000:00:00.1")


def test_auto_avoids_nccl_when_ranks_share_a_gpu(monkeypatch):
    monkeypatch.setattr(tr, "nccl_available", lambda: None)
    monkeypatch.setattr(tr, "mpi_cuda_support", lambda: False)
    four = types.SimpleNamespace(size=4)
    own = _gpus("0000:00:00.0", "0000:00:00.1", "0000:00:00.2", "0000:00:00.3")
    assert tr.choose_transport("auto", four, GPU_ENGINE, own) == (
        "nccl", "auto: GPU engine, cupy.cuda.nccl available, one GPU per rank")
    assert tr.choose_transport("auto", four, GPU_ENGINE, _gpus("0000:00:00.0", "0000:00:00.0", host="a")
                               + _gpus("0000:00:00.0", "0000:00:00.1", host="b")) == (
        "mpi-host", "auto: GPU engine, ranks 0, 1 share GPU 0 (PCI 0000:00:00.0) on a: NCCL needs one GPU per "
        "rank, so host-staged MPI")
    # the same bus id on two hosts is two GPUs
    assert tr.choose_transport("auto", TWO, GPU_ENGINE, _gpus("0000:00:00.0", host="a")
                               + _gpus("0000:00:00.0", host="b"))[0] == "nccl"
    monkeypatch.setattr(tr, "mpi_cuda_support", lambda: True)   # even with CUDA-aware MPI
    assert tr.choose_transport("auto", four, GPU_ENGINE, SHARED) == (
        "mpi-host", "auto: GPU engine, ranks 0, 1 share GPU 0 (PCI 0000:00:00.0) on node7 (and 1 more shared GPUs): "
        "NCCL needs one GPU per rank, so host-staged MPI")
    assert tr.choose_transport("auto", four, GPU_ENGINE, [None] * 4)[0] == "nccl"   # no GPU facts: as before


def test_explicit_nccl_on_a_shared_gpu_names_ranks_and_device(monkeypatch):
    monkeypatch.setattr(tr, "nccl_available", lambda: None)
    with pytest.raises(tr.TransportUnavailable) as err:
        tr.choose_transport("nccl", TWO, GPU_ENGINE, _gpus("0000:00:00.1", "0000:00:00.1"))
    assert str(err.value) == ("transport=nccl needs one GPU per rank, but ranks 0, 1 share GPU 1 "
                              "(PCI 0000:00:00.1) on node7; launch at most one rank per GPU, or use "
                              "transport=mpi-host or auto")
    assert str(err.value.spelled(cli_spelling)).endswith("or use --transport mpi-host or auto")
    assert tr.choose_transport("mpi-host", TWO, GPU_ENGINE, SHARED) == ("mpi-host", "requested")


MPIEXEC = shutil.which("mpiexec")
SHARED_RANK = os.path.join(os.path.dirname(__file__), "helpers", "shared_gpu_rank.py")


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install mpich)")
@pytest.mark.parametrize("ranks,grid", [(2, "1x2"), (4, "2x2")])
def test_ranks_sharing_a_gpu_under_mpiexec(tmp_path, ranks, grid):
    """``mpiexec -n R ozhpc gemm --engine cutile`` with every rank on one GPU (tests/helpers/shared_gpu_rank.py
    injects the GPU facts): auto runs host-staged MPI and says why; --transport nccl ends every rank
    with one line naming the ranks and the device, exit 2, before anything is read or written."""
    import ozhpc
    from ozhpc.run.matrices import standard_matrix

    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = standard_matrix(40, 30, 0.5, 1), standard_matrix(30, 20, 0.5, 2)
    sha = hashlib.sha256((tmp_path / "in.h5").read_bytes()).hexdigest()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OZHPC_CACHE_DIR=str(tmp_path / "cache"))

    def job(*extra):
        cmd = [MPIEXEC, "-n", str(ranks), sys.executable, SHARED_RANK, "gemm", f"{tmp_path}/in.h5:/A",
               f"{tmp_path}/in.h5:/B", "-o", f"{tmp_path}/out.h5:/C", "--engine", "cutile", "--grid", grid,
               "--block", "8", "--progress", "off", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)

    proc = job("--transport", "nccl")
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    share = ", ".join(map(str, range(ranks)))
    assert errors[0].endswith(f"--transport nccl needs one GPU per rank, but ranks {share} share GPU 0 "
                              f"(PCI 0000:19:00.0) on {socket.gethostname()}; launch at most one "
                              "rank per GPU, or use --transport mpi-host or auto"), errors[0]
    assert {p.name for p in tmp_path.iterdir()} - {"cache"} == {"in.h5"}   # no output, no temporary
    proc = job("--report", "run.json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "run.json").read_text())
    assert report["transport"] == "mpi-host" and report["engine"] == "cutile"
    assert report["transport_reason"] == (f"auto: GPU engine, ranks {share} share GPU 0 (PCI 0000:19:00.0) on "
                                          f"{socket.gethostname()}: NCCL needs one GPU per rank, so host-staged MPI")
    assert hashlib.sha256((tmp_path / "in.h5").read_bytes()).hexdigest() == sha
    with h5py.File(tmp_path / "in.h5", "r") as f, h5py.File(tmp_path / "out.h5", "r") as g:
        assert np.array_equal(g["C"][...], ozhpc.gemm(f["A"][...], f["B"][...], engine="numpy"))


CUPY_NCCL_WARNING = '''
nccl library could not be loaded.

Reason: ImportError (libnccl.so.2: cannot open shared object file: No such file or directory)

You can install the library by:
  $ pip install nvidia-nccl-cu13
'''


def test_info_says_nccl_is_missing_in_one_line_without_cupys_warning(tmp_path):
    """CuPy without libnccl warns over several lines when ``cupy.cuda.nccl`` is imported (its
    ``_preload_warning``); ``ozhpc info`` prints one line with the reason instead, and any other
    warning met while it probes as one line of its own. A CuPy of this shape (no device, NCCL
    missing, a warning on import) stands in for the real one, which this machine may lack."""
    import os

    from conftest import REPO, run_cli

    cuda = tmp_path / "cupy" / "cuda"
    cuda.mkdir(parents=True)
    (tmp_path / "cupy" / "__init__.py").write_text(
        "import warnings\nwarnings.warn('CUDA path could not be detected.\\nSet CUDA_PATH if CuPy fails to load.')\n"
        "from . import cuda\n")
    (cuda / "__init__.py").write_text("from . import runtime\n")
    (cuda / "runtime.py").write_text("def getDeviceCount():\n    raise RuntimeError('no CUDA driver')\n")
    (cuda / "nccl.py").write_text(f"import warnings\navailable = False\nwarnings.warn({CUPY_NCCL_WARNING!r})\n")
    r = run_cli(["info"], env={"PYTHONPATH": REPO + os.pathsep + str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert ("transports: nccl unavailable (CuPy cannot load NCCL (ImportError (libnccl.so.2: cannot open shared "
            "object file: No such file or directory)); pip install nvidia-nccl-cu13, or ozhpc[gpu]), ") in r.stdout
    assert "could not be loaded" not in r.stdout
    assert (f"warning (UserWarning from {tmp_path / 'cupy' / '__init__.py'}): CUDA path could not be detected."
            in r.stdout.splitlines())
