"""Per-row scales and the exponent-spread statistic, written against ``xp``.

Both are computed from quantities that reduce exactly and order-free across
ranks (a MAX of row maxima, SUMs of integer counts), so every rank of a
distributed run derives the same exponents and picks the same slice count.
"""
from __future__ import annotations

from ..engines.base import BITS, DIGIT_MAX

MAX_GAP = 63
"""Exponent gaps are clipped here: a median entry 63 bits down already asks for the most slices."""
NO_GAP = 127
"""Gap code of zero and non-finite entries: never counted."""


def row_abs_max(xp, x):
    """Max of |x| over the finite entries of each row (0 for an empty or all-zero row)."""
    if x.shape[1] == 0:
        return xp.zeros(x.shape[0], dtype=xp.float64)
    mag = xp.abs(x)
    return xp.where(xp.isfinite(mag), mag, 0.0).max(axis=1)


def exponents(xp, rowmax):
    """Row exponents ``e_i`` from the (global) row maxima.

    ``e_i`` is the smallest integer with ``rowmax_i < 2**e_i`` (0 for a zero
    row), plus one when the first digit of the row maximum would round to 128:
    then every first digit fits int8 and later digits stay within 64.
    """
    _, e = xp.frexp(rowmax)
    e = e.astype(xp.int32)
    first = xp.rint(xp.ldexp(rowmax, (BITS - e).astype(xp.int32)))
    return e + (first > DIGIT_MAX).astype(xp.int32)


def entry_gaps(xp, x, exps):
    """int8 gap ``e_i - exponent(|a_ij|)`` per entry, clipped to [0, MAX_GAP]; NO_GAP for 0, inf, NaN.

    An entry with gap ``g`` satisfies ``2**(e_i-g-1) <= |a_ij| < 2**(e_i-g)`` (unclipped).
    """
    mag = xp.abs(x)
    keep = xp.isfinite(mag) & (mag > 0)
    _, ex = xp.frexp(xp.where(keep, mag, 1.0))
    gap = xp.clip(exps.reshape(-1, 1).astype(xp.int32) - ex, 0, MAX_GAP).astype(xp.int8)
    return xp.where(keep, gap, xp.int8(NO_GAP))


def spread_bits(xp, gaps, sum_rows=None) -> int:
    """Bits between the scale and the median nonzero entry, maximised over rows (0 if all are zero).

    The median gap of row i is the smallest ``g`` with ``2 * #{gap <= g} >= #{nonzero}``; the
    row's spread is ``g + 1`` (the median entry is at least ``2**(e_i-g-1)``). Found by a
    per-row binary search over ``g`` in [0, MAX_GAP]: seven counting passes over the int8 gaps.
    ``sum_rows(counts)`` adds the per-row counts of the other pieces of each row (an exact
    integer SUM-allreduce in a distributed run), so every piece agrees on the median.
    """
    sum_rows = sum_rows or (lambda counts: counts)
    rows = gaps.shape[0]
    total = sum_rows((gaps <= MAX_GAP).sum(axis=1, dtype=xp.int64))
    lo = xp.zeros(rows, dtype=xp.int32)
    hi = xp.full(rows, MAX_GAP, dtype=xp.int32)
    for _ in range(MAX_GAP.bit_length()):
        mid = (lo + hi) // 2
        below = sum_rows((gaps <= mid.reshape(-1, 1).astype(xp.int8)).sum(axis=1, dtype=xp.int64))
        enough = 2 * below >= total
        hi = xp.where(enough, mid, hi)
        lo = xp.where(enough, lo, mid + 1)
    nonzero = total > 0
    if rows == 0 or not bool(nonzero.any()):
        return 0
    return int(xp.where(nonzero, lo, -1).max()) + 1
