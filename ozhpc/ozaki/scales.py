"""Per-row scales and the exponent-spread statistic, written against ``xp``.

Both are computed from quantities that reduce exactly and order-free across
ranks (a MAX of row maxima, a SUM of integer histogram counts), so every rank
of a distributed run derives the same exponents and picks the same slice count.
"""
from __future__ import annotations

from ..engines.base import BITS, DIGIT_MAX

SPREAD_BINS = 64
"""Histogram bins of the exponent gap ``e_i - exponent(|a_ij|)``; the last one collects the rest."""


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


def spread_histogram(xp, x, exps):
    """Integer counts, per row, of the gap between the row exponent and each nonzero entry.

    Bin ``g`` counts finite nonzero entries with ``2**(e_i-g-1) <= |a_ij| < 2**(e_i-g)``
    (the last bin also takes everything smaller). Counts are exact integers, so
    partial histograms of a row's pieces add up exactly in any order.
    """
    rows = x.shape[0]
    hist = xp.zeros((rows, SPREAD_BINS), dtype=xp.int64)
    if x.size == 0:
        return hist
    mag = xp.abs(x)
    keep = xp.isfinite(mag) & (mag > 0)
    _, ex = xp.frexp(xp.where(keep, mag, 1.0))
    gap = xp.clip(exps.reshape(-1, 1).astype(xp.int64) - ex, 0, SPREAD_BINS - 1)
    idx = (xp.arange(rows, dtype=xp.int64).reshape(-1, 1) * SPREAD_BINS + gap)[keep]
    counts = xp.bincount(idx, minlength=rows * SPREAD_BINS)
    return counts.reshape(rows, SPREAD_BINS).astype(xp.int64)


def spread_bits(hist) -> int:
    """Bits between the largest and the median nonzero magnitude, over all rows.

    For row i the median nonzero entry lies in gap bin ``g``, i.e. is at least
    ``2**(e_i-g-1)``; the row's spread is ``g + 1``. Returns the max over rows
    (0 when every row is zero). ``hist`` is a NumPy array.
    """
    import numpy as np

    hist = np.asarray(hist)
    total = hist.sum(axis=1)
    nonzero = total > 0
    if not nonzero.any():
        return 0
    cum = np.cumsum(hist[nonzero], axis=1)
    median_bin = (cum * 2 < total[nonzero, None]).sum(axis=1)
    return int(median_bin.max()) + 1
