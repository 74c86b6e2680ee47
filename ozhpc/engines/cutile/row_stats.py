"""Per-row max of |x| over the finite entries and the count of inf/NaN (the scales' input)."""
from __future__ import annotations

import cuda.tile as ct

from ..kernel_store import stored_kernel
from .config import cdiv
from .tile_math import ZERO, ConstBool, ConstInt

ROW_STATS_TILE = (32, 64)
"""The row-statistics kernel's tile (rows, columns): 167-201 registers, no spills; 32 x 128
spills 40 B when transposed (CPU AOT, sm_90)."""


@stored_kernel
def _row_stats_kernel(X, AMAX, BAD, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """For TR rows of X (TRANS: X holds their transpose) and column part ``bid(1)`` of
    ``num_blocks(1)``: the max of |x| over the finite entries and the number of inf/NaN entries,
    into ``AMAX[bid(1), rows]`` and ``BAD[bid(1), rows]`` (the engine reduces the parts).

    Elementwise accumulators, reduced once at the end: a row reduction per tile (the earlier
    kernel) put warp shuffles in the loop. TRANS accumulates in the loaded (TC, TR) layout and
    reduces along axis 0, so no tile is transposed."""
    bi = ct.bid(0)
    part = ct.bid(1)
    parts = ct.num_blocks(1)
    if TRANS:
        ntiles = ct.cdiv(X.shape[0], TC)
        amax = ct.zeros((TC, TR), ct.float64)
        bad = ct.zeros((TC, TR), ct.int32)
    else:
        ntiles = ct.cdiv(X.shape[1], TC)
        amax = ct.zeros((TR, TC), ct.float64)
        bad = ct.zeros((TR, TC), ct.int32)
    for j in range(part, ntiles, parts):
        if TRANS:
            x = ct.load(X, (j, bi), (TC, TR), padding_mode=ZERO)
        else:
            x = ct.load(X, (bi, j), (TR, TC), padding_mode=ZERO)
        finite = ((ct.bitcast(x, ct.int64) >> 52) & 0x7FF) != 0x7FF
        amax = ct.maximum(amax, ct.where(finite, ct.abs(x), 0.0))
        bad = bad + (~finite).astype(ct.int32)
    if TRANS:
        ct.store(AMAX, (part, bi), ct.max(amax, axis=0).reshape((1, TR)))
        ct.store(BAD, (part, bi), ct.sum(bad, axis=0).reshape((1, TR)))
    else:
        ct.store(AMAX, (part, bi), ct.max(amax, axis=1).reshape((1, TR)))
        ct.store(BAD, (part, bi), ct.sum(bad, axis=1).reshape((1, TR)))


def launch(stream, x, trans: bool, amax, bad) -> None:
    """``amax`` (float64) and ``bad`` (int32): (parts, rows), parts from :meth:`.launcher.Launcher.column_parts`."""
    ct.launch(stream, (max(1, cdiv(amax.shape[1], ROW_STATS_TILE[0])), amax.shape[0], 1),
              _row_stats_kernel, (x, amax, bad, *ROW_STATS_TILE, bool(trans)))
