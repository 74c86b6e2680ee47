"""Certified accuracy for the Ozaki schemes: equilibration, a per-entry error bound, a lower
bound of ``(|op(A)||op(B)|)_ij`` and the per-entry certificate.

The product pipeline (:class:`ozhpc.ozaki.product.Product`, behind ``ozhpc.gemm`` and SUMMA)
runs these steps with "auto" accuracy: it sums the magnitude digits' products
(``engines.base.magnitude_digits``: the lower bound, :data:`MAGNITUDE_UNIT`) with the first pass
and, once, the support digits' (``engines.base.support_digits``, :func:`support_bound`) for
entries with no lower bound, and runs :func:`certify_entries` after each pass; the policy
(:mod:`ozhpc.ozaki.policy`) equilibrates the operands (the engine's ``inner_stats``,
:func:`equilibration_shifts`, :func:`ldexp_columns`) or widens the plan until every entry passes
or the widest plan is reached. What differs between the schemes is read off the plan
(:mod:`ozhpc.ozaki.plan`: its grid bits, split steps, dropped pairs, combine roundings and final
rounding), so nothing here names a scheme.

Guarantee (docs/numerics.md, "The guarantee"): where :func:`certify` passes an entry,

    |C_ij - (op(A) op(B))_ij| <= u (|op(A)||op(B)|)_ij + rho u |C_ij| + 2**-1074,

``u = 2**-53``, ``rho`` = the plan's ``final_rounding_ulps`` (the last rounding(s) of the combine).

The bounds take the array module ``xp`` (numpy or cupy); what reads the operands or runs as one
pass over C takes the engine, whose statistics methods (:mod:`ozhpc.engines.statistics`, the
reference) and verdict kernels give the same bits (:meth:`~ozhpc.engines.base.Engine.entry_verdicts`:
scheme II's verdicts in one pass over C). All work on the operands as rows along k (``a_rows`` = op(A), m x k; ``b_rows`` = op(B)^T, n x k), as the pipeline holds
them. Global reductions are callables (identity on one process): ``reduce_max`` (MAX) and
``reduce_sum`` (SUM of int64, exact). Every quantity a decision reads is computed exactly or
by a fixed sequence of element-wise roundings from exact inputs (MAX of exact values, SUMs of
integers, the bits of C), so the decisions, hence C, are the same for any grid, block, panel
width, rank count and engine. Bounds are normalised by ``2**(e_i + f_j)`` (row exponents of
op(A), column exponents of op(B)), so no bound under- or overflows where C does.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engines import statistics
from ..engines.base import BITS, VERDICT_CONSTANTS, final_scale, ldexp_by
from ..engines.statistics import NONE_EXP, NORM_BITS  # noqa: F401  (re-exported)
from ..errors import InputError

U = 2.0**-53
UP, DOWN = 1.0 + 2.0**-40, 1.0 - 2.0**-40
"""Safety factors for a few FP64 operations on bounds (each relative error <= 2**-53)."""
MAX_CERTIFIED_K = 2**30 - 1
"""The longest k the certificate's exact int64 sums hold (:data:`NORM_BITS`): past it a sum could
wrap and a bound be read too small, so a longer "auto" product is refused, not certified."""


def check_k(k: int, width: int = 1) -> None:
    """InputError for a certified ("auto") product whose k the certificate's exact sums cannot hold.
    ``width``: real entries per entry of a row (2 for complex rows, whose sums run over 2k)."""
    limit = MAX_CERTIFIED_K // width
    if k > limit:
        which = "" if width == 1 else " of complex operands"
        raise InputError(f"k = {k} is longer than the certified (\"auto\") product{which} takes (at most "
                         f"{limit} = (2**30 - 1) // {width}, where its exact sums hold); give fixed bits or slices")


def _ident(x):
    return x


def equilibration_shifts(xp, stats_a, stats_b):
    """Shifts ``s_t``: column t of op(A) times 2**s_t, row t of op(B) times 2**-s_t.

    ``s_t = floor((hiB_t - hiA_t) / 2)`` balances the two largest exponents (0 when either side
    is zero), clamped so both scalings are exact: ``hiA + s <= 1024`` and ``hiB - s <= 1024`` (no
    overflow), ``lowA + s >= -1074`` and ``lowB - s >= -1074`` (no bit falls below the smallest
    subnormal). s = 0 satisfies all four, so the interval is never empty; the balanced shift
    never raises the larger exponent, so the clamp only acts for subnormal-heavy columns.
    """
    hia, lowa = stats_a[0].astype(xp.int64), -stats_a[1].astype(xp.int64)
    hib, lowb = stats_b[0].astype(xp.int64), -stats_b[1].astype(xp.int64)
    both = (hia > NONE_EXP) & (hib > NONE_EXP)
    s = xp.where(both, xp.floor_divide(hib - hia, 2), 0)
    lo = xp.maximum(-1074 - lowa, hib - 1024)
    hi = xp.minimum(1074 + lowb, 1024 - hia)
    s = xp.where(both, xp.minimum(xp.maximum(s, lo), hi), 0)
    return s.astype(xp.int32)


def ldexp_columns(xp, rows, shifts):
    """Column t of ``rows`` times ``2**shifts[t]``, exactly (the shifts of
    :func:`equilibration_shifts` lose no bit)."""
    return ldexp_by(xp, rows, xp.asarray(shifts).astype(xp.int64).reshape(1, -1))


# -- (b) the per-entry error bound ----------------------------------------------------------------

FLOOR = 2.0**-1000
"""Absolute slack added to a bound wherever some representation error is nonzero: covers the
rounding of its products should they reach the subnormal range."""


def representation_error(xp, x, exps, plan):
    """``|x - repr(x)| 2**(w - e_i)`` per entry for ``plan``'s split (``w`` = ``plan.bits``):
    :func:`ozhpc.engines.statistics.representation_error` with ``plan.split_steps``."""
    return statistics.representation_error(xp, x, exps, plan.split_steps)


@dataclass
class OperandStats:
    """Per row of op(A) (or column of op(B)), all global: ``delta`` = max representation error
    (units ``2**(e - w)``, in [0, 1/2]; MAX-reduced), ``norm`` = ``sum_t |x_t| 2**-e`` rounded up
    in units of ``2**-NORM_BITS`` (int64, SUM-reduced: exact), ``nnz`` (int64, SUM-reduced)."""

    delta: object
    norm: object
    nnz: object


def operand_stats(engine, x, exps, plan, reduce_max=_ident, reduce_sum=_ident, mags=None) -> OperandStats:
    """The O(rows x k) statistics of one operand the bound needs (``x``: its finite part;
    ``mags``: its ``(norm, nnz, ...)`` row sizes when the caller has them; else the engine's
    :meth:`~ozhpc.engines.base.Engine.magnitude_stats`, SUM-reduced)."""
    delta = engine.representation_errors(x, exps, plan.split_steps)
    if mags is None:
        sizes = engine.magnitude_stats(x, exps)
        mags = (reduce_sum(sizes[0]), reduce_sum(sizes[1]))
    return OperandStats(reduce_max(delta), mags[0], mags[1])


def error_bound(xp, sa: OperandStats, sb: OperandStats, plan):
    """Upper bound of ``|repr'd product - op(A) op(B)|_ij / 2**(e_i + f_j)`` (before the combine).

    With ``a = repr(a) + da``: ``ab - repr(a)repr(b) = da b + a db - da db``, so per entry
    ``sum_t |da||b| + |a||db| + |da||db| <= 2**-w (dA_i |B_j|_1 + |A_i|_1 dB_j)
    + 2**-2w dA_i dB_j min(nnzA_i, nnzB_j)`` (``w`` = ``plan.bits``), plus the dropped pairs
    (scheme I), ``tau_drop min(nnzA_i, nnzB_j)`` (``plan.dropped_pairs_bound``). O(m n) from
    O(m k + k n) statistics.
    """
    w = plan.bits
    da, db = sa.delta.reshape(-1, 1), sb.delta.reshape(1, -1)
    na = sa.norm.astype(xp.float64).reshape(-1, 1) * 2.0**-NORM_BITS
    nb = sb.norm.astype(xp.float64).reshape(1, -1) * 2.0**-NORM_BITS
    cross = xp.minimum(sa.nnz.reshape(-1, 1), sb.nnz.reshape(1, -1)).astype(xp.float64)
    bound = (da * nb + na * db) * 2.0**-w + (da * db * cross) * 2.0**(-2 * w)
    tau = plan.dropped_pairs_bound
    if tau:
        bound = bound + tau * cross
    return bound * UP + xp.where((da > 0) | (db > 0), FLOOR, 0.0)


def compensated_combine(xp, acc, row_exps, col_exps):
    """Scheme I's combine with its roundings carried along: the same additions smallest group
    first, each one's exact error (TwoSum) summed apart and added back before the final ``ldexp``
    (``final_scale`` rules: +0.0, the DBL_MAX clamp). The error is then one rounding of C plus
    ``(d-1) u**2 sum_g |t_g|`` (:func:`combine_rounding` with ``compensated=True``), where the plain
    combine can lose ``u |t_g|`` at each of its d-2 intermediate additions: for an entry far below
    ``2**(e_i + f_j)`` (phi >= 4, rows with one dominant entry) that is several ulps of C.
    Identical to the plain combine wherever no addition rounds (identity, permutations)."""
    d = acc.shape[0]
    total = xp.zeros(acc.shape[1:], dtype=xp.float64)
    err = xp.zeros(acc.shape[1:], dtype=xp.float64)
    for g in range(d - 1, -1, -1):
        x = acc[g].astype(xp.float64) * 2.0 ** (-BITS * (g + 2))
        s = total + x
        bp = s - total
        err = err + ((total - (s - bp)) + (x - bp))
        total = s
    scale = (xp.asarray(row_exps).astype(xp.int64).reshape(-1, 1)
             + xp.asarray(col_exps).astype(xp.int64).reshape(1, -1))
    return final_scale(xp, total + err, scale)


def group_combine_rounding(xp, groups: int, acc=None, stats=None, compensated=False):
    """Bound of scheme I's combine roundings other than the final one (normalised;
    :meth:`ozhpc.ozaki.plan.SlicePlan.combine_rounding`).

    From the group accumulators ``acc``: the additions ``t_g = t_{g+1} + S_g w_g``
    for ``g = d-2 .. 1`` err by at most ``u |t_g|``, and ``|t_g| <= sum_{h>=g} |S_h| w_h``, so in
    all ``u sum_h min(h, d-2) |S_h| w_h``. Without ``acc`` (a fused product), from the operand
    ``stats``: ``|t_g| <= 2**-6 (|A_i|_1 + |B_j|_1) + 2**-14 min(nnz)`` (digits after the first
    weigh at most 2**-7, the first at most twice the entry). ``compensated``
    (:func:`compensated_combine`): ``(d-1) u**2 sum_h (h+1) |S_h| w_h``.
    """
    if acc is None:
        sa, sb = stats
        norms = (sa.norm.astype(xp.float64).reshape(-1, 1)
                 + sb.norm.astype(xp.float64).reshape(1, -1)) * 2.0**-NORM_BITS
        cross = xp.minimum(sa.nnz.reshape(-1, 1), sb.nnz.reshape(1, -1)).astype(xp.float64)
        return (norms * 2.0**-6 + cross * 2.0**-14) * (max(groups - 2, 0) * U * UP)
    d = acc.shape[0]
    total = xp.zeros(acc.shape[1:], dtype=xp.float64)
    for h in range(d):
        weight = (h + 1) if compensated else min(h, d - 2)
        if weight > 0:
            total = total + xp.abs(acc[h].astype(xp.float64)) * float(weight * 2.0 ** (-BITS * (h + 2)))
    factor = d * U * U if compensated else U
    return total * (factor * UP * (1 + d * U)) + (xp.where(total > 0, FLOOR, 0.0) if compensated else 0.0)


# -- (c) lower bounds of (|A||B|)_ij (normalised) ------------------------------------------------

def normalised_c(xp, c, e, f, shift=None):
    """``(lo, up)`` with ``lo <= |C_ij| 2**-(e_i+f_j) <= up`` (the ldexp may underflow); ``c`` at
    ``shift`` (m x n, or None: 0) is ``final_scale(c, shift)``, a lifted total (:func:`certify_entries`)."""
    scale = -(xp.asarray(e).astype(xp.int64).reshape(-1, 1) + xp.asarray(f).astype(xp.int64).reshape(1, -1))
    if shift is not None:
        scale = scale + shift
    mag = xp.ldexp(xp.abs(c), xp.clip(scale, -2200, 2200).astype(xp.int32))
    return xp.maximum(mag * DOWN - 2.0**-1074, 0.0), mag * UP + 2.0**-1074


def subnormal_unit(xp, e, f):
    """``2**-1074 / 2**(e_i+f_j)`` rounded up (inf when that overflows: then nothing is certified
    by the free test, which stays a valid lower bound)."""
    t = -1074 - (xp.asarray(e).astype(xp.int64).reshape(-1, 1) + xp.asarray(f).astype(xp.int64).reshape(1, -1))
    return xp.ldexp(xp.ones(t.shape), xp.clip(t, -2200, 2200).astype(xp.int32)) + 2.0**-1074


def free_lower_bound(xp, c_lo, c_up, bound, rho: int, sub):
    """``|C| - E - F <= |AB| <= |A||B|`` (normalised), F = the final rounding ``rho u |C| + 2**-1074``
    with one more ``u |C|`` for a result clamped to +-DBL_MAX (``engines.base.final_scale``). The
    two subtractions round; ``4u (|C| + E + F)`` absorbs that (it matters only near 0)."""
    final = (rho + 1) * U * c_up * UP + sub
    raw = (c_lo - bound) - final
    return xp.maximum(raw - 4 * U * (c_up + bound + final), 0.0) * DOWN


# -- (d) the certificate --------------------------------------------------------------------------

@dataclass
class Certificate:
    """Per-entry outcome: ``passed`` (bool m x n, None from the fused kernel), ``uncertified``
    (global count), ``worst`` (global max of ``E_ij / (u L_ij)``; inf where L is 0 but E is not)."""

    passed: object
    uncertified: int
    worst: float
    passed_worst: float = 0.0
    """The largest ratio among the entries that passed (global; the array path only): the headroom
    of what stays when the failing entries are recomputed (:mod:`ozhpc.ozaki.refine`)."""


def entry_ratio(xp, scaled, lower, passed):
    """``E / (c u L)`` per entry from ``scaled = E 2**53 / c``: 0 where E is 0, inf where L is 0 and
    E is not; a failing entry is at least ``1 + 2**-52`` even where the quotient rounds to 1, so
    "ratio > 1" is exactly "fails" and the largest ratio is the certificate's headroom."""
    ratio = xp.where(lower > 0, scaled / xp.where(lower > 0, lower, 1.0), xp.inf)
    ratio = xp.where(scaled > 0, ratio, 0.0)
    return xp.where(passed, xp.minimum(ratio, 1.0), xp.maximum(ratio, FAIL_MIN))


FAIL_MIN = 1.0 + 2.0**-52
"""The smallest ratio a failing entry reports (:func:`entry_ratio`)."""


def scaled_bound(xp, bound, factor: int):
    """``E 2**53 / factor``, never below its exact value (``factor`` = 1 for "tight", k for "dgemm":
    a division rounds, ``UP`` covers it), so ``scaled <= L`` proves ``E <= factor u L``."""
    scaled = xp.ldexp(bound, 53)
    return scaled if factor == 1 else scaled / float(factor) * UP


def verdicts(xp, bound, lower, exclude=None, factor: int = 1):
    """``(passed, ratio)`` per entry: ``E_ij <= factor u L_ij`` (:func:`scaled_bound` ``<= L``) and
    :func:`entry_ratio`; ``exclude`` (entries that are inf/NaN by the special-value rules) always
    pass, with ratio 0."""
    scaled = scaled_bound(xp, bound, factor)
    passed = scaled <= lower
    if exclude is not None:
        passed = passed | exclude
    ratio = entry_ratio(xp, scaled, lower, passed)
    if exclude is not None:
        ratio = xp.where(exclude, 0.0, ratio)
    return passed, ratio


def certify(xp, bound, lower, exclude=None, reduce_sum=_ident, reduce_max=_ident, factor: int = 1) -> Certificate:
    """:func:`verdicts` of every entry; count and worst ratio (over every entry, passed or not) global."""
    passed, ratio = verdicts(xp, bound, lower, exclude, factor)
    return _tally(xp, passed, ratio, reduce_sum, reduce_max)


def _tally(xp, passed, ratio, reduce_sum=_ident, reduce_max=_ident) -> Certificate:
    both = xp.asarray([ratio.max() if ratio.size else 0.0, xp.where(passed, ratio, 0.0).max() if ratio.size else 0.0])
    worst, passed_worst = (float(v) for v in reduce_max(both))
    count = int(reduce_sum(xp.asarray([int((~passed).sum())], dtype=xp.int64))[0])
    return Certificate(passed, count, worst, passed_worst)


def overflow_verdicts(xp, free, bound, passed, ratio, e, f):
    """``(passed, ratio)`` of entries of C that overflowed to +-inf from finite inputs: passed where
    the free lower bound (``free``, normalised, from the entry's total before its last scaling)
    proves ``|(AB)_ij| >= 2**1024``, so the exact value rounds to the same inf, and the total itself
    passed (``passed``, ``ratio``: the entry's :func:`verdicts` as if C were its total): alpha
    multiplies the total (``Product.finish``), so a total proved only large enough for inf could
    give an ``alpha C`` off by 2**-24. A failing entry reports the larger of ``ratio`` and
    ``E / (|C| - F - 2**1024)``, the factor by which E must shrink for the proof (at least
    :data:`FAIL_MIN`): what the policy widens by."""
    s = xp.asarray(e).astype(xp.int64).reshape(-1, 1) + xp.asarray(f).astype(xp.int64).reshape(1, -1)
    top = xp.ldexp(xp.ones(s.shape), xp.clip(1024 - s, -2200, 2200).astype(xp.int32))
    proved = free >= top
    room = free + bound - top     # |C| - F - 2**1024, normalised (rounded: a ratio, not a proof)
    proof = xp.where(proved, 0.0, xp.where(room > 0, bound / xp.where(room > 0, room, 1.0), xp.inf))
    passed = proved & passed
    return passed, xp.where(passed, ratio, xp.maximum(xp.maximum(ratio, proof), FAIL_MIN))


MAGNITUDE_UNIT = 2.0 ** (-2 * BITS)
"""Weight of a product of two magnitude digits (``engines.base.magnitude_digits``) relative to
``2**(e_i + f_j)``: their sums over k, times this, are a lower bound of ``(|A||B|)_ij 2**-(e_i+f_j)``."""


SUPPORT_UNIT = 2.0 ** (1 - BITS)
"""``|b| 2**-f <= c_b 2**(1 - BITS)`` for a support digit ``c_b`` (``engines.base.support_digits``)."""


def support_bound(xp, sa: OperandStats, sb: OperandStats, plan, support_sums):
    """A per-entry error bound from the support digits' products ``U`` (exact sums over k):
    each representation error is at most ``delta 2**-w`` where its entry is nonzero (``<= c``), each
    magnitude at most ``c 2**(1 - BITS)``, so ``E <= ((dA + dB) 2**(1-BITS-w) + dA dB 2**-2w + tau) U``:
    0 where no k term has two nonzero factors, which the separable bound cannot see."""
    w = plan.bits
    da, db = sa.delta.reshape(-1, 1), sb.delta.reshape(1, -1)
    per = (da + db) * (SUPPORT_UNIT * 2.0**-w) + (da * db) * 2.0 ** (-2 * w) + plan.dropped_pairs_bound
    u = support_sums.astype(xp.float64)
    return xp.where(u > 0, per * u * UP + FLOOR, 0.0)


def certify_entries(engine, c, magnitude_sums, stats, e, f, plan, acc=None, support_sums=None, *, lifted=None,
                    reduce_sum=_ident, reduce_max=_ident, factor: int = 1, fused: bool = True) -> Certificate:
    """The certificate of the product pipeline: every finite entry of ``c`` (this rank's block of
    op(A) op(B), special values applied; inf/NaN entries pass) against the bound
    ``E_ij <= factor u L_ij`` (``factor``: 1 for the guarantee "tight", k for "dgemm"). ``E``: :func:`error_bound` plus the combine's roundings (scheme I: the
    compensated combine, from its group sums ``acc``); ``L``: the larger of the free bound
    (``|C| - E - F``) and the magnitude digits' products ``magnitude_sums`` (exact integer sums
    over all k, or None). ``support_sums`` (when known) add :func:`support_bound`, and where they
    are 0 the product is exactly 0 (every term has a zero factor, every split keeps zeros), so
    nothing is rounded. Everything is normalised by ``2**(e_i + f_j)``; the count and the worst
    ratio are reduced over every rank. ``lifted`` = ``(low, shift)`` where some entry of ``c``
    overflowed from finite inputs: ``c = final_scale(low, shift)`` entry by entry, with ``low``
    finite there (``shift`` = ``d_r_i + d_c_j``, :func:`ozhpc.ozaki.scales.headroom`; an entry with
    no lifted total holds its own C at shift 0); such an entry passes only by :func:`overflow_verdicts`
    (without ``lifted`` no entry can overflow: every non-finite entry is a special value).
    Scheme II's form (combine rounding ``a + b |C|``) runs as the engine's one-pass kernel where it
    has one (:meth:`~ozhpc.engines.base.Engine.entry_verdicts`: no per-entry mask, ``passed`` None);
    the array code here is the reference. ``fused=False``: the array code on a GPU too (the same
    verdicts), for the per-entry mask and the passed entries' worst ratio, which the kernel does
    not return."""
    import numpy as np

    if fused and acc is None and lifted is None and plan.combine_rounding_terms is not None:
        found = engine.entry_verdicts(c, e, f, *((s.delta, s.norm, s.nnz) for s in stats), magnitude_sums,
                                      support_sums, verdict_constants(plan, factor))
        if found is not None:
            return _reduced(None, *found, reduce_sum, reduce_max)
    with np.errstate(invalid="ignore", over="ignore"):   # inf/NaN entries of C pass (excluded)
        return _certify_entries(engine.xp, c, magnitude_sums, stats, e, f, plan, acc, support_sums, lifted,
                                reduce_sum, reduce_max, factor)


CERTIFY_CHUNK = 1 << 20
"""Entries per row chunk of the array-at-a-time certificate: its dozen temporaries stay at a few
chunks' size instead of a dozen copies of C (the memory model counts them)."""


def _certify_entries(xp, c, magnitude_sums, stats, e, f, plan, acc, support_sums, lifted, reduce_sum, reduce_max,
                     factor):
    m, n = c.shape
    step = max(1, CERTIFY_CHUNK // max(1, n))
    passed = xp.ones(c.shape, dtype=bool)
    count, worst, passed_worst = 0, 0.0, 0.0
    for r0 in range(0, m, step):
        rows = slice(r0, r0 + step)
        part = _certify_rows(xp, c[rows], _rows_of(magnitude_sums, rows), [_stats_rows(stats[0], rows), stats[1]],
                             xp.asarray(e)[rows], f, plan, None if acc is None else acc[:, rows],
                             _rows_of(support_sums, rows), factor,
                             None if lifted is None else (lifted[0][rows], lifted[1][rows]))
        passed[rows] = part.passed
        count, worst = count + part.uncertified, max(worst, part.worst)
        passed_worst = max(passed_worst, part.passed_worst)
    return _reduced(passed, count, worst, reduce_sum, reduce_max, passed_worst)


def _reduced(passed, count: int, worst: float, reduce_sum, reduce_max, passed_worst: float = 0.0) -> Certificate:
    """The certificate of this rank's ``count``, ``worst`` and ``passed_worst`` (host numbers), each
    reduced over every rank (one process: no trip to the device)."""
    import numpy as np

    worst, passed_worst = (float(v) for v in reduce_max(np.asarray([float(worst), float(passed_worst)])))
    count = int(reduce_sum(np.asarray([int(count)], dtype=np.int64))[0])
    return Certificate(passed, count, worst, passed_worst)


def _rows_of(x, rows):
    return None if x is None else x[rows]


def _stats_rows(s: "OperandStats", rows) -> "OperandStats":
    return OperandStats(s.delta[rows], s.norm[rows], s.nnz[rows])


def _certify_rows(xp, c, magnitude_sums, stats, e, f, plan, acc, support_sums, factor, lifted=None) -> Certificate:
    """:func:`certify_entries` on a block of rows, array at a time (local count and worst)."""
    sa, sb = stats
    if lifted is None:
        c_lo, c_up = normalised_c(xp, c, e, f)
    else:   # the same values, and the totals of the entries that overflowed
        c_lo, c_up = normalised_c(xp, lifted[0], e, f, lifted[1])
    comb = plan.combine_rounding(xp, acc, c_up, stats, compensated=acc is not None)
    bound = error_bound(xp, sa, sb, plan)
    if support_sums is not None:
        bound = xp.minimum(bound, support_bound(xp, sa, sb, plan, support_sums))
        comb = xp.where(support_sums > 0, comb, 0.0)
    bound = bound + comb
    # a zero row of op(A) or column of op(B): every term is 0, so is C_ij, exactly (no rounding)
    bound = xp.where((sa.norm.reshape(-1, 1) > 0) & (sb.norm.reshape(1, -1) > 0), bound, 0.0)
    magnitudes = None if magnitude_sums is None else magnitude_sums.astype(xp.float64)
    return _tally(xp, *bound_verdicts(xp, c, c_lo, c_up, bound, magnitudes, plan, e, f, lifted, factor))


def bound_verdicts(xp, c, c_lo, c_up, bound, magnitudes, plan, e, f, lifted, factor):
    """``(passed, ratio)`` per entry from its error ``bound``: the lower bound of ``|A||B|`` from C
    (raised by the sampled ``magnitudes`` where given), the verdicts, and those of entries that
    overflowed only in the lifted sum. Shared by the real and the complex certificate."""
    free = lower = free_lower_bound(xp, c_lo, c_up, bound, plan.final_rounding_ulps, subnormal_unit(xp, e, f))
    if magnitudes is not None:
        lower = xp.maximum(lower, magnitudes * MAGNITUDE_UNIT)
    special = ~xp.isfinite(c if lifted is None else lifted[0])
    passed, ratio = verdicts(xp, bound, lower, special, factor=factor)
    if lifted is not None:
        over = ~xp.isfinite(c) & ~special
        proved, over_ratio = overflow_verdicts(xp, free, bound, passed, ratio, e, f)
        passed, ratio = xp.where(over, proved, passed), xp.where(over, over_ratio, ratio)
    return passed, ratio


def verdict_constants(plan, factor: int) -> dict:
    """The numbers of scheme II's per-entry verdict (:data:`ozhpc.engines.base.VERDICT_CONSTANTS`)
    for ``plan`` (its combine rounding ``a + b |C|``, ``plan.combine_rounding_terms``) and ``factor``."""
    w = plan.bits
    comb0, comb1 = plan.combine_rounding_terms
    constants = dict(DOWN=DOWN, UP=UP, TINYSUB=2.0**-1074, COMB0=comb0, COMB1=comb1,
                     PW=2.0**-w, P2W=2.0 ** (-2 * w), FLOOR=FLOOR, SUW=SUPPORT_UNIT * 2.0**-w,
                     TAU=plan.dropped_pairs_bound, RHOU=(plan.final_rounding_ulps + 1) * U, FOURU=4 * U,
                     MAGUNIT=MAGNITUDE_UNIT, FACTOR=float(factor), FAIL_MIN=FAIL_MIN)
    assert tuple(constants) == VERDICT_CONSTANTS
    return constants
