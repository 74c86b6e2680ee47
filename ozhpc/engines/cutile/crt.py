"""Scheme II's combine: the CRT reconstruction of :mod:`ozhpc.engines.crt`, step for step (exact
products, the same additions in the same order), then the final scaling.

The certificate's per-entry verdicts are a pass of their own over C
(:func:`ozhpc.engines.certificate_kernels.entry_verdicts`): made inside this kernel they cost more
than that pass (H200, n = 16384, 15 moduli: the kernel 6.6 -> 19.3 ms, against about 4 ms for the
pass), and inside a product their answer once disagreed with the reference certificate.
"""
from __future__ import annotations

import cuda.tile as ct

from .. import crt as crt_tables
from ..kernel_store import stored_kernel
from .config import TileConfig, tile_grid
from .tile_math import (MP_COLS, TABLE_COLS, WEIGHT_COL, ZERO, BigArray, ConstBool, ConstInt, balanced, entry,
                        final_scale, pow2_const, rint_small, row_col_scale)

CRT_WIDE_PIECES = 6
"""From this many CRT pieces (M above 2**180: about 80 bits and up) the CRT kernel runs at half
``crt_occupancy``: 16 x 64 at occupancy 4 spills 56 B with 6 pieces and 104 B with 7, at
occupancy 2 it needs 180 / 200 registers and no stack (CPU AOT, sm_90; 4-5 pieces: 116-128)."""
CRT_GROUP = 4
"""Moduli per load: one (CRT_GROUP, TM, TN) tile of residues per step, the next group's loaded
before this one's arithmetic, so a block keeps CRT_GROUP times the bytes in flight of one
modulus per step. H200, n = 16384, 15 moduli (``bench/speed/crt_kernel.py``, 2026-12-04), the same
bits: 6.63 ms one modulus per load, 5.81 two, 5.11 four, 5.71 eight (occupancy 2)."""

def _piece_sums(ACC, TAB, bm, bn, TM: ConstInt, TN: ConstInt, PIECES: ConstInt, RESIDUES: ConstBool,
                GROUP: ConstInt):
    """``s_t = sum_l r_l W_l[t]`` for t < PIECES, the moduli in NumPy's order (each product exact)."""
    s = tuple(ct.zeros((TM, TN), ct.float64) for _ in ct.static_iter(range(PIECES)))
    ngroups = ct.cdiv(ACC.shape[0], GROUP)
    y_next = ct.load(ACC, (0, bm, bn), (GROUP, TM, TN), padding_mode=ZERO)
    for g in range(ngroups):
        ys = y_next
        y_next = ct.load(ACC, (min(g + 1, ngroups - 1), bm, bn), (GROUP, TM, TN), padding_mode=ZERO)
        for i in ct.static_iter(range(GROUP)):
            # rows past the last modulus are zero (padding): residue 0, weights 0
            row = ct.load(TAB, (g * GROUP + i, 0), (1, TABLE_COLS), padding_mode=ZERO)
            y = ct.extract(ys, (i, 0, 0), (1, TM, TN)).reshape((TM, TN)).astype(ct.float64)
            r = y if RESIDUES else balanced(y, row)
            s = tuple(s[t] + r * entry(row, WEIGHT_COL + t) for t in ct.static_iter(range(PIECES)))
    return s


def reconstruct(s, MP, INVM, PIECES: ConstInt):
    """Steps 2-5 of :mod:`ozhpc.engines.crt`: the quotient, the carries, the pieces' sum (the complex
    CRT kernel's too). Powers of two as float64 tiles: a Python float literal in a kernel may be
    typed float32, where 2**72 and up overflow."""
    unit = pow2_const(crt_tables.PIECE_BITS)
    x = s[0]
    for t in ct.static_iter(range(1, PIECES)):
        x = x * unit + s[t]
    q = rint_small(x * ct.load(INVM, (0, 0), (1, 1)))
    m_row = ct.load(MP, (0, 0), (1, MP_COLS))
    s = tuple(s[t] - q * entry(m_row, t) for t in ct.static_iter(range(PIECES)))
    # Carries from the least significant piece up (NumPy: pieces[t-1] += rint(pieces[t] / unit)).
    inv_unit = pow2_const(-crt_tables.PIECE_BITS)
    low = ()
    carried = s[PIECES - 1]
    for t in ct.static_iter(range(PIECES - 1, 0, -1)):
        c = rint_small(carried * inv_unit)
        low = (carried - c * unit,) + low
        carried = s[t - 1] + c
    pieces = (carried,) + low
    total = pieces[PIECES - 1]
    for t in ct.static_iter(range(PIECES - 2, -1, -1)):
        total = total + pieces[t] * pow2_const(crt_tables.PIECE_BITS * (PIECES - 1 - t))
    return total


@stored_kernel
def _crt_kernel(ACC: BigArray, RE, CE, TAB, MP, INVM, C, shift: int, TM: ConstInt, TN: ConstInt, PIECES: ConstInt,
                RESIDUES: ConstBool, GROUP: ConstInt):
    """Scheme II reconstruction, steps 1-5 of :mod:`ozhpc.engines.crt` in NumPy's order.

    ACC: one accumulator per modulus: with RESIDUES the int8 balanced residues of the pair
    kernel (step 1 done: it would return them unchanged), else exact integers (int32 or
    float64) that step 1 reduces; TAB: the constant table (N, TABLE_COLS), one tile load per
    modulus; MP: the pieces of M (1, MP_COLS, zero padded); INVM: fl(1/M) (1, 1).
    PIECES: pieces per big integer (:attr:`CrtTables.pieces`): the piece sums are a tuple
    unrolled at compile time, so 17 moduli keep 4 float64 sums per entry instead of 7.
    """
    bm = ct.bid(0)
    bn = ct.bid(1)
    s = _piece_sums(ACC, TAB, bm, bn, TM, TN, PIECES, RESIDUES, GROUP)
    total = reconstruct(s, MP, INVM, PIECES)
    scale = row_col_scale(RE, CE, bm, bn, TM, TN)
    c = final_scale(total, scale + shift)
    ct.store(C, (bm, bn), c)


def variants(occupancy: int) -> dict:
    """The CRT kernel for narrow (False) and wide (True, :data:`CRT_WIDE_PIECES` and up) M."""
    return {wide: _crt_kernel.replace_hints(occupancy=max(1, occupancy // 2) if wide else occupancy)
            for wide in (False, True)}


def launch(stream, cfg: TileConfig, kernels: dict, acc, row_exps, col_exps, tables, c, shift: int,
           pieces: int, group: int = CRT_GROUP) -> None:
    """``kernels``: :func:`variants`; ``tables``: device arrays (table (N, TABLE_COLS), m_pieces
    (1, MP_COLS), inv_m (1, 1)); ``pieces``: :attr:`CrtTables.pieces`; an int8 ``acc`` holds
    balanced residues."""
    grid = tile_grid(c.shape[0], c.shape[1], cfg.crt_rows, cfg.crt_cols)
    ct.launch(stream, grid, kernels[pieces >= CRT_WIDE_PIECES],
              (acc, row_exps, col_exps, *tables, c, int(shift), cfg.crt_rows, cfg.crt_cols,
               int(pieces), str(acc.dtype) == "int8", int(group)))
