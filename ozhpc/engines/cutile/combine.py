"""Scheme I's combine: ``total = sum_{g=d-1..0} S_g * 2**(-7(g+2))`` in that order, then
``ldexp(total, e_i + f_j)`` with one rounding (subnormal results rounded once through a
magic-constant rint at the 2**-1074 grid). ``S_g * w`` is exact, so the FMA that cuTile makes of
``total + S_g * w`` rounds exactly like NumPy's separate multiply and add.
"""
from __future__ import annotations

import cuda.tile as ct

from ..digits import BITS
from ..kernel_store import stored_kernel
from .config import TileConfig, tile_grid
from .tile_math import ZERO, BigArray, ConstInt, final_scale, pow2, row_col_scale


def _group_weight(g):
    """``2**(-BITS*(g+2))`` as a float64 scalar tile."""
    return pow2(ct.astype(-BITS * (g + 2), ct.int64))


@stored_kernel
def _combine_kernel(ACC: BigArray, RE, CE, C, TM: ConstInt, TN: ConstInt):
    """``C = ldexp(sum_{g=d-1..0} ACC[g] * 2**(-7(g+2)), e_i + f_j)``, NumPy's order.

    ACC is float64 group accumulators or the int32 group sums of :func:`.pair._pair_kernel`
    (converted exactly to float64 on load).
    """
    bm = ct.bid(0)
    bn = ct.bid(1)
    d = ACC.shape[0]
    total = ct.zeros((TM, TN), ct.float64)
    for gi in range(d):
        g = d - 1 - gi
        part = ct.load(ACC, (g, bm, bn), (1, TM, TN), padding_mode=ZERO).reshape((TM, TN))
        part = part.astype(ct.float64)
        total = total + part * _group_weight(g)
    ct.store(C, (bm, bn), final_scale(total, row_col_scale(RE, CE, bm, bn, TM, TN)))


def launch(stream, cfg: TileConfig, acc, row_exps, col_exps, c) -> None:
    grid = tile_grid(c.shape[0], c.shape[1], cfg.combine_rows, cfg.combine_cols)
    ct.launch(stream, grid, _combine_kernel, (acc, row_exps, col_exps, c, cfg.combine_rows, cfg.combine_cols))
