"""ProcessGrid, DistMatrix, SUMMA, block-cyclic HDF5 and the runner, in one process (COMM_SELF).

The multi-rank versions of these checks run under real mpiexec in tests/test_mpi.py.
"""
from __future__ import annotations

import ast
from types import SimpleNamespace
import json
import pathlib

import h5py
import numpy as np
import pytest
from mpi4py import MPI

import ozhpc
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.errors import InputError, cli_spelling
from ozhpc.io import distio
from ozhpc.io.h5io import DatasetRef
from ozhpc.parallel import DistMatrix, ProcessGrid, Summa, dist_gemm, near_square
from ozhpc.parallel.layout import BlockCyclic
from ozhpc.parallel.summa import default_kb
from ozhpc.parallel.transport import HostMPITransport
from ozhpc.run.config import RunConfig
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.report import sha256_of_matrix

COMM = MPI.COMM_SELF
M, K, N = 157, 301, 96


@pytest.fixture
def grid():
    with ProcessGrid(COMM) as g:
        yield g


def test_near_square():
    assert [near_square(r) for r in (1, 2, 3, 4, 6, 8, 12, 7)] == \
        [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (2, 4), (3, 4), (1, 7)]


def test_grid_basics_and_close():
    g = ProcessGrid(COMM)
    assert g.dims == (1, 1) and g.coords == (0, 0) and g.row_comm.Get_size() == g.col_comm.Get_size() == 1
    assert g.comm != COMM  # a private communicator
    g.close()
    g.close()
    assert g.comm is None


def test_grid_rank_mismatch_is_a_clear_input_error():
    with pytest.raises(InputError, match=r"^grid=2x2 needs 4 MPI ranks, but the job has 1 \(run with mpiexec "
                                         r"-n 4, or leave grid out for a near-square grid\)$") as err:
        ProcessGrid(COMM, (2, 2))
    assert str(err.value.spelled(cli_spelling)).startswith("--grid 2x2 needs 4 MPI ranks")  # the CLI's words


def operands(transa, transb, nonfinite=False):
    a = standard_matrix(M, K, 1.0, 21)
    b = standard_matrix(K, N, 1.0, 22)
    if nonfinite:
        a[4, 9], a[10, 10], b[9, 1], b[50, 7], a[60, 50] = np.inf, np.nan, -np.inf, np.inf, -np.inf
    return (a.T.copy() if transa else a), (b.T.copy() if transb else b)


@pytest.mark.parametrize("block", [1, 5, 13, 17, 32, 64, (5, 13)])
@pytest.mark.parametrize("transa,transb", [(False, False), (True, False), (False, True), (True, True)])
def test_summa_equals_gemm_bitwise(grid, block, transa, transb):
    A, B = operands(transa, transb)
    ref = ozhpc.gemm(A, B, transa=transa, transb=transb, engine="numpy")
    block = block if isinstance(block, tuple) else (block, block)
    c, info = dist_gemm(grid, A, B, transa=transa, transb=transb, block=block, kb=block[1], info=True)
    assert np.array_equal(c.gather(), ref)
    assert info.bytes_sent == 0 and info.panels == -(-K // block[1])
    c, info = dist_gemm(grid, A, B, transa=transa, transb=transb, block=block, engine="numpy", info=True)  # default panel
    assert np.array_equal(c.gather(), ref) and info.kb == default_kb(K, (1, 1), NumpyEngine())


def test_summa_alpha_beta_nonfinite_and_panel_width(grid):
    A, B = operands(False, True, nonfinite=True)
    C0 = standard_matrix(M, N, 0.5, 23)
    ref = ozhpc.gemm(A, B, C0, alpha=0.5, beta=-3.0, transb=True, engine="numpy")
    for kb in (1, 7, 64, 1000):
        c, info = dist_gemm(grid, A, B, C0, alpha=0.5, beta=-3.0, transb=True, block=16, kb=kb, info=True)
        assert info.nonfinite_inputs
        assert sha256_of_matrix(c.gather()) == sha256_of_matrix(ref)


def test_summa_empty_k_and_progress_hook(grid):
    A, B = np.zeros((5, 0)), np.zeros((0, 4))
    assert np.array_equal(dist_gemm(grid, A, B, block=2).gather(), np.zeros((5, 4)))
    calls = []
    A, B = operands(False, False)
    dist_gemm(grid, A, B, block=100, kb=100, on_panel=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]  # (0, total): the panel loop starts


def test_cpu_panel_width_is_not_tied_to_a_small_block(grid):
    """A block size of 1 or 5 must not mean k or k/5 narrow panels on CPUs (each a pass over the
    accumulators): the CPU default is min(1024, k / max(P, Q)) in multiples of 16, whatever NB."""
    assert default_kb(8192, (1, 1), NumpyEngine()) == 1024
    assert default_kb(2048, (1, 2), NumpyEngine()) == 1024
    assert default_kb(2048, (2, 2), NumpyEngine()) == 1024
    assert default_kb(1000, (1, 3), NumpyEngine()) == 336
    assert default_kb(20, (1, 1), NumpyEngine()) == 32
    assert default_kb(65536, (2, 2), SimpleNamespace(on_device=True, k_align=16)) == 4096
    for nb in (1, 5, 256, 4000):
        with Summa(grid, 10, 10, 8192, block=nb, engine="numpy") as summa:
            assert summa.kb == 1024


def test_summa_rejects_wrong_layout(grid):
    summa = Summa(grid, 10, 10, 10, block=4)
    a = DistMatrix(grid, BlockCyclic(10, 10, 3, 3, 1, 1), np.zeros((10, 10)))
    bt = DistMatrix(grid, summa.bt_layout, np.zeros((10, 10)), transposed_grid=True)
    with pytest.raises(ValueError, match="layouts"):
        summa(a, bt)


def test_beta_needs_c_one_check_one_message(grid):
    """The API's "beta needs C" is errors.require_c: one InputError (a ValueError), one wording,
    for dist_gemm and Summa.__call__ (ozhpc.gemm: test_gemm); a C in another layout is its own error."""
    A, B = standard_matrix(10, 10, 1.0, 1), standard_matrix(10, 10, 1.0, 2)
    with pytest.raises(InputError) as err:
        dist_gemm(grid, A, B, beta=1.0, block=4)
    assert str(err.value) == "beta != 0 needs C" and isinstance(err.value, ValueError)
    with Summa(grid, 10, 10, 10, block=4) as summa:
        a, bt, _ = summa.distribute(A, B)
        with pytest.raises(InputError, match=r"^beta != 0 needs C$"):
            summa(a, bt, None, beta=0.5)
        c = DistMatrix(grid, BlockCyclic(10, 10, 3, 3, 1, 1), np.zeros((10, 10)))
        with pytest.raises(ValueError, match=r"^C is not in this Summa's layout \(Summa.c_layout\)$"):
            summa(a, bt, c, beta=0.5)


def test_distmatrix_scatter_gather(grid):
    x = standard_matrix(37, 23, 0.5, 3)
    lay = BlockCyclic(37, 23, 4, 5, 1, 1)
    d = DistMatrix.scatter(grid, x, lay)
    assert np.array_equal(d.gather(), x) and np.array_equal(d.allgather(), x)
    with pytest.raises(ValueError, match="local block has shape"):
        DistMatrix(grid, lay, np.zeros((3, 3)))


def test_transport_is_a_no_op_on_one_rank(grid):
    t = HostMPITransport(grid, max_count=3)
    buf = np.arange(10, dtype=np.int8)
    assert t.ibcast(buf, 0, "row").wait() is buf and t.bytes_sent == 0
    with pytest.raises(ValueError):
        HostMPITransport(grid, max_count=0)


def test_distio_read_write_roundtrip(grid, tmp_path):
    x = standard_matrix(29, 41, 0.5, 4)
    src = tmp_path / "x.h5"
    with h5py.File(src, "w") as f:
        f["X"] = x
        f["X32"] = x.astype(np.float32)
    lay = BlockCyclic(29, 41, 3, 7, 1, 1)
    d = distio.read_distributed(DatasetRef(str(src), "/X"), grid, lay)
    assert np.array_equal(d.local, x)
    dt = distio.read_distributed(DatasetRef(str(src), "/X"), grid, lay.transpose(), transpose=True)
    assert np.array_equal(dt.local, x.T)
    d32 = distio.read_distributed(DatasetRef(str(src), "/X32"), grid, lay)
    assert d32.local.dtype == np.float64 and np.array_equal(d32.local, x.astype(np.float32))
    out = DatasetRef(str(tmp_path / "y.h5"), "/Y")
    digest = distio.write_distributed(out, d)
    assert digest == sha256_of_matrix(x)
    with h5py.File(out.file, "r") as f:
        assert np.array_equal(f["Y"][...], x) and f["Y"].attrs["ozhpc_sha256"] == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.h5", "y.h5"]
    # the output is checked again at write time: no silent replacement without force
    with pytest.raises(InputError, match="exists; pass force=True to replace it"):
        distio.write_distributed(out, DistMatrix(grid, lay, np.zeros((29, 41))))
    with h5py.File(out.file, "r") as f:
        assert np.array_equal(f["Y"][...], x)
    assert distio.write_distributed(out, DistMatrix(grid, lay, np.zeros((29, 41))), force=True) != digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.h5", "y.h5"]
    with pytest.raises(InputError, match="has shape"):
        distio.read_distributed(DatasetRef(str(src), "/X"), grid, BlockCyclic(5, 5, 2, 2, 1, 1))


def test_runner_one_rank_is_the_distributed_path(tmp_path):
    a, b = standard_matrix(40, 33, 0.5, 5), standard_matrix(33, 27, 0.5, 6)
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = a, b
    from ozhpc.run.runner import execute

    cfg = RunConfig(a=DatasetRef(str(tmp_path / "in.h5"), "/A"), b=DatasetRef(str(tmp_path / "in.h5"), "/B"),
                    out=DatasetRef(str(tmp_path / "out.h5"), "/C"), block=(8, 8), engine="numpy",
                    report=str(tmp_path / "run.json"), progress="off")
    report = execute(cfg, comm=COMM)
    assert report["sha256"] == sha256_of_matrix(ozhpc.gemm(a, b, engine="numpy"))
    saved = json.loads((tmp_path / "run.json").read_text())
    for key in ("ranks", "grid", "block", "bytes_sent", "seconds", "tflops", "gflops", "sha256", "slices",
                "groups", "int8_gemms", "engine", "config", "m", "n", "k", "error_bound"):
        assert key in saved, key
    assert saved["ranks"] == 1 and saved["grid"] == [1, 1] and saved["bytes_sent"]["total"] == 0
    for phase in ("read", "scales", "split", "multiply", "combine", "write", "total"):
        assert phase in saved["seconds"]


def test_layers_ozaki_and_engines_never_import_mpi():
    root = pathlib.Path(ozhpc.__file__).parent
    for sub in ("ozaki", "engines"):
        for path in (root / sub).glob("*.py"):
            tree = ast.parse(path.read_text())
            names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            assert not any(n.startswith("mpi4py") or "parallel" in n.split(".") for n in names), path


def test_the_python_entry_points_share_their_defaults():
    """ozhpc.gemm, Summa, dist_gemm and pdgemm default to the same engine ("auto") and guarantee
    (the settings' own default), so a product moved from one process to a grid keeps its meaning."""
    import inspect

    from ozhpc.ozaki.settings import OzakiSettings
    from ozhpc.parallel.scalapack import pdgemm

    for name in ("engine", "guarantee"):
        defaults = {f.__qualname__: inspect.signature(f).parameters[name].default
                    for f in (ozhpc.gemm, Summa.__init__, dist_gemm, pdgemm)}
        assert set(defaults.values()) == {"auto" if name == "engine" else OzakiSettings().guarantee}, defaults
