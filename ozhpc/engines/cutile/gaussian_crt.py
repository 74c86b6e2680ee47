"""Complex scheme II's combine: both components of C from the int8 product residues, the real CRT's
steps 2-5 (:mod:`ozhpc.engines.crt`) on each component's plane combinations with folded weights
(:mod:`ozhpc.engines.gaussian`); the NumPy engine's ``combine_gaussian`` in the same order.

One kernel writes both components: each modulus's planes are read once (two per split modulus,
three per Karatsuba one), and C is stored as float64 ``(m, n, 2)`` tiles, the layout of a complex128
matrix. The combinations ``c_l`` are exact (``|c_l| <= 384``), every term ``c_l W'_l[t]`` an exact
integer below ``2**45``: the same piece sums as NumPy's, so the same bits.
"""
from __future__ import annotations

import cuda.tile as ct

from ..kernel_store import stored_kernel
from .config import tile_grid
from .crt import reconstruct
from .tile_math import TABLE_COLS, WEIGHT_COL, ZERO, BigArray, ConstInt, entry, final_scale, row_col_scale

CRT_TILE = (16, 32)
"""Rows x columns of C per block: half the real CRT kernel's 16 x 64, for two components' piece
sums (2 x 4 float64 per entry at 53-56 bits) in registers."""
CRT_OCCUPANCY = 4


def _plane(ACC, g, bm, bn, TM: ConstInt, TN: ConstInt):
    return ct.load(ACC, (g, bm, bn), (1, TM, TN), padding_mode=ZERO).reshape((TM, TN)).astype(ct.float64)


def _add_weighted(s, c, row, PIECES: ConstInt):
    """``s[t] + c W[t]`` for the pieces of a table row's weights (exact: integers below 2**51)."""
    return tuple(s[t] + c * entry(row, WEIGHT_COL + t) for t in ct.static_iter(range(PIECES)))


@stored_kernel(occupancy=CRT_OCCUPANCY)
def _gaussian_crt_kernel(ACC: BigArray, RE, CE, TABR, TABI, MP, INVM, C: BigArray, shift: int, nmod: int,
                         nsplit: int, TM: ConstInt, TN: ConstInt, PIECES: ConstInt):
    """C (float64 ``(m, n, 2)``) of a (TM, TN) block from the int8 residues ACC (planes, m, n): split
    modulus l < nsplit has planes ``2l, 2l + 1`` (``U, V``: ``c_re = U + V``, ``c_im = U - V``), the
    Karatsuba ones three from ``2 nsplit`` on (``P1, P2, P3``: ``P1 - P2``, ``P3 - P1 - P2``). TABR /
    TABI: the components' tables (N, TABLE_COLS), weights from WEIGHT_COL; MP, INVM: M's pieces and
    fl(1/M)."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    sr = tuple(ct.zeros((TM, TN), ct.float64) for _ in ct.static_iter(range(PIECES)))
    si = tuple(ct.zeros((TM, TN), ct.float64) for _ in ct.static_iter(range(PIECES)))
    for l in range(nsplit):
        u = _plane(ACC, 2 * l, bm, bn, TM, TN)
        v = _plane(ACC, 2 * l + 1, bm, bn, TM, TN)
        sr = _add_weighted(sr, u + v, ct.load(TABR, (l, 0), (1, TABLE_COLS)), PIECES)
        si = _add_weighted(si, u - v, ct.load(TABI, (l, 0), (1, TABLE_COLS)), PIECES)
    for l in range(nsplit, nmod):
        g = 2 * nsplit + 3 * (l - nsplit)
        p1 = _plane(ACC, g, bm, bn, TM, TN)
        p2 = _plane(ACC, g + 1, bm, bn, TM, TN)
        p3 = _plane(ACC, g + 2, bm, bn, TM, TN)
        sr = _add_weighted(sr, p1 - p2, ct.load(TABR, (l, 0), (1, TABLE_COLS)), PIECES)
        si = _add_weighted(si, p3 - p1 - p2, ct.load(TABI, (l, 0), (1, TABLE_COLS)), PIECES)
    scale = row_col_scale(RE, CE, bm, bn, TM, TN) + shift
    re = final_scale(reconstruct(sr, MP, INVM, PIECES), scale).reshape((TM, TN, 1))
    im = final_scale(reconstruct(si, MP, INVM, PIECES), scale).reshape((TM, TN, 1))
    ct.store(C, (bm, bn, 0), ct.cat((re, im), 2))


def launch(stream, acc, row_exps, col_exps, tables, c, shift: int, nsplit: int, pieces: int) -> None:
    """``acc``: int8 residues (planes, m, n); ``tables``: device arrays (re table, im table (N,
    TABLE_COLS), m_pieces (1, MP_COLS), inv_m (1, 1)); ``c``: float64 (m, n, 2)."""
    rows, cols = CRT_TILE
    ct.launch(stream, tile_grid(c.shape[0], c.shape[1], rows, cols), _gaussian_crt_kernel,
              (acc, row_exps, col_exps, *tables, c, int(shift), int(tables[0].shape[0]), int(nsplit), rows, cols,
               int(pieces)))
