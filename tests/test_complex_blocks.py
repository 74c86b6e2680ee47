"""Complex products whose residue planes do not fit at once: the planes made a block at a time
(:class:`ozhpc.ozaki.complex_plan.DeferredPlanes`) give the bits of the whole split, in the fused
one-process product (row blocks of op(A)) and in SUMMA's panels (packed from deferred planes)."""
from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import ozhpc
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.ozaki import complex_plan
from ozhpc.parallel import ProcessGrid
from ozhpc.parallel.summa import dist_gemm


def _random(rng, shape, phi=0.5):
    return ((rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
            + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape)))


def _bits(x):
    return np.asarray(x).view(np.int64)


@pytest.fixture
def small_budget(monkeypatch):
    """The NumPy engine told that one operand's planes may take ``budget[0]`` bytes; a record of every
    DeferredPlanes made and of the (rows, columns) of C each fused product call wrote."""
    budget, made, blocks = [None], [], []
    monkeypatch.setattr(NumpyEngine, "plane_budget", lambda self: budget[0])
    init = complex_plan.DeferredPlanes.__init__
    multiply = NumpyEngine.multiply_combine_gaussian

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    def recorded(self, da, eb, *args, **kwargs):
        blocks.append((da.shape[1], eb.shape[1]))
        return multiply(self, da, eb, *args, **kwargs)
    monkeypatch.setattr(complex_plan.DeferredPlanes, "__init__", recording)
    monkeypatch.setattr(NumpyEngine, "multiply_combine_gaussian", recorded)
    return budget, made, blocks


@pytest.mark.parametrize("shape,budget_rows,ta,tb,rows,cols", [
    ((37, 50, 23), 5, "N", "N", 5, 8),    # A: 5 rows per block; B: 23 rows > 3 budgets, 3 even blocks
    ((37, 50, 23), 8, "C", "T", 8, 23),   # B within three budgets: whole; conjugate transposes
    ((300, 40, 9), 0, "N", "C", 1, 1),    # below one row (a budget of 1 byte): one row per block
])
def test_row_blocks_give_the_bits_of_the_whole_split(small_budget, shape, budget_rows, ta, tb, rows, cols):
    m, k, n = shape
    rng = np.random.default_rng(m + n)
    a = _random(rng, (m, k) if ta == "N" else (k, m))
    b = _random(rng, (k, n) if tb == "N" else (n, k))
    want, info = ozhpc.gemm(a, b, transa=ta, transb=tb, engine="numpy", info=True)
    budgets, made, blocks = small_budget
    assert not made and blocks == [(m, n)] * len(blocks)
    blocks.clear()
    budgets[0] = max(1, budget_rows * info.planes * k)   # bytes: budget_rows rows of planes
    got, ginfo = ozhpc.gemm(a, b, transa=ta, transb=tb, engine="numpy", info=True)
    assert len(made) >= 2   # both operands deferred
    first = blocks[:-(-m // rows) * -(-n // cols)]
    assert max(r for r, _ in first) == rows and max(c for _, c in first) == cols
    assert sum(r * c for r, c in first) == m * n   # the blocks tile C once
    assert (ginfo.certified, ginfo.widths) == (info.certified, info.widths)
    assert np.array_equal(_bits(got), _bits(want))


def test_an_operand_that_fits_is_split_whole(small_budget):
    rng = np.random.default_rng(3)
    a, b = _random(rng, (20, 30)), _random(rng, (30, 10))
    small_budget[0][0] = 10**9
    ozhpc.gemm(a, b, engine="numpy")
    assert not small_budget[1] and small_budget[2] == [(20, 10)]


def test_summa_packs_panels_from_deferred_planes(small_budget):
    rng = np.random.default_rng(5)
    a, b = _random(rng, (40, 70)), _random(rng, (70, 30))
    want = ozhpc.gemm(a, b, engine="numpy")
    small_budget[0][0] = 1
    with ProcessGrid(MPI.COMM_SELF) as grid:
        got = dist_gemm(grid, a, b, kb=16, engine="numpy", wire="planes").gather()
    assert small_budget[1]
    assert np.array_equal(_bits(got), _bits(want))


def test_deferred_planes_refuse_reads_they_cannot_make():
    rng = np.random.default_rng(1)
    plan = complex_plan.GaussianPlan.for_k(54, 8)
    planes = complex_plan.DeferredPlanes(NumpyEngine(), _random(rng, (4, 8)), np.zeros(4, dtype=np.int32),
                                         plan.tables)
    assert planes.shape == (plan.planes, 4, 8)
    whole = NumpyEngine().gaussian_residues(planes.rows, planes.exps, plan.tables)
    assert np.array_equal(planes[:, 1:3, 2:5], whole[:, 1:3, 2:5])
    with pytest.raises(IndexError, match=r"\[:, rows, cols\] slices"):
        planes[0]


@pytest.mark.gpu
@pytest.mark.parametrize("budget_rows", [200, 20])   # op(B)^T whole (A: 2 blocks), then both blocked
def test_gpu_blocks_give_the_cpu_bits(gpu, monkeypatch, budget_rows):
    """The cuTile engine writing C's row blocks in place (and B's column blocks apart): NumPy's bits."""
    engine, cp = gpu
    rng = np.random.default_rng(budget_rows)
    a, b = _random(rng, (300, 700)), _random(rng, (700, 130))
    want, info = ozhpc.gemm(a, b, engine="numpy", info=True)
    monkeypatch.setattr(type(engine), "plane_budget", lambda self: budget_rows * info.planes * 700)
    got, ginfo = ozhpc.gemm(cp.asarray(a), cp.asarray(b), engine=engine, info=True)
    assert (ginfo.certified, ginfo.widths) == (info.certified, info.widths)
    assert np.array_equal(_bits(cp.asnumpy(got)), _bits(want))


@pytest.mark.parametrize("name", ["compensated scalings", "zeros and a tiny part", "conjugate transposes"])
def test_structured_products_in_blocks_take_the_same_passes_and_bits(small_budget, name):
    """Structured cases that widen or equilibrate: every pass's planes made in blocks, the same
    widths, verdicts and bits as the whole split."""
    from test_complex_gemm import structured

    a, b, ta, tb = structured()[name]
    want, info = ozhpc.gemm(a, b, transa=ta, transb=tb, engine="numpy", info=True)
    small_budget[0][0] = 1
    got, ginfo = ozhpc.gemm(a, b, transa=ta, transb=tb, engine="numpy", info=True)
    assert small_budget[1]
    assert (ginfo.certified, ginfo.widths, ginfo.uncertified) == (info.certified, info.widths, info.uncertified)
    assert np.array_equal(_bits(got), _bits(want))
