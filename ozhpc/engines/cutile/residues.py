"""Scheme II's split: the balanced residues of the scaled rows modulo every modulus, in one pass.

Residues are unique balanced integers (reductions, then the canonical range), so how cuTile rounds
the quotient estimates or contracts ``y - q*p`` cannot change them: the NumPy engine's bits.
"""
from __future__ import annotations

import cuda.tile as ct

from .. import crt as crt_tables
from ..kernel_store import stored_kernel
from .config import TileConfig, tile_grid
from .tile_math import (LIMB_COL, RINT_MAGIC, RINT_MAGIC32, TABLE_COLS, BigArray, ConstBool, ConstInt,
                        balanced, entry, pow2, rint_any, rint_small, row_tile)

_LIMB_UP = (2.0**16, 2.0**32, 2.0**48)
_LIMB_DOWN = (2.0**-16, 2.0**-32, 2.0**-48)
FLOAT32_RESIDUE_BITS = 63
"""Up to this many bits the residue kernel works in float32: ``X = sum_j l_j 2**(16 j)`` with
balanced limbs ``|l_j| <= 2**15`` (j < 4), so ``sum_j l_j (2**(16 j) mod p)`` (constants at most
128 in magnitude) is an integer below ``2**15 * 385 < 2**24``: exact in float32."""


def _float32_limbs(big):
    """Balanced 16-bit limbs ``(l0, l1, l2, l3)`` (float32) of exact float64 integers
    ``|big| <= 2**63``: ``big = sum_j l_j 2**(16 j)``, each ``|l_j| <= 2**15`` (rint of a quotient
    below 2**51, the rests exact)."""
    l3 = rint_small(big * _LIMB_DOWN[2])
    rest = big - l3 * _LIMB_UP[2]
    l2 = rint_small(rest * _LIMB_DOWN[1])
    rest = rest - l2 * _LIMB_UP[1]
    l1 = rint_small(rest * _LIMB_DOWN[0])
    rest = rest - l1 * _LIMB_UP[0]
    return (rest.astype(ct.float32), l1.astype(ct.float32), l2.astype(ct.float32),
            l3.astype(ct.float32))


def _float32_residue(limbs, row):
    """Balanced residue (int8) of ``sum_j limbs[j] 2**(16 j)`` modulo ``p`` (``row``: the modulus's
    float64 table row), in float32: ``y = sum_j l_j c_j`` (``c_j = balanced(2**(16 j) mod p)``) is an
    exact integer, ``|y| < 2**24`` (:data:`FLOAT32_RESIDUE_BITS`); the quotient ``q = rint(fl(y *
    fl(1/p)))`` (relative error below 2**-22, ``|y / p| < 2**20`` for p > 16) is within 5/8 of ``y / p``,
    so ``y - q p`` (exact) lies within 5/8 p of 0 and one fix-up each way puts it in [lo, hi]: the
    unique balanced residue. To int8 through the bits of ``r + 1.5 * 2**23`` (no conversion)."""
    p = entry(row, 0).astype(ct.float32)
    y = limbs[0]
    for j in ct.static_iter(range(1, 4)):
        y = y + limbs[j] * entry(row, LIMB_COL + j - 1).astype(ct.float32)
    inv = ct.full((1, 1), 1.0, ct.float32) / p
    q = (y * inv + RINT_MAGIC32) - RINT_MAGIC32
    r = y - q * p
    r = ct.where(r > entry(row, 3).astype(ct.float32), r - p, r)
    r = ct.where(r < entry(row, 2).astype(ct.float32), r + p, r)
    return ct.bitcast(r + RINT_MAGIC32, ct.int32).astype(ct.int8)


def _small_int8(r):
    """Exact integers in [-128, 127] (float64) to int8: the low bits of ``r + 1.5 * 2**52``
    are r in two's complement (an add and a truncation instead of a float-to-int conversion)."""
    return ct.bitcast(r + RINT_MAGIC, ct.int64).astype(ct.int8)


@stored_kernel
def _residue_kernel(X, EXPS, TAB, OUT: BigArray, nmod: int, bits: int,
                    TR: ConstInt, TC: ConstInt, TRANS: ConstBool, SHORT: ConstBool, FLOAT32: ConstBool):
    """Scheme II: balanced residues of ``X = rint(x * 2**(bits - e_i))`` modulo each of the
    ``nmod`` moduli in TAB, for a (TR, TC) tile of the rows of X (TRANS as in the split).

    FLOAT32 (``bits <= 63``): X as four balanced 16-bit limbs, every residue in float32
    (:func:`_float32_residue`; float64 arithmetic bounded the kernel: about ten float64
    operations per residue). Otherwise ``X`` (up to 2**100) is split exactly as
    ``H * 2**52 + L``; its residue is ``balanced(balanced(H) * (2**52 mod p) + balanced(L))``,
    or with SHORT (``bits <= 80``: ``|H * (2**52 mod p)| < 2**35``, so ``H * c + L`` is an exact
    integer below 2**52) ``balanced(H * (2**52 mod p) + L)``: the same unique residue with one
    reduction.
    """
    bi = ct.bid(0)
    bj = ct.bid(1)
    x, e = row_tile(X, EXPS, bi, bj, TR, TC, TRANS)
    shift = bits - e
    a = shift >> 1
    big = rint_any(x * pow2(a) * pow2(shift - a))
    # The next modulus's table row is loaded before this one's arithmetic (as in the CRT kernel).
    row_next = ct.load(TAB, (0, 0), (1, TABLE_COLS))
    if FLOAT32:
        limbs = _float32_limbs(big)
        for l in range(nmod):
            row = row_next
            row_next = ct.load(TAB, (min(l + 1, nmod - 1), 0), (1, TABLE_COLS))
            ct.store(OUT, (l, bi, bj), _float32_residue(limbs, row).reshape((1, TR, TC)))
    else:
        high = rint_small(big * (1.0 / crt_tables.SPLIT))
        low = big - high * crt_tables.SPLIT
        for l in range(nmod):
            row = row_next
            row_next = ct.load(TAB, (min(l + 1, nmod - 1), 0), (1, TABLE_COLS))
            if SHORT:
                r = balanced(high * entry(row, 4) + low, row)
            else:
                r = balanced(balanced(high, row) * entry(row, 4) + balanced(low, row), row)
            ct.store(OUT, (l, bi, bj), _small_int8(r).reshape((1, TR, TC)))


def launch(stream, cfg: TileConfig, x, trans: bool, exps, table, out, bits: int) -> None:
    grid = tile_grid(out.shape[1], out.shape[2], cfg.residue_rows, cfg.residue_cols)
    ct.launch(stream, grid, _residue_kernel,
              (x, exps, table, out, int(out.shape[0]), int(bits), cfg.residue_rows, cfg.residue_cols,
               bool(trans), bits <= crt_tables.SHORT_BITS, bits <= FLOAT32_RESIDUE_BITS))
