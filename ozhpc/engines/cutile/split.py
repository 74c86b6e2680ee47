"""Scheme I's split: all int8 digit slices of a tile of rows, in one pass.

``D_p = rint(r_p * 2**(7(p+1)-e))``, ``r_{p+1} = r_p - D_p * 2**(e-7(p+1))``, computed on
``y_p = r_p * 2**(7p-e)``: ``y_0 = x * 2**-e``, ``D_p = rint(128 y_p)``, ``y_{p+1} = 128 y_p - D_p``.
``2**-e`` is applied as two factors ``2**a * 2**b`` (``a = -e >> 1``, each in the normal range, the
intermediate between x and y_0, so y_0 is exact unless it is below 2**-1022, when every digit is
zero either way: ``|128**p y_0| < 1/2`` for p < 145), and ``rint`` is the magic-constant add
(``|t| < 128`` here). ``128 y_p`` is exact, so contracting it into an FMA changes nothing, and
``128 y_p - D_p`` is exact (Sterbenz, or ``D_p = 0``). Bit for bit the NumPy engine's digits.
"""
from __future__ import annotations

import cuda.tile as ct

from ..digits import BITS
from ..kernel_store import stored_kernel
from .config import TileConfig, tile_grid
from .tile_math import RINT_MAGIC, BigArray, ConstBool, ConstInt, pow2, row_tile

_DIGIT_RADIX = float(2**BITS)       # 128: one slice's digits


@stored_kernel
def _split_kernel(X, EXPS, OUT: BigArray, nslices: int,
                  TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """All ``nslices`` int8 digit slices of a (TR, TC) tile of the rows of X (TRANS: see
    :func:`row_tile`).

    The tile is scaled once, ``y = x * 2**-e`` (two factors), then each slice is
    ``u = y * 128 + 1.5 * 2**52`` (one FMA; the low byte of ``u`` is the digit in two's
    complement: no float-to-int conversion), ``d = u - 1.5 * 2**52``, ``y = y * 128 - d``:
    three float64 operations per digit instead of five and a conversion (the C-ordered split
    had 131 registers, three CTAs per SM; now 96). Exact: see the module docstring.
    """
    bi = ct.bid(0)
    bj = ct.bid(1)
    x, e = row_tile(X, EXPS, bi, bj, TR, TC, TRANS)
    a = (-e) >> 1
    y = x * pow2(a) * pow2(-e - a)
    for p in range(nslices):
        u = y * _DIGIT_RADIX + RINT_MAGIC
        ct.store(OUT, (p, bi, bj), ct.bitcast(u, ct.int64).astype(ct.int8).reshape((1, TR, TC)))
        y = y * _DIGIT_RADIX - (u - RINT_MAGIC)


def launch(stream, cfg: TileConfig, x, trans: bool, exps, out, nslices: int) -> None:
    """``out`` (nslices, rows, cols) int8, every element written (zeros where x is padded)."""
    grid = tile_grid(out.shape[1], out.shape[2], cfg.split_rows, cfg.split_cols)
    ct.launch(stream, grid, _split_kernel,
              (x, exps, out, int(nslices), cfg.split_rows, cfg.split_cols, bool(trans)))
