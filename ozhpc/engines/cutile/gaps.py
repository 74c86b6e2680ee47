"""The "auto" statistic's gap codes of a tile of rows (:meth:`ozhpc.engines.base.Engine.entry_gaps`)."""
from __future__ import annotations

import cuda.tile as ct

from ..digits import MAX_GAP, NO_GAP
from ..kernel_store import stored_kernel
from .config import TileConfig, tile_grid
from .tile_math import BigArray, ConstBool, ConstInt, pow2_const, row_tile

GAP_COLS = 256
"""Gap-code buffers have a multiple of this many columns (NO_GAP padding): whole count tiles."""


@stored_kernel
def _gap_kernel(X, EXPS, OUT: BigArray, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """The "auto" statistic's gap codes (:meth:`Engine.entry_gaps`) of a (TR, TC) tile of the rows
    of X: ``clip(e_i - frexp_exponent(|x|), 0, MAX_GAP)``, NO_GAP for 0, inf and NaN (and for the
    zero padding). The exponent comes from the bit pattern (subnormals scaled by 2**64 first)."""
    bi = ct.bid(0)
    bj = ct.bid(1)
    x, e = row_tile(X, EXPS, bi, bj, TR, TC, TRANS)
    field = (ct.bitcast(x, ct.int64) >> 52) & 0x7FF
    field_sub = (ct.bitcast(ct.abs(x) * pow2_const(64), ct.int64) >> 52) & 0x7FF
    ex = ct.where(field == 0, field_sub - (1022 + 64), field - 1022)
    gap = ct.minimum(ct.maximum(e - ex, 0), MAX_GAP)
    keep = (field != 0x7FF) & (x != 0.0)
    ct.store(OUT, (bi, bj), ct.where(keep, gap, NO_GAP).astype(ct.int32).astype(ct.int8))


def launch(stream, cfg: TileConfig, x, trans: bool, exps, out) -> None:
    grid = tile_grid(out.shape[0], out.shape[1], cfg.split_rows, cfg.split_cols)
    ct.launch(stream, grid, _gap_kernel, (x, exps, out, cfg.split_rows, cfg.split_cols, bool(trans)))
