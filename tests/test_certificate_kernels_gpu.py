"""The certificate's raw CUDA passes (:mod:`ozhpc.engines.certificate_kernels`) against the NumPy
reference, bit for bit: the verdict pass (real, and both components of a complex C in one launch
from the three digit groups) gives the reference's failing count and worst ratio, the
representation-error pass its row maxima, for C, sums and operands in any layout (contiguous,
transposed, strided views, complex rows read as real rows of 2k), sizes that are not multiples of a
block, entries that fail, inf/NaN entries, zero rows and columns, a part that is all zero.

Marked ``gpu``; every test skips cleanly when CuPy, cuda.tile or a GPU is missing.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from ozhpc.engines import statistics
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.ozaki import certificate as cf
from ozhpc.ozaki import complex_certificate as cc
from ozhpc.ozaki.complex_plan import GaussianPlan
from ozhpc.ozaki.plan import ModularPlan, SlicePlan
from ozhpc.ozaki.scales import exponents, row_abs_max

from helpers.inputs import awkward, phi_matrix

pytestmark = pytest.mark.gpu

NUMPY = NumpyEngine()
M, N, K = 41, 1030, 64
"""41 rows (not a multiple of the verdict block's 4), 1030 columns (two column chunks of 1024)."""


def laid_out(cp, x, layout: str):
    """``x`` on the device as a contiguous array, a transposed (Fortran-ordered) one, or a strided view."""
    d = cp.asarray(x)
    if layout == "F":
        return cp.asfortranarray(d)
    if layout == "strided":   # every other column of a wider array
        wide = cp.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=d.dtype)
        wide[..., 1::2] = d
        return wide[..., 1::2]
    return d


def product_c(rng, a, b):
    """``a @ b.T`` with entries that fail (rows scaled far down: the free bound cannot prove them),
    zeros and inf/NaN entries."""
    with np.errstate(over="ignore"):
        c = a @ b.T
    c[11] *= 2.0**-60
    c[12, :7] = 0.0
    c[0, 0], c[1, 1] = np.inf, np.nan
    return c


def sums_for(rng, shape, dtype, zeros: float = 0.5):
    """Digit-product sums: random, zero in a fraction of the entries (there only the free bound)."""
    s = rng.integers(0, 2**20, size=shape)
    return np.where(rng.random(shape) < zeros, 0, s).astype(dtype)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("lower_dtype", [None, "int32", "int64", "float64"])
def test_real_verdicts_match_numpy(gpu, layout, lower_dtype):
    """One pass over C and the sums (any strides; int32 row and int64 column exponents): the NumPy
    reference's count of failing entries and worst ratio, "tight" and "dgemm", with and without
    support sums; some cases fail, some pass."""
    engine, cp = gpu
    rng = np.random.default_rng(3)
    a, b = awkward(rng, M, K), awkward(rng, N, K)
    e = exponents(np, row_abs_max(np, a)).astype(np.int32)
    f = exponents(np, row_abs_max(np, b)).astype(np.int64)
    failing = product_c(rng, a, b)
    with np.errstate(over="ignore"):
        clean = a @ b.T
    lower = None if lower_dtype is None else sums_for(rng, failing.shape, lower_dtype)
    full = None if lower is None else np.where(lower == 0, 2**20, lower).astype(lower.dtype)   # at 70 bits all pass
    outcomes = set()
    supports = (None, np.where(rng.random(failing.shape) < 0.3, 0, rng.integers(1, 2**20, failing.shape)).astype(np.int32))
    for (c, lower), support, bits in itertools.product(((failing, lower), (clean, full)), supports, (53, 70)):
        plan = ModularPlan.for_k(bits, K)
        stats = [cf.operand_stats(NUMPY, x, ex, plan) for x, ex in ((a, e), (b, f))]
        dev = [cf.OperandStats(*(cp.asarray(v) for v in (st.delta, st.norm, st.nnz))) for st in stats]
        for factor in (1, K):
            want = cf.certify_entries(NUMPY, c, lower, stats, e, f, plan, None, support, factor=factor)
            got = cf.certify_entries(engine, laid_out(cp, c, layout), None if lower is None else
                                     laid_out(cp, lower, layout), dev, cp.asarray(e), cp.asarray(f), plan, None,
                                     None if support is None else laid_out(cp, support, layout), factor=factor)
            assert got.passed is None   # the kernel answered (no per-entry mask)
            assert (got.uncertified, got.worst) == (want.uncertified, want.worst), (bits, factor)
            outcomes.add(want.uncertified > 0)
    assert outcomes == ({True} if lower_dtype is None else {True, False})


def complex_operands(rng, case: str):
    a = awkward(rng, M, K) + 1j * awkward(rng, M, K)
    b = awkward(rng, N, K) + 1j * phi_matrix(rng, N, K, 1.0)
    if case == "imaginary part all zero":
        a, b = a.real + 0j, b.real + 0j
    elif case == "one operand imaginary":
        a = 1j * a.imag
    return a, b


def _complex_exps(z):
    return exponents(np, np.maximum(np.abs(z.real), np.abs(z.imag)).max(axis=1)).astype(np.int32)


@pytest.mark.parametrize("case", ["random", "imaginary part all zero", "one operand imaginary"])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_complex_verdicts_match_numpy(gpu, case, layout):
    """Both components in one launch, the Re sums added from groups 0 and 2 in the kernel: each
    component's count and worst ratio as the real certificate gives them on the NumPy engine from
    :func:`component_sums` (the reference), and the whole complex certificate (its fallback where
    some entry fails) the NumPy engine's."""
    engine, cp = gpu
    rng = np.random.default_rng(5)
    a, b = complex_operands(rng, case)
    e, f = _complex_exps(a), _complex_exps(b)
    c = a @ b.T
    c[11] *= 2.0**-60
    c[0, 0], c[1, 1], c[2, 2] = complex(np.inf, 1.0), complex(1.0, np.nan), 0.0
    groups = sums_for(rng, (3, M, N), np.int32)
    if case == "imaginary part all zero":
        groups[1:] = 0
    outcomes = set()
    for support in (None, sums_for(rng, (3, M, N), np.int64, zeros=0.3)):
        for plan in (GaussianPlan.for_k(54, K), GaussianPlan.for_k(70, K)):
            stats = [cc.part_stats(NUMPY, x, ex, plan) for x, ex in ((a, e), (b, f))]
            joint = [s.joint for s in stats]
            row, col = ((cp.asarray(s.delta), cp.asarray(s.norm), cp.asarray(s.nnz)) for s in joint)
            mags = cc.component_sums(np, groups)
            supp = None if support is None else cc.component_sums(np, support)
            for factor in (1, K + 1):
                want = [cf.certify_entries(NUMPY, part(c), mags[q], joint, e, f, plan, None,
                                           None if supp is None else supp[q], factor=factor)
                        for q, part in enumerate(cc.PARTS)]
                got = engine.complex_entry_verdicts(
                    laid_out(cp, c, layout), cp.asarray(e), cp.asarray(f), row, col, laid_out(cp, groups, layout),
                    None if support is None else laid_out(cp, support, layout), cf.verdict_constants(plan, factor))
                assert got == tuple((w.uncertified, w.worst) for w in want), (plan.bits, factor)
                outcomes.add(any(w.uncertified for w in want))
                whole = cc.certify_complex_entries(NUMPY, c, groups, stats, e, f, plan, None, support, factor=factor)
                dev_stats = [cc.part_stats(engine, cp.asarray(x), cp.asarray(ex), plan) for x, ex in ((a, e), (b, f))]
                on_gpu = cc.certify_complex_entries(engine, laid_out(cp, c, layout), cp.asarray(groups), dev_stats,
                                                    cp.asarray(e), cp.asarray(f), plan, None,
                                                    None if support is None else cp.asarray(support), factor=factor)
                assert (on_gpu.uncertified, on_gpu.worst, on_gpu.passed_worst) == \
                    (whole.uncertified, whole.worst, whole.passed_worst)
    assert True in outcomes


def _real_rows(z):
    return np.ascontiguousarray(z).view(np.float64).reshape(z.shape[0], 2 * z.shape[1])


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_representation_errors_match_numpy(gpu, layout, kind):
    """Row maxima of the representation error (scheme II and scheme I steps; int32 and int64
    exponents) through the operand's strides, a complex operand read as real rows of length 2k
    (5000 complex columns: three column chunks), the reference's bits; zero rows give 0."""
    engine, cp = gpu
    rng = np.random.default_rng(9)
    rows, cols = 37, 5000 if kind == "complex" else 4200
    x = awkward(rng, rows, cols, phi=2.0)
    if kind == "complex":
        x = x + 1j * awkward(rng, rows, cols, phi=0.5)
        x[20] = x[20].real + 0j
        ref, e = _real_rows(x), _complex_exps(x)
    else:
        ref, e = x, exponents(np, row_abs_max(np, x)).astype(np.int32)
    for exps in (e, e.astype(np.int64)):
        for plan in (ModularPlan.for_k(57, cols), ModularPlan.for_k(90, cols), SlicePlan(5, 5)):
            want = statistics.representation_errors(np, ref, exps, plan.split_steps)
            got = engine.representation_errors(laid_out(cp, x, layout), cp.asarray(exps), plan.split_steps)
            assert got.dtype == np.float64 and np.array_equal(cp.asnumpy(got).view(np.int64), want.view(np.int64))
            assert want[3] == 0.0 and want.max() > 0.0


def test_complex_part_stats_read_the_rows_in_place(gpu):
    """A complex operand's joint statistics from the rows as they lie (a transposed op(B)^T: no copy)
    and each part's, the NumPy engine's."""
    engine, cp = gpu
    rng = np.random.default_rng(13)
    z = awkward(rng, 300, 50) + 1j * awkward(rng, 300, 50)
    e = _complex_exps(z)
    plan = GaussianPlan.for_k(54, 50)
    want = cc.part_stats(NUMPY, z, e, plan)
    mags = [cp.asarray(v) for v in (want.joint.norm, want.joint.nnz)]
    got = cc.part_stats(engine, cp.asarray(np.asfortranarray(z)), cp.asarray(e), plan, mags=mags)
    for g, w in ((got.joint, want.joint), *zip(got.parts, want.parts)):
        for u, v in zip((g.delta, g.norm, g.nnz), (w.delta, w.norm, w.nnz)):
            assert np.array_equal(cp.asnumpy(u), v)
