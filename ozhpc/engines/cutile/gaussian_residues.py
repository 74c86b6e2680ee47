"""Complex scheme II's split: the residue planes of complex rows modulo every complex modulus, in
one pass (:mod:`ozhpc.engines.gaussian`; the NumPy engine's ``gaussian_residues`` is the reference).

Each part of an entry becomes ``X = rint(x 2**(bits - e_i))`` as in scheme II's residue kernel
(:mod:`.residues`), and every plane is the unique balanced residue of a small exact combination of
the parts (split: ``Xr +- w Xi``; Karatsuba: ``Xr``, ``Xi``, ``Xr + Xi``), so the rounding of the
quotient estimates cannot change a plane: NumPy's bits.

**Two reductions per split modulus** (``bits <= NARROW_BITS``, the default plans' 53-56 bits): the
parts as balanced 14-bit limbs ``X = sum_j l_j 2**(14 j)`` (:func:`_limbs14`: ``|l_j| <= 2**13`` for
j < 3, ``|l_3| <= 2**(bits - 42)``), and per modulus the raw sums ``A = sum_j l_j^re c_j``, ``B = sum_j
l_j^im d_j`` with ``c_j = balanced(2**(14 j) mod p)`` (``c_0 = 1``) and ``d_j = balanced(w 2**(14 j) mod
p)``, all ``|c_j|, |d_j| <= 128``: ``A = Xr`` and ``B = w Xi`` modulo p, so the planes are the
residues of ``A + B`` and ``A - B``. With ``S = 3 * 2**13 + 2**(bits - 42)`` (the largest ``sum_j
|l_j|``), ``|A|, |B| <= 128 S`` and ``|A +- B| <= 256 S``, which is below ``2**24`` for bits <= 57
(``256 (3 * 2**13 + 2**15) = 14680064``; 58 bits give 23068672): every partial sum and both
combinations are exact float32 integers, each plane one float32 reduction
(:func:`_small_residue32`). A Karatsuba modulus likewise: ``reduce(A_re)``, ``reduce(A_im)``,
``reduce(A_re + A_im)`` (``A_im = sum_j l_j^im c_j``), three reductions.

Above 57 bits the parts' residues come first (``bits <= 63``: the real kernel's 16-bit float32 limbs,
:func:`.residues._float32_limbs`; otherwise float64 halves ``H 2**52 + L``), already balanced, then
the split planes ``reduce(xr +- w xi)`` and the Karatsuba ones ``xr``, ``xi``, ``reduce(xr + xi)``.
"""
from __future__ import annotations

import cuda.tile as ct

from .. import crt as crt_tables
from ..kernel_store import stored_kernel
from .config import tile_grid
from .residues import FLOAT32_RESIDUE_BITS, _float32_limbs, _float32_residue, _small_int8
from .tile_math import (RINT_MAGIC32, ZERO, BigArray, ConstBool, ConstInt, balanced, entry, pow2, rint_any,
                        rint_small)

RESIDUE_COLS = 32
"""Width of the residue table (its own layout, one tile load per modulus): columns 0-4 the real
table's ``p, fl(1/p), lo, hi, balanced(2**52 mod p)``, ``w`` (a root of -1 modulo p; 0 for a
Karatsuba modulus) at :data:`ROOT_COL`, ``fl32(1/p)`` at :data:`INV32_COL`, the real kernel's 16-bit
limb constants at ``LIMB_COL`` (12-14), ``c_1..c_3`` at :data:`LIMB14_COL` and ``d_0..d_3`` at
:data:`ROOT_LIMB14_COL` (module docstring), zeros elsewhere."""
ROOT_COL = 5
INV32_COL = 6
LIMB14_COL = 16
ROOT_LIMB14_COL = 20
LIMB14_BITS = 14
NARROW_BITS = 57
"""Up to this many bits, two float32 reductions per split modulus (module docstring)."""
_LIMB14_UP = (2.0**14, 2.0**28, 2.0**42)
_LIMB14_DOWN = (2.0**-14, 2.0**-28, 2.0**-42)
RESIDUE_TILE = (16, 64)
"""Rows x complex columns of a tile: the real residue kernel's 16 x 128 float64 entries."""
RESIDUE_OCCUPANCY = 3
"""CTAs per SM the compiler plans registers for (168 a thread, no spills; CPU AOT, sm_90). H200,
n = 16384, 16 split moduli, rows / transposed rows (``bench/speed/gaussian_kernels.py``,
2026-12-04): 8.7 / 9.1 ms at occupancy 3, 9.0 / 9.4 at 4, 13.4 / 14.3 at 5, 10.6 (rows) without a
hint (187 registers); the parts' residues first (the path above NARROW_BITS, four reductions per
split modulus) 11.4 / 11.7 at occupancy 4."""


def _parts(X, bi, bj, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """The real and imaginary parts (float64 (TR, TC) each) of tile (bi, bj) of complex rows held as
    float64 ``(rows, cols, 2)`` (TRANS: the transpose, ``(cols, rows, 2)``, read along its rows)."""
    if TRANS:
        t = ct.load(X, (bj, bi, 0), (TC, TR, 2), padding_mode=ZERO)
        re = ct.transpose(ct.extract(t, (0, 0, 0), (TC, TR, 1)).reshape((TC, TR)))
        im = ct.transpose(ct.extract(t, (0, 0, 1), (TC, TR, 1)).reshape((TC, TR)))
    else:
        t = ct.load(X, (bi, bj, 0), (TR, TC, 2), padding_mode=ZERO)
        re = ct.extract(t, (0, 0, 0), (TR, TC, 1)).reshape((TR, TC))
        im = ct.extract(t, (0, 0, 1), (TR, TC, 1)).reshape((TR, TC))
    return re, im


def _scaled(x, shift):
    """``rint(x 2**shift)``, exact (two exact power-of-two factors, then an integer)."""
    a = shift >> 1
    return rint_any(x * pow2(a) * pow2(shift - a))


def _part_residue(part, row, SHORT: ConstBool, FLOAT32: ConstBool):
    """The balanced residue of one part (``part``: its 16-bit float32 limbs, or its float64 halves
    ``(high, low)``): int8 and as a float tile (float32 with FLOAT32), exact."""
    if FLOAT32:
        r8 = _float32_residue(part, row)
        return r8, r8.astype(ct.float32)
    high, low = part
    if SHORT:
        r = balanced(high * entry(row, 4) + low, row)
    else:
        r = balanced(balanced(high, row) * entry(row, 4) + balanced(low, row), row)
    return _small_int8(r), r


def _plane(y, row, mod32, FLOAT32: ConstBool):
    """int8 balanced residue of an exact integer ``y`` (float32 ``|y| < 2**24`` with FLOAT32: one
    float32 reduction; else float64 ``|y| < 2**16``)."""
    if FLOAT32:
        return _small_residue32(y, mod32)
    return _small_int8(balanced(y, row))


def _modulus32(row):
    """``(p, fl32(1/p), lo, hi)`` of a table row as float32 (1, 1) tiles."""
    return (entry(row, 0).astype(ct.float32), entry(row, INV32_COL).astype(ct.float32),
            entry(row, 2).astype(ct.float32), entry(row, 3).astype(ct.float32))


def _small_residue32(y, mod32):
    """int8 balanced residue of exact float32 integers ``|y| <= 256 S < 2**23.9`` (module docstring):
    ``|y / p| < 2**19.7`` (every modulus p >= 19), so ``q = rint(fl(y fl32(1/p)))`` (two relative
    errors below ``2**-24``; a fused multiply-add only drops one; ``|y fl32(1/p)| < 2**22``, so adding
    ``1.5 * 2**23`` rounds it to an integer) is within ``1/2 + 2**-3.2`` of ``y / p``; ``y - q p`` is exact
    (``|q p| < |y| + p < 2**24``, integers) and lies within ``0.61 p`` of 0, so one fix-up each way
    gives the unique balanced residue. To int8 through the bits of ``r + 1.5 * 2**23`` (no conversion)."""
    p, inv, lo, hi = mod32
    q = (y * inv + RINT_MAGIC32) - RINT_MAGIC32
    r = y - q * p
    r = ct.where(r > hi, r - p, r)
    r = ct.where(r < lo, r + p, r)
    return ct.bitcast(r + RINT_MAGIC32, ct.int32).astype(ct.int8)


def _split_of(big):
    high = rint_small(big * (1.0 / crt_tables.SPLIT))
    return high, big - high * crt_tables.SPLIT


def _limbs14(big):
    """Balanced 14-bit limbs ``(l0, l1, l2, l3)`` (float32) of exact float64 integers ``|big| <=
    2**57``: ``big = sum_j l_j 2**(14 j)``, ``|l_j| <= 2**13`` for j < 3 and ``|l_3| <= 2**(bits - 42)``
    (rint of quotients below 2**51, the rests exact)."""
    l3 = rint_small(big * _LIMB14_DOWN[2])
    rest = big - l3 * _LIMB14_UP[2]
    l2 = rint_small(rest * _LIMB14_DOWN[1])
    rest = rest - l2 * _LIMB14_UP[1]
    l1 = rint_small(rest * _LIMB14_DOWN[0])
    rest = rest - l1 * _LIMB14_UP[0]
    return (rest.astype(ct.float32), l1.astype(ct.float32), l2.astype(ct.float32), l3.astype(ct.float32))


def _limb_sum(limbs, row, col: int, UNIT: ConstBool):
    """``sum_j limbs[j] k_j`` with the constants ``k_j`` (float32) from column ``col`` of a table row
    (UNIT: ``k_0 = 1`` is not stored, ``k_1..k_3`` are at ``col``): an exact float32 integer."""
    if UNIT:
        y = limbs[0]
        for j in ct.static_iter(range(1, 4)):
            y = y + limbs[j] * entry(row, col + j - 1).astype(ct.float32)
        return y
    y = limbs[0] * entry(row, col).astype(ct.float32)
    for j in ct.static_iter(range(1, 4)):
        y = y + limbs[j] * entry(row, col + j).astype(ct.float32)
    return y


def _store(OUT, g, bi, bj, r8, TR: ConstInt, TC: ConstInt):
    ct.store(OUT, (g, bi, bj), r8.reshape((1, TR, TC)))


@stored_kernel(occupancy=RESIDUE_OCCUPANCY)
def _gaussian_residue_kernel(X, EXPS, TAB, OUT: BigArray, nmod: int, nsplit: int, bits: int,
                             TR: ConstInt, TC: ConstInt, TRANS: ConstBool, SHORT: ConstBool, FLOAT32: ConstBool,
                             CONJ: ConstBool, NARROW: ConstBool):
    """Residue planes of ``X = rint(z 2**(bits - e_i))`` (``CONJ``: of ``conj(z)``) for a (TR, TC) tile
    of complex rows ``z``: planes ``2l, 2l + 1`` of split modulus l < nsplit (``xr + w xi``, ``xr - w
    xi``), then three per Karatsuba modulus (``xr``, ``xi``, ``xr + xi``). NARROW (``bits <=
    NARROW_BITS``): from the parts' 14-bit limbs, two float32 reductions per split modulus (module
    docstring); else FLOAT32 (``bits <= 63``): the parts' residues from their 16-bit float32 limbs
    (:func:`.residues._float32_limbs`); otherwise from their exact halves ``H 2**52 + L`` (SHORT:
    ``bits <= 80``, one reduction), as the real residue kernel. TAB: (N, RESIDUE_COLS)."""
    bi = ct.bid(0)
    bj = ct.bid(1)
    re, im = _parts(X, bi, bj, TR, TC, TRANS)
    shift = bits - ct.load(EXPS, (bi,), (TR,), padding_mode=ZERO).astype(ct.int64).reshape((TR, 1))
    big_re = _scaled(re, shift)
    big_im = _scaled(im, shift)
    if CONJ:
        big_im = -big_im
    if NARROW:
        limbs_re = _limbs14(big_re)
        limbs_im = _limbs14(big_im)
        for l in range(nsplit):
            row = ct.load(TAB, (l, 0), (1, RESIDUE_COLS))
            mod32 = _modulus32(row)
            a = _limb_sum(limbs_re, row, LIMB14_COL, True)
            b = _limb_sum(limbs_im, row, ROOT_LIMB14_COL, False)
            _store(OUT, 2 * l, bi, bj, _small_residue32(a + b, mod32), TR, TC)
            _store(OUT, 2 * l + 1, bi, bj, _small_residue32(a - b, mod32), TR, TC)
        for l in range(nsplit, nmod):
            row = ct.load(TAB, (l, 0), (1, RESIDUE_COLS))
            mod32 = _modulus32(row)
            g = 2 * nsplit + 3 * (l - nsplit)
            a = _limb_sum(limbs_re, row, LIMB14_COL, True)
            b = _limb_sum(limbs_im, row, LIMB14_COL, True)
            _store(OUT, g, bi, bj, _small_residue32(a, mod32), TR, TC)
            _store(OUT, g + 1, bi, bj, _small_residue32(b, mod32), TR, TC)
            _store(OUT, g + 2, bi, bj, _small_residue32(a + b, mod32), TR, TC)
    else:
        if FLOAT32:
            part_re = _float32_limbs(big_re)
            part_im = _float32_limbs(big_im)
        else:
            part_re = _split_of(big_re)
            part_im = _split_of(big_im)
        for l in range(nsplit):
            row = ct.load(TAB, (l, 0), (1, RESIDUE_COLS))
            mod32 = _modulus32(row)
            _, xr = _part_residue(part_re, row, SHORT, FLOAT32)
            _, xi = _part_residue(part_im, row, SHORT, FLOAT32)
            if FLOAT32:
                wxi = entry(row, ROOT_COL).astype(ct.float32) * xi
            else:
                wxi = entry(row, ROOT_COL) * xi
            _store(OUT, 2 * l, bi, bj, _plane(xr + wxi, row, mod32, FLOAT32), TR, TC)
            _store(OUT, 2 * l + 1, bi, bj, _plane(xr - wxi, row, mod32, FLOAT32), TR, TC)
        for l in range(nsplit, nmod):
            row = ct.load(TAB, (l, 0), (1, RESIDUE_COLS))
            mod32 = _modulus32(row)
            g = 2 * nsplit + 3 * (l - nsplit)
            xr8, xr = _part_residue(part_re, row, SHORT, FLOAT32)
            xi8, xi = _part_residue(part_im, row, SHORT, FLOAT32)
            _store(OUT, g, bi, bj, xr8, TR, TC)
            _store(OUT, g + 1, bi, bj, xi8, TR, TC)
            _store(OUT, g + 2, bi, bj, _plane(xr + xi, row, mod32, FLOAT32), TR, TC)


def launch(stream, x, trans: bool, exps, table, out, bits: int, nsplit: int, conj: bool,
           kernel=None, tile: tuple = RESIDUE_TILE, narrow: bool | None = None) -> None:
    """``x``: float64 ``(rows, cols, 2)`` (``trans``: ``(cols, rows, 2)``); ``table``: (N, RESIDUE_COLS);
    ``out``: int8 (planes, rows, cols) padded to whole tiles. ``kernel``, ``tile``, ``narrow`` (False:
    the parts' residues first even at ``bits <= NARROW_BITS``): another variant (a benchmark's; the
    same planes)."""
    rows, cols = tile
    narrow = bits <= NARROW_BITS if narrow is None else narrow and bits <= NARROW_BITS
    ct.launch(stream, tile_grid(out.shape[1], out.shape[2], rows, cols), kernel or _gaussian_residue_kernel,
              (x, exps, table, out, int(table.shape[0]), int(nsplit), int(bits), rows, cols, bool(trans),
               bits <= crt_tables.SHORT_BITS, bits <= FLOAT32_RESIDUE_BITS, bool(conj), bool(narrow)))
