"""The numbers of Ozaki scheme I that every engine and :mod:`ozhpc.ozaki` share: digit bits and
bounds, the gap codes of the "auto" statistic, and the final power-of-two scaling.

Digit definition (shared by all engines; :class:`NumpyEngine` is the
reference): for row ``i`` with exponent ``e_i`` and ``r_0 = a_ij``::

    y_p = r_p * 2**(BITS*(p+1) - e_i)            (scaling by a power of two)
    D_p = rint(y_p)                              (round half to even)
    r_{p+1} = (y_p - D_p) * 2**(e_i - BITS*(p+1))

Every step is exact in FP64 (``y_p - D_p`` removes the rounded top bits of
``y_p`` and needs no more bits than it had; it is at most 1/2, so scaling it
back cannot overflow even for rows near DBL_MAX). The only inexact case is an
entry over ~1000 bits below its row maximum in a row with ``e_i > 0``, whose
scaled value underflows: its digits are 0 in every slice either way. The
power-of-two scalings have exponents beyond +-1023 for tiny or huge rows: they
mean exact ``ldexp``, not a multiplication by an overflowed constant. With ``e_i`` from
:func:`ozhpc.ozaki.scales.exponents`, ``|D_0| <= 127`` and ``|D_p| <= 64`` for
``p >= 1``.
"""
from __future__ import annotations

BITS = 7
"""Bits per slice: digits of slice p weigh 2**(-BITS*(p+1)) relative to the row scale."""

DIGIT_MAX = 127
"""Largest |digit| of any slice (the first one; later slices stay within 64)."""

LATER_DIGIT_MAX = 2 ** (BITS - 1)
"""Largest |digit| of slices p >= 1: the remainder after a rounded digit is at most half a unit."""


MAX_GAP = 63
"""Exponent gaps are clipped here: a median entry 63 bits down already asks for the most slices."""
NO_GAP = 127
"""Gap code of zero and non-finite entries: never counted."""


GAP_HISTOGRAM_ENTRIES = 1 << 22
"""Gap entries per histogram chunk of :func:`count_gaps_le` (32 MiB of int64 bin indices)."""


def count_gaps_le(xp, gaps, limits):
    """``out[i, l] = #{j: gaps[i, j] <= limits[i, l]}`` (int64) for gap codes (NO_GAP never
    counts) and limits in [0, MAX_GAP]: one pass per chunk of rows (per-row histograms,
    cumulated), whatever the number of limits. The NumPy path: on CuPy a bincount histogram
    was slower than counting passes (bench/results/HISTORY.md, 2026-11-30), so
    the cuTile engine counts with its kernel and falls back here only off its layout."""
    limits = xp.asarray(limits).astype(xp.int64)
    rows, cols = gaps.shape
    bins = MAX_GAP + 1
    out = xp.zeros(limits.shape, dtype=xp.int64)
    step = max(1, GAP_HISTOGRAM_ENTRIES // max(1, cols))
    for r0 in range(0, rows, step):
        g = gaps[r0:r0 + step].astype(xp.int64)
        nr = g.shape[0]
        index = (xp.arange(nr, dtype=xp.int64).reshape(-1, 1) * bins + g)[g <= MAX_GAP]
        cum = xp.cumsum(xp.bincount(index, minlength=nr * bins).reshape(nr, bins), axis=1)
        out[r0:r0 + nr] = xp.take_along_axis(cum, limits[r0:r0 + nr], axis=1)
    return out


def row_abs_max(xp, x):
    """Max of |x| over the finite entries of each row (0 for an empty or all-zero row)."""
    if x.shape[1] == 0:
        return xp.zeros(x.shape[0], dtype=xp.float64)
    mag = xp.abs(x)
    return xp.where(xp.isfinite(mag), mag, 0.0).max(axis=1)


def exponents(xp, rowmax):
    """Row exponents ``e_i`` from the (global) row maxima of ``|x|`` (finite, >= 0).

    ``e_i`` is the smallest integer with ``rowmax_i < 2**e_i`` (0 for a zero row), plus one when
    the first digit of the row maximum would round to 128: then every first digit fits int8 and
    later digits stay within 64. Monotone in ``rowmax_i``, so the exponents of pieces of a row
    MAX-reduce to the whole row's.
    """
    _, e = xp.frexp(rowmax)
    e = e.astype(xp.int32, copy=False)   # int32 throughout: no conversion kernels on a GPU
    first = xp.rint(xp.ldexp(rowmax, BITS - e))
    return e + (first > DIGIT_MAX)


def digit_bound(p: int) -> int:
    return DIGIT_MAX if p == 0 else LATER_DIGIT_MAX


def group_product_bound(slices: int, ngroups: int) -> int:
    """Largest ``sum_{p+q=g} max|D_p| max|E_q|`` over groups g < ngroups.

    ``k`` times this bounds every partial sum of a group accumulator over k terms: the
    int32 accumulation of a k-chunk is exact while ``k_chunk * bound < 2**31``.
    """
    return max(sum(digit_bound(p) * digit_bound(g - p)
                   for p in range(max(0, g - slices + 1), min(g, slices - 1) + 1))
               for g in range(ngroups))


def group_weight_exponent(g: int) -> int:
    """Exponent of the scale shared by all pairs with p + q == g."""
    return -BITS * (g + 2)


DBL_MAX = 1.7976931348623157e308


def ldexp_by(xp, x, shift):
    """``ldexp(x, shift)`` (``shift`` broadcast against ``x``, e.g. one per row).

    A product with a normal power of two is correctly rounded, like ``ldexp``, so both give the
    same bits; the product is 3-4x faster in NumPy, ``ldexp`` covers shifts beyond the normal range.
    """
    shift = xp.asarray(shift)
    if shift.size == 0 or (int(shift.min()) >= -1022 and int(shift.max()) <= 1022):
        return x * xp.ldexp(xp.ones(shift.shape), shift.astype(xp.int32))
    return xp.ldexp(x, shift.astype(xp.int32))


def final_scale(xp, total, scale):
    """``ldexp(total, scale)``, the last step of every combine, with two BLAS details:

    * a zero result is +0.0 (a BLAS sums from +0.0, so a negative product that underflows, or
      terms that cancel, give +0.0): ``+ 0.0`` turns -0.0 into +0.0 and leaves the rest alone;
    * an overflow caused by the operands' rounding alone is no overflow: when the scaled total
      is at most ``2**1024`` (reached by rounding entries near DBL_MAX up to the grid, e.g.
      ``DBL_MAX * 1`` with fewer than 53 bits), the result is +-DBL_MAX; beyond, +-inf as in DGEMM.

    The cuTile kernels do the same (``cutile.tile_math.final_scale``).
    """
    import numpy as np

    with np.errstate(over="ignore"):  # an overflowing product is inf, as in DGEMM
        out = xp.ldexp(total, scale)
        over = xp.isinf(out) & xp.isfinite(total)
        if bool(over.any()):
            edge = xp.abs(xp.ldexp(total, scale - 1)) <= 2.0**1023
            out = xp.where(over & edge, xp.copysign(DBL_MAX, total), out)
    return out + 0.0


def magnitude_digits(xp, x, exps):
    """int8 ``rint(|x| 2**(BITS - e_i) - 1/2)`` per entry of finite ``x``: in [0, 127] (``|x| <
    2**e_i``) and never above ``|x| 2**(BITS - e_i)`` (the subtraction is exact where it matters),
    so products of these digits summed over k are a lower bound of ``(|A||B|)_ij 2**(2 BITS - e_i - f_j)``:
    the lower bound of the accuracy certificate, as one more int8 GEMM."""
    y = ldexp_by(xp, xp.abs(x), BITS - xp.asarray(exps).astype(xp.int64).reshape(-1, 1))
    return xp.rint(y - 0.5).astype(xp.int8)


def support_digits(xp, x, exps):
    """int8 ``ceil(|x| 2**(BITS - 1 - e_i))`` per entry of finite ``x``: in [0, 64], at least 1
    exactly where ``x != 0`` (also where the scaling underflows to 0: an entry 1000 bits below its
    row's scale is small, not zero), never below ``|x| 2**(BITS - 1 - e_i)``. Their products summed over k
    bound ``(|A||B|)_ij`` from above and vanish exactly where no k term has two nonzero factors
    (sparse operands): the certificate's per-entry error bound there."""
    y = ldexp_by(xp, xp.abs(x), BITS - 1 - xp.asarray(exps).astype(xp.int64).reshape(-1, 1))
    return xp.maximum(xp.ceil(y), (x != 0).astype(xp.float64)).astype(xp.int8)
