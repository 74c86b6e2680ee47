"""Tile maths shared by the cuTile kernels (inlined into them): exact powers of two, ``ldexp``
with one rounding, ``rint``, the row tiles and their exponents, and scheme II's constant table.

cuTile has no ``ldexp``/``rint``: powers of two are built by bitcasting ``(x + 1023) << 52``, and
``rint`` is ``(t + 1.5*2**52) - 1.5*2**52`` (exact round-half-even for ``|t| < 2**51``).
"""
from __future__ import annotations

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]
BigArray = ct.IndexedWithInt64
ZERO = ct.PaddingMode.ZERO

RINT_MAGIC = 6755399441055744.0   # 1.5 * 2**52
RINT_MAGIC32 = 12582912.0         # 1.5 * 2**23: float32 t + this has the bits RINT_MAGIC32_BITS + rint(t)
RINT_MAGIC32_BITS = 0x4B400000    # for |t| < 2**22
TWO52 = 4503599627370496.0        # 2**52


# ----------------------------------------------------------------------------------------
# Powers of two, ldexp, rint
# ----------------------------------------------------------------------------------------

def pow2(e):
    """``2.0**e`` for an int64 tile ``e`` in [-1022, 1023], exactly (bitcast of the exponent field)."""
    return ct.bitcast((e + 1023) << 52, ct.float64)


def pow2_const(e: int):
    """``2.0**e`` as a float64 (1, 1) tile, for a constant ``e`` in [-1022, 1023]."""
    return pow2(ct.full((1, 1), e, ct.int64))


def ldexp(x, sc):
    """``np.ldexp(x, sc)`` with one rounding, for float64 ``x`` that is 0 or has
    ``2**-400 <= |x| < 2**900`` and int64 ``sc``.

    Normal results: ``x * 2**a * 2**b`` (both factors of one sign, the intermediate
    between x and the result, so exact up to an overflow that the result has too).
    Subnormal results: ``rint(|x| * 2**(sc+1074))`` on the integer grid, then times
    2**-1074 (exact). ``sc`` is clamped to [-2044, 2046], which changes no result for
    such ``x`` (all overflow, or all underflow to a signed zero).
    """
    sc = ct.minimum(ct.maximum(sc, -2044), 2046)
    ex = ((ct.bitcast(x, ct.int64) >> 52) & 0x7FF) - 1023
    a = sc >> 1
    normal = x * pow2(a) * pow2(sc - a)
    y = ct.abs(x) * pow2(ct.minimum(sc + 1074, 1023))
    r = (y + TWO52) - TWO52
    r = ct.where(x < 0.0, -r, r)
    sub = r * pow2(ct.full((1, 1), -52, ct.int64)) * pow2(ct.full((1, 1), -1022, ct.int64))
    return ct.where(ex + sc >= -1022, normal, sub)


def final_scale(x, sc):
    """``engines.digits.final_scale``: :func:`ldexp`, then the two BLAS details -- +-DBL_MAX
    where only the operands' rounding made the result overflow (``|x 2**(sc-1)| <= 2**1023``),
    and +0.0 for a zero (a BLAS sums from +0.0). Selects, not arithmetic, so no compiler
    folding can change them."""
    out = ldexp(x, sc)
    dbl_max = ct.bitcast(ct.full((1, 1), 0x7FEFFFFFFFFFFFFF, ct.int64), ct.float64)
    clamp = (ct.abs(out) > dbl_max) & (ct.abs(ldexp(x, sc - 1)) <= pow2_const(1023))
    out = ct.where(clamp, ct.where(x < 0.0, -dbl_max, dbl_max), out)
    return ct.where(out == 0.0, 0.0, out)


def rint_small(t):
    """``rint(t)`` (half to even) for ``|t| < 2**51``."""
    return (t + RINT_MAGIC) - RINT_MAGIC


def rint_any(t):
    """``rint(t)`` for any finite float64 (``|t| >= 2**52`` is already an integer)."""
    mag = ct.abs(t)
    r = (mag + TWO52) - TWO52
    r = ct.where(t < 0.0, -r, r)
    return ct.where(mag >= TWO52, t, r)


# ----------------------------------------------------------------------------------------
# Row tiles and exponents
# ----------------------------------------------------------------------------------------

def row_tile(X, EXPS, bi, bj, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """Tile (bi, bj) of the rows of X as float64 (TR, TC), and its row exponents as int64 (TR, 1).

    TRANS: X holds the transpose of the rows (a C-contiguous (cols, rows) array); the tile is
    read along its contiguous axis and transposed in registers.
    """
    if TRANS:
        x = ct.transpose(ct.load(X, (bj, bi), (TC, TR), padding_mode=ZERO))
    else:
        x = ct.load(X, (bi, bj), (TR, TC), padding_mode=ZERO)
    return x, ct.load(EXPS, (bi,), (TR,), padding_mode=ZERO).astype(ct.int64).reshape((TR, 1))


def row_col_scale(RE, CE, bm, bn, TM: ConstInt, TN: ConstInt):
    re = ct.load(RE, (bm,), (TM,), padding_mode=ZERO).astype(ct.int64).reshape((TM, 1))
    ce = ct.load(CE, (bn,), (TN,), padding_mode=ZERO).astype(ct.int64).reshape((1, TN))
    return re + ce


# ----------------------------------------------------------------------------------------
# Scheme II's constant table (residue and CRT kernels)
# ----------------------------------------------------------------------------------------

TABLE_COLS = 16
"""Row layout of the scheme II constant table (one row per modulus, one tile load per row):
``p, fl(1/p), lo, hi, balanced(2**52 mod p)``, the pieces of ``W_l`` (up to 7, columns 5-11),
``balanced(2**16 mod p), balanced(2**32 mod p), balanced(2**48 mod p)`` (columns 12-14), zero."""
WEIGHT_COL = 5
LIMB_COL = 12
LIMB_BITS = 16
MP_COLS = 8
"""The pieces of M as one (1, 8) zero-padded row (tile shapes are powers of two)."""


def entry(row, i: int):
    """Column ``i`` of a (1, TABLE_COLS) table row as a (1, 1) tile."""
    return ct.extract(row, (0, i), (1, 1))


def balanced(y, row):
    """Balanced residue of exact integers ``|y| <= 2**53 - 2**10`` modulo ``p`` (``row``: the
    modulus's table row): one reduction and the range fix-ups, step 1 of :mod:`ozhpc.engines.crt`
    (unique, so the rounding of the quotient does not matter)."""
    p = entry(row, 0)
    r = y - rint_small(y * entry(row, 1)) * p
    r = ct.where(r > entry(row, 3), r - p, r)
    return ct.where(r < entry(row, 2), r + p, r)
