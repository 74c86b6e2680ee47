"""The operands' statistics that the scales, the plan and the certificate read, as reference code
written against ``xp`` (numpy or cupy): every engine's kernels give these bits.

* :func:`row_summary`: one operand's rows in one pass (one process holds whole rows): the row
  exponents (the scales), the inf/NaN count and, relative to those exponents, the row sizes of
  :func:`magnitude_stats`; :data:`FIELDS` names the rows of its int64 result;
* :func:`magnitude_stats`: the row sizes for given (global) exponents;
* :func:`representation_error`: what a plan's split leaves out of each entry;
* :func:`inner_stats`: per k index, the exponent range the equilibration balances.

All integer results are exact (sums of integers, maxima); the one float statistic, the
representation error, is a maximum of exactly rounded values. So every engine, and every split of
the rows over ranks (SUM / MAX reductions of these), gives the same numbers.
"""
from __future__ import annotations

from .digits import BITS, exponents, ldexp_by, row_abs_max

NORM_BITS = 32
"""Fixed point of the row 1-norms: sums of ``ceil(|x| 2**(32 - e))`` are exact int64 for k < 2**30."""
GAP_MAX = 63
"""Gaps are clipped here (an entry 63 bits below its scale already asks for the most bits)."""
NONE_EXP = -4096
"""Exponent code of a column / row with no nonzero finite entry (:func:`inner_stats`)."""
TINY = 2.0**-800
"""Added to every nonzero representation error (:func:`representation_error`): covers the rounding
of an ``ldexp`` that underflows (at most 2**-1075, times at most 2**168 for 24 slices), and keeps
the bounds built from it (times ``2**-32`` units and ``2**-w``) normal numbers."""

FIELDS = ("exp", "nonfinite", "norm", "nnz", "sq", "gaps")
"""Rows of a :func:`row_summary`: the row exponent, the count of inf/NaN entries, then
:func:`magnitude_stats` (``norm``, ``nnz``, ``sq``, ``gaps``) of the finite part."""
EXP, NONFINITE, NORM, NNZ, SQ, GAPS = range(len(FIELDS))


def magnitude_stats(xp, x, exps):
    """int64 ``(4, rows)``: ``norm``, ``nnz``, ``sq``, ``gaps`` per row of the finite part ``x``
    for row exponents ``exps``, exact: ``norm = sum_t ceil(|x_t| 2**(NORM_BITS - e)) + nnz``, the
    count of nonzeros, ``sq = sum_t ceil((x_t 2**-e)**2 2**32) + nnz`` >= ``||x 2**-e||_2**2 2**32``
    (each ``ldexp`` and the square round to nearest; the ``+ 1`` per entry covers them), and
    ``gaps = sum_t min(e - frexp_exponent(x_t), GAP_MAX)`` over the nonzeros (bits between the row
    scale and each entry; their mean is "auto"'s statistic). Sums over pieces of a row add up."""
    e = xp.asarray(exps).astype(xp.int64).reshape(-1, 1)
    a = xp.abs(x)
    scaled = xp.ceil(ldexp_by(xp, a, NORM_BITS - e))
    y = ldexp_by(xp, a, -e)
    squares = xp.ceil(xp.ldexp(y * y, NORM_BITS))
    nonzero = x != 0
    nnz = nonzero.sum(axis=1).astype(xp.int64)
    _, ex = xp.frexp(xp.where(nonzero, x, 1.0))
    gaps = xp.where(nonzero, xp.clip(e - ex.astype(xp.int64), 0, GAP_MAX), 0)
    return xp.stack([scaled.astype(xp.int64).sum(axis=1) + nnz, nnz,
                     squares.astype(xp.int64).sum(axis=1) + nnz, gaps.sum(axis=1).astype(xp.int64)])


def row_summary(xp, x, exps=None):
    """int64 ``(len(FIELDS), rows)`` of one operand's rows (any values, inf/NaN counted and
    otherwise left out): the exponents :func:`~ozhpc.engines.digits.exponents` gives the rows'
    largest finite ``|x|`` (or ``exps``, the global ones, when given), the inf/NaN count, and
    :func:`magnitude_stats` for those exponents. Exponents of pieces of a row MAX-reduce to the
    whole row's (``exponents`` is monotone in the maximum)."""
    finite = xp.isfinite(x)
    bad = (~finite).sum(axis=1).astype(xp.int64)
    e = exponents(xp, row_abs_max(xp, x)) if exps is None else xp.asarray(exps)
    fin = x if not bool(bad.any()) else xp.where(finite, x, 0.0)
    return xp.concatenate([xp.stack([e.astype(xp.int64), bad]), magnitude_stats(xp, fin, e)])


def representation_error(xp, x, exps, steps):
    """``|x - repr(x)| 2**(w - e_i)`` per entry (in [0, 1/2]; ``w`` the grid's bits below the row
    scale), recomputed with the split's exact steps ``steps = (shift, digits)``: ``y = x 2**(shift
    - e)``, then ``digits`` 7-bit digits taken off (the remainder; scheme I), or none (``|y -
    rint(y)|``; scheme II). 0 only for entries on the grid (zeros among them); every other entry
    gets at least :data:`TINY`: a nonzero entry whose scaling underflows to 0 is not on the grid
    (its error is all of it, below 2**-1074 of the scale); read as 0 it would certify a false C."""
    e = xp.asarray(exps).astype(xp.int64).reshape(-1, 1)
    shift, digits = steps
    y = scaled = ldexp_by(xp, x, shift - e)
    if digits:
        for _ in range(digits):
            y = y * float(2**BITS)
            y = y - xp.rint(y)
        err = xp.abs(y)
    else:
        err = xp.abs(y - xp.rint(y))
    return xp.where((x != 0) & ((err > 0) | (scaled == 0)), err + TINY, err)


def representation_errors(xp, x, exps, steps):
    """Row maxima of :func:`representation_error` (float64 per row; 0 for an empty row)."""
    if x.shape[1] == 0:
        return xp.zeros(x.shape[0], dtype=xp.float64)
    return representation_error(xp, x, exps, steps).max(axis=1)


def inner_stats(xp, rows):
    """int32 (2, k): per column t of ``rows`` (op(A) or op(B)^T), the largest frexp exponent of a
    nonzero finite entry, and minus the lowest bit any of them can hold (``max(ex - 53, -1074)``);
    :data:`NONE_EXP` where there is none. Both MAX-reduce (exactly) over pieces of the k index."""
    if rows.shape[0] == 0:
        return xp.full((2, rows.shape[1]), NONE_EXP, dtype=xp.int32)
    mag = xp.abs(rows)
    keep = xp.isfinite(mag) & (mag > 0)
    _, ex = xp.frexp(xp.where(keep, mag, 1.0))
    ex = ex.astype(xp.int32)
    both = xp.stack([xp.where(keep, ex, NONE_EXP), xp.where(keep, -xp.maximum(ex - 53, -1074), NONE_EXP)])
    return both.max(axis=1).astype(xp.int32)
