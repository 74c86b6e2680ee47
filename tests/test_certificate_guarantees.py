"""The two certified guarantees ("dgemm", "tight"), the defaults (scheme II, "dgemm"), what fixed
plans state a priori, and the places where a quantity that scales to 0 must not be read as 0.

Every check against the exact product uses rational arithmetic (tests/helpers/guarantee.py)."""
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ozhpc
from ozhpc.engines import crt, get_engine
from ozhpc.engines.digits import row_abs_max
from ozhpc.ozaki import certificate as cf
from ozhpc.ozaki.plan import ModularPlan
from ozhpc.ozaki.scales import exponents
from ozhpc.ozaki.settings import OzakiSettings
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.reference import exact_entry, relative_errors, sample_indices

from helpers.guarantee import guarantee_holds

SCHEMES = ("ozaki1", "ozaki2")
LEVELS = ("dgemm", "tight")


def gemm(a, b, **kw):
    return ozhpc.gemm(a, b, **{"engine": "numpy", **kw})


def same_bits(x, y) -> bool:
    return x.shape == y.shape and x.tobytes() == y.tobytes()


def holds_everywhere(c, a, b, scheme, guarantee):
    return all(guarantee_holds(c, a, b, scheme, i, j, guarantee) for i in range(c.shape[0]) for j in range(c.shape[1]))


# -- defaults ------------------------------------------------------------------------------------------

def test_defaults_are_scheme2_and_the_dgemm_guarantee():
    a, b = standard_matrix(12, 40, 0.5, seed=1), standard_matrix(40, 9, 0.5, seed=2)
    c, info = gemm(a, b, info=True)
    assert (info.scheme, info.guarantee, info.certified) == ("ozaki2", "dgemm", True)
    assert holds_everywhere(c, a, b, "ozaki2", "dgemm")
    assert OzakiSettings().scheme == "ozaki2" and OzakiSettings(slices=8).scheme == "ozaki1"
    assert OzakiSettings(groups="all").scheme == "ozaki1"


def test_slices_with_scheme2_and_a_bad_guarantee_are_one_clear_error():
    with pytest.raises(ValueError, match="slices=8 is an option of scheme=ozaki1"):
        gemm(np.eye(2), np.eye(2), scheme="ozaki2", slices=8)
    with pytest.raises(ValueError, match="guarantee must be one of dgemm, tight, got 'loose'"):
        gemm(np.eye(2), np.eye(2), guarantee="loose")


# -- a tiny factor is not a zero factor ------------------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_a_factor_1300_bits_below_its_column_is_not_read_as_zero(scheme, guarantee):
    """The issue's false certificate: C[1, 0] = 1e-30 exactly, every plan gives 0 (the entry is
    1100 bits below its column's largest). The pass's certificate reports it (it used to certify
    the 0), and the refinement reaches it in one level (at the scales of the failing block's own k
    indices, where 1e300 takes no part): C is exact and certified."""
    a, b = np.eye(2), np.array([[1e300, 0.0], [1e-30, 1.0]])
    c, info = gemm(a, b, scheme=scheme, guarantee=guarantee, accuracy="strict", info=True)
    assert info.widths[0][1] >= 1 and math.isinf(info.widths[0][2])
    assert info.certified is True and info.refined_entries >= 1 and info.levels == 1
    assert same_bits(c, b)


def test_support_digits_and_representation_errors_of_underflowing_entries():
    """Entries whose scaling underflows to 0 still get a support digit of 1 and a nonzero
    representation error (both schemes), on the NumPy path."""
    from ozhpc.engines.digits import support_digits
    from ozhpc.ozaki.plan import SlicePlan

    x = np.array([[1e300, 1e-30, 0.0, -5e-324]])
    e = exponents(np, row_abs_max(np, x))
    assert support_digits(np, x, e).tolist() == [[math.ceil(1e300 * 2.0 ** (6 - int(e[0]))), 1, 0, 1]]
    for plan in (ModularPlan.for_k(60, 4), SlicePlan(9, 9)):
        err = cf.representation_error(np, x, e, plan)
        assert err[0, 1] > 0 and err[0, 3] > 0 and err[0, 2] == 0, plan


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 5), st.integers(1, 6),
       st.integers(900, 1300), st.sampled_from(SCHEMES), st.sampled_from(LEVELS), st.booleans())
def test_factors_far_below_their_row_never_certify_wrongly(seed, m, n, k, gap, scheme, guarantee, left):
    """Rows / columns holding a huge entry and tiny ones (900-1300 bits apart), on either side:
    whatever "auto" does, certified means the guarantee holds for every entry (exact check)."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    big, tiny = 2.0 ** (1000 - gap // 2), 2.0 ** -(gap - gap // 2)
    if left:   # rows of A mix huge and tiny entries; B is ordinary
        a = np.where(rng.random((m, k)) < 0.5, a * big, a * tiny)
    else:      # columns of B mix them
        b = np.where(rng.random((k, n)) < 0.5, b * big, b * tiny)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ozhpc.AccuracyWarning)
        c, info = gemm(a, b, scheme=scheme, guarantee=guarantee, info=True)
    if info.certified:
        assert holds_everywhere(c, a, b, scheme, guarantee), info.widths


# -- the certificate's headroom ---------------------------------------------------------------------------

@pytest.mark.parametrize("guarantee", LEVELS)
def test_worst_ratio_is_the_largest_over_every_entry(guarantee):
    """A certified run reports its real headroom: 0 < worst_ratio <= 1 (it used to be 0 whenever
    every entry passed), the same through SUMMA."""
    a, b = standard_matrix(20, 64, 0.5, seed=3), standard_matrix(64, 16, 0.5, seed=4)
    _, info = gemm(a, b, guarantee=guarantee, info=True)
    assert info.certified is True and 0 < info.worst_ratio <= 1
    assert info.widths[-1][2] == info.worst_ratio


def test_the_dgemm_factor_divides_every_ratio_by_k():
    """certify with factor k: each ratio is the factor-1 ratio over k (rounded up, never down), and
    "fails" is exactly "ratio > 1"."""
    rng = np.random.default_rng(5)
    bound = rng.random((30, 30)) * 2.0**-50
    lower = rng.random((30, 30)) * 2.0**-2
    lower[0, 0], bound[1, 1] = 0.0, 0.0
    one, k = cf.certify(np, bound, lower), cf.certify(np, bound, lower, factor=1000)
    scaled = np.ldexp(bound, 53)
    assert one.uncertified == int(np.sum(scaled > lower))
    assert k.uncertified == int(np.sum(np.ldexp(bound, 53) / 1000 * cf.UP > lower))
    assert one.uncertified > k.uncertified >= 1          # the entry with no lower bound
    assert math.isinf(one.worst) and math.isinf(k.worst)
    finite = lower > 0
    r1 = cf.entry_ratio(np, scaled, lower, scaled <= lower)
    rk = cf.entry_ratio(np, cf.scaled_bound(np, bound, 1000), lower, cf.scaled_bound(np, bound, 1000) <= lower)
    ok = finite & (r1 > 0)
    assert np.all(np.abs(rk[ok] * 1000 / r1[ok] - 1) < 2.0**-38)
    assert np.all((rk > 1) == (cf.scaled_bound(np, bound, 1000) > lower))


# -- fixed plans: the a-priori bound they state holds ----------------------------------------------------

def a_priori_holds(c, a, b, info) -> bool:
    """|C - AB| <= 2**(e_i+f_j) (truncation_bound + combine_bound) + rounding_bound |C| + 2**-1074."""
    e = exponents(np, row_abs_max(np, a)).astype(int)
    f = exponents(np, row_abs_max(np, b.T)).astype(int)
    tau = Fraction(info.truncation_bound) + Fraction(info.combine_bound)
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            exact = exact_entry(a[i], b[:, j])
            got = Fraction(float(c[i, j]))
            limit = (Fraction(2) ** (int(e[i]) + int(f[j])) * tau + Fraction(info.rounding_bound) * abs(got)
                     + Fraction(1, 2**1074))
            if abs(got - exact) > limit:
                return False
    return True


def test_the_issue_cancellation_example_states_a_true_bound():
    a, b = np.array([[1.1, -1.0]]), np.array([[1 / 1.1], [1.0]])
    for kw in (dict(slices=10), dict(slices=16), dict(slices=16, groups="all"), dict(scheme="ozaki2", bits=100)):
        c, info = gemm(a, b, info=True, **kw)
        assert a_priori_holds(c, a, b, info), kw


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 5), st.integers(1, 9),
       st.integers(0, 40), st.one_of(st.integers(1, 24).map(lambda s: dict(slices=s)),
                                     st.integers(1, 24).map(lambda s: dict(slices=s, groups="all")),
                                     st.integers(8, 100).map(lambda b: dict(scheme="ozaki2", bits=b))))
def test_fixed_plans_state_a_true_bound(seed, m, n, k, spread, plan):
    """Cancelling sums (columns that repeat with opposite signs) and spread rows, every fixed plan:
    the a-priori statement of GemmInfo holds for every entry."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-spread, spread + 1, size=(m, k))
    b = rng.standard_normal((k, n))
    if k > 1:
        b[1::2] = -b[0:k - 1:2] * (1 + 2.0**-40)
        a[:, 1::2] = a[:, 0:k - 1:2]
    c, info = gemm(a, b, info=True, **plan)
    assert info.certified is None and a_priori_holds(c, a, b, info), plan


# -- "auto" is accurate in fact -------------------------------------------------------------------------

@pytest.mark.parametrize("phi", [0.0, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("k", [256, 2048])
def test_default_auto_is_no_less_accurate_than_native_dgemm(phi, k):
    """The first plan is chosen for accuracy in fact: on the standard matrices the sampled error of
    the default product is no larger than NumPy's own FP64 product on the same inputs."""
    a, b = standard_matrix(32, k, phi, seed=21), standard_matrix(k, 32, phi, seed=22)
    idx = sample_indices(32, 32, 40, seed=23)
    exact = [exact_entry(a[i], b[:, j]) for i, j in idx]
    c, info = gemm(a, b, info=True)
    ours, native = relative_errors(c, a, b, idx, exact).max(), relative_errors(a @ b, a, b, idx, exact).max()
    assert info.certified is True
    assert ours <= native, (ours, native, info.bits)


# -- the data-dependent CRT range ------------------------------------------------------------------------

def test_data_range_saves_moduli_and_keeps_every_bit():
    """On ordinary data the operands' own sizes need fewer moduli than the worst case k 4**bits; the
    product is the same integer, so C has the same bits as with the worst-case moduli."""
    eng = get_engine("numpy")
    a, b = standard_matrix(24, 4096, 0.5, seed=1), standard_matrix(4096, 20, 0.5, seed=2)
    saved = []
    for bits in (40, 53, 60):
        c, info = gemm(a, b, scheme="ozaki2", bits=bits, info=True)
        worst = ModularPlan.for_k(bits, 4096)
        saved.append(worst.moduli - info.moduli)
        e = exponents(np, row_abs_max(np, a))
        f = exponents(np, row_abs_max(np, b.T))
        ref = worst.multiply_combine(eng, worst.split(eng, a, e), worst.split(eng, np.ascontiguousarray(b.T), f), e, f)
        assert ref.tobytes() == c.tobytes(), bits
    assert min(saved) >= 0 and max(saved) >= 1, saved


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_data_range_holds_where_cauchy_schwarz_is_tight(sign):
    """Equal rows and columns (|C'| reaches ||X|| ||Y||): the data bound still holds every product
    exactly (a too-small range would wrap around and give garbage)."""
    k = 3000
    a = np.full((3, k), 0.75)        # on every grid: X = 0.75 2**bits exactly
    b = np.full((k, 2), 0.75 * sign)
    a[1] *= -1
    for bits in (8, 20, 53, 100):
        c, info = gemm(a, b, scheme="ozaki2", bits=bits, info=True)
        assert c.tobytes() == (a @ b).tobytes(), (bits, info.moduli)
    assert crt.data_product_bound(53, (k << 32, k << 32), (k, k), 32) >= k * (2**53 * 0.99) ** 2


def test_rows_close_to_their_scale_do_not_set_the_range_for_everyone():
    """A row (and a column) whose entries all sit near its scale would need one more modulus for the
    whole product; "auto" scales it down by a power of two instead (exact, global), so it keeps the
    moduli of the other rows and still certifies, the outlier's own entries included."""
    from ozhpc.ozaki.scales import range_bumps

    a, b = standard_matrix(8, 16384, 0.5, seed=1), standard_matrix(16384, 8, 0.5, seed=2)
    a[3], b[:, 5] = np.clip(a[3], -1.9, 1.9), np.clip(b[:, 5], -1.9, 1.9)
    c, info = gemm(a, b, info=True)
    _, fixed = gemm(a, b, scheme="ozaki2", bits=info.bits, info=True)
    assert info.certified is True and info.moduli == fixed.moduli - 1, (info.moduli, fixed.moduli)
    assert all(guarantee_holds(c, a, b, "ozaki2", i, j, "dgemm") for i, j in ((3, 5), (3, 0), (0, 5)))
    # the rule itself: twice the average per entry, and only rows long enough to matter
    sq = np.array([100, 210, 3000, 20, 0])
    nnz = np.array([100, 100, 100, 1, 0])
    assert range_bumps(sq, nnz, 1000, 1000, 100).tolist() == [0, 1, 2, 0, 0]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_a_huge_entry_that_meets_only_zeros_does_not_hide_the_rest(scheme, guarantee):
    """B's column holds 1e300 at a k index where A is all zero, and an ordinary entry elsewhere:
    the product is the ordinary term, 1000 bits below the column's largest. Equilibration drops
    the entries that meet only zeros (exact), so C is certified and right (it used to be 0, and
    before the tiny-factor fix, falsely certified)."""
    a = np.array([[0.0, -0.13210486], [0.0, 2.5]])
    b = np.array([[1e300, 1.0], [0.104900117, -3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ozhpc.AccuracyWarning)
        c, info = gemm(a, b, scheme=scheme, guarantee=guarantee, info=True)
    assert info.certified is True and holds_everywhere(c, a, b, scheme, guarantee)
    assert np.all(np.abs(c - a @ b) <= np.spacing(np.abs(a @ b)))
