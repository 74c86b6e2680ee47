"""The widening policy (ozhpc/ozaki/policy.py) as a value: each certificate's verdict gives the next
pass, from the plan's widths and caps alone, without a product or data (a wider plan is named by
its settings and width, which the product resolves for its data)."""
from __future__ import annotations

import math

import pytest

from ozhpc.engines import crt
from ozhpc.ozaki.certificate import Certificate
from ozhpc.ozaki.plan import MAX_SLICES, ModularPlan, SlicePlan
from ozhpc.ozaki.policy import EQUILIBRATE_RATIO, NextPass, Widening
from ozhpc.ozaki.settings import OzakiSettings


def plan_of(step):
    """The plan a step names, as a product without data would resolve it (no sizes, k = 64)."""
    return ModularPlan.for_k(step.width, 64) if step.settings.scheme == "ozaki2" else SlicePlan(step.width, step.width)


def failed(worst, count=3):
    return Certificate(None, count, worst)


def test_a_certified_pass_ends_and_is_recorded():
    policy = Widening(OzakiSettings())
    plan = ModularPlan.for_k(56, 64)
    assert policy.after(Certificate(None, 0, 0.5), plan, sampled=True, support=False) is None
    assert policy.widths == [[56, 0, 0.5]]


def test_bounds_pass_first_then_equilibrate_then_wider():
    policy = Widening(OzakiSettings())
    plan = ModularPlan.for_k(56, 64)
    assert policy.after(failed(math.inf), plan, sampled=True, support=False) == NextPass(bounds=("lower", "support"))
    assert policy.after(failed(2.0**20), plan, sampled=False, support=True) == NextPass(equilibrate=True)
    step = policy.after(failed(2.0**5.5), plan, sampled=False, support=True)   # equilibrated once only
    assert plan_of(step).bits == 63 and not step.bounds and not step.equilibrate   # log2(worst) + 1 more bits
    assert [w[0] for w in policy.widths] == [56, 56, 56]


def test_past_scheme_two_cap_scheme_one_digits_then_none():
    policy = Widening(OzakiSettings())
    policy.equilibrated = True
    top = ModularPlan.for_k(crt.MAX_BITS, 64)
    step = policy.after(failed(2.0**10), top, sampled=False, support=True)
    assert policy.settings.scheme == "ozaki1" and policy.settings.bits == "auto"
    assert plan_of(step) == SlicePlan(-(-crt.MAX_BITS // 7) + 2, -(-crt.MAX_BITS // 7) + 2)
    assert policy.after(failed(2.0**10), SlicePlan(MAX_SLICES, MAX_SLICES), sampled=False, support=True) is None


@pytest.mark.parametrize("worst, slices", [(2.0, 10), (EQUILIBRATE_RATIO, 12)])
def test_failures_up_to_the_ratio_widen_at_once(worst, slices):
    """log2(worst) + 1 bits in whole slices (2 bits: one; 17 bits: three), no equilibration."""
    policy = Widening(OzakiSettings(slices="auto", scheme="ozaki1"))
    step = policy.after(failed(worst), SlicePlan(9, 9), sampled=False, support=True)
    assert plan_of(step) == SlicePlan(slices, slices) and not policy.equilibrated


def test_after_the_equilibrated_problem_fails_at_the_widest_plan_the_given_one_once_more():
    """Equilibration, then past every cap: the given operands again (their settings back), widened
    without equilibrating; past every cap once more, done (None)."""
    policy = Widening(OzakiSettings())
    plan = ModularPlan.for_k(56, 64)
    assert policy.after(failed(2.0**20), plan, sampled=False, support=True) == NextPass(equilibrate=True)
    policy.after(failed(2.0**10), ModularPlan.for_k(crt.MAX_BITS, 64), sampled=False, support=True)
    assert policy.settings.scheme == "ozaki1"
    widest = SlicePlan(MAX_SLICES, MAX_SLICES)
    assert policy.after(failed(2.0**10), widest, sampled=False, support=True) == NextPass(restore=True)
    assert policy.settings == OzakiSettings()
    step = policy.after(failed(2.0**20), plan, sampled=False, support=True)
    assert step.width is not None and not step.equilibrate and plan_of(step).bits > 56
    assert policy.after(failed(2.0**10), widest, sampled=False, support=True) is None


def test_nothing_to_equilibrate_leaves_nothing_to_restore():
    policy = Widening(OzakiSettings())
    plan = ModularPlan.for_k(crt.MAX_BITS, 64)
    assert policy.after(failed(2.0**20), plan, sampled=False, support=True) == NextPass(equilibrate=True)
    assert policy.nothing_to_equilibrate(failed(2.0**20), plan).settings.scheme == "ozaki1"   # scheme I's digits
    assert policy.after(failed(2.0**10), SlicePlan(MAX_SLICES, MAX_SLICES), sampled=False, support=True) is None
