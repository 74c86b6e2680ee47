"""Scheme II's combine: the CRT reconstruction of :mod:`ozhpc.engines.crt`, step for step (exact
products, the same additions in the same order), then the final scaling; and, on request, the
certificate's per-entry verdicts of the C it writes (:class:`ozhpc.engines.base.Verdicts`).

The verdicts are :mod:`ozhpc.engines.certificate_kernels`' formula (the NumPy array code's
operations in its order), every product that feeds a sum kept apart from it
(:func:`.ieee.kept`), so each operation rounds as NumPy's does: the same count and worst ratio.
The kernel reads every residue and writes C anyway, so the verdicts cost arithmetic and the
magnitude sums' read, not a pass over C.
"""
from __future__ import annotations

import cuda.tile as ct

from .. import crt as crt_tables
from ..kernel_store import stored_kernel
from .config import TileConfig, tile_grid
from .ieee import kept, ldexp_rne, pow2_any
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

VERDICT_COLS = 16
"""Width of the verdict constants' table (``ozhpc.engines.base.VERDICT_CONSTANTS``, zero padded)."""
(_DOWN, _UP, _TINYSUB, _COMB0, _COMB1, _PW, _P2W, _FLOOR, _SUW, _TAU, _RHOU, _FOURU, _MAGUNIT, _FACTOR,
 _FAIL_MIN) = range(15)


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


def _reconstruct(s, MP, INVM, PIECES: ConstInt):
    """Steps 2-5 of :mod:`ozhpc.engines.crt`: the quotient, the carries, the pieces' sum."""
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


def _side(D, N, Z, b, T: ConstInt, ROW: ConstBool):
    """``(delta, norm 2**-32, nnz)`` of a row block (ROW: as (T, 1)) or a column block ((1, T))."""
    d = ct.load(D, (b,), (T,), padding_mode=ZERO)
    n = ct.load(N, (b,), (T,), padding_mode=ZERO).astype(ct.float64) * pow2_const(-32).reshape((1,))
    z = ct.load(Z, (b,), (T,), padding_mode=ZERO).astype(ct.float64)
    if ROW:
        return d.reshape((T, 1)), n.reshape((T, 1)), z.reshape((T, 1))
    return d.reshape((1, T)), n.reshape((1, T)), z.reshape((1, T))


def _error_bound(c_up, da, na, za, db, nb, zb, K):
    """The separable bound plus the combine rounding (certificate_kernels' order)."""
    def k(i):
        return ct.extract(K, (0, i), (1, 1))
    comb = k(_COMB0) + kept(c_up * k(_COMB1))
    cross = ct.minimum(za, zb)
    bound = kept((kept(da * nb) + kept(na * db)) * k(_PW))
    bound = bound + kept(da * db * cross * k(_P2W))
    bound = kept(bound * k(_UP)) + ct.where((da > 0.0) | (db > 0.0), k(_FLOOR), 0.0)
    bound = bound + comb
    return ct.where((na > 0.0) & (nb > 0.0), bound, 0.0)   # a zero row or column: C_ij is exactly 0


def _ratios(c, scale, da, na, za, db, nb, zb, lsum, K, LOWER: ConstBool):
    """Per entry ``E / (factor u L)`` as :func:`ozhpc.ozaki.certificate.entry_ratio` gives it (0 for
    inf/NaN entries); ``scale`` = ``e_i + f_j`` (int64)."""
    def k(i):
        return ct.extract(K, (0, i), (1, 1))
    mag = ldexp_rne(ct.abs(c), -scale)
    c_lo = ct.maximum(kept(mag * k(_DOWN)) - k(_TINYSUB), 0.0)
    c_up = kept(mag * k(_UP)) + k(_TINYSUB)
    bound = _error_bound(c_up, da, na, za, db, nb, zb, K)
    sub = pow2_any(-1074 - scale) + k(_TINYSUB)
    fin = kept(k(_RHOU) * c_up * k(_UP)) + sub
    raw = (c_lo - bound) - fin
    slack = kept(k(_FOURU) * ((c_up + bound) + fin))
    lower = ct.maximum(raw - slack, 0.0) * k(_DOWN)
    if LOWER:
        lower = ct.maximum(lower, lsum * k(_MAGUNIT))
    scaled = bound * pow2_const(53)
    scaled = ct.where(k(_FACTOR) != 1.0, scaled / k(_FACTOR) * k(_UP), scaled)
    passed = scaled <= lower
    inf = pow2_any(ct.full((1, 1), 2000, ct.int64))
    r = ct.where(lower > 0.0, scaled / ct.where(lower > 0.0, lower, 1.0), inf)
    r = ct.where(scaled > 0.0, r, 0.0)
    ratio = ct.where(passed, ct.minimum(r, 1.0), ct.maximum(r, k(_FAIL_MIN)))
    dbl_max = ct.bitcast(ct.full((1, 1), 0x7FEFFFFFFFFFFFFF, ct.int64), ct.float64)
    return ct.where(ct.abs(c) <= dbl_max, ratio, 0.0)   # inf and NaN entries pass


@stored_kernel
def _crt_kernel(ACC: BigArray, RE, CE, TAB, MP, INVM, C, shift: int, DA, NA, ZA, DB, NB, ZB, LSUM: BigArray,
                K, FOUND, TM: ConstInt, TN: ConstInt, PIECES: ConstInt, RESIDUES: ConstBool, GROUP: ConstInt,
                VERDICT: ConstBool, LOWER: ConstBool):
    """Scheme II reconstruction, steps 1-5 of :mod:`ozhpc.engines.crt` in NumPy's order.

    ACC: one accumulator per modulus: with RESIDUES the int8 balanced residues of the pair
    kernel (step 1 done: it would return them unchanged), else exact integers (int32 or
    float64) that step 1 reduces; TAB: the constant table (N, TABLE_COLS), one tile load per
    modulus; MP: the pieces of M (1, MP_COLS, zero padded); INVM: fl(1/M) (1, 1).
    PIECES: pieces per big integer (:attr:`CrtTables.pieces`): the piece sums are a tuple
    unrolled at compile time, so 17 moduli keep 4 float64 sums per entry instead of 7.

    VERDICT: also the certificate's verdicts of C: DA/NA/ZA and DB/NB/ZB the rows' and columns'
    (delta, norm, nnz), LSUM the magnitude sums (LOWER), K the constants (1, VERDICT_COLS); the
    block's largest ratio (its bits: ratios are >= 0) and failing count go to FOUND (int64 (2,))
    by atomic max and add.
    """
    bm = ct.bid(0)
    bn = ct.bid(1)
    s = _piece_sums(ACC, TAB, bm, bn, TM, TN, PIECES, RESIDUES, GROUP)
    total = _reconstruct(s, MP, INVM, PIECES)
    scale = row_col_scale(RE, CE, bm, bn, TM, TN)
    c = final_scale(total, scale + shift)
    ct.store(C, (bm, bn), c)
    if VERDICT:
        da, na, za = _side(DA, NA, ZA, bm, TM, True)
        db, nb, zb = _side(DB, NB, ZB, bn, TN, False)
        lsum = ct.load(LSUM, (bm, bn), (TM, TN), padding_mode=ZERO).astype(ct.float64)
        K_ = ct.load(K, (0, 0), (1, VERDICT_COLS))
        ratio = _ratios(c, scale, da, na, za, db, nb, zb, lsum, K_, LOWER)
        ct.atomic_max(FOUND, 0, ct.bitcast(ct.max(ratio), ct.int64))
        ct.atomic_add(FOUND, 1, ct.sum((ratio > 1.0).astype(ct.int64)))


def variants(occupancy: int) -> dict:
    """The CRT kernel for narrow (False) and wide (True, :data:`CRT_WIDE_PIECES` and up) M."""
    return {wide: _crt_kernel.replace_hints(occupancy=max(1, occupancy // 2) if wide else occupancy)
            for wide in (False, True)}


def launch(stream, cfg: TileConfig, kernels: dict, acc, row_exps, col_exps, tables, c, shift: int,
           pieces: int, verdict: tuple, group: int = CRT_GROUP) -> None:
    """``kernels``: :func:`variants`; ``tables``: device arrays (table (N, TABLE_COLS), m_pieces
    (1, MP_COLS), inv_m (1, 1)); ``pieces``: :attr:`CrtTables.pieces`; an int8 ``acc`` holds
    balanced residues. ``verdict``: ``(da, na, za, db, nb, zb, lower, constants, found, wanted,
    has_lower)`` (placeholders with ``wanted`` False)."""
    grid = tile_grid(c.shape[0], c.shape[1], cfg.crt_rows, cfg.crt_cols)
    *arrays, wanted, has_lower = verdict
    ct.launch(stream, grid, kernels[pieces >= CRT_WIDE_PIECES],
              (acc, row_exps, col_exps, *tables, c, int(shift), *arrays, cfg.crt_rows, cfg.crt_cols,
               int(pieces), str(acc.dtype) == "int8", int(group), bool(wanted), bool(has_lower)))
