"""Certified accuracy (issue 15): equilibration, the per-entry bound, the certificate, the policy
and the BLAS details, against exact rational references (ozhpc.reference)."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ozhpc
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.matrices import standard_matrix
from ozhpc.ozaki import certificate as cf
from ozhpc.ozaki.plan import ModularPlan, SlicePlan
from ozhpc.ozaki.scales import exponents, row_abs_max
from ozhpc.reference import exact_entry, sample_indices

ENGINE = NumpyEngine()
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCHEMES = ("ozaki1", "ozaki2")
U = Fraction(1, 2**53)
DBL_MAX = np.finfo(np.float64).max


def exact_abs(a_row, b_col) -> Fraction:
    return sum((abs(Fraction(float(x)) * Fraction(float(y))) for x, y in zip(a_row, b_col)), Fraction(0))


def guarantee_holds(c, a_op, b_op, scheme, i, j) -> bool:
    """|C_ij - (AB)_ij| <= u (|A||B|)_ij + rho u |C_ij| + 2**-1074 (the guarantee, exactly)."""
    exact = exact_entry(a_op[i], b_op[:, j])
    slack = U * exact_abs(a_op[i], b_op[:, j])
    final = cf.FINAL_ROUNDING_ULPS[scheme] * U * abs(Fraction(float(c[i, j]))) + Fraction(1, 2**1074)
    return abs(Fraction(float(c[i, j])) - exact) <= slack + final


def worst_entries(c, a_op, b_op, count=8):
    """The entries with the most cancellation (smallest |C| / (|A||B|)) and the smallest |A||B|."""
    with np.errstate(all="ignore"):
        mag = np.abs(a_op) @ np.abs(b_op)
        ratio = np.where(mag > 0, np.abs(c) / np.where(mag > 0, mag, 1), np.inf)
    flat = list(np.argsort(ratio, axis=None)[:count]) + list(np.argsort(mag, axis=None)[:count])
    return [(int(x // c.shape[1]), int(x % c.shape[1])) for x in flat]


def assert_certified_guarantee(a, b, scheme, samples=30, **kw):
    a_op = a.T if kw.get("transa") else a
    b_op = b.T if kw.get("transb") else b
    c, info = cf.certified_gemm_prototype(a, b, scheme=scheme, **kw)
    assert info.certified and info.uncertified == 0, info
    m, n = c.shape
    for i, j in sample_indices(m, n, samples, seed=3) + worst_entries(c, a_op, b_op):
        assert guarantee_holds(c, a_op, b_op, scheme, i, j), (scheme, i, j, info)
    return c, info


# -- equilibration --------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [30, 500])
def test_equilibration_undoes_compensated_power_of_two_scalings(p):
    rng = np.random.default_rng(p)
    a, b = rng.standard_normal((20, 40)), rng.standard_normal((40, 30))
    sc = 2.0 ** rng.integers(-p, p + 1, size=40)
    a_eq, b_eq, shifts = cf.equilibrate_global(np, a * sc, (b / sc[:, None]).T)
    assert np.abs(np.frexp(np.abs(a_eq).max(axis=0))[1] - np.frexp(np.abs(b_eq).max(axis=0))[1]).max() <= 2
    assert np.array_equal(a_eq, np.ldexp(a * sc, shifts))
    assert np.array_equal(b_eq, np.ldexp((b / sc[:, None]).T, -shifts))


def test_equilibration_is_exact_at_the_ends_of_the_range():
    """Subnormal columns against huge rows: the clamp keeps every bit (no over/underflow)."""
    a = np.array([[5e-324, 3e-310, DBL_MAX, 1.0, 0.0], [-7e-320, 1e-300, 1.0, 0.0, 2.0]])
    b = np.array([[DBL_MAX, 1e300, 5e-324, 3.0, 0.0], [1.5, 1e-10, 1e-300, 0.0, 0.0]])  # op(B)^T rows
    a_eq, b_eq, s = cf.equilibrate_global(np, a, b)
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
    a_eq, b_eq, _ = cf.equilibrate_global(np, a, b)
    for i in range(3):
        for j in range(4):
            assert exact_entry(a_eq[i], b_eq[j]) == exact_entry(a[i], b[j])
            assert exact_abs(a_eq[i], b_eq[j]) == exact_abs(a[i], b[j])


# -- the guarantee on structured inputs -------------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("p", [30, 500])
def test_compensated_scalings(scheme, p):
    rng = np.random.default_rng(p + 1)
    a, b = rng.standard_normal((40, 48)), rng.standard_normal((48, 36))
    sc = 2.0 ** rng.integers(-p, p + 1, size=48)
    assert_certified_guarantee(a * sc, b / sc[:, None], scheme)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_identity_permutation_diagonal_sparse(scheme):
    rng = np.random.default_rng(5)
    a = standard_matrix(24, 32, 1.0, seed=4)
    eye = np.eye(32)
    assert np.array_equal(cf.certified_gemm_prototype(a, eye, scheme=scheme)[0], a)
    assert np.array_equal(cf.certified_gemm_prototype(eye[:24, :24], a, scheme=scheme)[0], a)
    perm = eye[rng.permutation(32)]
    assert np.array_equal(cf.certified_gemm_prototype(a, perm, scheme=scheme)[0], a @ perm)
    pow2 = np.diag(2.0 ** rng.integers(-40, 40, size=32))
    assert np.array_equal(cf.certified_gemm_prototype(a, pow2, scheme=scheme)[0], a @ pow2)
    assert_certified_guarantee(a, np.diag(rng.standard_normal(32)), scheme)
    sparse_a = np.where(rng.random((24, 32)) < 0.85, 0.0, a)
    sparse_b = np.where(rng.random((32, 20)) < 0.85, 0.0, standard_matrix(32, 20, 2.0, seed=6))
    c, _ = assert_certified_guarantee(sparse_a, sparse_b, scheme)
    zero = (np.abs(sparse_a) @ np.abs(sparse_b)) == 0
    assert zero.any() and not np.signbit(c[zero]).any() and not c[zero].any()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_k_one_and_tiny_k(scheme):
    one = cf.certified_gemm_prototype(np.array([[1 + 2**-52]]), np.array([[1.0]]), scheme=scheme)[0]
    assert one[0, 0] == 1 + 2**-52
    tiny = cf.certified_gemm_prototype(np.array([[1.0, 2.0**-60]]), np.array([[2.0**-60], [1.0]]), scheme=scheme)[0]
    assert tiny[0, 0] == 2.0**-59
    rng = np.random.default_rng(7)
    for k in (1, 2, 3):
        assert_certified_guarantee(standard_matrix(9, k, 2.0, seed=k), standard_matrix(k, 7, 2.0, seed=k + 9), scheme)
    a = rng.standard_normal((6, 1))
    b = rng.standard_normal((1, 5))
    c = cf.certified_gemm_prototype(a, b, scheme=scheme)[0]
    assert np.all(np.abs(c - a @ b) <= np.spacing(np.abs(a @ b)) * cf.FINAL_ROUNDING_ULPS[scheme])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_rows_with_one_dominant_entry(scheme):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((30, 50)) * 2.0**-40
    a[np.arange(30), rng.integers(0, 50, 30)] = rng.standard_normal(30) * 2.0**20
    b = rng.standard_normal((50, 25))
    b[rng.integers(0, 50, 25), np.arange(25)] = 2.0**-45
    assert_certified_guarantee(a, b, scheme)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("phi", [0.5, 1.0, 2.0, 4.0, 6.0])
def test_phi_matrices(scheme, phi):
    a, b = standard_matrix(32, 160, phi, seed=11), standard_matrix(160, 28, phi, seed=12)
    assert_certified_guarantee(a, b, scheme, samples=20)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("transa,transb", [(False, True), (True, False), (True, True)])
def test_alpha_beta_and_transposes(scheme, transa, transb):
    rng = np.random.default_rng(13)
    m, n, k = 17, 13, 29
    a = rng.standard_normal((k, m) if transa else (m, k)) * 2.0 ** rng.integers(-30, 30)
    b = rng.standard_normal((n, k) if transb else (k, n))
    c0 = rng.standard_normal((m, n))
    kw = dict(transa=transa, transb=transb)
    ab, _ = assert_certified_guarantee(a, b, scheme, **kw)
    got, info = cf.certified_gemm_prototype(a, b, c0, alpha=-1.5, beta=0.25, scheme=scheme, **kw)
    assert info.certified and np.array_equal(got, -1.5 * ab + 0.25 * c0)  # rounded separately, as BLAS


# -- the certificate never claims what does not hold -------------------------------------------------

def badly_scaled(rng, rows, cols, spread):
    x = rng.standard_normal((rows, cols)) * 2.0 ** rng.integers(-spread, spread + 1, size=(rows, cols))
    x = x * 2.0 ** rng.integers(-spread, spread + 1, size=(rows, 1))
    x[rng.random((rows, cols)) < 0.2] = 0.0
    return x


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 6), st.integers(1, 30),
       st.integers(0, 80), st.sampled_from(SCHEMES), st.integers(0, 6), st.booleans())
def test_certified_entries_meet_the_bound_at_any_width(seed, m, n, k, spread, scheme, extra, use_acc):
    """At fixed, often too small widths the certificate passes some entries: each of them meets
    the guarantee exactly; compensated column scalings on top; scheme I with and without the
    group accumulators (a fused product), plain or compensated combine."""
    rng = np.random.default_rng(seed)
    a, b = badly_scaled(rng, m, k, spread), badly_scaled(rng, k, n, spread)
    sc = 2.0 ** rng.integers(-spread, spread + 1, size=k)
    a, b = a * sc, b / sc[:, None]
    a_eq, b_eq, _ = cf.equilibrate_global(np, a, b.T)
    e, f = exponents(np, row_abs_max(np, a_eq)), exponents(np, row_abs_max(np, b_eq))
    plan = ModularPlan.for_k(40 + 4 * extra, k) if scheme == "ozaki2" else SlicePlan(3 + extra, 3 + extra)
    acc = plan.zeros(ENGINE, m, n, k)
    plan.accumulate(ENGINE, acc, plan.split(ENGINE, a_eq, e), plan.split(ENGINE, b_eq, f))
    compensated = scheme == "ozaki1" and use_acc and seed % 2 == 0
    c = cf.compensated_combine(np, acc, e, f) if compensated else plan.combine(ENGINE, acc, e, f)
    cert = cf.certify_product(np, a_eq, b_eq, e, f, plan, c, acc if scheme == "ozaki1" and use_acc else None,
                              compensated=compensated)
    assert cert.uncertified == int((~cert.passed).sum())
    for i, j in zip(*np.nonzero(cert.passed)):
        assert guarantee_holds(c, a, b, scheme, i, j), (i, j, plan)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 5), st.integers(1, 20),
       st.integers(0, 300), st.sampled_from(SCHEMES))
def test_certified_auto_on_badly_scaled_inputs(seed, m, n, k, spread, scheme):
    rng = np.random.default_rng(seed)
    a, b = badly_scaled(rng, m, k, spread), badly_scaled(rng, k, n, spread)
    c, info = cf.certified_gemm_prototype(a, b, scheme=scheme)
    assert info.certified
    for i in range(m):
        for j in range(n):
            assert guarantee_holds(c, a, b, scheme, i, j), (i, j, info)


# -- out of reach, the policy, determinism ---------------------------------------------------------

def unreachable():
    """Rows of op(A) spanning 2**-130 .. 1 whose small entries decide a cancelling product."""
    a = np.array([[1.0, 2.0**-130 * (1 + 2**-50)], [2.0**-130 * 3.0, 1.0]])
    b = np.array([[2.0**-130 * (1 + 2**-51)], [-1.0 + 2.0**-52]])
    return a, b


def test_out_of_reach_is_reported_then_recomputed_exactly():
    a, b = unreachable()
    c, info = cf.certified_gemm_prototype(a, b, scheme="ozaki2", fallback=False)
    assert not info.certified and info.uncertified >= 1 and info.width == 100 and info.worst > 1
    c, info = cf.certified_gemm_prototype(a, b, scheme="ozaki2")
    assert info.certified and info.fallback >= 1
    for i in range(2):
        assert Fraction(float(c[i, 0])) == Fraction(float(exact_entry(a[i], b[:, 0])))
        assert guarantee_holds(c, a, b, "ozaki2", i, 0)
    c1, info1 = cf.certified_gemm_prototype(a, b, scheme="ozaki1", cap=4, fallback=False)
    assert not info1.certified and info1.width == 4


def test_policy_widens_from_the_worst_ratio_up_to_the_cap():
    seen = []

    def run(width):
        seen.append(width)
        ok = width >= 70
        return width, cf.Certificate(None, 0 if ok else 3, 0.0 if ok else 2.0**5.5)
    c, width, cert, tried = cf.certified_policy(run, 56, "ozaki2")
    assert seen == [56, 63, 70] and width == 70 and cert.uncertified == 0 and len(tried) == 3
    seen.clear()
    _, width, cert, _ = cf.certified_policy(run, 56, "ozaki2", cap=60)
    assert seen == [56, 60] and cert.uncertified == 3
    assert cf.next_width("ozaki1", 8, 2.0**10, 24) == 10 and cf.next_width("ozaki1", 8, np.inf, 24) == 11


def test_statistics_reduce_exactly_over_k_pieces():
    """Operand statistics and the fixed-point lower bound of k split in two pieces, reduced with
    MAX / SUM, are bit for bit those of the whole (what keeps SUMMA's decisions the same)."""
    rng = np.random.default_rng(17)
    a, b = badly_scaled(rng, 9, 50, 40), badly_scaled(rng, 7, 50, 40)
    e, f = exponents(np, row_abs_max(np, a)), exponents(np, row_abs_max(np, b))
    plan = ModularPlan.for_k(60, 50)
    whole = cf.operand_stats(np, a, e, plan)
    parts = [cf.operand_stats(np, a[:, s], e, plan) for s in (slice(0, 23), slice(23, 50))]
    assert np.array_equal(whole.delta, np.maximum(parts[0].delta, parts[1].delta))
    assert np.array_equal(whole.norm, parts[0].norm + parts[1].norm)
    lo = cf.fixed_point_lower_bound(np, a, b, e, f, 50)
    halves = sum(cf.fixed_point_lower_bound(np, a[:, s], b[:, s], e, f, 50) for s in (slice(0, 23), slice(23, 50)))
    assert np.array_equal(lo, halves)
    assert np.array_equal(cf.inner_stats(np, a), np.maximum(cf.inner_stats(np, a[:5]), cf.inner_stats(np, a[5:])))


# -- BLAS details ----------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
def test_underflowing_negative_product_is_plus_zero(scheme):
    for a, b in (([[-1e-200]], [[1e-200]]), ([[1e-300, -1e-300]], [[1e-300], [1e-300]])):
        c = ozhpc.gemm(np.array(a), np.array(b), engine="numpy", scheme=scheme)
        want = np.array(a) @ np.array(b)
        assert c[0, 0] == 0 and not np.signbit(c[0, 0]) and not np.signbit(want[0, 0])


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", ["auto", "low"])
def test_no_spurious_overflow_near_dbl_max(scheme, width):
    kw = ({"bits": 52} if scheme == "ozaki2" else {"slices": 7}) if width == "low" else {}
    for a, b, want in (([[DBL_MAX]], [[1.0]], DBL_MAX), ([[1.0]], [[-DBL_MAX]], -DBL_MAX),
                       ([[DBL_MAX, DBL_MAX]], [[1.0], [1.0]], np.inf), ([[2.0**1023]], [[4.0]], np.inf)):
        c = ozhpc.gemm(np.array(a), np.array(b), engine="numpy", scheme=scheme, **kw)
        assert c[0, 0] == want, (a, b, kw)
    c, info = cf.certified_gemm_prototype(np.array([[DBL_MAX]]), np.array([[1.0]]), scheme=scheme)
    assert c[0, 0] == DBL_MAX and info.certified


@pytest.mark.parametrize("scheme", SCHEMES)
def test_too_few_bits_break_the_bound_and_are_not_certified(scheme):
    """The property above has teeth: at a small width some entries miss the guarantee, and the
    certificate passes none of those."""
    a, b = standard_matrix(12, 40, 1.0, seed=21), standard_matrix(40, 10, 1.0, seed=22)
    e, f = exponents(np, row_abs_max(np, a)), exponents(np, row_abs_max(np, b.T))
    plan = ModularPlan.for_k(30, 40) if scheme == "ozaki2" else SlicePlan(4, 4)
    acc = plan.zeros(ENGINE, 12, 10, 40)
    plan.accumulate(ENGINE, acc, plan.split(ENGINE, a, e), plan.split(ENGINE, b.T, f))
    c = plan.combine(ENGINE, acc, e, f)
    cert = cf.certify_product(np, a, b.T, e, f, plan, c, acc if scheme == "ozaki1" else None)
    missed = [(i, j) for i in range(12) for j in range(10) if not guarantee_holds(c, a, b, scheme, i, j)]
    assert missed and not any(cert.passed[i, j] for i, j in missed)
    assert cert.uncertified >= len(missed) and cert.worst > 1


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


@pytest.mark.parametrize("scheme", SCHEMES)
def test_special_values_zero_and_empty_operands(scheme):
    """inf/NaN land where IEEE puts them (those entries are not counted), the finite entries are
    certified; k = 0, empty and all-zero operands give +0.0 and pass."""
    rng = np.random.default_rng(23)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 4))
    a[1, 2], b[3, 1] = np.inf, np.nan
    c, info = cf.certified_gemm_prototype(a, b, scheme=scheme)
    with np.errstate(all="ignore"):
        native = a @ b
    assert info.certified and np.array_equal(np.isnan(c), np.isnan(native))
    assert np.array_equal(np.isinf(c), np.isinf(native))
    finite = [(i, j) for i in range(5) for j in range(4) if np.isfinite(a[i]).all() and np.isfinite(b[:, j]).all()]
    assert finite and all(guarantee_holds(c, a, b, scheme, i, j) for i, j in finite)
    for sa, sb in (((3, 0), (0, 4)), ((0, 5), (5, 4)), ((3, 5), (5, 0)), ((3, 4), (4, 2))):
        c, info = cf.certified_gemm_prototype(np.zeros(sa), np.zeros(sb), scheme=scheme)
        assert c.shape == (sa[0], sb[1]) and info.certified and not c.any() and not np.signbit(c).any()
