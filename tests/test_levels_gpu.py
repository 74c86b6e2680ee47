"""Levels of scales and exact dots on the GPU: the cuTile engine certifies every acceptance input
with the NumPy engine's bits, and its exact dots (CuPy, the same integer steps) are the NumPy
engine's, correctly rounded.

Marked ``gpu``; every test skips cleanly when CuPy, cuda.tile or a GPU is missing.
"""
from __future__ import annotations

import numpy as np
import pytest

import ozhpc
from ozhpc.engines import get_engine

from helpers.anyinput_cases import cases
from helpers.guarantee import guarantee_holds

pytestmark = pytest.mark.gpu

CASES = cases()


@pytest.mark.parametrize("scheme", ["ozaki1", "ozaki2"])
@pytest.mark.parametrize("guarantee", ["dgemm", "tight"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_cutile_certifies_with_the_numpy_bits(gpu, name, scheme, guarantee):
    """Every acceptance case: certified on the GPU, every entry within its guarantee (exact), the
    same C bit for bit and the same counts as the NumPy engine."""
    a, b = CASES[name]
    kw = dict(scheme=scheme, guarantee=guarantee, accuracy="strict", info=True)
    want, ref = ozhpc.gemm(a, b, engine="numpy", **kw)
    got, info = ozhpc.gemm(a, b, engine="cutile", **kw)
    assert info.certified and got.tobytes() == want.tobytes(), (info.widths, ref.widths)
    assert (info.refined_entries, info.levels, info.exact_entries) == (ref.refined_entries, ref.levels,
                                                                       ref.exact_entries)
    for i in range(got.shape[0]):
        for j in range(got.shape[1]):
            assert guarantee_holds(got, a, b, scheme, i, j, guarantee), (i, j)


def test_exact_dots_on_the_gpu_are_the_numpy_bits(gpu):
    """The engine's exact_dots on CuPy arrays: the NumPy engine's values, bit for bit, on entries
    that cancel to almost nothing, spread over the whole exponent range, and subnormal."""
    engine, cp = gpu
    rng = np.random.default_rng(5)
    k = 300
    a = np.ldexp(rng.standard_normal((40, k)), rng.integers(-1000, 1000, (40, k)))
    b = np.ldexp(rng.standard_normal((30, k)), rng.integers(-60, 60, (30, k)))
    a[0], b[0] = 1.0, 0.0
    b[0, :2] = (1.0, -1.0)
    a[1, :3], b[1, :3] = (2.0**-1074, 1.0, 1.0), (1.0, 2.0**-600, -2.0**-600)
    rows, cols = rng.integers(0, 40, 500), rng.integers(0, 30, 500)
    rows[:2], cols[:2] = (0, 1), (0, 1)
    want = get_engine("numpy").exact_dots(a, b, rows, cols)
    got = cp.asnumpy(engine.exact_dots(cp.asarray(a), cp.asarray(b), cp.asarray(rows), cp.asarray(cols)))
    assert got.tobytes() == want.tobytes()


def test_accumulator_kernels_are_the_numpy_steps(gpu):
    """The long accumulator's CuPy kernels (carries, a level's parts deposited one per entry, the
    rounding) give NumPy's limbs and NumPy's rounded values bit for bit: deposits over the whole
    exponent range, both signs, cancellation to a few bits, sums below the subnormals and past
    DBL_MAX, and raw limbs of any sign."""
    _, cp = gpu
    from ozhpc.engines import superacc

    rng = np.random.default_rng(11)
    window = superacc.Window.covering(-1200, 1100)
    entries = 400
    want = superacc.zeros(np, entries, window)
    got = cp.asarray(want)
    for _ in range(4):
        values = np.ldexp(rng.uniform(0.5, 1.0, entries) * rng.choice([-1.0, 1.0], entries),
                          rng.integers(-1000, 1000, entries))
        values[:20] = 2.0**-1074 * rng.integers(-3, 4, 20)
        values[20:40] = np.ldexp(1.0, 1023) * rng.choice([-1.0, 1.0], 20)
        shifts = rng.integers(-60, 60, entries)
        order = rng.permutation(entries)
        live = values != 0
        superacc.deposit_values(np, want, window, order[live], values[live], shifts[live], unique=True)
        superacc.deposit_values(cp, got, window, cp.asarray(order[live]), cp.asarray(values[live]),
                                cp.asarray(shifts[live]), unique=True)
        assert (cp.asnumpy(got) == want).all()
    rounded = superacc.round_nearest(np, want, window)
    assert rounded.tobytes() == superacc.round_nearest(cp, got, window).get().tobytes()
    some = np.flatnonzero(np.isfinite(rounded) & (rounded != 0))[:50]   # cancelled to their low bits
    superacc.deposit_values(np, want, window, some, -rounded[some], np.zeros(some.size, dtype=np.int64), unique=True)
    superacc.deposit_values(cp, got, window, cp.asarray(some), cp.asarray(-rounded[some]),
                            cp.zeros(some.size, dtype=cp.int64), unique=True)
    assert (cp.asnumpy(got) == want).all()
    raw = rng.integers(-2**40, 2**40, want.shape)
    for acc in (want, raw, raw * (rng.random((entries, 1)) < 0.5)):
        assert superacc.round_nearest(cp, cp.asarray(acc), window).get().tobytes() == \
            superacc.round_nearest(np, acc, window).tobytes()
        mine, theirs = cp.asarray(acc), acc.copy()
        superacc.normalise(cp, mine)
        superacc.normalise(np, theirs)
        assert (mine.get() == theirs).all()


@pytest.mark.parametrize("scheme", ["ozaki1", "ozaki2"])
@pytest.mark.parametrize("name", ["docs A@I", "1e300 over 1e-30", "blocks I@A", "subnormal beside DBL_MAX"])
def test_complex_levels_on_the_gpu_are_the_numpy_bits(gpu, name, scheme):
    """Complex products refined by levels (both parts of A the real case's): certified on the GPU
    with the NumPy engine's bits and counts."""
    a, b = CASES[name]
    a, b = a * (1 + 1j), b * (0.5 - 0.25j)
    kw = dict(scheme=scheme, guarantee="tight", accuracy="strict", info=True)
    want, ref = ozhpc.gemm(a, b, engine="numpy", **kw)
    got, info = ozhpc.gemm(a, b, engine="cutile", **kw)
    assert info.certified and got.tobytes() == want.tobytes(), (info.widths, ref.widths)
    assert (info.refined_entries, info.levels, info.exact_entries) == (ref.refined_entries, ref.levels,
                                                                       ref.exact_entries)
