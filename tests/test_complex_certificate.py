"""The certificate of complex products (:mod:`ozhpc.ozaki.complex_certificate`) on the NumPy engine:
every entry it passes meets the guarantee per component, exactly (Fractions); entries it cannot
prove fail; parts that are all zero are proved without the support digits."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.ozaki import complex_certificate as cc
from ozhpc.ozaki.complex_plan import ComplexSlicePlan, GaussianPlan
from ozhpc.run.reference import exact_dot

ENG = NumpyEngine()
U = Fraction(1, 2**53)


def _exps(z):
    return np.frexp(np.maximum(np.abs(z.real), np.abs(z.imag)).max(axis=1))[1].astype(np.int32)


def _digit_groups(a, b, e, f, upper=False):
    """The three groups of the parts' magnitude (support) digit products."""
    planes = [np.concatenate([ENG.magnitudes(np.ascontiguousarray(p), x, upper=upper) for p in (z.real, z.imag)])
              for z, x in ((a, e), (b, f))]
    sums = ENG.zeros_groups(3, a.shape[0], b.shape[0])
    ENG.accumulate_groups(sums, *planes)
    return sums


def certified(a, b, plan, factor=1, support=False):
    """(C, Certificate) of op(A) = a, op(B)^T = b on ``plan``, as the product pipeline runs it."""
    e, f = _exps(a), _exps(b)
    da, eb = plan.split(ENG, a, e), plan.split(ENG, b, f)
    if plan.needs_group_sums:
        acc = plan.zeros(ENG, a.shape[0], b.shape[0], a.shape[1])
        plan.accumulate(ENG, acc, da, eb)
        c = plan.certified_combine(ENG, acc, e, f)
    else:
        acc, c = None, plan.multiply_combine(ENG, da, eb, e, f)
    stats = (cc.part_stats(ENG, a, e, plan), cc.part_stats(ENG, b, f, plan))
    cert = cc.certify_complex_entries(ENG, c, _digit_groups(a, b, e, f), stats, e, f, plan, acc,
                                      _digit_groups(a, b, e, f, True) if support else None, factor=factor)
    return c, cert


def exact_parts(a_row, b_row):
    """Re, Im of sum_t a_t b_t and the |A||B| of the parts of each, exactly."""
    ar, ai, br, bi = a_row.real, a_row.imag, b_row.real, b_row.imag
    re = exact_dot(ar, br) - exact_dot(ai, bi)
    im = exact_dot(ar, bi) + exact_dot(ai, br)
    mags = (exact_dot(np.abs(ar), np.abs(br)) + exact_dot(np.abs(ai), np.abs(bi)),
            exact_dot(np.abs(ar), np.abs(bi)) + exact_dot(np.abs(ai), np.abs(br)))
    return (re, im), mags


def guarantee_holds(c, a, b, plan, factor=1) -> np.ndarray:
    """Per entry: both components within ``factor u (|A||B| of the parts) + rho u |C| + 2**-1074``."""
    ok = np.ones(c.shape, dtype=bool)
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            exact, mags = exact_parts(a[i], b[j])
            for got, want, mag in zip((c[i, j].real, c[i, j].imag), exact, mags):
                slack = factor * U * mag + plan.final_rounding_ulps * U * abs(Fraction(float(got))) + Fraction(1, 2**1074)
                ok[i, j] &= abs(Fraction(float(got)) - want) <= slack
    return ok


def _random(rng, shape, phi=1.0):
    return ((rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
            + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape)))


@pytest.mark.parametrize("plan", [GaussianPlan.widest_for(60, 24), GaussianPlan.for_k(40, 24),
                                  ComplexSlicePlan(9, 9), ComplexSlicePlan(4, 4)])
def test_passed_entries_meet_the_guarantee(plan):
    rng = np.random.default_rng(plan.bits)
    a, b = _random(rng, (7, 24)), _random(rng, (6, 24))
    b[2] *= 2.0**-40                      # a column far below the others
    a[1, :12] = 0                         # cancellation-prone rows
    c, cert = certified(a, b, plan)
    ok = guarantee_holds(c, a, b, plan)
    passed = np.ones(c.shape, bool) if cert.passed is None else cert.passed
    assert np.all(ok[passed])
    assert cert.uncertified == int((~passed).sum())
    if plan.bits >= 60:
        assert cert.uncertified == 0 and 0 < cert.worst <= 1
        assert cert.passed_worst == cert.worst   # every entry passed
    if plan.bits <= 40:                   # too few bits for u |A||B|: some entries fail, none wrongly
        assert cert.uncertified > 0 and cert.worst > 1
        if passed.any():                  # the headroom of what stays when the failing ones are refined
            assert 0 < cert.passed_worst <= 1


def test_real_and_imaginary_operands_need_no_support_pass():
    """Purely real operands (and a purely imaginary one times a real one): the component that is
    exactly zero has no live term, so its bound is 0; certified in the first pass under "tight"."""
    rng = np.random.default_rng(3)
    a_re, b_re = _random(rng, (5, 30)).real + 0j, _random(rng, (4, 30)).real + 0j
    plan = GaussianPlan.widest_for(56, 30)
    for a, b in ((a_re, b_re), (1j * a_re.real, b_re), (a_re, 1j * b_re.real)):
        c, cert = certified(a, b, plan)
        assert cert.uncertified == 0
        assert np.all(guarantee_holds(c, a, b, plan))
        zero = c.imag if np.all(a.imag == 0) == np.all(b.imag == 0) else c.real
        assert np.all(zero == 0) and not np.signbit(zero).any()


def test_a_tiny_part_is_not_a_zero_part():
    """An imaginary part 1060 bits below its row's scale rounds to the integer 0 in every plan: C's
    imaginary part is 0 where the exact one is 2**-1000. Its representation error is not 0, so that
    entry is never certified (with or without the support digits)."""
    a = np.array([[2.0**60 + 2.0**-1000 * 1j]])
    b = np.array([[1.0 + 0j]])
    for support in (False, True):
        c, cert = certified(a, b, GaussianPlan.widest_for(100, 1), support=support)
        assert c[0, 0] == 2.0**60 and cert.uncertified == 1 and cert.worst == np.inf
        assert not guarantee_holds(c, a, b, GaussianPlan.widest_for(100, 1))[0, 0]


def test_dgemm_factor_and_support():
    """Under "dgemm" (factor k + 1) a plan too narrow for "tight" certifies; sparse operands whose
    products have no common nonzero term are proved by the support digits."""
    rng = np.random.default_rng(9)
    a, b = _random(rng, (6, 40)), _random(rng, (5, 40))
    plan = GaussianPlan.for_k(53, 40)
    _, tight = certified(a, b, plan)
    c, loose = certified(a, b, plan, factor=41)
    assert tight.uncertified > 0 and loose.uncertified == 0
    assert np.all(guarantee_holds(c, a, b, plan, factor=41))
    sparse_a, sparse_b = np.zeros((3, 8), complex), np.zeros((3, 8), complex)
    sparse_a[:, :4] = _random(rng, (3, 4))
    sparse_b[:, 4:] = _random(rng, (3, 4))
    c, cert = certified(sparse_a, sparse_b, GaussianPlan.for_k(30, 8), support=True)
    assert cert.uncertified == 0 and np.all(c == 0)


def _same_stats(x, y):
    return all(np.array_equal(np.asarray(u), np.asarray(v)) for u, v in zip((x.delta, x.norm, x.nnz),
                                                                            (y.delta, y.norm, y.nnz)))


@pytest.mark.parametrize("case", ["random", "purely real", "zeros and tiny parts", "wide range"])
def test_joint_statistics_in_one_pass_are_those_of_the_parts(case):
    """The first check's statistics of both parts together (one pass over the rows as real rows of
    length 2k) equal the parts' joined, bit for bit; the row sizes the product measured bound them."""
    from ozhpc.ozaki.operands import measure
    from ozhpc.ozaki.domain import COMPLEX
    from ozhpc.ozaki.reductions import LOCAL
    from ozhpc.ozaki.settings import OzakiSettings

    rng = np.random.default_rng(11)
    z = _random(rng, (13, 40))
    if case == "purely real":
        z = z.real.astype(complex)
    elif case == "zeros and tiny parts":
        z[3] = 0
        z[5] = z[5].real + 1e-300j
        z[:, 7] = 1j * z[:, 7].imag
    elif case == "wide range":
        z = z * 2.0 ** rng.integers(-200, 200, z.shape)
    for plan in (GaussianPlan.for_k(54, 40), ComplexSlicePlan(7, 7)):
        e = _exps(z)
        stats = cc.part_stats(ENG, z, e, plan)
        assert _same_stats(stats.joint, cc.joint(np, stats.parts))
    ops = measure(ENG, z, z, k=40, settings=OzakiSettings("ozaki2"), certifying=True, reduce=LOCAL, domain=COMPLEX)
    plan = ops.plan(OzakiSettings("ozaki2"))
    fresh = cc.part_stats(ENG, ops.fin_a, ops.row_exps, plan)
    measured = cc.part_stats(ENG, ops.fin_a, ops.row_exps, plan, mags=ops.mags[0])
    # the measured sizes: the same counts and errors; norms the same or, in rows "auto" scaled down
    # to relieve the CRT range, rounded up (bounds, as the real certificate reads them)
    assert _same_stats(fresh.joint, cc.joint(np, fresh.parts))
    assert np.array_equal(measured.joint.delta, fresh.joint.delta)
    assert np.array_equal(measured.joint.nnz, fresh.joint.nnz)
    assert np.all(measured.joint.norm >= fresh.joint.norm)
