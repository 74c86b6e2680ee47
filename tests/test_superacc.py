"""The long accumulator (ozhpc/engines/superacc.py): exact sums of FP64 products rounded once,
checked against exact rational arithmetic (Fractions), over the whole FP64 range: subnormal
products, sums that overflow, ties, cancellation to nothing, and any split of the terms."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ozhpc.engines import get_engine, superacc
from ozhpc.run.reference import exact_dot

DBL_MAX = np.finfo(np.float64).max
TINY = 5e-324


def rounded(value: Fraction) -> float:
    """The FP64 nearest to ``value`` (ties to even; Python's int division rounds correctly,
    subnormals included), +-inf past the overflow threshold, +0.0 for a zero."""
    try:
        return float(value) + 0.0
    except OverflowError:
        return np.inf if value > 0 else -np.inf


def same(got: float, want: float) -> bool:
    return np.float64(got).tobytes() == np.float64(want).tobytes()


def dots(a, b):
    """Every entry of ``a @ b.T`` (rows of a and b along k) by the accumulator."""
    rows, cols = np.repeat(np.arange(a.shape[0]), b.shape[0]), np.tile(np.arange(b.shape[0]), a.shape[0])
    return superacc.exact_dots(np, a, b, rows, cols).reshape(a.shape[0], b.shape[0])


def check(a, b):
    got = dots(a, b)
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            want = rounded(exact_dot(a[i], b[j]))
            assert same(got[i, j], want), (i, j, got[i, j], want, a[i], b[j])


def wide(rng, shape, low=-1074, high=1000, zeros=0.2):
    with np.errstate(all="ignore"):
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(low, high, size=shape).astype(np.float64)
    x = np.where(np.isfinite(x), x, DBL_MAX / 2)
    return np.where(rng.random(shape) < zeros, 0.0, x)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(1, 4), st.integers(1, 24),
       st.sampled_from([(-1074, 1000), (-1074, -900), (900, 1000), (-60, 60)]), st.booleans())
def test_correctly_rounded_over_the_whole_range(seed, m, n, k, span, cancel):
    """Random entries over the given exponent spans (subnormal products, products near DBL_MAX
    squared, everything between), with rows that cancel to a last bit or to exactly zero."""
    rng = np.random.default_rng(seed)
    a, b = wide(rng, (m, k), *span), wide(rng, (n, k), *span)
    if cancel and k > 1:
        a[:, 1::2] = a[:, 0:k - 1:2]
        b[:, 1::2] = -b[:, 0:k - 1:2] * rng.choice([1.0, 1 + 2.0**-52, 1 - 2.0**-53])
    check(a, b)


def test_ties_round_to_even_and_the_edges_of_the_range():
    one, half_ulp = 1.0, 2.0**-53
    cases = [
        ([one, half_ulp], [1.0, 1.0], 1.0),                       # a tie: to even (down)
        ([1 + 2.0**-52, half_ulp], [1.0, 1.0], 1 + 2 * 2.0**-52),  # a tie: to even (up)
        ([one, half_ulp, 2.0**-1074], [1.0, 1.0, 1.0], 1 + 2.0**-52),   # just above the tie: up
        ([TINY], [0.5], 0.0),                                      # half the smallest subnormal: to even, 0
        ([TINY, TINY], [0.5, 0.25], TINY),                         # above half: the smallest subnormal
        ([3 * TINY], [0.5], 2 * TINY),                             # 1.5 units: to even
        ([-TINY], [0.5], 0.0),                                     # -0 comes out +0.0
        ([DBL_MAX, DBL_MAX], [1.0, -1.0], 0.0),                    # cancels exactly
        ([DBL_MAX, 1.0], [1.0, 2.0**970], np.inf),                 # the overflow threshold: a tie, to even
        ([DBL_MAX, 1.0], [1.0, 2.0**970 * (1 - 2.0**-53)], DBL_MAX),
        ([DBL_MAX, DBL_MAX], [1.0, 2.0**-53], np.inf),
        ([DBL_MAX, -DBL_MAX], [DBL_MAX, DBL_MAX], 0.0),            # 2**2048-sized terms, exactly 0
        ([DBL_MAX, -DBL_MAX, 1.0], [DBL_MAX, DBL_MAX, TINY], TINY),
        ([1e300, 1e-300], [1e300, 1e-300], np.inf),
        ([2.0**-600, -2.0**-600], [2.0**-600, 2.0**-600 * (1 - 2.0**-53)], 0.0),   # 2**-1253: below every subnormal
    ]
    for a, b, want in cases:
        got = superacc.exact_dots(np, np.array([a]), np.array([b]), [0], [0])[0]
        assert same(got, want), (a, b, got, want)
        assert same(got, rounded(exact_dot(np.array(a), np.array(b))))


def test_any_split_of_the_terms_gives_the_same_limbs():
    """Terms deposited in one batch, in panels of any width, in any order: the same limbs."""
    rng = np.random.default_rng(4)
    a, b = wide(rng, (1, 300)), wide(rng, (1, 300))
    ma, qa = superacc.mantissas(np, a[0])
    mb, qb = superacc.mantissas(np, b[0])
    window = superacc.window_for_products(int(qa.min()), int(qa.max()), int(qb.min()), int(qb.max()), 300)
    whole = superacc.zeros(np, 1, window)
    entry = np.zeros(300, dtype=np.int64)
    superacc.deposit(np, whole, window, entry, ma, qa, mb, qb)
    for cuts in ([7, 8, 100, 299], [1, 2, 3]):
        acc = superacc.zeros(np, 1, window)
        order = rng.permutation(300)
        for part in np.split(order, cuts):
            superacc.deposit(np, acc, window, entry[part], ma[part], qa[part], mb[part], qb[part])
        assert np.array_equal(acc, whole)
    assert same(superacc.round_nearest(np, whole, window)[0], rounded(exact_dot(a[0], b[0])))


def test_values_with_shifts_beyond_the_fp64_range():
    """Exact parts ``v 2**s`` whose scale is outside FP64 (a level's pieces) add up exactly."""
    values = np.array([3.0, -3.0, 2.0**52 + 1, 1.0])
    shifts = np.array([1500, 1500, -1200, -1126])
    window = superacc.Window.covering(-1300, 1600)
    acc = superacc.zeros(np, 1, window)
    superacc.deposit_values(np, acc, window, np.zeros(4, dtype=np.int64), values, shifts)
    exact = sum(Fraction(int(v)) * Fraction(2) ** int(s) for v, s in zip(values, shifts))
    assert same(superacc.round_nearest(np, acc, window)[0], rounded(exact))


def test_long_k_and_the_engine_interface():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 5000)), rng.standard_normal((4, 5000)) * 2.0**-1000
    got = get_engine("numpy").exact_dots(a, b, [0, 2, 1], [3, 0, 1])
    for e, (i, j) in enumerate([(0, 3), (2, 0), (1, 1)]):
        assert same(got[e], rounded(exact_dot(a[i], b[j])))
    assert superacc.exact_dots(np, a, b, [], []).shape == (0,)
    assert same(superacc.exact_dots(np, a[:, :0], b[:, :0], [1], [2])[0], 0.0)


@pytest.mark.gpu
def test_gpu_gives_the_numpy_bits(gpu):
    """The same steps on CuPy arrays (the cuTile engine's exact entries): every bit equal."""
    engine, cp = gpu
    rng = np.random.default_rng(6)
    for span in ((-1074, 1000), (-60, 60)):
        a, b = wide(rng, (40, 777), *span), wide(rng, (30, 777), *span)
        b[:5] = -b[5:10]
        a[:5] = a[5:10]
        rows, cols = rng.integers(0, 40, 500), rng.integers(0, 30, 500)
        want = superacc.exact_dots(np, a, b, rows, cols)
        got = cp.asnumpy(engine.exact_dots(cp.asarray(a), cp.asarray(b), cp.asarray(rows), cp.asarray(cols)))
        assert got.tobytes() == want.tobytes()
