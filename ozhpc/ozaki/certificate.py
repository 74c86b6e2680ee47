"""Certified accuracy for the Ozaki schemes: equilibration, a per-entry error bound, a lower
bound of ``(|op(A)||op(B)|)_ij``, the per-entry certificate and the "more bits" policy.

Guarantee (docs/numerics.md, "The guarantee"): where :func:`certify` passes an entry,

    |C_ij - (op(A) op(B))_ij| <= u (|op(A)||op(B)|)_ij + rho u |C_ij| + 2**-1074,

``u = 2**-53``, ``rho`` = :data:`FINAL_ROUNDING_ULPS` (the last rounding(s) of the combine).

Everything here takes the array module ``xp`` (numpy or cupy) and works on the operands as
rows along k (``a_rows`` = op(A), m x k; ``b_rows`` = op(B)^T, n x k), as the pipeline holds
them. Global reductions are callables (identity on one process): ``reduce_max`` (MAX) and
``reduce_sum`` (SUM of int64, exact). Every quantity a decision reads is computed exactly or
by a fixed sequence of element-wise roundings from exact inputs (MAX of exact values, SUMs of
integers, the bits of C), so the decisions, hence C, are the same for any grid, block, panel
width, rank count and engine. Bounds are normalised by ``2**(e_i + f_j)`` (row exponents of
op(A), column exponents of op(B)), so no bound under- or overflows where C does.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

from ..engines import crt as _crt
from ..engines.base import BITS, final_scale, ldexp_by

U = 2.0**-53
FINAL_ROUNDING_ULPS = {"ozaki1": 1, "ozaki2": 2}
"""Roundings of the combine counted as "the final rounding of C" (relative to |C_ij|): scheme I
the last of its d-1 additions (the ldexp is exact unless C is subnormal: + 2**-1074); scheme II
the last piece addition plus the one before it (|R_1| <= (1 + 2**-34)|C'| whenever it matters)."""
UP, DOWN = 1.0 + 2.0**-40, 1.0 - 2.0**-40
"""Safety factors for a few FP64 operations on bounds (each relative error <= 2**-53)."""
NONE_EXP = -4096
"""Exponent code of a column / row with no nonzero finite entry."""
NORM_BITS = 32
"""Fixed point of the row 1-norms: sums of ``ceil(|x| 2**(32 - e))`` are exact int64 for k < 2**30."""


def _ident(x):
    return x


# -- (a) equilibration over k --------------------------------------------------------------------

def inner_stats(xp, rows):
    """int32 (2, k): per column t of ``rows`` (op(A) or op(B)^T), the largest frexp exponent of a
    nonzero finite entry, and minus the lowest bit any of them can hold (``max(ex - 53, -1074)``).
    Both are MAX-reduced (exact) over the ranks that share the k indices."""
    if xp.__name__ == "cupy" and rows.shape[0] and rows.shape[1]:
        from .certificate_kernels import inner_stats as fused
        return fused(xp, rows, NONE_EXP)
    mag = xp.abs(rows)
    keep = xp.isfinite(mag) & (mag > 0)
    _, ex = xp.frexp(xp.where(keep, mag, 1.0))
    ex = ex.astype(xp.int32)
    both = xp.stack([xp.where(keep, ex, NONE_EXP), xp.where(keep, -xp.maximum(ex - 53, -1074), NONE_EXP)])
    if rows.shape[0] == 0:
        return xp.full((2, rows.shape[1]), NONE_EXP, dtype=xp.int32)
    return both.max(axis=1).astype(xp.int32)


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


def equilibrate(xp, a_rows, b_rows, shifts):
    """``(op(A) D, (D^-1 op(B))^T)`` with ``D = diag(2**s)``: exact (``equilibration_shifts``), so
    ``op(A) op(B)`` and ``|op(A)||op(B)|`` are unchanged, entry for entry."""
    s = shifts.reshape(1, -1)
    return xp.ldexp(a_rows, s), xp.ldexp(b_rows, -s)


def ldexp_columns(xp, rows, shifts):
    """Column t of ``rows`` times ``2**shifts[t]``, exactly (the shifts of
    :func:`equilibration_shifts` lose no bit)."""
    return ldexp_by(xp, rows, xp.asarray(shifts).astype(xp.int64).reshape(1, -1))


def equilibrate_global(xp, a_rows, b_rows, reduce_max_a=_ident, reduce_max_b=_ident):
    """The three steps above with the reductions of a distributed run (identity here)."""
    shifts = equilibration_shifts(xp, reduce_max_a(inner_stats(xp, a_rows)),
                                  reduce_max_b(inner_stats(xp, b_rows)))
    return equilibrate(xp, a_rows, b_rows, shifts) + (shifts,)


# -- (b) the per-entry error bound ----------------------------------------------------------------

TINY = 2.0**-800
"""Added to every nonzero representation error: covers the rounding of an ``ldexp`` that
underflows (at most 2**-1075, times at most 2**168 for 24 slices), and keeps the bounds built
from it (times ``2**-32`` units and ``2**-w``) normal numbers."""
FLOOR = 2.0**-1000
"""Absolute slack added to a bound wherever some representation error is nonzero: covers the
rounding of its products should they reach the subnormal range."""


def grid_bits(plan) -> int:
    """Bits of the operand grid below the row scale: 7 x slices (scheme I), bits (scheme II)."""
    return BITS * plan.slices if plan.scheme == "ozaki1" else plan.bits


def representation_error(xp, x, exps, plan):
    """``|x - repr(x)| 2**(w - e_i)`` per entry (in [0, 1/2]): what the split of ``plan`` leaves
    out, recomputed with the engine's exact steps (scheme I: the remainder after ``slices``
    digits; scheme II: ``|y - rint(y)|``, ``y = x 2**(bits - e)``). 0 for entries on the grid."""
    e = xp.asarray(exps).astype(xp.int64).reshape(-1, 1)
    if plan.scheme == "ozaki2":
        y = ldexp_by(xp, x, plan.bits - e)
        err = xp.abs(y - xp.rint(y))
    else:
        y = ldexp_by(xp, x, -e)
        for _ in range(plan.slices):
            y = y * float(2**BITS)
            y = y - xp.rint(y)
        err = xp.abs(y)
    return xp.where((x != 0) & (err > 0), err + TINY, err)


@dataclass
class OperandStats:
    """Per row of op(A) (or column of op(B)), all global: ``delta`` = max representation error
    (units ``2**(e - w)``, in [0, 1/2]; MAX-reduced), ``norm`` = ``sum_t |x_t| 2**-e`` rounded up
    in units of ``2**-NORM_BITS`` (int64, SUM-reduced: exact), ``nnz`` (int64, SUM-reduced)."""

    delta: object
    norm: object
    nnz: object


def operand_stats(xp, x, exps, plan, reduce_max=_ident, reduce_sum=_ident, mags=None) -> OperandStats:
    """The O(rows x k) statistics of one operand the bound needs (``x``: its finite part;
    ``mags``: its :func:`magnitude_stats` when the caller has them)."""
    rows = x.shape[0]
    if xp.__name__ == "cupy" and rows and x.shape[1]:
        from .certificate_kernels import representation_error_max
        delta = representation_error_max(xp, x, exps, plan.bits if plan.scheme == "ozaki2" else 0,
                                          0 if plan.scheme == "ozaki2" else plan.slices, TINY)
    else:
        err = representation_error(xp, x, exps, plan)
        delta = err.max(axis=1) if x.shape[1] else xp.zeros(rows, dtype=xp.float64)
    norm, nnz = mags or magnitude_stats(xp, x, exps, reduce_sum)
    return OperandStats(reduce_max(delta), norm, nnz)


def dropped_pairs_bound(plan) -> float:
    """``sum_{p+q >= d} m_p m_q`` (scheme I, ``m_0 = 1``, ``m_p = 2**(-7p-1)``), rounded up: the
    most the dropped slice pairs add per k term whose two entries are nonzero."""
    if plan.scheme != "ozaki1":
        return 0.0
    s = plan.slices
    size = [Fraction(1)] + [Fraction(1, 2 ** (BITS * p + 1)) for p in range(1, s)]
    exact = sum((size[p] * size[q] for p in range(s) for q in range(s) if p + q >= plan.groups),
                Fraction(0))
    out = float(exact)
    return math.nextafter(out, math.inf) if Fraction(out) < exact else out


def error_bound(xp, sa: OperandStats, sb: OperandStats, plan):
    """Upper bound of ``|repr'd product - op(A) op(B)|_ij / 2**(e_i + f_j)`` (before the combine).

    With ``a = repr(a) + da``: ``ab - repr(a)repr(b) = da b + a db - da db``, so per entry
    ``sum_t |da||b| + |a||db| + |da||db| <= 2**-w (dA_i |B_j|_1 + |A_i|_1 dB_j)
    + 2**-2w dA_i dB_j min(nnzA_i, nnzB_j)``; scheme I adds the dropped pairs,
    ``tau_drop min(nnzA_i, nnzB_j)``. O(m n) from O(m k + k n) statistics.
    """
    w = grid_bits(plan)
    da, db = sa.delta.reshape(-1, 1), sb.delta.reshape(1, -1)
    na = sa.norm.astype(xp.float64).reshape(-1, 1) * 2.0**-NORM_BITS
    nb = sb.norm.astype(xp.float64).reshape(1, -1) * 2.0**-NORM_BITS
    cross = xp.minimum(sa.nnz.reshape(-1, 1), sb.nnz.reshape(1, -1)).astype(xp.float64)
    bound = (da * nb + na * db) * 2.0**-w + (da * db * cross) * 2.0**(-2 * w)
    tau = dropped_pairs_bound(plan)
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


def combine_rounding(xp, plan, acc=None, c_up=None, stats=None, compensated=False):
    """Bound of the combine's roundings other than the final ones (normalised).

    Scheme I, from the group accumulators ``acc``: the additions ``t_g = t_{g+1} + S_g w_g``
    for ``g = d-2 .. 1`` err by at most ``u |t_g|``, and ``|t_g| <= sum_{h>=g} |S_h| w_h``, so in
    all ``u sum_h min(h, d-2) |S_h| w_h``. Without ``acc`` (a fused product), from the operand
    ``stats``: ``|t_g| <= 2**-6 (|A_i|_1 + |B_j|_1) + 2**-14 min(nnz)`` (digits after the first
    weigh at most 2**-7, the first at most twice the entry). ``compensated``
    (:func:`compensated_combine`): ``(d-1) u**2 sum_h (h+1) |S_h| w_h``. Scheme II: the piece additions
    below the last two (``|R_t| <= 2**(36(P-t)-1) (1 + 2**-35)``) plus ``(1 + 2**-32)`` slack.
    """
    if plan.scheme == "ozaki2":
        pieces = plan.tables.pieces
        const = U * 2.0 ** (36 * (pieces - 2) - 1 - 2 * plan.bits) * 1.001 if pieces >= 3 else 0.0
        return const + (0.0 if c_up is None else c_up * 2.0**-80)
    if acc is None:
        sa, sb = stats
        norms = (sa.norm.astype(xp.float64).reshape(-1, 1)
                 + sb.norm.astype(xp.float64).reshape(1, -1)) * 2.0**-NORM_BITS
        cross = xp.minimum(sa.nnz.reshape(-1, 1), sb.nnz.reshape(1, -1)).astype(xp.float64)
        return (norms * 2.0**-6 + cross * 2.0**-14) * (max(plan.groups - 2, 0) * U * UP)
    d = acc.shape[0]
    total = xp.zeros(acc.shape[1:], dtype=xp.float64)
    for h in range(d):
        weight = (h + 1) if compensated else min(h, d - 2)
        if weight > 0:
            total = total + xp.abs(acc[h].astype(xp.float64)) * float(weight * 2.0 ** (-BITS * (h + 2)))
    factor = d * U * U if compensated else U
    return total * (factor * UP * (1 + d * U)) + (xp.where(total > 0, FLOOR, 0.0) if compensated else 0.0)


# -- (c) lower bounds of (|A||B|)_ij (normalised) ------------------------------------------------

def normalised_c(xp, c, e, f):
    """``(lo, up)`` with ``lo <= |C_ij| 2**-(e_i+f_j) <= up`` (the ldexp may underflow)."""
    scale = -(xp.asarray(e).astype(xp.int64).reshape(-1, 1) + xp.asarray(f).astype(xp.int64).reshape(1, -1))
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


def fixed_point_lower_bound(xp, a_rows, b_rows, e, f, k_total: int):
    """``sum_t floor(|a| 2**(F-e)) floor(|b| 2**(F-f)) 2**-2F`` with ``2F + bitlen(k) <= 52``: one
    FP64 GEMM of integers whose every partial sum is exact, so the same in any order or blocking
    (k panels accumulate exactly too). Entries below ``2**-F`` of their row scale count 0."""
    bits = (52 - max(1, k_total).bit_length()) // 2
    if bits <= 0:
        return xp.zeros((a_rows.shape[0], b_rows.shape[0]))
    ea = (bits - xp.asarray(e).astype(xp.int64)).reshape(-1, 1).astype(xp.int32)
    fb = (bits - xp.asarray(f).astype(xp.int64)).reshape(-1, 1).astype(xp.int32)
    ia = xp.floor(ldexp_by(xp, xp.abs(a_rows), ea))
    ib = xp.floor(ldexp_by(xp, xp.abs(b_rows), fb))
    return xp.ldexp(ia @ ib.T, -2 * bits)


ENTRY_CHUNK = 1 << 21
"""Elements (entries x k) per chunk of :func:`entry_bounds`."""


def _entry_terms(xp, a, b, da, db, both, plan):
    """Per-term upper error bounds and lower magnitudes (normalised) for entries x k
    (``both``: where both entries are nonzero, the terms the dropped pairs can reach)."""
    w = grid_bits(plan)
    mag = a * b
    err = (da * b + a * db) * 2.0**-w + (da * db) * 2.0**(-2 * w)
    tau = dropped_pairs_bound(plan)
    some = (da > 0) | (db > 0)
    if tau:
        err = err + xp.where(both, tau, 0.0)
        some = some | both
    err = xp.where(some, err * UP + FLOOR, 0.0)
    return err, xp.maximum(mag * (1 - 2.0**-50) - 2.0**-1070, 0.0)


def _fixed_sum(xp, terms, top, grid: int, up: bool):
    """Sum along axis 1 on the fixed grid ``2**(top - grid)`` (int64, exact): rounded up or down."""
    scaled = xp.ldexp(terms, (grid - top).reshape(-1, 1).astype(xp.int32))
    return (xp.ceil(scaled) if up else xp.floor(scaled)).astype(xp.int64).sum(axis=1)


def entry_bounds(xp, a_rows, b_rows, e, f, plan, ii, jj, k_total: int,
                 reduce_max=_ident, reduce_sum=_ident):
    """Tight ``(E, L)`` at the entries ``(ii, jj)``: the per-term bounds summed, O(len(ii) k).

    Two passes keep it exact and order-free: the MAX of the terms gives each entry a top
    exponent, then the terms are summed on the fixed grid ``2**(top - G)`` as int64 (rounded up
    for E, down for L), ``G = 61 - bitlen(k)`` so no sum overflows.
    """
    grid = 61 - max(1, k_total).bit_length()
    ea = xp.asarray(e).astype(xp.int64).reshape(-1, 1)
    fb = xp.asarray(f).astype(xp.int64).reshape(-1, 1)
    an = ldexp_by(xp, xp.abs(a_rows), -ea)
    bn = ldexp_by(xp, xp.abs(b_rows), -fb)
    dan = representation_error(xp, a_rows, e, plan)
    dbn = representation_error(xp, b_rows, f, plan)
    nza, nzb = a_rows != 0, b_rows != 0
    out_e, out_l = xp.zeros(len(ii)), xp.zeros(len(ii))
    step = max(1, ENTRY_CHUNK // max(1, a_rows.shape[1]))
    for s0 in range(0, len(ii), step):
        i, j = ii[s0:s0 + step], jj[s0:s0 + step]
        err, mag = _entry_terms(xp, an[i], bn[j], dan[i], dbn[j], nza[i] & nzb[j], plan)
        tops = []
        for t in (err, mag):
            _, ex = xp.frexp(t.max(axis=1) if t.shape[1] else xp.zeros(t.shape[0]))
            tops.append(reduce_max(ex.astype(xp.int64)))
        se = reduce_sum(_fixed_sum(xp, err, tops[0], grid, True))
        sl = reduce_sum(_fixed_sum(xp, mag, tops[1], grid, False))
        out_e[s0:s0 + step] = xp.ldexp(se.astype(xp.float64) * UP, (tops[0] - grid).astype(xp.int32))
        out_l[s0:s0 + step] = xp.ldexp(sl.astype(xp.float64) * DOWN, (tops[1] - grid).astype(xp.int32))
    return out_e, out_l


# -- (d) the certificate --------------------------------------------------------------------------

@dataclass
class Certificate:
    """Per-entry outcome: ``passed`` (bool m x n), ``uncertified`` (global count), ``worst``
    (global max of ``E_ij / (u L_ij)``; inf where L is 0 but E is not), ``free`` (global count
    certified by the free test alone), ``fallback`` (entries recomputed exactly)."""

    passed: object
    uncertified: int
    worst: float
    free: int = 0
    fallback: int = 0


def certify(xp, bound, lower, exclude=None, reduce_sum=_ident, reduce_max=_ident) -> Certificate:
    """``E_ij <= u L_ij`` per entry (compared as ``2**53 E <= L``: exact); ``exclude`` (e.g. entries
    that are inf/NaN by the special-value rules) always pass. Count and worst ratio are global."""
    scaled = xp.ldexp(bound, 53)
    passed = scaled <= lower
    if exclude is not None:
        passed = passed | exclude
    with_err = (bound > 0) & ~passed
    ratio = xp.where(with_err, scaled / xp.where(lower > 0, lower, 1.0), 0.0)
    ratio = xp.where(with_err & (lower <= 0), xp.inf, ratio)
    worst = float(reduce_max(xp.asarray([ratio.max() if ratio.size else 0.0]))[0])
    count = int(reduce_sum(xp.asarray([int((~passed).sum())], dtype=xp.int64))[0])
    return Certificate(passed, count, worst)


FIXED_POINT_MIN = 64
"""Global count of entries left by the free test above which the fixed-point GEMM runs."""
ENTRY_LIMIT = 1 << 16
"""Most entries (global) given the O(k) per-entry bounds of :func:`entry_bounds`."""


def certify_product(xp, a_rows, b_rows, e, f, plan, c, acc=None, *, k_total=None, stats=None,
                    exclude=None, fixed_lower=None, entry_limit=None, compensated=False,
                    reduce_max=_ident, reduce_sum=_ident) -> Certificate:
    """The certificate of one product ``c`` (before special values and alpha/beta) of the finite,
    equilibrated operands: separable bound and free test, then (for the entries left, decided
    by global counts) the fixed-point lower bound (``fixed_lower`` when the caller has it, e.g.
    from :func:`predict_width`), then the per-entry bounds for at most ``entry_limit`` entries
    (default :data:`ENTRY_LIMIT`; 0 where the caller does not hold whole rows along k).
    ``compensated``: ``c`` came from :func:`compensated_combine` (scheme I)."""
    k_total = a_rows.shape[1] if k_total is None else k_total
    sa, sb = stats or (operand_stats(xp, a_rows, e, plan, reduce_max, reduce_sum),
                       operand_stats(xp, b_rows, f, plan, reduce_max, reduce_sum))
    c_lo, c_up = normalised_c(xp, c, e, f)
    comb = combine_rounding(xp, plan, acc, c_up, (sa, sb), compensated) + xp.zeros(c.shape)
    bound = error_bound(xp, sa, sb, plan) + comb
    lower = free_lower_bound(xp, c_lo, c_up, bound, FINAL_ROUNDING_ULPS[plan.scheme], subnormal_unit(xp, e, f))
    exclude = ~xp.isfinite(c) if exclude is None else exclude | ~xp.isfinite(c)
    cert = certify(xp, bound, lower, exclude, reduce_sum, reduce_max)
    free = int(reduce_sum(xp.asarray([int(cert.passed.sum())], dtype=xp.int64))[0])
    if cert.uncertified > FIXED_POINT_MIN:
        if fixed_lower is None:
            fixed_lower = fixed_point_lower_bound(xp, a_rows, b_rows, e, f, k_total)
        lower = xp.maximum(lower, fixed_lower)
        cert = certify(xp, bound, lower, exclude, reduce_sum, reduce_max)
    if 0 < cert.uncertified <= (ENTRY_LIMIT if entry_limit is None else entry_limit):
        ii, jj = xp.nonzero(~cert.passed)
        be, le = entry_bounds(xp, a_rows, b_rows, e, f, plan, ii, jj, k_total, reduce_max, reduce_sum)
        bound, lower = bound.copy(), lower.copy()
        bound[ii, jj] = xp.minimum(bound[ii, jj], (be + comb[ii, jj]) * UP)
        lower[ii, jj] = xp.maximum(lower[ii, jj], le)
        cert = certify(xp, bound, lower, exclude, reduce_sum, reduce_max)
    cert.free = int(free)
    return cert


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
    w = grid_bits(plan)
    da, db = sa.delta.reshape(-1, 1), sb.delta.reshape(1, -1)
    per = (da + db) * (SUPPORT_UNIT * 2.0**-w) + (da * db) * 2.0 ** (-2 * w) + dropped_pairs_bound(plan)
    u = support_sums.astype(xp.float64)
    return xp.where(u > 0, per * u * UP + FLOOR, 0.0)


def certify_entries(xp, c, magnitude_sums, stats, e, f, plan, acc=None, support_sums=None, *,
                    reduce_sum=_ident, reduce_max=_ident) -> Certificate:
    """The certificate of the product pipeline: every finite entry of ``c`` (this rank's block of
    op(A) op(B), special values applied; inf/NaN entries pass) against the bound
    ``E_ij <= u L_ij``. ``E``: :func:`error_bound` plus the combine's roundings (scheme I: the
    compensated combine, from its group sums ``acc``); ``L``: the larger of the free bound
    (``|C| - E - F``) and the magnitude digits' products ``magnitude_sums`` (exact integer sums
    over all k, or None). ``support_sums`` (when known) add :func:`support_bound`, and where they
    are 0 the product is exactly 0 (every term has a zero factor, every split keeps zeros), so
    nothing is rounded. Everything is normalised by ``2**(e_i + f_j)``; the count and the worst
    ratio are reduced over every rank."""
    import numpy as np

    with np.errstate(invalid="ignore", over="ignore"):   # inf/NaN entries of C pass (excluded)
        return _certify_entries(xp, c, magnitude_sums, stats, e, f, plan, acc, support_sums, reduce_sum, reduce_max)


def _certify_entries(xp, c, magnitude_sums, stats, e, f, plan, acc, support_sums, reduce_sum, reduce_max):
    sa, sb = stats
    if acc is None and xp.__name__ == "cupy":
        return _certify_fused(xp, c, magnitude_sums, stats, e, f, plan, support_sums, reduce_sum, reduce_max)
    c_lo, c_up = normalised_c(xp, c, e, f)
    comb = combine_rounding(xp, plan, acc, c_up, stats, compensated=acc is not None)
    bound = error_bound(xp, sa, sb, plan)
    if support_sums is not None:
        bound = xp.minimum(bound, support_bound(xp, sa, sb, plan, support_sums))
        comb = xp.where(support_sums > 0, comb, 0.0)
    bound = bound + comb
    lower = free_lower_bound(xp, c_lo, c_up, bound, FINAL_ROUNDING_ULPS[plan.scheme], subnormal_unit(xp, e, f))
    if magnitude_sums is not None:
        lower = xp.maximum(lower, magnitude_sums.astype(xp.float64) * MAGNITUDE_UNIT)
    return certify(xp, bound, lower, ~xp.isfinite(c), reduce_sum, reduce_max)


def _certify_fused(xp, c, magnitude_sums, stats, e, f, plan, support_sums, reduce_sum, reduce_max):
    """:func:`_certify_entries` (scheme II) as one CuPy kernel with the same roundings
    (:mod:`ozhpc.ozaki.certificate_kernels`); no per-entry mask (the pipeline needs none)."""
    from .certificate_kernels import entry_ratios

    w = grid_bits(plan)
    vecs = [(s.delta, s.norm.astype(xp.float64) * 2.0**-NORM_BITS, s.nnz.astype(xp.float64)) for s in stats]
    constants = dict(DOWN=DOWN, UP=UP, TINYSUB=2.0**-1074, COMB0=combine_rounding(xp, plan), COMB1=2.0**-80,
                     PW=2.0**-w, P2W=2.0 ** (-2 * w), FLOOR=FLOOR, SUW=SUPPORT_UNIT * 2.0**-w,
                     TAU=dropped_pairs_bound(plan), RHOU=(FINAL_ROUNDING_ULPS[plan.scheme] + 1) * U, FOURU=4 * U,
                     MAGUNIT=MAGNITUDE_UNIT)
    ratio = entry_ratios(xp, c, e, f, vecs[0], vecs[1], magnitude_sums, support_sums, constants)
    worst = float(reduce_max(xp.asarray([ratio.max() if ratio.size else 0.0]))[0])
    count = int(reduce_sum(xp.asarray([int(xp.count_nonzero(ratio))], dtype=xp.int64))[0])
    return Certificate(None, count, worst)


# -- (e) the policy -------------------------------------------------------------------------------

def magnitude_stats(xp, x, exps, reduce_sum=_ident):
    """``(norm, nnz)`` of :class:`OperandStats` (they do not depend on the plan)."""
    if xp.__name__ == "cupy" and x.shape[0] and x.shape[1]:
        from .certificate_kernels import magnitude_sums
        norm, nnz = magnitude_sums(xp, x, exps, NORM_BITS)
        return reduce_sum(norm), reduce_sum(nnz)
    e = xp.asarray(exps).astype(xp.int64).reshape(-1, 1)
    scaled = xp.ceil(ldexp_by(xp, xp.abs(x), NORM_BITS - e))
    nnz = (x != 0).sum(axis=1).astype(xp.int64)
    return reduce_sum(scaled.astype(xp.int64).sum(axis=1) + nnz), reduce_sum(nnz)


PREDICT_MARGIN = 15 / 16
"""Largest worst-case ratio ``E / (u L)`` :func:`predict_width` accepts: the rest of ``u L`` is
left for the combine's own roundings (about 2**-6 of it in scheme I, less in scheme II)."""


def predict_width(xp, mag_a, mag_b, lower, scheme: str, cap: int, reduce_max=_ident) -> int:
    """The fewest bits / slices whose bound, with every representation error at its worst (1/2),
    is at most ``PREDICT_MARGIN u L_ij`` on every entry with ``L > 0``: the "auto" statistic of
    certified mode, from the exact norms and counts and the fixed-point lower bound ``L`` (one
    MAX per candidate width, so the same on every rank). It starts at ``52 + log2 max (|A_i|_1 +
    |B_j|_1) / L_ij`` bits (the first term alone) and adds a bit / slice until the worst entry fits."""
    from .plan import SlicePlan
    na = mag_a[0].astype(xp.float64).reshape(-1, 1) * 2.0**-NORM_BITS
    nb = mag_b[0].astype(xp.float64).reshape(1, -1) * 2.0**-NORM_BITS
    cross = xp.minimum(mag_a[1].reshape(-1, 1), mag_b[1].reshape(1, -1)).astype(xp.float64)
    pos = lower > 0
    safe = xp.where(pos, lower, 1.0)

    def worst(x):
        return float(reduce_max(xp.asarray([xp.where(pos, x / safe, 0.0).max() if x.size else 0.0]))[0])

    def fits(width):
        w = BITS * width if scheme == "ozaki1" else width
        bound = (na + nb) * 2.0 ** (-w - 1) + cross * 2.0 ** (-2 * w - 2)
        if scheme == "ozaki1":
            bound = bound + dropped_pairs_bound(SlicePlan(width, width)) * cross
        return worst(bound) * 2.0**53 <= PREDICT_MARGIN

    first = worst(na + nb)
    bits = 52 + math.ceil(math.log2(first)) if first > 0 else _crt.MIN_BITS
    width = max(_crt.MIN_BITS, bits) if scheme == "ozaki2" else max(1, -(-bits // BITS))
    while width < cap and not fits(width):
        width += 1
    return min(cap, width)


FALLBACK_LIMIT = 4096
"""Most uncertified entries (global) the exact fallback recomputes."""


def next_width(scheme: str, width: int, worst: float, cap: int) -> int:
    """More bits (scheme II) or slices (scheme I) for a failed certificate: the bound shrinks by
    2 per bit (2**7 per slice), so ``log2(worst) + 1`` bits close the worst gap, at least one
    step; an infinite ratio (no lower bound) takes 16 bits / 3 slices."""
    need = 16 if not math.isfinite(worst) else max(1, math.ceil(math.log2(max(worst, 1.0))) + 1)
    step = need if scheme == "ozaki2" else max(1, -(-need // BITS))
    return min(cap, width + step)


def certified_policy(run_product, start: int, scheme: str, cap: int | None = None, fallback=None,
                     fallback_limit: int = FALLBACK_LIMIT):
    """"auto" with a guarantee: ``run_product(width) -> (c, Certificate)`` at ``start`` bits /
    slices, more (:func:`next_width`) while entries fail, up to ``cap`` (``crt.MAX_BITS`` /
    ``plan.MAX_SLICES``); then ``fallback(c, cert) -> (c, cert)`` for at most ``fallback_limit``
    entries. Returns ``(c, width, cert, tried)``, ``tried`` = [(width, uncertified, worst)].
    Every decision reads global counts and MAXes: the same on every rank."""
    from .plan import MAX_SLICES
    cap = cap or (_crt.MAX_BITS if scheme == "ozaki2" else MAX_SLICES)
    width, tried = min(start, cap), []
    while True:
        c, cert = run_product(width)
        tried.append((width, cert.uncertified, cert.worst))
        if cert.uncertified == 0 or width >= cap:
            break
        width = next_width(scheme, width, cert.worst, cap)
    if cert.uncertified and fallback is not None and cert.uncertified <= fallback_limit:
        c, cert = fallback(c, cert)
    return c, width, cert, tried


def exact_entry_value(a, b) -> float:
    """``sum_t a_t b_t`` correctly rounded to FP64 (Python integers; finite inputs; +0.0 for 0)."""
    total, low = 0, None
    terms = []
    for x, y in zip(a.tolist(), b.tolist()):
        if x and y:
            mx, ex = math.frexp(x)
            my, ey = math.frexp(y)
            terms.append((int(mx * 2**53) * int(my * 2**53), ex + ey - 106))
    if not terms:
        return 0.0
    low = min(ex for _, ex in terms)
    total = sum(m << (ex - low) for m, ex in terms)
    try:
        return float(Fraction(total) * Fraction(2) ** low) + 0.0
    except OverflowError:
        return math.copysign(math.inf, total)


def exact_fallback(a_rows, b_rows):
    """A ``fallback`` for :func:`certified_policy` on host arrays: the uncertified entries
    recomputed correctly rounded (error <= u |AB_ij| <= u (|A||B|)_ij), then passed."""
    import numpy as np

    def run(c, cert):
        c = np.array(c, copy=True)
        passed = np.array(cert.passed, copy=True)
        for i, j in zip(*np.nonzero(~passed)):
            c[i, j] = exact_entry_value(a_rows[i], b_rows[j])
            passed[i, j] = True
        return c, Certificate(passed, 0, cert.worst, cert.free, cert.uncertified)
    return run


# -- prototype driver (until the product object of the one-pipeline refactor takes these calls) --

@dataclass
class CertifiedInfo:
    """What :func:`certified_gemm_prototype` did: the width used (bits / slices), the
    certificate, the widths tried, the width today's "auto" picks, and seconds per phase."""

    scheme: str
    width: int
    auto_width: int
    certified: bool
    uncertified: int
    worst: float
    free: int
    fallback: int
    tried: list
    seconds: dict


def _prototype_setup(eng, A, B, transa, transb, scheme, cap):
    """Operands as rows along k, equilibrated finite parts, exponents, today's auto width, the
    plan-free statistics and the predicted width, and the special-value counts."""
    from . import special
    from .gemm import check_real_matrix
    from .product import op_rows
    from .plan import MAX_SLICES, make_plan
    from .scales import exponents, spread_bits

    xp = eng.xp
    for x, name in ((A, "A"), (B, "B")):
        check_real_matrix(x, name)
    a_rows = op_rows(eng.asarray(A).astype(xp.float64), transa, True)
    b_rows = op_rows(eng.asarray(B).astype(xp.float64), transb, False)
    a_eq, b_eq, _ = equilibrate_global(xp, special.finite_part(xp, a_rows), special.finite_part(xp, b_rows))
    e, f = exponents(xp, eng.row_stats(a_eq)[0]), exponents(xp, eng.row_stats(b_eq)[0])
    spread = max(spread_bits(xp, eng.entry_gaps(a_eq, e)), spread_bits(xp, eng.entry_gaps(b_eq, f)))
    auto = make_plan("auto", "auto", spread, scheme=scheme, bits="auto", k=a_rows.shape[1])
    t0 = time.perf_counter()
    mags = magnitude_stats(xp, a_eq, e), magnitude_stats(xp, b_eq, f)
    fixed = fixed_point_lower_bound(xp, a_eq, b_eq, e, f, a_rows.shape[1])
    cap = cap or (_crt.MAX_BITS if scheme == "ozaki2" else MAX_SLICES)
    predicted = predict_width(xp, mags[0], mags[1], fixed, scheme, cap)
    counts = None
    if special.has_nonfinite(xp, a_rows) or special.has_nonfinite(xp, b_rows):
        counts = special.zeros_counts(xp, a_rows.shape[0], b_rows.shape[0])
        special.accumulate_counts(xp, counts, special.classify(xp, a_rows), special.classify(xp, b_rows))
    return dict(a=a_eq, b=b_eq, e=e, f=f, auto=auto.bits if scheme == "ozaki2" else auto.slices,
                mags=mags, fixed=fixed, cap=cap, predicted=predicted, counts=counts,
                prediction_s=time.perf_counter() - t0)


def certified_gemm_prototype(A, B, C=None, *, alpha=1.0, beta=0.0, transa=False, transb=False,
                             scheme="ozaki1", engine="numpy", cap=None, fallback=True, start=None):
    """Certified "auto" on one process with today's plan / engine steps: equilibrate, start at
    :func:`predict_width` (``start`` overrides), certify, widen, fall back; then special values
    and alpha/beta as :func:`ozhpc.gemm`. Returns ``(C, CertifiedInfo)``; ``seconds`` has the
    products, their certificates and the prediction (norms + fixed-point GEMM) apart."""
    import numpy as np

    from ..engines import get_engine
    from . import special
    from .plan import ModularPlan, SlicePlan
    from .product import epilogue

    eng = get_engine(engine)
    xp = eng.xp
    p = _prototype_setup(eng, A, B, transa, transb, scheme, cap)
    a_eq, b_eq, e, f, mags = p["a"], p["b"], p["e"], p["f"], p["mags"]
    (m, k), n = a_eq.shape, b_eq.shape[0]
    exclude = None if p["counts"] is None else (p["counts"] > 0).any(axis=0)
    seconds = {"prediction": p["prediction_s"], "product": 0.0, "certificate": 0.0}

    def run_product(width):
        t1 = time.perf_counter()
        plan = ModularPlan.for_k(width, k) if scheme == "ozaki2" else SlicePlan(width, width)
        plan.check_k(k)
        acc = plan.zeros(eng, m, n, k)
        if k:
            plan.accumulate(eng, acc, plan.split(eng, a_eq, e), plan.split(eng, b_eq, f))
        ab = compensated_combine(xp, acc, e, f) if scheme == "ozaki1" else plan.combine(eng, acc, e, f)
        t2 = time.perf_counter()
        stats = (operand_stats(xp, a_eq, e, plan, mags=mags[0]), operand_stats(xp, b_eq, f, plan, mags=mags[1]))
        cert = certify_product(xp, a_eq, b_eq, e, f, plan, ab, acc if scheme == "ozaki1" else None,
                               stats=stats, exclude=exclude, fixed_lower=p["fixed"],
                               compensated=scheme == "ozaki1")
        seconds["product"] += t2 - t1
        seconds["certificate"] += time.perf_counter() - t2
        return ab, cert

    use_fallback = fallback and xp is np
    ab, width, cert, tried = certified_policy(run_product, p["predicted"] if start is None else start, scheme,
                                              p["cap"], exact_fallback(a_eq, b_eq) if use_fallback else None)
    if exclude is not None:
        ab = special.apply_counts(xp, ab, p["counts"])
    out = epilogue(xp, ab, alpha, beta, None if beta == 0.0 else eng.asarray(C).astype(xp.float64))
    info = CertifiedInfo(scheme, width, p["auto"], cert.uncertified == 0, cert.uncertified, cert.worst,
                         cert.free, cert.fallback, tried, seconds)
    return out, info
