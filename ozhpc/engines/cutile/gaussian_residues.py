"""Complex scheme II's split: the residue planes of complex rows modulo every complex modulus, in
one pass (:mod:`ozhpc.engines.gaussian`; the NumPy engine's ``gaussian_residues`` is the reference).

Each part of an entry becomes ``X = rint(x 2**(bits - e_i))`` as in scheme II's residue kernel
(:mod:`.residues`, whose float32 limb path this reuses), its residue modulo p a balanced integer;
the planes are small exact combinations of the two parts' residues (split: ``xr +- w xi``;
Karatsuba: ``xr``, ``xi``, ``xr + xi``), reduced again. Every value is a unique balanced residue,
so the rounding of the quotient estimates cannot change a plane: NumPy's bits.
"""
from __future__ import annotations

import cuda.tile as ct

from .. import crt as crt_tables
from ..kernel_store import stored_kernel
from .config import tile_grid
from .residues import FLOAT32_RESIDUE_BITS, _float32_limbs, _float32_residue, _small_int8
from .tile_math import (RINT_MAGIC32, TABLE_COLS, ZERO, BigArray, ConstBool, ConstInt, balanced, entry, pow2, rint_any,
                        rint_small)

ROOT_COL = 5
"""Column of ``w`` (a root of -1 modulo p; 0 for a Karatsuba modulus) in the residue table: the
real table's columns 0-4 (``p, fl(1/p), lo, hi, balanced(2**52 mod p)``) and its limb constants
(``LIMB_COL``) are where the real residue kernel reads them."""
RESIDUE_TILE = (16, 64)
"""Rows x complex columns of a tile: the real residue kernel's 16 x 128 float64 entries."""


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
    """The balanced residue of one part (``part``: its float32 limbs, or its float64 halves ``(high,
    low)``) as a float tile (float32 with FLOAT32), exact."""
    if FLOAT32:
        return _float32_residue(part, row).astype(ct.float32)
    high, low = part
    if SHORT:
        return balanced(high * entry(row, 4) + low, row)
    return balanced(balanced(high, row) * entry(row, 4) + balanced(low, row), row)


def _plane(y, row, mod32, FLOAT32: ConstBool):
    """int8 balanced residue of a small exact integer ``y`` (``|y| < 2**16``): one float32 reduction
    (``mod32``: the modulus's ``p, fl32(1/p), lo, hi`` as float32 (1, 1) tiles), or the float64 one."""
    if FLOAT32:
        return _small_residue32(y, mod32)
    return _small_int8(balanced(y, row))


def _modulus32(row):
    """``(p, fl32(1/p), lo, hi)`` of a table row as float32 (1, 1) tiles, made once per modulus."""
    p = entry(row, 0).astype(ct.float32)
    return p, ct.full((1, 1), 1.0, ct.float32) / p, entry(row, 2).astype(ct.float32), entry(row, 3).astype(ct.float32)


def _small_residue32(y, mod32):
    """int8 balanced residue of exact float32 integers ``|y| < 2**16``: ``q = rint(fl(y fl(1/p)))`` is
    within ``1/2 + 2**-7`` of ``y / p`` (``|y / p| < 2**12``, relative errors below ``2**-23``), so
    ``y - q p`` (exact) lies within ``0.51 p`` of 0 and one fix-up each way gives the unique balanced
    residue (as :func:`.residues._float32_residue`, whose single-limb case this is)."""
    p, inv, lo, hi = mod32
    q = (y * inv + RINT_MAGIC32) - RINT_MAGIC32
    r = y - q * p
    r = ct.where(r > hi, r - p, r)
    r = ct.where(r < lo, r + p, r)
    return ct.bitcast(r + RINT_MAGIC32, ct.int32).astype(ct.int8)


def _split_of(big):
    high = rint_small(big * (1.0 / crt_tables.SPLIT))
    return high, big - high * crt_tables.SPLIT


@stored_kernel
def _gaussian_residue_kernel(X, EXPS, TAB, OUT: BigArray, nmod: int, nsplit: int, bits: int,
                             TR: ConstInt, TC: ConstInt, TRANS: ConstBool, SHORT: ConstBool, FLOAT32: ConstBool,
                             CONJ: ConstBool):
    """Residue planes of ``X = rint(z 2**(bits - e_i))`` (``CONJ``: of ``conj(z)``) for a (TR, TC) tile
    of complex rows ``z``: planes ``2l, 2l + 1`` of split modulus l < nsplit (``xr + w xi``, ``xr - w
    xi``), then three per Karatsuba modulus (``xr``, ``xi``, ``xr + xi``). FLOAT32 (``bits <= 63``): the
    parts as float32 limbs (:func:`.residues._float32_limbs`); otherwise their exact halves
    ``H 2**52 + L`` (SHORT: ``bits <= 80``, one reduction), as the real residue kernel."""
    bi = ct.bid(0)
    bj = ct.bid(1)
    re, im = _parts(X, bi, bj, TR, TC, TRANS)
    shift = bits - ct.load(EXPS, (bi,), (TR,), padding_mode=ZERO).astype(ct.int64).reshape((TR, 1))
    big_re = _scaled(re, shift)
    big_im = _scaled(im, shift)
    if CONJ:
        big_im = -big_im
    if FLOAT32:
        part_re = _float32_limbs(big_re)
        part_im = _float32_limbs(big_im)
    else:
        part_re = _split_of(big_re)
        part_im = _split_of(big_im)
    for l in range(nsplit):
        row = ct.load(TAB, (l, 0), (1, TABLE_COLS))
        mod32 = _modulus32(row)
        xr = _part_residue(part_re, row, SHORT, FLOAT32)
        xi = _part_residue(part_im, row, SHORT, FLOAT32)
        if FLOAT32:
            wxi = entry(row, ROOT_COL).astype(ct.float32) * xi
        else:
            wxi = entry(row, ROOT_COL) * xi
        ct.store(OUT, (2 * l, bi, bj), _plane(xr + wxi, row, mod32, FLOAT32).reshape((1, TR, TC)))
        ct.store(OUT, (2 * l + 1, bi, bj), _plane(xr - wxi, row, mod32, FLOAT32).reshape((1, TR, TC)))
    for l in range(nsplit, nmod):
        row = ct.load(TAB, (l, 0), (1, TABLE_COLS))
        mod32 = _modulus32(row)
        g = 2 * nsplit + 3 * (l - nsplit)
        xr = _part_residue(part_re, row, SHORT, FLOAT32)
        xi = _part_residue(part_im, row, SHORT, FLOAT32)
        ct.store(OUT, (g, bi, bj), _plane(xr, row, mod32, FLOAT32).reshape((1, TR, TC)))
        ct.store(OUT, (g + 1, bi, bj), _plane(xi, row, mod32, FLOAT32).reshape((1, TR, TC)))
        ct.store(OUT, (g + 2, bi, bj), _plane(xr + xi, row, mod32, FLOAT32).reshape((1, TR, TC)))


def launch(stream, x, trans: bool, exps, table, out, bits: int, nsplit: int, conj: bool) -> None:
    """``x``: float64 ``(rows, cols, 2)`` (``trans``: ``(cols, rows, 2)``); ``table``: (N, TABLE_COLS);
    ``out``: int8 (planes, rows, cols) padded to whole tiles."""
    rows, cols = RESIDUE_TILE
    ct.launch(stream, tile_grid(out.shape[1], out.shape[2], rows, cols), _gaussian_residue_kernel,
              (x, exps, table, out, int(table.shape[0]), int(nsplit), int(bits), rows, cols, bool(trans),
               bits <= crt_tables.SHORT_BITS, bits <= FLOAT32_RESIDUE_BITS, bool(conj)))
