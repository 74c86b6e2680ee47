"""Certified "auto": which pass of the products comes after a failed certificate, as a value.

A :class:`~ozhpc.ozaki.product.Product` runs one pass (:class:`~ozhpc.ozaki.passes.Pass`) and its
certificate; :class:`Widening` reads the outcome (the verdict, the plan, which digits were summed)
and answers with a :class:`NextPass` (or None: done), a value the product starts. It never calls
the product: a wider plan is named by its settings and width, which the product resolves for its
data. In order, while some entry fails:

1. once per set of scales, a pass of the certificate's digits alone (:data:`BOUNDS`): the
   magnitudes of every k index where the first pass sampled them, support digits where some entry
   has no lower bound at all (sparse operands);
2. once, the operands equilibrated over k (:func:`equilibrated_operands`), where the failure is
   gross (a ratio above :data:`EQUILIBRATE_RATIO`) or the widest plan is reached: a new problem,
   "auto" picks its first plan afresh;
3. a wider plan (``plan.next_width`` of :func:`bits_to_close`), and past the widest what
   ``plan.beyond_cap`` offers (scheme II: scheme I's digits);
4. once, where the equilibrated problem still fails past all of that, the given operands again
   (equilibration can also push an entry below every plan's reach: a row of op(A) that mixes a
   column scaled down with one scaled up), from their first plan, widened without step 2.

Where an entry of C can sum few products (:attr:`~ozhpc.ozaki.plan.DataSizes.few_products`) under
"dgemm", a certified pass must also be accurate in fact (:meth:`Widening.in_fact_step`: ``E <=
IN_FACT_RATIO u L``, the certificate's sharper bounds, then a wider plan), and step 3's wider plan
closes that bound too.

Before the digits of step 1, steps 2-4, and where none is left, :meth:`Widening.refine_or` weighs them against
recomputing only the failing entries (``NextPass(refine=True)``: levels of scales, then exact dot
products, :mod:`ozhpc.ozaki.refine`), by predicted int8 work: a few bad rows never widen the plan
of the whole matrix, and where nothing is left every entry still ends certified. A pass never
loses what an earlier one certified: the product keeps those entries (equilibration is an
alternative, not a one-way door).

Every input is global and exact (the certificate's count and worst ratio are reduced over every
rank), so every rank takes the same decisions and the bits stay grid-independent. Nothing here
names a scheme: widths, caps and fallbacks are the plan's (:mod:`ozhpc.ozaki.plan`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..engines import crt
from . import certificate
from .plan import IN_FACT_RATIO, exact_plan

EQUILIBRATE_MIN_SHIFT = 4
"""Columns of op(A) whose largest exponent is within 8 bits of the matching row of op(B) keep their
scale: so little imbalance costs at most a few bits of the plan, and leaving them alone spares a
copy of both operands for the usual, balanced inputs (any rule does, if it is exact and global)."""

EQUILIBRATE_RATIO = 2.0**16
"""A failed certificate whose worst ratio is below this is widened at once (a few bits close it:
heavy-tailed data, phi >= 2); above it the operands are equilibrated first (an unbalanced scaling
over k makes the ratio huge or infinite, and more bits would not help)."""

REFINE_PAIRS = 3
"""Level pairs a refinement is predicted to take on its failing block: the first level again, exact,
and the two cross pairs of the second ((1, 1), (1, 2), (2, 1)); most failures need no more."""
REFINE_MIN_BITS = 53
"""The staircase's grid: the pass's bits, at least FP64's (so one level holds an ordinary entry whole,
and its remainder the next), at most scheme II's widest (one int8 GEMM per modulus)."""

BOUNDS = ("lower", "support")
"""The certificate's digit planes a bounds pass may sum: "lower", the magnitudes at every k index;
"support", the support digits (an upper bound of each entry's magnitude)."""


@dataclass(frozen=True)
class NextPass:
    """The pass a failed certificate asks for: the certificate's digits alone (``bounds``, a subset
    of :data:`BOUNDS`), the operands equilibrated over k (``equilibrate``), a wider plan (``width``
    in the units of ``settings``' plans: :meth:`~ozhpc.ozaki.operands.Operands.plan`), or the given
    operands again (``restore``)."""

    bounds: tuple = ()
    equilibrate: bool = False
    settings: object = None
    width: int | None = None
    restore: bool = False
    """The given operands again, their first plan afresh (step 4)."""
    refine: int = 0
    """Recompute the failing entries by levels of scales on a grid of this many bits, then exact
    dot products (:mod:`ozhpc.ozaki.refine`); every other entry keeps its bits (0: no)."""


def bits_to_close(worst: float) -> int:
    """More bits for a failed certificate: the bound shrinks by 2 per bit, so ``log2(worst) + 1``
    bits close the worst gap, at least one; an infinite ratio (no lower bound) takes 16."""
    return 16 if not math.isfinite(worst) else max(1, math.ceil(math.log2(max(worst, 1.0))) + 1)


class Widening:
    """The policy's state across the passes of one product: the settings the plans resolve from
    (scheme I's past scheme II's cap), whether the operands were equilibrated, the plans run
    (``widths``: ``[bits, uncertified, worst_ratio]`` each)."""

    def __init__(self, settings):
        self.settings = settings
        self.equilibrated = False
        self._given_settings = None   # while the equilibrated problem runs: the settings to restore
        self.widths: list = []
        self.in_fact = 0
        """The guarantee's factor where a certified pass must also be accurate in fact
        (:meth:`in_fact_step`; the product sets it per set of scales), 0 where not."""

    def after(self, cert, plan, *, sampled: bool, support: bool) -> NextPass | None:
        """The pass after certificate ``cert`` of ``plan`` (None: done, certified or not).
        ``sampled``: the magnitude plane held every few k indices only; ``support``: the support
        digits were summed for these scales."""
        self.widths.append([plan.bits, cert.uncertified, cert.worst])
        if not cert.uncertified:
            return self.in_fact_step(cert, plan, sampled=sampled, support=support)
        bounds = (("lower",) if sampled else ()) + (("support",) if math.isinf(cert.worst) and not support else ())
        if bounds:
            return NextPass(bounds=bounds)
        return self.wider(cert, plan)

    def in_fact_step(self, cert, plan, *, sampled: bool, support: bool) -> NextPass | None:
        """After a certified pass, where accuracy in fact is checked (:attr:`in_fact`: operands on
        which an entry of C can sum few products, :attr:`~ozhpc.ozaki.plan.DataSizes.few_products`):
        None where every entry's bound meets ``E <= IN_FACT_RATIO u L`` (the certificate's worst
        ratio times the guarantee's factor), else first the sharper bounds the certificate has for
        these scales (the full magnitude plane where k was sampled, support digits: one int8 GEMM
        each), then a plan wider by the bits that close it, up to the widest (then None: the
        certified C stands)."""
        ratio = cert.worst * self.in_fact
        if not self.in_fact or ratio <= IN_FACT_RATIO:
            return None
        bounds = (("lower",) if sampled else ()) + (("support",) if not support else ())
        if bounds:
            return NextPass(bounds=bounds)
        if plan.width >= plan.max_width:
            return None
        return NextPass(settings=self.settings, width=plan.next_width(bits_to_close(ratio / IN_FACT_RATIO)))

    def wider(self, cert, plan) -> NextPass | None:
        """Equilibrate once (a gross failure, or the widest plan reached), else a wider plan, else
        what the plan offers past its cap. The product asks again when equilibration changes
        nothing (no column needs it): then this is past step 2. Where accuracy in fact is checked
        (:attr:`in_fact`), the wider plan closes the in-fact bound at once, not only the guarantee's
        (one pass fewer than widening twice)."""
        at_cap = plan.width >= plan.max_width
        if not self.equilibrated and (cert.worst > EQUILIBRATE_RATIO or at_cap):
            self.equilibrated, self._given_settings = True, self.settings
            return NextPass(equilibrate=True)
        need = bits_to_close(cert.worst * self.in_fact / IN_FACT_RATIO if self.in_fact else cert.worst)
        if not at_cap:
            return NextPass(settings=self.settings, width=plan.next_width(need))
        beyond = plan.beyond_cap(self.settings, need)
        if beyond is None:
            if self._given_settings is None:
                return None
            self.settings, self._given_settings = self._given_settings, None
            return NextPass(restore=True)
        self.settings, width = beyond
        return NextPass(settings=self.settings, width=width)

    @staticmethod
    def refine_bits(plan) -> int:
        """The grid of the refinement's staircase after a pass of ``plan``."""
        return max(REFINE_MIN_BITS, min(plan.bits, crt.MAX_BITS))

    def refine_or(self, step: NextPass | None, plan, worst: float, block: tuple[int, int],
                  sizes: tuple[int, int, int], step_gemms: int) -> NextPass | None:
        """``step``, or the failing entries recomputed instead (``NextPass(refine=bits)``): always
        where no step is left (None); never instead of a wider plan or the full magnitude plane
        ("lower") after a mild failure (``worst`` at most :data:`EQUILIBRATE_RATIO`: a few more bits
        or the unsampled lower bound close it, and they carry every entry's accuracy in fact, as on
        heavy-tailed data); else where its
        predicted int8 work is below the step's: :data:`REFINE_PAIRS` exact level products on the
        failing ``block`` (rows x columns, global) against ``step_gemms`` int8 GEMMs (the step's
        plan, resolved by the product; equilibrating: a first pass) of every entry (``sizes`` = m,
        n, k). Levels cost per scale where equilibration removes every compensated scaling at
        once: the cost picks it then, as the failing block is the whole matrix. Global, exact
        inputs: every rank agrees."""
        bits = self.refine_bits(plan)
        if step is None:
            return NextPass(refine=bits)
        if ("lower" in step.bounds or not step.bounds) and not step.equilibrate and worst <= EQUILIBRATE_RATIO:
            return step
        m, n, k = sizes
        ours = REFINE_PAIRS * exact_plan(bits, k).int8_gemms * block[0] * block[1]
        if step.bounds:   # one int8 GEMM of every entry per digit plane (full magnitudes, support digits)
            step_gemms = len(step.bounds)
        if ours >= step_gemms * m * n:
            return step
        if step.equilibrate:   # not taken: what step 2 would have done next is still open
            self.equilibrated, self._given_settings = False, None
        return NextPass(refine=bits)

    def refined(self, bits: int, worst: float) -> None:
        """Record the refinement as the last entry of :attr:`widths` (every entry certified)."""
        self.widths.append([bits, 0, worst])

    def nothing_to_equilibrate(self, cert, plan) -> NextPass | None:
        """:meth:`wider` past step 2, when equilibration changes nothing (no column needs it)."""
        self._given_settings = None
        return self.wider(cert, plan)


def equilibrated_operands(engine, reduce, given, k: int, k_index, finite: bool = False, domain=None):
    """The given operands (op(A), op(B)^T rows) with column t of op(A) times ``2**s_t`` and row t of
    op(B) times ``2**-s_t`` (None when no column needs it): exact, so the product and
    ``|op(A)||op(B)|`` keep every bit, while the scales see balanced columns (compensated scalings
    no longer hide entries below a row's scale). Per-k statistics are MAX-reduced over every rank
    (``reduce.everywhere_max``) by global k index (``k_index``, None: all of k in order). Tried
    once a pass failed: a diagonal operand, say, certifies at once unbalanced and would spread its
    range into the other operand. With ``finite`` (no inf/NaN anywhere), a k index where one
    operand is all zero also drops the other operand's entries there (0 times them is 0): a huge
    entry that meets only zeros no longer sets its row's scale (``[0, x] [1e300, y]^T``). ``domain``:
    real (default) or complex rows (one shift scales both parts of a column: :mod:`ozhpc.ozaki.domain`)."""
    xp = engine.xp
    inner_stats = engine.inner_stats if domain is None else (lambda rows: domain.inner_stats(engine, rows))
    ldexp_columns = certificate.ldexp_columns if domain is None else domain.ldexp_columns
    a_rows, b_rows = given
    ia, ib = k_index if k_index is not None else (np.arange(k), np.arange(k))
    stats = np.full((4, k), certificate.NONE_EXP, dtype=np.int32)
    stats[:2, ia] = engine.to_host(inner_stats(a_rows))
    stats[2:, ib] = engine.to_host(inner_stats(b_rows))
    stats = reduce.everywhere_max(stats)
    shifts = certificate.equilibration_shifts(np, stats[:2], stats[2:])
    shifts[np.abs(shifts) < EQUILIBRATE_MIN_SHIFT] = 0   # balanced enough: no pass over the operands
    idle_a, idle_b = (stats[0] == certificate.NONE_EXP), (stats[2] == certificate.NONE_EXP)
    drop_a = drop_b = np.zeros(k, dtype=bool)
    if finite:   # an all-zero k index of one operand: the other's entries there meet only zeros
        drop_a, drop_b = idle_b & ~idle_a, idle_a & ~idle_b
    if not (shifts.any() or drop_a.any() or drop_b.any()):
        return None
    out = []
    for rows, index, shift, drop in ((a_rows, ia, shifts, drop_a), (b_rows, ib, -shifts, drop_b)):
        rows = ldexp_columns(xp, rows, engine.asarray(shift[index]))
        if drop[index].any():
            rows = xp.where(engine.asarray(drop[index]).reshape(1, -1), 0.0, rows)
        out.append(rows)
    return tuple(out)
