"""The entries a pass could not certify, made certified: levels of scales, then exact dot products.

After a pass, every failing entry of C (docs/numerics.md, "Levels of scales") is recomputed from
the rows of op(A) and op(B)^T that hold one (the failing block), by a
:class:`~ozhpc.ozaki.levels.Staircase` deepened level by level until every failing entry passes
its guarantee, and where a few entries still fail, by their exact dot products
(:func:`ozhpc.engines.superacc.exact_dots`, correctly rounded: within both guarantees by
construction). Entries that passed keep their bits. So C is certified for every finite input. A
complex product's components are each a real product of rows of length 2k (:func:`complex_rows`),
refined as such.

Works on a rank's block of C with the product's reductions: the block's rows (columns) are agreed
over the ranks that share them (MAX of flags) and gathered whole along k (a SUM of their bits, one
rank holding each column), so every rank refines its own entries from the whole of k, and every
decision (the depth, where exact lower bounds or exact dots are used) reads global, exact counts:
the bits are the same on every grid.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import certificate
from .levels import MAX_LEVELS, Staircase, abs_sums
from .reductions import on_host
from .scales import exponents, row_abs_max

EXACT_LOWER_TERMS = 1 << 22
"""The exact ``sum_t |a_it||b_tj|`` (a lower bound as good as it gets) is taken for the failing
entries when there are at most this many ``k`` terms among them, over every rank."""


@dataclass
class Refined:
    """What :func:`refine` did: ``levels`` (depth of the staircase, 0: none), ``exact`` (entries
    given their exact dot products, over every rank), ``refined`` (entries recomputed)."""

    levels: int = 0
    exact: int = 0
    refined: int = 0
    worst: float = 0.0
    """The largest ratio ``E / (c u L)`` of the refined entries (0 for exact ones)."""
    totals: tuple | None = None
    """``(rows, cols, values)`` of the refined entries that overflowed (their indices in C): each
    one's exact value times ``2**-TOTAL_SHIFT``, rounded once (what alpha multiplies); None: none.
    A complex product's: one such triple (or None) per component."""


TOTAL_SHIFT = 1100
"""Where a refined entry overflows, its total is kept ``2**-TOTAL_SHIFT`` below it: ``2**1024 <= |AB|
< k 2**2048``, so normal and finite for any k below 2**70."""
TOTAL_TOP = 1020
"""A lifted total's exponent (:func:`lifted_totals`): room below DBL_MAX, normal."""


def _same(x):
    return x


@dataclass
class Kept:
    """What the passes so far certified, entry by entry: C (``ab``; ``lifted``, None or ``(low,
    shift)`` with ``C = final_scale(low, shift)`` per entry, where some entry of C overflowed:
    :meth:`~ozhpc.ozaki.operands.Operands.raised`) and the mask of certified entries (``passed``),
    so that a later pass (wider, equilibrated, the given operands again) never loses an entry an
    earlier one certified. ``passed_worst``: the largest ratio among those entries (global)."""

    ab: object
    lifted: object
    passed: object
    passed_worst: float

    @classmethod
    def merge(cls, xp, kept: "Kept | None", ab, lifted, cert, reduce_sum=_same):
        """``(kept, cert)`` after a pass with C ``ab`` (``lifted``) and per-entry ``cert``: each entry
        from this pass where it passed, else from ``kept`` where that passed; the certificate of the
        result (its count global; its worst ratio this pass's where some entry still fails)."""
        if kept is None:
            return cls(ab, lifted, cert.passed, cert.passed_worst), cert
        old = kept.passed & ~cert.passed
        if lifted is not None or kept.lifted is not None:
            lifted = tuple(xp.where(old, was, now) for was, now in zip(unlifted(xp, kept.ab, kept.lifted),
                                                                       unlifted(xp, ab, lifted)))
        ab = xp.where(old, kept.ab, ab)
        passed = cert.passed | kept.passed
        count = int(reduce_sum(xp.asarray([int(xp.count_nonzero(~passed))], dtype=xp.int64))[0])
        best = max(cert.passed_worst, kept.passed_worst)
        out = certificate.Certificate(passed, count, cert.worst if count else best, best)
        return cls(ab, lifted, passed, best), out


def unlifted(xp, ab, lifted):
    """``lifted`` (:class:`Kept`), or where it is None, C as its own total at shift 0: the same
    ``(low, shift)`` meaning entry by entry. Each pass's ``shift`` is its own scales' (an entry kept
    from equilibrated scales keeps theirs), and a placeholder is never read as a special value:
    a NaN there once made a later certificate pass a wrong finite entry as "inf/NaN input"."""
    return lifted if lifted is not None else (ab, xp.zeros(ab.shape, dtype=xp.int64))


class Refinement:
    """One product's entries through its passes: those a pass certified kept through later passes
    (:class:`Kept`), and the ones no pass certifies recomputed (:func:`refine`; a complex product's
    components each as a real product of rows of length 2k, :func:`complex_rows`) where the policy
    weighs that cheaper (:meth:`weigh`). ``done``: what :meth:`run` did (:class:`Refined`, for the
    report)."""

    def __init__(self, engine, reduce, complex_product: bool = False):
        self.engine, self.reduce, self.complex = engine, reduce, complex_product
        self.kept, self.done = None, Refined()

    def keep(self, cert, ab, lifted, per_entry):
        """``(cert, ab, lifted)`` after a pass with C ``ab`` (``lifted``): the entries an earlier pass
        certified (and this one did not) taken from that pass, so no later pass loses one;
        ``per_entry()`` the pass's certificate with per-entry verdicts (the fused kernel keeps none)."""
        if not cert.uncertified:
            self.kept = None
            return cert, ab, lifted
        if cert.passed is None:
            cert = per_entry()
        self.kept, cert = Kept.merge(self.engine.xp, self.kept, ab, lifted, cert,
                                     on_host(self.engine, self.reduce.everywhere_sum))
        return cert, self.kept.ab, self.kept.lifted

    def weigh(self, policy, step, cert, plan, sizes, step_gemms: int):
        """The policy's ``step`` after a failed ``cert``, or the refinement instead
        (:meth:`~ozhpc.ozaki.policy.Widening.refine_or`, on the global failing block)."""
        block = failing_block(self.engine, self.reduce, ~cert.passed)
        return policy.refine_or(step, plan, cert.worst, block, sizes, step_gemms)

    def run(self, policy, bits: int, cert, fin, k: int, k_index, ab, lifted):
        """The failing entries of ``ab`` recomputed in place (:func:`refine`), the others keep their
        bits: ``(certificate after it, lifted)`` (every entry passes; a recomputed entry's total is
        its value at shift 0, or where it overflowed, its exact value's, :func:`lifted_totals`)."""
        xp = self.engine.xp
        failing = ~cert.passed
        if self.complex:
            self.done = self._run_complex(bits, failing, fin, k, k_index, ab)
        else:
            self.done = refine(self.engine, self.reduce, fin, k, k_index, bits, ab, failing, 1)
        if lifted is not None:
            lifted = (xp.where(failing, ab, lifted[0]), xp.where(failing, 0, lifted[1]))
        if self.done.totals is not None:
            lifted = lifted_totals(xp, ab, lifted, self.done.totals)
        worst = max(cert.passed_worst, self.done.worst)
        policy.refined(bits, worst)
        return certificate.Certificate(None, 0, worst, worst), lifted

    def _run_complex(self, bits: int, failing, fin, k: int, k_index, ab) -> Refined:
        """Both components of the failing entries of the complex ``ab``, in place: each the real
        refinement of the rows as real rows of length 2k (:func:`complex_rows`; one scale per
        complex row for both parts), whose ``|A||B|`` is the component's own bound's."""
        xp = self.engine.xp
        index = None if k_index is None else tuple(interleaved(np.asarray(ix)) for ix in k_index)
        done, totals = Refined(), []
        for component in ("real", "imag"):
            c = xp.ascontiguousarray(getattr(ab, component))
            part = refine(self.engine, self.reduce, complex_rows(xp, *fin, component), 2 * k, index, bits, c,
                          failing, 1)
            setattr(ab, component, c)
            totals.append(part.totals)
            done = Refined(max(done.levels, part.levels), done.exact + part.exact, part.refined,
                           max(done.worst, part.worst))
        if any(t is not None for t in totals):
            done.totals = tuple(totals)
        return done


def lifted_totals(xp, ab, lifted, totals):
    """``lifted`` (:class:`Kept`'s meaning) with the refined entries that overflowed at their totals:
    ``totals`` from :func:`refine` (a complex product: one per component, None where none overflowed).
    Each such entry gets the shift that puts its largest total at ``2**TOTAL_TOP`` (exact); the other
    component of a complex entry is scaled by the same shift (rounded, as the combine's own totals)."""
    low, shift = (x.copy() for x in unlifted(xp, ab, lifted))
    parts = (totals,) if xp.isrealobj(ab) else totals
    comps = (lambda z: z,) if xp.isrealobj(ab) else (lambda z: z.real, lambda z: z.imag)
    over = xp.zeros(ab.shape, dtype=bool)
    top = xp.full(ab.shape, -(1 << 20), dtype=xp.int64)
    for part in parts:
        if part is not None:
            r, c, v = part
            over[r, c] = True
            top[r, c] = xp.maximum(top[r, c], xp.frexp(v)[1].astype(xp.int64))
    s = xp.where(over, top + TOTAL_SHIFT - TOTAL_TOP, 0)
    for part, comp in zip(parts, comps):
        new = xp.where(over, xp.ldexp(comp(ab), (-s).astype(xp.int32)), comp(low))   # a component that did not overflow
        if part is not None:
            r, c, v = part
            new[r, c] = xp.ldexp(v, (TOTAL_SHIFT - s[r, c]).astype(xp.int32))
        if xp.isrealobj(ab):
            low = new
        else:
            comp(low)[...] = new
    return low, xp.where(over, s, shift)


def interleaved(index):
    """Global k indices ``t`` of complex columns as the indices ``2t, 2t + 1`` of their parts."""
    return np.stack([2 * index, 2 * index + 1], axis=-1).reshape(-1)


def complex_rows(xp, a, b, component: str):
    """Rows of op(A) and op(B)^T (complex, finite) as real rows of length 2k whose real product is one
    component of ``op(A) op(B)``: ``[ar_t, ai_t]`` against ``[br_t, -bi_t]`` (Re) or ``[bi_t, br_t]``
    (Im), part beside part for each t (by assignment: exact)."""
    a = xp.ascontiguousarray(a, dtype=xp.complex128).view(xp.float64)
    first, second = (b.real, -b.imag) if component == "real" else (b.imag, b.real)
    return a, xp.stack([first, second], axis=-1).reshape(b.shape[0], 2 * b.shape[1])


def failing_block(engine, reduce, failing) -> tuple[int, int]:
    """How many rows of op(A) and columns of op(B) hold a failing entry (global, exact: a row is
    counted once per rank that shares it, divided by how many do)."""
    out = []
    for axis, r_max, r_sum in ((1, reduce.a_max, reduce.a_sum), (0, reduce.b_max, reduce.b_sum)):
        flag = np.asarray(engine.to_host(failing.any(axis=axis))).astype(np.int64)
        agreed_rows = int((np.asarray(r_max(flag)) > 0).sum())
        share = int(np.asarray(r_sum(np.ones(flag.shape, dtype=np.int64))).max(initial=0))
        total = int(reduce.everywhere_sum(np.array([agreed_rows], dtype=np.int64))[0])
        ranks = int(reduce.everywhere_max(np.array([share], dtype=np.int64))[0])
        out.append(total // max(ranks, 1))
    return tuple(out)


def agreed(flags, reduce_max) -> np.ndarray:
    """Host bool flags per row, OR-ed over the ranks that share each row."""
    return np.asarray(reduce_max(np.asarray(flags, dtype=np.int64))) > 0


def whole_rows(engine, x, k: int, index, reduce_sum):
    """``x`` (rows of this rank's k columns ``index``) as rows along the whole k, the same on every
    rank that shares them: each k column is held by one rank, so a SUM of the bits (as int64,
    zeros elsewhere) is the whole row, exactly (``index`` None: ``x`` is whole already)."""
    if index is None:
        return x
    out = np.zeros((x.shape[0], k), dtype=np.int64)
    out[:, np.asarray(index)] = np.ascontiguousarray(engine.to_host(x)).view(np.int64)
    return engine.asarray(np.asarray(reduce_sum(out)).view(np.float64))


def inner_block(engine, a, b, everywhere_max):
    """The failing block's rows of op(A) and op(B)^T (whole along k) on the k indices where both hold
    something, over the whole block (every rank's rows, MAX-reduced: the same indices on every
    grid, so each row's levels are): the others add exact zeros to every entry (nor do they change
    ``|A||B|``), so levels, bounds and exact dots see only the block's own terms (its rows' scales
    included). All of k where no index is left (every entry is an exact 0)."""
    flags = np.stack([np.asarray(engine.to_host((x != 0).any(axis=0)), dtype=np.int64) for x in (a, b)])
    flags = np.asarray(everywhere_max(flags))
    inner = np.flatnonzero((flags[0] > 0) & (flags[1] > 0))
    if 0 < inner.size < a.shape[1]:
        at = engine.asarray(inner)
        return a[:, at], b[:, at]
    return a, b


def refine(engine, reduce, fin, k: int, k_index, bits: int, c, failing, factor: int = 1,
           max_levels: int = MAX_LEVELS) -> Refined:
    """Recompute the failing entries of this rank's block ``c`` of op(A) op(B) in place, until each
    is certified: ``fin`` = (finite rows of op(A), of op(B)^T) as this rank holds them, ``k_index``
    their global k columns (None: all of k), ``bits`` the staircase's grid (its first level at the
    whole rows' own scales), ``failing`` the bool mask of entries to recompute (inf/NaN entries of special values never
    among them), ``factor`` the guarantee's (k for "dgemm", 1 for "tight")."""
    xp = engine.xp
    r = reduce
    row_flags, col_flags = (np.asarray(engine.to_host(failing.any(axis=axis)), dtype=bool) for axis in (1, 0))
    rows = np.flatnonzero(agreed(row_flags, r.a_max))
    cols = np.flatnonzero(agreed(col_flags, r.b_max))
    done = Refined()
    if not int(r.everywhere_sum(np.array([int(row_flags.sum())], dtype=np.int64))[0]):
        return done
    ia, ib = (None, None) if k_index is None else k_index
    rows_at, cols_at = engine.asarray(rows), engine.asarray(cols)
    a, b = inner_block(engine, whole_rows(engine, fin[0][rows_at], k, ia, r.a_sum),
                       whole_rows(engine, fin[1][cols_at], k, ib, r.b_sum), r.everywhere_max)
    block = failing[rows_at[:, None], cols_at[None, :]]
    stair = Staircase(engine, a, b, exponents(xp, row_abs_max(xp, a)), exponents(xp, row_abs_max(xp, b)), bits,
                      a.shape[1])
    values, left, sums, worst = xp.zeros(block.shape), block, None, 0.0
    while True:
        c_block, passed, ratio = stair.verdicts(factor, sums)
        now = left & passed
        values = xp.where(now, c_block, values)
        worst = max(worst, float(xp.where(now, ratio, 0.0).max()) if now.size else 0.0)
        left = left & ~passed
        count = _count(engine, r, left)
        if count and sums is None and count * k <= EXACT_LOWER_TERMS:
            sums = _sums_where(engine, a, b, left)    # the best lower bound, once, for the few left
            continue
        if not count or stair.depth >= max_levels:
            break
        stair.deepen()
    done.levels, done.refined = stair.depth, _count(engine, r, block)
    done.worst = float(r.everywhere_max(np.array([worst]))[0])
    if count:   # still failing at the deepest level: their exact dot products
        at = xp.nonzero(left)
        values[at] = engine.exact_dots(a, b, at[0], at[1])
        done.exact = count
    at = (rows_at[:, None], cols_at[None, :])
    c[at] = xp.where(block, values, c[at])
    over = block & xp.isinf(values)
    if bool(over.any()):   # alpha multiplies these entries' totals (Product.finish)
        br, bc = xp.nonzero(over)
        done.totals = (rows_at[br], cols_at[bc], engine.exact_dots(a, b, br, bc, TOTAL_SHIFT))
    return done


def _count(engine, reduce, mask) -> int:
    return int(reduce.everywhere_sum(np.array([int(engine.xp.count_nonzero(mask))], dtype=np.int64))[0])


def _sums_where(engine, a, b, mask):
    """:func:`~ozhpc.ozaki.levels.abs_sums` at the entries of ``mask`` (NaN elsewhere)."""
    xp = engine.xp
    at = xp.nonzero(mask)
    out = xp.full(mask.shape, xp.nan)
    out[at] = abs_sums(xp, a, b, at[0], at[1])
    return out
