"""Properties of the Ozaki-I numerics on the NumPy engine (the reference for every engine)."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ozhpc
from ozhpc.engines.digits import BITS
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.ozaki.plan import SlicePlan, make_plan
from ozhpc.ozaki.scales import exponents, row_abs_max
from ozhpc.run.matrices import standard_matrix

from helpers.inputs import phi_matrix

ENGINE = NumpyEngine()
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
wide_rows = hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, max_side=12), elements=finite)


def reconstruct(digits, exps, upto):
    """Exact value of the first ``upto`` slices of each entry, as Fractions."""
    rows, cols = digits.shape[1:]
    out = [[Fraction(0)] * cols for _ in range(rows)]
    for p in range(upto):
        for i in range(rows):
            w = Fraction(2) ** (int(exps[i]) - BITS * (p + 1))
            for j in range(cols):
                out[i][j] += int(digits[p, i, j]) * w
    return out


@SETTINGS
@given(wide_rows)
def test_digits_fit_and_remainder_is_below_half_a_unit(x):
    """|D_0| <= 127, |D_p| <= 64, and after s slices the rest is at most half a unit of the last."""
    s = 4
    e = exponents(np, row_abs_max(np, x))
    d = ENGINE.split(x, e, s)
    assert np.abs(d[0].astype(int)).max(initial=0) <= 127
    assert np.abs(d[1:].astype(int)).max(initial=0) <= 64
    approx = reconstruct(d, e, s)
    for i in range(x.shape[0]):
        unit = Fraction(2) ** (int(e[i]) - BITS * s)
        for j in range(x.shape[1]):
            assert abs(Fraction(float(x[i, j])) - approx[i][j]) <= unit / 2


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 9), st.integers(1, 9), st.sampled_from([0.0, 1.0, 4.0]))
def test_enough_slices_reconstruct_exactly(seed, rows, cols, phi):
    """With digits for every bit of the row's range, the slices are the input, exactly."""
    rng = np.random.default_rng(seed)
    x = phi_matrix(rng, rows, cols, phi)
    e = exponents(np, row_abs_max(np, x))
    lowest = np.frexp(x[x != 0])[1].min() if np.any(x) else 0
    bits_needed = int(e.max() - lowest) + 54
    s = -(-bits_needed // BITS)
    d = ENGINE.split(x, e, s)
    approx = reconstruct(d, e, s)
    assert all(approx[i][j] == Fraction(float(x[i, j])) for i in range(rows) for j in range(cols))


def test_split_of_subnormal_and_huge_rows_is_exact():
    x = np.array([[5e-324, -3e-320, 2.5e-310], [1.7e308, -1e308, 3.0], [0.0, 0.0, 0.0]])
    e = exponents(np, row_abs_max(np, x))
    d = ENGINE.split(x, e, 24)
    approx = reconstruct(d, e, 24)
    assert approx[0] == [Fraction(v) for v in x[0]]
    assert approx[1][:2] == [Fraction(v) for v in x[1, :2]]
    assert not d[:, 2].any()


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 20), st.integers(1, 20),
       st.integers(0, 300))
def test_group_accumulators_are_exact_integer_sums(seed, s, m, n, k):
    """acc[g] == sum_{p+q=g} D_p E_q^T computed in exact int64 arithmetic."""
    rng = np.random.default_rng(seed)
    da = rng.integers(-64, 65, size=(s, m, k)).astype(np.int8)
    eb = rng.integers(-64, 65, size=(s, n, k)).astype(np.int8)
    da[0] = rng.integers(-127, 128, size=(m, k))
    eb[0] = rng.integers(-127, 128, size=(n, k))
    assert_exact_group_sums(da, eb)


def assert_exact_group_sums(da, eb):
    """The engine's group accumulators equal the int64 sums of the digit products, bit for bit."""
    s, m, n = da.shape[0], da.shape[1], eb.shape[1]
    plan = SlicePlan(s, 2 * s - 1)
    acc = ENGINE.zeros_groups(plan.groups, m, n)
    ENGINE.accumulate_groups(acc, da, eb)
    for g in range(plan.groups):
        want = sum((da[p].astype(np.int64) @ eb[q].astype(np.int64).T for p, q in plan.pairs(g)),
                   np.zeros((m, n), np.int64))
        assert np.array_equal(acc[g], want.astype(np.float64))
        assert np.array_equal(acc[g].astype(np.int64), want)


def exact_product(a, b):
    return [[sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a[i], b[:, j])), Fraction(0))
             for j in range(b.shape[1])] for i in range(a.shape[0])]


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 7), st.integers(1, 7), st.integers(1, 40),
       st.sampled_from([0.0, 0.5, 2.0, 4.0]), st.integers(2, 9), st.sampled_from(["auto", "all"]))
def test_error_within_stated_bound(seed, m, n, k, phi, s, groups):
    """|C - AB| <= 2^(e_i+f_j) tau k + rounding |C| for the bound GemmInfo reports."""
    rng = np.random.default_rng(seed)
    a = phi_matrix(rng, m, k, phi)
    b = phi_matrix(rng, k, n, phi)
    c, info = ozhpc.gemm(a, b, slices=s, groups=groups, engine="numpy", info=True)
    e = exponents(np, row_abs_max(np, a))
    f = exponents(np, row_abs_max(np, b.T))
    tau_k = make_plan(s, groups, 0).truncation_bound(k)
    assert info.truncation_bound == float(tau_k)
    exact = exact_product(a, b)
    for i in range(m):
        for j in range(n):
            bound = Fraction(2) ** int(e[i] + f[j]) * tau_k + Fraction(info.rounding_bound) * abs(Fraction(c[i, j]))
            assert abs(Fraction(c[i, j]) - exact[i][j]) <= bound


def test_plan_counts_and_limits():
    assert SlicePlan(7, 7).int8_gemms == 28
    assert SlicePlan(8, 8).int8_gemms == 36
    assert SlicePlan(3, 5).int8_gemms == 9
    assert SlicePlan(3, 5).pairs(3) == [(1, 2), (2, 1)]
    with pytest.raises(ValueError, match=r"groups=6 is more than the 5 groups that 3 slices have"):
        SlicePlan(3, 6)
    with pytest.raises(ValueError, match=r"slices must be between 1 and 24, got 0"):
        SlicePlan(0, 1)
    with pytest.raises(ValueError, match="slices must be 'auto' or an integer"):
        make_plan("many", "auto", 0)
    assert SlicePlan(8, 8).max_exact_k() > 10**10


def test_auto_is_deterministic_and_grows_with_spread():
    picks = []
    for phi in (0.0, 0.5, 1.0, 2.0, 4.0):
        a = standard_matrix(32, 512, phi, 1)
        b = standard_matrix(512, 32, phi, 2)
        for scheme in ("ozaki1", "ozaki2"):
            _, first = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, info=True)
            c2, second = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, info=True)
            assert (first.bits, first.widths) == (second.bits, second.widths)
            picks.append((scheme, first.bits))
    for scheme in ("ozaki1", "ozaki2"):
        bits = [b for s, b in picks if s == scheme]
        assert bits == sorted(bits) and bits[0] < bits[-1], picks


def test_accumulators_exact_across_k_chunks_with_extreme_digits():
    """k beyond one packed chunk, every digit at its bound: the worst case of the packing."""
    rng = np.random.default_rng(7)
    s, m, n, k = 4, 3, 5, 9000
    da = np.full((s, m, k), 64, np.int8)
    eb = np.full((s, n, k), -64, np.int8)
    da[0], eb[0] = 127, -127
    da[:, 1] = rng.integers(-64, 65, size=(s, k))
    assert_exact_group_sums(da, eb)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(0, 8), st.integers(0, 40), st.sampled_from([0.0, 1.0, 4.0, 30.0]),
       st.floats(0, 0.9))
def test_spread_is_the_largest_median_gap(seed, rows, cols, phi, zeros):
    """spread_bits (two counting passes of 8 limits) == 1 + max over rows of the sorted-median exponent gap."""
    from ozhpc.engines.numpy_engine import NumpyEngine
    from ozhpc.ozaki.scales import MAX_GAP, spread_bits

    rng = np.random.default_rng(seed)
    x = phi_matrix(rng, rows, cols, phi)
    x[rng.random((rows, cols)) < zeros] = 0.0
    if x.size:
        x.flat[0] = np.inf
    e = exponents(np, row_abs_max(np, x))
    medians = []
    for i in range(rows):
        vals = np.abs(x[i][np.isfinite(x[i]) & (x[i] != 0)])
        if vals.size:
            gaps = np.sort(np.clip(e[i] - np.frexp(vals)[1], 0, MAX_GAP))
            medians.append(gaps[(vals.size + 1) // 2 - 1])
    want = int(max(medians)) + 1 if medians else 0
    assert spread_bits(np, NumpyEngine().entry_gaps(x, e)) == want


@pytest.mark.parametrize("chunk", [1 << 22, 50])
def test_gap_counts_are_the_counts_of_every_limit(monkeypatch, chunk):
    """count_gaps_le (histograms per chunk of rows) == direct counting, for several limits per
    row, NO_GAP entries (never counted) and row chunks that do not divide the rows."""
    from ozhpc.engines import digits
    from ozhpc.ozaki.scales import MAX_GAP, NO_GAP
    monkeypatch.setattr(digits, "GAP_HISTOGRAM_ENTRIES", chunk)
    rng = np.random.default_rng(3)
    gaps = rng.integers(0, MAX_GAP + 1, (37, 29)).astype(np.int8)
    gaps[rng.random(gaps.shape) < 0.2] = NO_GAP
    limits = rng.integers(0, MAX_GAP + 1, (37, 5))
    want = np.array([[np.sum(gaps[i] <= lim) for lim in limits[i]] for i in range(37)])
    got = digits.count_gaps_le(np, gaps, limits)
    assert got.dtype == np.int64 and np.array_equal(got, want)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 300), st.floats(0.0, 0.6))
def test_spread_asks_for_ascending_limits_in_range(seed, rows, cols, zeros):
    """The engines count per bucket between limits (the cuTile kernel) and do not check the
    order: spread_bits, their only caller, must pass ascending limits in [0, MAX_GAP]."""
    from ozhpc.engines import digits
    from ozhpc.ozaki.scales import MAX_GAP, NO_GAP, spread_bits
    rng = np.random.default_rng(seed)
    gaps = rng.integers(0, MAX_GAP + 1, (rows, cols)).astype(np.int8)
    gaps[rng.random(gaps.shape) < zeros] = NO_GAP
    seen = []

    def count_le(g, limits):
        seen.append(limits)
        return digits.count_gaps_le(np, g, limits)
    assert spread_bits(np, gaps, count_le=count_le) == spread_bits(np, gaps)
    assert seen
    for limits in seen:
        assert limits.min() >= 0 and limits.max() <= MAX_GAP
        assert np.all(np.diff(limits, axis=1) >= 0)


def test_spread_joins_every_count_reduction_with_zero_rows():
    """A rank whose piece of the rows is empty makes the same sum_rows calls (collectives in a
    distributed run) as one with rows, and reports no spread."""
    from ozhpc.engines.numpy_engine import NumpyEngine
    from ozhpc.ozaki.scales import COUNT_PASSES, COUNT_WIDTH, spread_bits

    for rows in (0, 3):
        calls = []
        gaps = NumpyEngine().entry_gaps(np.ones((rows, 4)), np.ones(rows, dtype=np.int32))

        def sum_rows(counts):
            calls.append(counts.shape)
            return counts

        assert spread_bits(np, gaps, sum_rows) == (0 if rows == 0 else 1)
        assert calls == [(rows, COUNT_WIDTH)] * COUNT_PASSES


def test_too_long_k_is_an_input_error():
    from ozhpc.errors import InputError

    plan = SlicePlan(8, 8)
    plan.check_k(plan.max_exact_k())
    with pytest.raises(InputError, match=f"k = {plan.max_exact_k() + 1} is too long for exact accumulation"):
        plan.check_k(plan.max_exact_k() + 1)
