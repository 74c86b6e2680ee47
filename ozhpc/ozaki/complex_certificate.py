"""The certificate of a complex product, per component, from the statistics of the parts.

Each component of ``C = op(A) op(B)`` is a sum of two real products of the parts over k:
``Re C = Ar Br - Ai Bi``, ``Im C = Ar Bi + Ai Br`` (:data:`TERMS`). What the certificate proves, for
every finite component of every entry (docs/numerics.md, "Complex products"):

    |Re C_ij - Re (AB)_ij| <= c u (|Ar||Br| + |Ai||Bi|)_ij + rho u |Re C_ij| + 2**-1074,
    |Im C_ij - Im (AB)_ij| <= c u (|Ar||Bi| + |Ai||Br|)_ij + rho u |Im C_ij| + 2**-1074,

``c = k + 1`` under "dgemm" (a ZGEMM that multiplies by the schoolbook rule rounds each complex
product's two real products and their sum, then k - 1 additions: ``gamma_(k+1)`` per component,
Higham's ``sqrt(2) gamma_(k+2)`` in moduli follows), ``c = 1`` under "tight". The right-hand sides
are the ``|A||B|`` of the parts, which magnitude digits bound from below exactly; they are at most
``|A||B|`` of the complex moduli, so both bounds imply ``|C_ij - (AB)_ij| <= sqrt(2) c u (|A||B|)_ij``
+ the final rounding in moduli.

The pieces are the real certificate's (:mod:`ozhpc.ozaki.certificate`), applied per term and per
component: the error bound of each term from its two parts' :class:`OperandStats` (a term whose row
of one part or column of the other is all zero is exactly 0: it adds nothing, and an entry both of
whose terms vanish is exactly 0), the combine's rounding per component, the free lower bound from
``|Re C|`` / ``|Im C|``, and the magnitude (support) digits of the parts: their products as three
groups ``(Mr Mr, Mr Mi + Mi Mr, Mi Mi)`` (:func:`component_sums`) give ``Re``'s (groups 0 + 2) and
``Im``'s (group 1) exact integer sums. An entry passes when both components do; the count and the
worst ratio are global (SUM and MAX), so the verdicts do not depend on the grid.
"""
from __future__ import annotations

import numpy as np

from .certificate import (CERTIFY_CHUNK, UP, Certificate, OperandStats, _ident, _reduced, bound_verdicts,
                          certify_entries, error_bound, normalised_c, operand_stats, support_bound, verdict_constants)

TERMS = (((0, 0), (1, 1)), ((0, 1), (1, 0)))
"""Per component (Re, Im), its two terms as (part of op(A), part of op(B)^T): 0 real, 1 imaginary."""


class PartStats:
    """One operand's certificate statistics: ``joint``, of both parts together (the rows as real rows
    of length 2k), which the first check reads, and ``parts``, of the real and the imaginary part
    apart, made only when some entry needs the term-by-term check (:func:`precise_entries`)."""

    def __init__(self, joint_stats: OperandStats, make_parts):
        self.joint = joint_stats
        self._make_parts, self._parts = make_parts, None

    @property
    def parts(self) -> tuple[OperandStats, OperandStats]:
        if self._parts is None:
            self._parts = self._make_parts()
        return self._parts


def part_stats(engine, fin, exps, plan, reduce_max=_ident, reduce_sum=_ident, mags=None) -> PartStats:
    """:func:`~ozhpc.ozaki.certificate.operand_stats` of the finite complex rows ``fin`` as real rows
    of length 2k (one pass over them, in place; ``mags``: their ``(norm, nnz, ...)`` row sizes, reduced, when the
    caller measured them, as :func:`ozhpc.ozaki.operands.measure` does), and, when asked for, of
    each part apart. The joint statistics equal :func:`joint` of the parts' (a row's largest
    representation error and its entries' norm units and counts over both parts)."""
    xp, reduce_sum = engine.xp, reduce_sum or _ident

    def parts():   # the engines read the parts' strided views (no copies)
        return tuple(operand_stats(engine, part, exps, plan, reduce_max, reduce_sum) for part in (fin.real, fin.imag))
    if mags is None:   # the row sizes afresh, of the real rows
        rows = xp.ascontiguousarray(fin).view(fin.real.dtype).reshape(fin.shape[0], 2 * fin.shape[1])
        together = operand_stats(engine, rows, exps, plan, reduce_max, reduce_sum)
    else:   # the engine reads the complex rows as real rows of length 2k through their strides
        together = operand_stats(engine, fin, exps, plan, reduce_max, reduce_sum, mags=tuple(mags[:2]))
    return PartStats(together, parts)


def joint(xp, stats: tuple[OperandStats, OperandStats]) -> OperandStats:
    """Statistics of both parts together (the rows as real rows of length 2k): the larger
    representation error, the summed norms and counts."""
    re, im = stats
    return OperandStats(xp.maximum(re.delta, im.delta), re.norm + im.norm, re.nnz + im.nnz)


def component_sums(xp, groups):
    """``(Re, Im)`` float64 sums from the three groups of the parts' digit products (exact integers,
    each below 2**53: one pass each, the groups converted as they are added)."""
    return xp.add(groups[0], groups[2], dtype=xp.float64), groups[1].astype(xp.float64)


def component_bound(xp, stats_a, stats_b, terms, plan):
    """``(E, live)``: the error bound of a component (the sum of its live terms' bounds, rounded up)
    and where some term is live (both its factors' rows nonzero; elsewhere the component is exactly 0)."""
    bound, live = 0.0, None
    for pa, pb in terms:
        sa, sb = stats_a[pa], stats_b[pb]
        on = (sa.norm.reshape(-1, 1) > 0) & (sb.norm.reshape(1, -1) > 0)
        bound = bound + xp.where(on, error_bound(xp, sa, sb, plan), 0.0)
        live = on if live is None else live | on
    return bound * UP, live


def certify_complex_entries(engine, c, magnitude_groups, stats, e, f, plan, acc=None, support_groups=None, *,
                            lifted=None, reduce_sum=_ident, reduce_max=_ident, factor: int = 1,
                            fused: bool = True) -> Certificate:
    """Every entry of the complex ``c`` (this rank's block, special values applied) against the
    guarantee, per component (module docstring). ``stats``: ``(part_stats of op(A), part_stats of
    op(B)^T)`` (:class:`PartStats`); ``magnitude_groups`` / ``support_groups``: the three groups of the parts' magnitude /
    support digit products (or None); ``acc``: the plan's per-component accumulators where its combine
    rounding reads them (scheme I), else None; ``lifted``: ``(low, shift)`` as in
    :func:`ozhpc.ozaki.certificate.certify_entries`, ``low`` complex; ``fused``: the real certificate's
    switch, without effect here (a complex product that fails anywhere always gets per-entry verdicts).

    First each component by the real certificate with the parts' joint statistics (``joint``:
    the rows as real rows of length 2k, a valid and looser bound of both terms; where the engine
    has the kernel (:meth:`~ozhpc.engines.base.Engine.complex_entry_verdicts`), both components in
    one pass over C and the digit groups, the same verdicts); only when some entry fails there, every entry again term by term
    (:func:`precise_entries`), which certifies what the joint bound cannot see (a part that is all
    zero contributes nothing). Both steps are global decisions with the same roundings on every
    engine, so every rank and engine takes the same one."""
    xp = engine.xp
    joint_stats = tuple(s.joint for s in stats)

    def sums():
        return tuple(None if g is None else component_sums(xp, g) for g in (magnitude_groups, support_groups))
    found = None
    if acc is None and lifted is None and plan.combine_rounding_terms is not None:
        found = engine.complex_entry_verdicts(c, e, f, *((s.delta, s.norm, s.nnz) for s in joint_stats),
                                              magnitude_groups, support_groups, verdict_constants(plan, factor))
    if found is not None:   # one pass over C and the groups: the m x n sums made only if some entry fails
        certs = [_reduced(None, *answer, reduce_sum, reduce_max) for answer in found]
    else:
        mags, supp = sums()
        certs = [certify_entries(engine, part(c), _at(mags, comp), joint_stats, e, f, plan, _at(acc, comp),
                                 _at(supp, comp), lifted=None if lifted is None else (part(lifted[0]), lifted[1]),
                                 reduce_sum=reduce_sum, reduce_max=reduce_max, factor=factor)
                 for comp, part in enumerate(PARTS)]
    if all(cert.uncertified == 0 for cert in certs):
        passed = None if certs[0].passed is None or certs[1].passed is None else certs[0].passed & certs[1].passed
        worst = max(cert.worst for cert in certs)
        return Certificate(passed, 0, worst, worst)   # every entry passed: the worst is a passed one
    mags, supp = sums() if found is not None else (mags, supp)
    return precise_entries(xp, c, mags, tuple(s.parts for s in stats), e, f, plan, acc, supp, lifted, reduce_sum,
                           reduce_max, factor)


PARTS = (lambda z: z.real, lambda z: z.imag)
"""The components of a complex array (views)."""


def _at(pair, comp: int):
    return None if pair is None else pair[comp]


def precise_entries(xp, c, mags, stats, e, f, plan, acc, supp, lifted, reduce_sum, reduce_max, factor) -> Certificate:
    """The certificate term by term (:func:`component_bound`), chunked over rows; ``mags`` / ``supp``:
    the components' digit sums (:func:`component_sums`) or None."""
    m, n = c.shape
    step = max(1, CERTIFY_CHUNK // max(1, n))
    passed = xp.ones(c.shape, dtype=bool)
    count, worst, passed_worst = 0, 0.0, 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        for r0 in range(0, m, step):
            rows = slice(r0, r0 + step)
            ok, ratio = xp.ones(c[rows].shape, dtype=bool), xp.zeros(c[rows].shape)
            sa = tuple(OperandStats(s.delta[rows], s.norm[rows], s.nnz[rows]) for s in stats[0])
            for comp, (terms, part) in enumerate(zip(TERMS, PARTS)):
                low = None if lifted is None else (part(lifted[0][rows]), lifted[1][rows])
                done, r = _component(xp, part(c[rows]), (sa, stats[1]), terms, xp.asarray(e)[rows], f, plan,
                                     None if acc is None else acc[comp][:, rows],
                                     None if mags is None else mags[comp][rows],
                                     None if supp is None else supp[comp][rows], factor, low)
                ok, ratio = ok & done, xp.maximum(ratio, r)
            passed[rows] = ok
            count += int((~ok).sum())
            if ratio.size:
                worst = max(worst, float(ratio.max()))
                passed_worst = max(passed_worst, float(xp.where(ok, ratio, 0.0).max()))
    return _reduced(passed, count, worst, reduce_sum, reduce_max, passed_worst)


def _component(xp, c, stats, terms, e, f, plan, acc, magnitudes, support, factor, lifted):
    """``(passed, ratio)`` of one component on a block of rows (the real certificate's steps)."""
    bound, live = component_bound(xp, *stats, terms, plan)
    if lifted is None:
        c_lo, c_up = normalised_c(xp, c, e, f)
    else:
        c_lo, c_up = normalised_c(xp, lifted[0], e, f, lifted[1])
    sa, sb = (joint(xp, s) for s in stats)
    comb = plan.combine_rounding(xp, acc, c_up, (sa, sb), compensated=acc is not None)
    if support is not None:
        bound = xp.minimum(bound, support_bound(xp, sa, sb, plan, support))
        comb = xp.where(support > 0, comb, 0.0)
    bound = xp.where(live, bound + comb, 0.0)
    return bound_verdicts(xp, c, c_lo, c_up, bound, magnitudes, plan, e, f, lifted, factor)
