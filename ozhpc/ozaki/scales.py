"""Per-row scales and the exponent-spread statistic, written against ``xp``.

Both are computed from quantities that reduce exactly and order-free across
ranks (a MAX of row maxima, SUMs of integer counts), so every rank of a
distributed run derives the same exponents and picks the same slice count.
"""
from __future__ import annotations

from ..engines.base import BITS, DIGIT_MAX, MAX_GAP, NO_GAP, row_abs_max  # noqa: F401  (re-exported)

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


def spread_bits(xp, gaps, sum_rows=None, count_le=None) -> int:
    """Bits between the scale and the median nonzero entry, maximised over rows (0 if all are zero).

    The median gap of row i is the smallest ``g`` with ``2 * #{gap <= g} >= #{nonzero}``; the
    row's spread is ``g + 1`` (the median entry is at least ``2**(e_i-g-1)``). Found by a
    per-row binary search over ``g`` in [0, MAX_GAP]: seven counting passes over the int8 gaps.
    ``sum_rows(counts)`` adds the per-row counts of the other pieces of each row (an exact
    integer SUM-allreduce in a distributed run), so every piece agrees on the median.
    ``gaps`` come from :meth:`Engine.entry_gaps`; ``count_le(gaps, limits)`` is the engine's
    :meth:`Engine.count_gaps_le` (per-row counts of ``gaps <= limits``; exact integers, so
    every engine finds the same median).
    """
    sum_rows = sum_rows or (lambda counts: counts)
    count_le = count_le or (lambda g, lim: (g <= lim.reshape(-1, 1).astype(xp.int8)).sum(axis=1, dtype=xp.int64))
    rows = gaps.shape[0]
    total = sum_rows(count_le(gaps, xp.full(rows, MAX_GAP, dtype=xp.int32)))
    lo = xp.zeros(rows, dtype=xp.int32)
    hi = xp.full(rows, MAX_GAP, dtype=xp.int32)
    for _ in range(MAX_GAP.bit_length()):
        mid = (lo + hi) // 2
        below = sum_rows(count_le(gaps, mid))
        enough = 2 * below >= total
        hi = xp.where(enough, mid, hi)
        lo = xp.where(enough, lo, mid + 1)
    nonzero = total > 0
    if rows == 0 or not bool(nonzero.any()):
        return 0
    return int(xp.where(nonzero, lo, -1).max()) + 1
