"""Levels of scales (ozhpc/ozaki/levels.py) and the refinement of failing entries
(ozhpc/ozaki/refine.py): the operand as exact levels, the staircase's bound against exact rational
products, and certified "auto" on every finite input (tests/helpers/anyinput_cases.py: the issue's
acceptance cases), both schemes, both guarantees, through ``ozhpc.gemm`` and SUMMA."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ozhpc
from ozhpc.engines import get_engine, superacc
from ozhpc.ozaki import refine as rf
from ozhpc.ozaki.levels import OperandLevels, Staircase, remainder
from ozhpc.ozaki.plan import exact_plan
from ozhpc.ozaki.product import LOCAL
from ozhpc.ozaki.scales import exponents, row_abs_max
from ozhpc.run.reference import exact_dot

from helpers.anyinput_cases import cases, docs_example
from helpers.guarantee import guarantee_holds

SCHEMES = ("ozaki1", "ozaki2")
LEVELS = ("dgemm", "tight")
ENGINE = get_engine("numpy")


def wide(rng, shape, spread, zeros=0.3):
    """Standard normal entries times powers of two over ``+-spread``, some zeros."""
    x = np.ldexp(rng.standard_normal(shape), rng.integers(-spread, spread + 1, size=shape))
    return np.where(rng.random(shape) < zeros, 0.0, x)


def fraction(x) -> Fraction:
    return Fraction(float(x))


def rounded(value: Fraction) -> float:
    """The FP64 nearest to ``value`` (+-inf past the overflow threshold)."""
    try:
        return float(value) + 0.0
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def exact_value(acc, window) -> list[Fraction]:
    """The accumulators' exact values (the limbs' weighted sum)."""
    return [sum((Fraction(int(v)) * Fraction(2) ** (window.low + superacc.LIMB_BITS * t) for t, v in enumerate(row)),
                Fraction(0)) for row in acc]


# -- the operand as levels -----------------------------------------------------------------------

@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.sampled_from([8, 30, 53, 100]), st.integers(0, 1020))
def test_levels_hold_the_operand_exactly(seed, bits, spread):
    """``X = X_1 + ... + X_L + X^(L+1)`` exactly at every depth, each level's scale at least
    ``bits - 1`` below the last, and every row held whole after at most ``1 + 2099 / (bits - 1)``
    levels (FP64's exponent range)."""
    rng = np.random.default_rng(seed)
    x = wide(rng, (4, 9), spread)
    x[0, 0] = 5e-324
    x[1, 1] = np.finfo(np.float64).max   # its row's nearest grid point could be 2**1024
    levels = OperandLevels.start(np, x, exponents(np, row_abs_max(np, x)), bits)
    limit = 1 + math.ceil(2099 / (bits - 1))
    while not levels.exhausted(np):
        assert levels.depth < limit
        levels.deepen(np)
    for i in range(x.shape[0]):
        for t in range(x.shape[1]):
            assert sum((fraction(g[i, t]) for g in levels.grids), Fraction(0)) == fraction(x[i, t])
    for lower, upper, grid in zip(levels.exps[1:], levels.exps, levels.grids[1:]):
        live = (grid != 0).any(axis=1)
        assert np.all(lower[live] <= upper[live] - bits + 1)


def test_remainder_is_what_the_grid_drops():
    x = np.array([[1.0, 2.0**-60 * 3, 1e-300, -(1 + 2.0**-52)]])
    e = exponents(np, row_abs_max(np, x))
    assert int(e[0]) == 1
    r = remainder(np, x, e, 52)   # a grid of 2**-51: 1 + 2**-52 is a tie, to even (1)
    assert r.tolist() == [[0.0, 2.0**-60 * 3, 1e-300, -2.0**-52]]
    assert remainder(np, x, e, 100).tolist() == [[0.0, 0.0, 1e-300, 0.0]]


@pytest.mark.parametrize("bits", [53, 100, 105, 168])
def test_exact_plans_multiply_their_grids_exactly(bits):
    """The level products' plans: scheme II's moduli up to 100 bits, scheme I's digits with every
    pair beyond; the exact parts add up to the exact product of the grids."""
    rng = np.random.default_rng(bits)
    a, b = wide(rng, (3, 40), 20), wide(rng, (4, 40), 20)
    e, f = exponents(np, row_abs_max(np, a)), exponents(np, row_abs_max(np, b))
    ga, gb = a - remainder(np, a, e, bits), b - remainder(np, b, f, bits)
    plan = exact_plan(bits, 40)
    acc = plan.zeros(ENGINE, 3, 4, 40)
    plan.accumulate(ENGINE, acc, plan.split(ENGINE, ga, e), plan.split(ENGINE, gb, f))
    values, shifts = plan.exact_parts(np, acc)
    for i in range(3):
        for j in range(4):
            got = sum((Fraction(int(v[i, j])) * Fraction(2) ** (int(s) + int(e[i]) + int(f[j]))
                       for v, s in zip(values, shifts)), Fraction(0))
            assert got == exact_dot(ga[i], gb[j])


# -- the staircase's bound ------------------------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(1, 4), st.integers(1, 8),
       st.sampled_from([53, 60, 100]), st.sampled_from([40, 300, 1000]))
def test_the_staircase_bound_holds_at_every_depth(seed, m, n, k, bits, spread):
    """``|P_L - AB| <= E`` per entry (P_L the accumulator's exact value, E :meth:`Staircase.bound`)
    at depths 1..5, ``fl(P_L)`` its correct rounding, and E = 0 from depth ``L_A + L_B - 1`` on when
    A's levels hold it whole at depth ``L_A`` and B's at ``L_B``."""
    rng = np.random.default_rng(seed)
    a, b = wide(rng, (m, k), spread), wide(rng, (n, k), spread)
    stair = Staircase(ENGINE, a, b, exponents(np, row_abs_max(np, a)), exponents(np, row_abs_max(np, b)), bits, k)
    whole = {}
    for _ in range(5):
        for side in ("a", "b"):
            if side not in whole and getattr(stair, side).exhausted(np):
                whole[side] = stair.depth
        exact_p = exact_value(stair.acc, stair.window)
        frac, top = stair.bound()
        values = stair.values()
        for i in range(m):
            for j in range(n):
                p = exact_p[i * n + j]
                err = abs(p - exact_dot(a[i], b[j]))
                assert err <= fraction(frac[i, j]) * Fraction(2) ** int(top[i, j]), (i, j, stair.depth)
                assert values[i, j] == rounded(p)
        if len(whole) == 2 and stair.depth >= whole["a"] + whole["b"] - 1:
            assert stair.exact() and not frac.any()
        stair.deepen()


# -- certified "auto" on every finite input --------------------------------------------------------

CASES = cases()


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_acceptance_case_is_certified(product, name, scheme, guarantee):
    """The issue's inputs (a docs example 100% wrong before, 1e-30 under 1e300, off-diagonal blocks
    2**-200 .. 2**-900 below, compensated scalings 2**+-1000, subnormals beside DBL_MAX rows, D2's
    family, V inv(V)): certified under accuracy="strict", every entry within its guarantee (exact)."""
    a, b = CASES[name]
    c, info = product(a, b, scheme=scheme, guarantee=guarantee, accuracy="strict", info=True)
    assert info.certified is True and info.uncertified == 0 and info.worst_ratio <= 1, info.widths
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            assert guarantee_holds(c, a, b, scheme, i, j, guarantee), (i, j, info.widths)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 6), st.integers(1, 8),
       st.sampled_from([200, 600, 1000]), st.sampled_from(SCHEMES), st.sampled_from(LEVELS), st.booleans())
def test_wide_exponent_spread_is_certified(seed, m, n, k, spread, scheme, guarantee, identity):
    """Entries spread over 2**+-spread (and identity operands that turn a column's spread into the
    entries of C): certified, every entry within its guarantee."""
    rng = np.random.default_rng(seed)
    a, b = wide(rng, (m, k), spread), wide(rng, (k, n), spread)
    if identity:
        a = np.eye(k)[:m] if m <= k else np.eye(m, k)
    c, info = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, guarantee=guarantee, accuracy="strict", info=True)
    assert info.certified is True
    assert all(guarantee_holds(c, a, b, scheme, i, j, guarantee) for i in range(m) for j in range(n)), info.widths


def test_the_docs_example_is_exact_and_counted():
    """docs/batch.md's example: the pass fails on the 552 entries off the diagonal; two levels
    hold them, exactly; no exact dot is needed; the report's fields say so."""
    a = docs_example()
    c, info = ozhpc.gemm(a, np.eye(24), engine="numpy", accuracy="strict", info=True)
    assert c.tobytes() == a.tobytes()
    assert (info.refined_entries, info.levels, info.exact_entries) == (552, 2, 0)
    assert info.widths[0][1] == 552 and info.widths[-1][1] == 0
    attrs = info.plan_attrs()
    assert (attrs["refined_entries"], attrs["levels"], attrs["exact_entries"]) == (552, 2, 0)


def test_entries_past_the_deepest_level_get_exact_dots():
    """A refinement allowed one level only: the entries it leaves get their exact dot products,
    correctly rounded, and are counted; entries that passed keep their bits."""
    a = docs_example(8)
    c = np.eye(8) + 0.0
    failing = ~np.eye(8, dtype=bool)
    done = rf.refine(ENGINE, LOCAL, (a, np.eye(8)), 8, None, 53, c, failing, 1, max_levels=1)
    assert c.tobytes() == a.tobytes() and (done.levels, done.exact, done.refined) == (1, 56, 56)


def test_refinement_weighed_against_the_full_magnitude_plane():
    """After a first pass that sampled its magnitudes: entries with no lower bound in a few rows
    are refined instead of a pass of the full plane over every entry; a mild failure, or a failing
    block that costs more than the plane, keeps the plane's pass."""
    from ozhpc.ozaki.policy import EQUILIBRATE_RATIO, NextPass, Widening
    from ozhpc.ozaki.settings import OzakiSettings

    plan, sizes = exact_plan(55, 4096), (4096, 4096, 4096)
    step = NextPass(bounds=("lower", "support"))
    assert Widening(OzakiSettings()).refine_or(step, plan, math.inf, (41, 4096), sizes, 14).refine == 55
    assert Widening(OzakiSettings()).refine_or(step, plan, 2 * EQUILIBRATE_RATIO, (41, 41), sizes, 14).refine
    mild = NextPass(bounds=("lower",))
    assert Widening(OzakiSettings()).refine_or(mild, plan, EQUILIBRATE_RATIO, (1, 1), sizes, 14) == mild
    assert Widening(OzakiSettings()).refine_or(step, plan, math.inf, (2048, 2048), sizes, 14) == step


@pytest.mark.parametrize("scheme", SCHEMES)
def test_unit_rows_meeting_tiny_rows_take_one_refinement(scheme):
    """Rows of A that pick single rows of B scaled by 2**-300, with k long enough that the first
    pass samples its magnitudes: the refinement (on the block's own k indices and scales) follows
    the first pass at once, and those rows of C are B's rows exactly; everything certified."""
    rng = np.random.default_rng(3)
    m, k, n = 400, 2048, 24
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    picks = rng.choice(k, 4, replace=False)
    a[:4] = 0.0
    a[np.arange(4), picks] = 1.0
    b[picks] *= 2.0**-300
    c, info = ozhpc.gemm(a, b, scheme=scheme, accuracy="strict", info=True)
    assert info.certified and len(info.widths) == 2 and info.refined_entries == 4 * n, info.widths
    assert c[:4].tobytes() == b[picks].tobytes()
