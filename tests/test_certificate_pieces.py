"""The pieces of the accuracy certificate that the product pipeline uses, one at a time:
equilibration, the magnitude / support digits, the operand statistics, the error bounds, the
compensated combine, the per-entry decision and the widening step, against exact rational
references (ozhpc.run.reference). The guarantee of the whole pipeline (``ozhpc.gemm`` and SUMMA with
"auto") is tested in tests/test_certificate_pipeline.py."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ozhpc.engines.digits import BITS, magnitude_digits, support_digits
from ozhpc.engines import statistics
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.ozaki import certificate as cf
from ozhpc.ozaki.plan import PLANS, ModularPlan, SlicePlan
from ozhpc.ozaki.policy import bits_to_close
from ozhpc.ozaki.scales import exponents, row_abs_max
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.reference import exact_entry

from helpers.guarantee import exact_abs, guarantee_holds

ENGINE = NumpyEngine()
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCHEMES = ("ozaki1", "ozaki2")
U = Fraction(1, 2**53)
DBL_MAX = np.finfo(np.float64).max




def badly_scaled(rng, rows, cols, spread, zeros=0.2):
    x = rng.standard_normal((rows, cols)) * 2.0 ** rng.integers(-spread, spread + 1, size=(rows, cols))
    x = x * 2.0 ** rng.integers(-spread, spread + 1, size=(rows, 1))
    x[rng.random((rows, cols)) < zeros] = 0.0
    return x


def scales_of(a_rows, b_rows):
    return exponents(np, row_abs_max(np, a_rows)), exponents(np, row_abs_max(np, b_rows))


def digit_sums(a_rows, b_rows, e, f, digits):
    """Exact int64 sums over k of the digit products (what the extra int8 plane's GEMM gives)."""
    return digits(np, a_rows, e).astype(np.int64) @ digits(np, b_rows, f).astype(np.int64).T


# -- equilibration --------------------------------------------------------------------------------

def equilibrate_global(xp, a_rows, b_rows):
    """The pipeline's equilibration on one process (``policy.equilibrated_operands`` without
    the reductions over ranks): per-k statistics, shifts, exact column scalings."""
    shifts = cf.equilibration_shifts(xp, statistics.inner_stats(xp, a_rows), statistics.inner_stats(xp, b_rows))
    return cf.ldexp_columns(xp, a_rows, shifts), cf.ldexp_columns(xp, b_rows, -shifts), shifts


@pytest.mark.parametrize("p", [30, 500])
def test_equilibration_undoes_compensated_power_of_two_scalings(p):
    rng = np.random.default_rng(p)
    a, b = rng.standard_normal((20, 40)), rng.standard_normal((40, 30))
    sc = 2.0 ** rng.integers(-p, p + 1, size=40)
    a_eq, b_eq, shifts = equilibrate_global(np, a * sc, (b / sc[:, None]).T)
    assert np.abs(np.frexp(np.abs(a_eq).max(axis=0))[1] - np.frexp(np.abs(b_eq).max(axis=0))[1]).max() <= 2
    assert np.array_equal(a_eq, np.ldexp(a * sc, shifts))
    assert np.array_equal(b_eq, np.ldexp((b / sc[:, None]).T, -shifts))
    # ldexp_columns (what the pipeline calls) is the same exact scaling
    assert np.array_equal(cf.ldexp_columns(np, a * sc, shifts), a_eq)


def test_equilibration_is_exact_at_the_ends_of_the_range():
    """Subnormal columns against huge rows: the clamp keeps every bit (no over/underflow)."""
    a = np.array([[5e-324, 3e-310, DBL_MAX, 1.0, 0.0], [-7e-320, 1e-300, 1.0, 0.0, 2.0]])
    b = np.array([[DBL_MAX, 1e300, 5e-324, 3.0, 0.0], [1.5, 1e-10, 1e-300, 0.0, 0.0]])  # op(B)^T rows
    a_eq, b_eq, s = equilibrate_global(np, a, b)
    for x, y, sign in ((a, a_eq, 1), (b, b_eq, -1)):
        assert np.isfinite(y).all()
        for (r, t), v in np.ndenumerate(x):
            assert Fraction(float(y[r, t])) == Fraction(float(v)) * Fraction(2) ** (sign * int(s[t]))
    assert s[4] == 0  # a zero row of op(B) leaves the column alone


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(-1074, 1000), st.integers(-1074, 1000))
def test_equilibration_keeps_products_exact(seed, ea, eb):
    rng = np.random.default_rng(seed)
    a = np.ldexp(rng.standard_normal((3, 6)), rng.integers(min(ea, 0), max(ea, 1) + 1, size=(3, 6)))
    b = np.ldexp(rng.standard_normal((4, 6)), rng.integers(min(eb, 0), max(eb, 1) + 1, size=(4, 6)))
    a_eq, b_eq, _ = equilibrate_global(np, a, b)
    for i in range(3):
        for j in range(4):
            assert exact_entry(a_eq[i], b_eq[j]) == exact_entry(a[i], b[j])
            assert exact_abs(a_eq[i], b_eq[j]) == exact_abs(a[i], b[j])


def test_inner_stats_reduce_exactly_over_row_pieces():
    """The per-k statistics of rows split over ranks, MAX-reduced, are those of the whole."""
    rng = np.random.default_rng(2)
    a = badly_scaled(rng, 9, 50, 40)
    a[:, 7] = 0.0
    a[3, 11] = 5e-324
    whole = statistics.inner_stats(np, a)
    assert np.array_equal(whole, np.maximum(statistics.inner_stats(np, a[:5]), statistics.inner_stats(np, a[5:])))
    assert whole[0, 7] == cf.NONE_EXP and whole[1, 7] == cf.NONE_EXP
    assert np.array_equal(statistics.inner_stats(np, a[:0]), np.full((2, 50), cf.NONE_EXP))


# -- magnitude and support digits (engines/digits.py) ------------------------------------------------

@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 6), st.integers(1, 12),
       st.integers(0, 200))
def test_magnitude_and_support_digits_bound_the_exact_magnitudes(seed, m, n, k, spread):
    """Per entry: magnitude digit <= |x| 2**(7 - e) <= 2 x support digit, the support digit is
    nonzero exactly where x is; per product entry (exact Fractions): the magnitude digits' sums
    times MAGNITUDE_UNIT never exceed (|A||B|)_ij 2**-(e_i + f_j), the support digits' sums times
    SUPPORT_UNIT**2 never fall below it and vanish exactly where no k term has two nonzero factors."""
    rng = np.random.default_rng(seed)
    a, b = badly_scaled(rng, m, k, spread, 0.4), badly_scaled(rng, n, k, spread, 0.4)
    if seed % 3 == 0:
        a[0] = np.ldexp(a[0], -1060)   # a row reaching into the subnormals
    e, f = scales_of(a, b)
    for x, ex in ((a, e), (b, f)):
        lo, up = magnitude_digits(np, x, ex), support_digits(np, x, ex)
        assert lo.dtype == np.int8 and up.dtype == np.int8
        assert lo.min() >= 0 and lo.max() <= 127 and up.min() >= 0 and up.max() <= 64
        assert np.array_equal(up != 0, x != 0)
        for (r, t), v in np.ndenumerate(x):
            scaled = abs(Fraction(float(v))) * Fraction(2) ** (BITS - int(ex[r]))
            assert lo[r, t] <= scaled <= 2 * int(up[r, t]), (v, ex[r])
    lower = digit_sums(a, b, e, f, magnitude_digits)
    upper = digit_sums(a, b, e, f, support_digits)
    for i in range(m):
        for j in range(n):
            mag = exact_abs(a[i], b[j]) * Fraction(2) ** -(int(e[i]) + int(f[j]))
            assert Fraction(int(lower[i, j])) * Fraction(cf.MAGNITUDE_UNIT) <= mag
            assert mag <= Fraction(int(upper[i, j])) * Fraction(cf.SUPPORT_UNIT) ** 2
            assert (upper[i, j] == 0) == (not ((a[i] != 0) & (b[j] != 0)).any())


def test_magnitude_digits_are_tight_for_dense_rows():
    """On rows of size ~ their scale the digit lower bound is within a few 2**-7 of |A||B|: the
    certificate needs nothing else for phi <= 1."""
    a, b = standard_matrix(16, 64, 0.5, seed=1), standard_matrix(64, 12, 0.5, seed=2).T
    e, f = scales_of(a, b)
    lower = digit_sums(a, b, e, f, magnitude_digits) * cf.MAGNITUDE_UNIT
    exact = np.abs(a) @ np.abs(b).T * 2.0 ** -(e.reshape(-1, 1) + f.reshape(1, -1))
    assert (lower <= exact).all() and (lower >= 0.8 * exact).all()


# -- statistics and bounds ------------------------------------------------------------------------

def test_operand_statistics_reduce_exactly_over_k_pieces():
    """Operand statistics and digit sums of k split in two pieces, reduced with MAX / SUM, are
    bit for bit those of the whole (what keeps SUMMA's decisions the same)."""
    rng = np.random.default_rng(17)
    a, b = badly_scaled(rng, 9, 50, 40), badly_scaled(rng, 7, 50, 40)
    e, f = scales_of(a, b)
    pieces = (slice(0, 23), slice(23, 50))
    for plan in (ModularPlan.for_k(60, 50), SlicePlan(9, 9)):
        whole = cf.operand_stats(ENGINE, a, e, plan)
        parts = [cf.operand_stats(ENGINE, a[:, s], e, plan) for s in pieces]
        assert np.array_equal(whole.delta, np.maximum(parts[0].delta, parts[1].delta))
        assert np.array_equal(whole.norm, parts[0].norm + parts[1].norm)
        assert np.array_equal(whole.nnz, parts[0].nnz + parts[1].nnz)
    for digits in (magnitude_digits, support_digits):
        halves = sum(digit_sums(a[:, s], b[:, s], e, f, digits) for s in pieces)
        assert np.array_equal(digit_sums(a, b, e, f, digits), halves)


def test_operand_statistics_are_exact():
    """delta is the largest representation error (0 on the grid), norm the row 1-norm rounded up
    in units of 2**-32 of the row scale, plus one unit per nonzero."""
    a = np.array([[1.0, -0.5, 0.0, 2.0**-70], [3.0, 0.0, 0.0, 0.0]])
    e = exponents(np, row_abs_max(np, a))
    plan = ModularPlan.for_k(60, 4)
    st_ = cf.operand_stats(ENGINE, a, e, plan)
    assert st_.delta[1] == 0.0 and 0 < st_.delta[0] <= 0.5 + 2.0**-700
    assert list(st_.nnz) == [3, 1]
    for r in range(2):
        exact = sum(abs(Fraction(float(v))) for v in a[r]) * Fraction(2) ** (32 - int(e[r]))
        assert exact <= int(st_.norm[r]) <= exact + 2 * int(st_.nnz[r])


def represented_error(a, b, e, f, plan, i, j) -> Fraction:
    """|repr'd product - exact product|_ij / 2**(e_i + f_j) at ``plan``, exactly (before the combine)."""
    if plan.scheme == "ozaki2":   # the integers X = rint(x 2**(bits - e)), ties to even as rint
        xs = [round(Fraction(float(v)) * Fraction(2) ** (plan.bits - int(e[i]))) for v in a[i]]
        ys = [round(Fraction(float(v)) * Fraction(2) ** (plan.bits - int(f[j]))) for v in b[j]]
        rep = Fraction(sum(x * y for x, y in zip(xs, ys)), 2 ** (2 * plan.bits))
    else:
        acc = plan.zeros(ENGINE, a.shape[0], b.shape[0], a.shape[1])
        plan.accumulate(ENGINE, acc, plan.split(ENGINE, a, e), plan.split(ENGINE, b, f))
        rep = sum((Fraction(int(acc[g, i, j])) * Fraction(2) ** (-BITS * (g + 2))
                   for g in range(acc.shape[0])), Fraction(0))
    return abs(rep - exact_entry(a[i], b[j]) * Fraction(2) ** -(int(e[i]) + int(f[j])))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_error_bound_covers_the_representation_error(scheme):
    """The separable bound is above the exact error of the represented product (before the
    combine), normalised by 2**(e_i + f_j), checked with Fractions at a small width."""
    rng = np.random.default_rng(19)
    a, b = badly_scaled(rng, 6, 30, 20), badly_scaled(rng, 5, 30, 20)
    e, f = scales_of(a, b)
    plan = ModularPlan.for_k(24, 30) if scheme == "ozaki2" else SlicePlan(3, 3)
    bound = cf.error_bound(np, cf.operand_stats(ENGINE, a, e, plan), cf.operand_stats(ENGINE, b, f, plan), plan)
    for i in range(6):
        for j in range(5):
            err = represented_error(a, b, e, f, plan, i, j)
            assert 0 < err <= Fraction(float(bound[i, j])), (i, j)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_support_bound_is_zero_without_overlap_and_an_upper_bound_otherwise(scheme):
    a = np.array([[1.0, 0.0, 0.0], [0.3, 0.7, 0.0]])
    b = np.array([[0.0, 1.0 / 3, 0.0], [0.0, 0.0, 5.0], [0.1, 0.2, 0.0]])   # op(B)^T rows
    e, f = scales_of(a, b)
    plan = ModularPlan.for_k(30, 3) if scheme == "ozaki2" else SlicePlan(3, 3)
    stats = cf.operand_stats(ENGINE, a, e, plan), cf.operand_stats(ENGINE, b, f, plan)
    bound = cf.support_bound(np, *stats, plan, digit_sums(a, b, e, f, support_digits))
    assert bound[0, 0] == 0 and bound[0, 1] == 0 and bound[1, 1] == 0   # no k term with two nonzeros
    for i in range(2):
        for j in range(3):
            err = represented_error(a, b, e, f, plan, i, j)
            assert err <= Fraction(float(bound[i, j])), (i, j)
    assert bound[1, 0] > 0 and bound[1, 2] > 0


# -- the compensated combine ------------------------------------------------------------------------

@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 14), st.integers(-1100, 950))
def test_compensated_combine_rounds_once(seed, d, scale):
    """Group sums of mixed signs and sizes: the compensated combine is the exact sum rounded once
    (within u |C| and the (d-1) u**2 term), where the plain combine may be several ulps off."""
    rng = np.random.default_rng(seed)
    acc = (rng.integers(-2**40, 2**40, size=(d, 3, 4)) * (rng.random((d, 3, 4)) < 0.8)).astype(np.float64)
    e, f = np.array([scale, scale + 3, scale - 5]), np.array([0, 1, -2, 4])
    c = cf.compensated_combine(np, acc, e, f)
    for i in range(3):
        for j in range(4):
            terms = [Fraction(int(acc[g, i, j])) * Fraction(2) ** (-7 * (g + 2)) for g in range(d)]
            exact = sum(terms, Fraction(0)) * Fraction(2) ** int(e[i] + f[j])
            slack = d * U * U * sum(abs(t) * (g + 1) for g, t in enumerate(terms)) * Fraction(2) ** int(e[i] + f[j]) * 2
            final = U * abs(Fraction(float(c[i, j]))) + Fraction(1, 2**1074)
            assert abs(Fraction(float(c[i, j])) - exact) <= final + slack
            assert not (c[i, j] == 0 and np.signbit(c[i, j]))
    plain = SlicePlan(d, d).combine(ENGINE, acc, e, f)
    exactly = (acc[1:] == 0).all(axis=0)   # one group: no addition rounds, both agree
    assert np.array_equal(c[exactly], plain[exactly])


# -- the decision ------------------------------------------------------------------------------------

def test_certify_compares_exactly_and_counts():
    bound = np.array([[0.0, 2.0**-53, 2.0**-52, 1e-20]])
    lower = np.array([[0.0, 1.0, 1.0, 0.0]])
    exclude = np.array([[False, False, False, True]])
    cert = cf.certify(np, bound, lower, exclude)
    assert list(cert.passed[0]) == [True, True, False, True]
    assert cert.uncertified == 1 and cert.worst == 2.0
    cert = cf.certify(np, bound, lower)
    assert cert.uncertified == 2 and cert.worst == np.inf   # a bound without a lower bound


def next_width(scheme: str, width: int, worst: float, cap: int) -> int:
    """The width the policy asks for after ``width`` (bits or slices) for a worst ratio ``worst``."""
    return PLANS[scheme].widen(width, bits_to_close(worst), cap)


def test_next_width_closes_the_worst_gap_up_to_the_cap():
    assert next_width("ozaki2", 56, 2.0**5.5, 100) == 63
    assert next_width("ozaki2", 56, 0.5, 100) == 57          # at least one step
    assert next_width("ozaki2", 95, 2.0**20, 100) == 100     # never past the cap
    assert next_width("ozaki2", 60, np.inf, 100) == 76       # no lower bound: 16 bits
    assert next_width("ozaki1", 8, 2.0**10, 24) == 10
    assert next_width("ozaki1", 8, np.inf, 24) == 11
    assert next_width("ozaki1", 23, 2.0**30, 24) == 24


def certified_pass(a, b, scheme, width, use_acc=True, support=False):
    """One product at a fixed plan on equilibrated operands and its certificate, as Product.settle
    takes it (scheme I with group sums: the compensated combine)."""
    a_eq, b_eq, _ = equilibrate_global(np, a, b.T)
    e, f = scales_of(a_eq, b_eq)
    (m, k), n = a_eq.shape, b_eq.shape[0]
    plan = ModularPlan.for_k(width, k) if scheme == "ozaki2" else SlicePlan(width, width)
    acc = plan.zeros(ENGINE, m, n, k)
    plan.accumulate(ENGINE, acc, plan.split(ENGINE, a_eq, e), plan.split(ENGINE, b_eq, f))
    compensated = scheme == "ozaki1" and use_acc
    c = cf.compensated_combine(np, acc, e, f) if compensated else plan.combine(ENGINE, acc, e, f)
    stats = cf.operand_stats(ENGINE, a_eq, e, plan), cf.operand_stats(ENGINE, b_eq, f, plan)
    lower = digit_sums(a_eq, b_eq, e, f, magnitude_digits)
    upper = digit_sums(a_eq, b_eq, e, f, support_digits) if support else None
    cert = cf.certify_entries(ENGINE, c, lower, stats, e, f, plan, acc if compensated else None, upper)
    return c, cert


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 6), st.integers(1, 30),
       st.integers(0, 80), st.sampled_from(SCHEMES), st.integers(0, 6), st.booleans(), st.booleans())
def test_certified_entries_meet_the_bound_at_any_width(seed, m, n, k, spread, scheme, extra, use_acc, support):
    """At fixed, often too small widths certify_entries passes some entries: each of them meets
    the guarantee exactly; compensated column scalings on top; scheme I with the group sums
    (compensated combine) and without (a fused product, plain combine); with and without the
    support digits' sums."""
    rng = np.random.default_rng(seed)
    a, b = badly_scaled(rng, m, k, spread), badly_scaled(rng, k, n, spread)
    sc = 2.0 ** rng.integers(-spread, spread + 1, size=k)
    a, b = a * sc, b / sc[:, None]
    width = 40 + 4 * extra if scheme == "ozaki2" else 3 + extra
    c, cert = certified_pass(a, b, scheme, width, use_acc, support)
    assert cert.uncertified == int((~cert.passed).sum())
    for i, j in zip(*np.nonzero(cert.passed)):
        assert guarantee_holds(c, a, b, scheme, i, j), (i, j, width)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_too_few_bits_break_the_bound_and_are_not_certified(scheme):
    """The property above has teeth: at a small width some entries miss the guarantee, and the
    certificate passes none of those."""
    a, b = standard_matrix(12, 40, 1.0, seed=21), standard_matrix(40, 10, 1.0, seed=22)
    c, cert = certified_pass(a, b, scheme, 30 if scheme == "ozaki2" else 4)
    missed = [(i, j) for i in range(12) for j in range(10) if not guarantee_holds(c, a, b, scheme, i, j)]
    assert missed and not any(cert.passed[i, j] for i, j in missed)
    assert cert.uncertified >= len(missed) and cert.worst > 1


@pytest.mark.parametrize("scheme", SCHEMES)
def test_sparse_entries_are_certified_by_the_support_digits(scheme):
    """Entries whose |A||B| lower bound is 0 (no overlapping nonzeros: the product is exactly 0)
    fail without the support sums (infinite ratio) and pass with them."""
    a = np.array([[1.0, 0.0, 0.0], [0.0, 1.0 / 3, 0.0]])
    b = np.array([[0.0, 0.0], [2.0 / 3, 0.0], [0.0, 0.1]])
    width = 40 if scheme == "ozaki2" else 4
    c, cert = certified_pass(a, b, scheme, width)
    assert cert.uncertified > 0 and cert.worst == np.inf
    c, cert = certified_pass(a, b, scheme, width, support=True)
    assert not cert.passed[1, 0] or guarantee_holds(c, a, b, scheme, 1, 0)
    assert cert.passed[0, 0] and cert.passed[0, 1] and cert.passed[1, 1]
    assert c[0, 0] == 0 and c[0, 1] == 0 and c[1, 1] == 0
