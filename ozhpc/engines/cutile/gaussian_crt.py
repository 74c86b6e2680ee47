"""Complex scheme II's combine: both components of C from the int8 product residues, the real CRT's
steps 2-5 (:mod:`ozhpc.engines.crt`) on each component's plane combinations with folded weights
(:mod:`ozhpc.engines.gaussian`); the NumPy engine's ``combine_gaussian`` in the same order.

One kernel writes both components: each modulus's planes are read once (two per split modulus,
three per Karatsuba one), and C is stored as float64 ``(m, n, 2)`` tiles, the layout of a complex128
matrix. The combinations ``c_l`` are exact (``|c_l| <= 384``), every term ``c_l W'_l[t]`` an exact
integer below ``2**45``: the same piece sums as NumPy's, so the same bits.

The split moduli's planes are read :data:`CRT_GROUP` moduli at a time, one ``(2 CRT_GROUP, TM, TN)``
int8 tile per step, the next group's loaded before this one's arithmetic (as the real CRT kernel's
groups, :data:`.crt.CRT_GROUP`): a block keeps a group's bytes in flight, not one plane's.
"""
from __future__ import annotations

import cuda.tile as ct

from ..kernel_store import stored_kernel
from .config import tile_grid
from .crt import reconstruct
from .tile_math import TABLE_COLS, WEIGHT_COL, ZERO, BigArray, ConstInt, entry, final_scale, row_col_scale

CRT_TILE = (8, 64)
"""Rows x columns of C per block: half the real CRT kernel's 16 x 64 rows, for two components'
piece sums (2 x 4 float64 per entry at 53-56 bits) in registers at occupancy 4. H200, n = 16384,
16 split moduli, 4 pieces (``bench/speed/gaussian_kernels.py``, 2026-12-04,
``bench/results/gaussian_kernels_h200_2026-12-04.md``), the same bits: 11.3 ms at 8 x 64 /
occupancy 4 / 2 moduli per load, 12.8 at 16 x 64 / 2 / 2, 13.4 at 16 x 32 / 4 / 2, 17.0 at
16 x 64 / 2 / 1, 32.1 at 32 x 64 / 1 / 2; each plane its own load at 16 x 32 / occupancy 4:
22.0 ms."""
CRT_OCCUPANCY = 4
CRT_GROUP = 2
"""Split moduli per load (4 int8 planes; 4 moduli at 16 x 32 / occupancy 2: 18.8 ms)."""
WIDE_PIECES = 5
"""From this many CRT pieces (plans of about 64 bits and up) the kernel runs at half CRT_OCCUPANCY: at
8 x 64 and occupancy 4 it spills 168 B with 5 pieces and 600 B with 7, at occupancy 2 it needs 253
registers with 5 and 254 with 7 and no stack (200 B with 6) (CPU AOT, sm_90)."""


def _as_float(planes, i: int, TM: ConstInt, TN: ConstInt):
    """Plane ``i`` of a (G, TM, TN) int8 tile as float64 (TM, TN)."""
    return ct.extract(planes, (i, 0, 0), (1, TM, TN)).reshape((TM, TN)).astype(ct.float64)


def _plane(ACC, g, bm, bn, TM: ConstInt, TN: ConstInt):
    return _as_float(ct.load(ACC, (g, bm, bn), (1, TM, TN), padding_mode=ZERO), 0, TM, TN)


def _add_weighted(s, c, row, PIECES: ConstInt):
    """``s[t] + c W[t]`` for the pieces of a table row's weights (exact: integers below 2**51)."""
    return tuple(s[t] + c * entry(row, WEIGHT_COL + t) for t in ct.static_iter(range(PIECES)))


def _add_split(sr, si, uv, l, TABR, TABI, PIECES: ConstInt):
    """Split modulus ``l``'s terms (``uv``: its planes U, V as float64) added to both components."""
    u, v = uv
    sr = _add_weighted(sr, u + v, ct.load(TABR, (l, 0), (1, TABLE_COLS)), PIECES)
    si = _add_weighted(si, u - v, ct.load(TABI, (l, 0), (1, TABLE_COLS)), PIECES)
    return sr, si


@stored_kernel(occupancy=CRT_OCCUPANCY)
def _gaussian_crt_kernel(ACC: BigArray, RE, CE, TABR, TABI, MP, INVM, C: BigArray, shift: int, nmod: int,
                         nsplit: int, TM: ConstInt, TN: ConstInt, PIECES: ConstInt, GROUP: ConstInt):
    """C (float64 ``(m, n, 2)``) of a (TM, TN) block from the int8 residues ACC (planes, m, n): split
    modulus l < nsplit has planes ``2l, 2l + 1`` (``U, V``: ``c_re = U + V``, ``c_im = U - V``), the
    Karatsuba ones three from ``2 nsplit`` on (``P1, P2, P3``: ``P1 - P2``, ``P3 - P1 - P2``). TABR /
    TABI: the components' tables (N, TABLE_COLS), weights from WEIGHT_COL; MP, INVM: M's pieces and
    fl(1/M). GROUP: split moduli per load; the moduli are added in order (groups, then the rest one
    at a time, then the Karatsuba ones)."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    sr = tuple(ct.zeros((TM, TN), ct.float64) for _ in ct.static_iter(range(PIECES)))
    si = tuple(ct.zeros((TM, TN), ct.float64) for _ in ct.static_iter(range(PIECES)))
    ngroups = nsplit // GROUP
    # planes past the last (no group at all) read as zeros and are not used
    y_next = ct.load(ACC, (0, bm, bn), (2 * GROUP, TM, TN), padding_mode=ZERO)
    for g in range(ngroups):
        ys = y_next
        y_next = ct.load(ACC, (min(g + 1, ngroups - 1), bm, bn), (2 * GROUP, TM, TN), padding_mode=ZERO)
        for i in ct.static_iter(range(GROUP)):
            uv = (_as_float(ys, 2 * i, TM, TN), _as_float(ys, 2 * i + 1, TM, TN))
            sr, si = _add_split(sr, si, uv, g * GROUP + i, TABR, TABI, PIECES)
    for l in range(ngroups * GROUP, nsplit):
        ys = ct.load(ACC, (l, bm, bn), (2, TM, TN), padding_mode=ZERO)
        sr, si = _add_split(sr, si, (_as_float(ys, 0, TM, TN), _as_float(ys, 1, TM, TN)), l, TABR, TABI, PIECES)
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


_WIDE: dict = {}
"""The kernel at half occupancy (WIDE_PIECES), made on first use."""


def _kernel_for(pieces: int):
    if pieces < WIDE_PIECES:
        return _gaussian_crt_kernel
    if not _WIDE:
        _WIDE[True] = _gaussian_crt_kernel.replace_hints(occupancy=CRT_OCCUPANCY // 2)
    return _WIDE[True]


def launch(stream, acc, row_exps, col_exps, tables, c, shift: int, nsplit: int, pieces: int,
           kernel=None, tile: tuple = CRT_TILE, group: int = CRT_GROUP) -> None:
    """``acc``: int8 residues (planes, m, n); ``tables``: device arrays (re table, im table (N,
    TABLE_COLS), m_pieces (1, MP_COLS), inv_m (1, 1)); ``c``: float64 (m, n, 2). ``kernel``, ``tile``,
    ``group``: another variant (a benchmark's; the same bits)."""
    rows, cols = tile
    ct.launch(stream, tile_grid(c.shape[0], c.shape[1], rows, cols), kernel or _kernel_for(pieces),
              (acc, row_exps, col_exps, *tables, c, int(shift), int(tables[0].shape[0]), int(nsplit), rows, cols,
               int(pieces), int(group)))
