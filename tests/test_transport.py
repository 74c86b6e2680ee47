"""Transport selection and auto-detection, without a GPU (CuPy / NCCL / CUDA-aware MPI mocked)."""
from __future__ import annotations

import types

import numpy as np
import pytest
from mpi4py import MPI

from ozhpc.config import RunConfig, parse_panel
from ozhpc.parallel import ProcessGrid
from ozhpc.parallel import transport_choice as tr
from ozhpc.parallel.gpu_transport import NVLS_ENV, ensure_nvls_off
from ozhpc.parallel.summa import default_kb, overlap_fraction
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.errors import InputError

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
    cfg = RunConfig(a=ref, b=ref, out=ref, transport="nccl", kb=4096)
    assert cfg.describe()["transport"] == "nccl" and cfg.describe()["kb"] == 4096
    with pytest.raises(InputError, match="transport"):
        RunConfig(a=ref, b=ref, out=ref, transport="tcp")
    assert parse_panel("auto") is None and parse_panel("128") == 128
    with pytest.raises(InputError, match="--panel must be 'auto' or a positive integer, got 'wide'"):
        parse_panel("wide")
    with pytest.raises(InputError, match="--panel must be 'auto' or a positive integer, got 0"):
        RunConfig(a=ref, b=ref, out=ref, kb=parse_panel("0"))


def test_summa_kb_any_width_same_bits():
    """Panel width (GPU-style wide panels included) never changes the bits (NumPy engine, 1 rank)."""
    import ozhpc
    from ozhpc.parallel import dist_gemm
    from ozhpc.matrices import standard_matrix

    a, b = standard_matrix(70, 300, 0.5, 1), standard_matrix(300, 50, 0.5, 2)
    want = ozhpc.gemm(a, b, engine="numpy", slices=7)
    with ProcessGrid(MPI.COMM_SELF) as grid:
        for kb in (16, 100, 4096):
            c, info = dist_gemm(grid, a, b, block=(32, 32), kb=kb, slices=7, transport="auto", info=True)
            assert np.array_equal(c.gather(), want)
            assert info.transport == "mpi-host" and info.seconds["compute"] >= 0.0
