"""Per-row max of |x| over the finite entries and the count of inf/NaN (the scales' input)."""
from __future__ import annotations

import cuda.tile as ct

from ..kernel_store import stored_kernel
from .config import cdiv
from .ieee import EXP_MASK, field
from .tile_math import ZERO, ConstBool, ConstInt

ROW_STATS_TILE = (32, 64)
"""The row-statistics kernel's tile (rows, columns): 167-201 registers, no spills; 32 x 128
spills 40 B when transposed (CPU AOT, sm_90)."""


def rows_tile(X, bi, j, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """Tile j of the block's rows in the loaded layout: (TR, TC), or (TC, TR) for TRANS."""
    if TRANS:
        return ct.load(X, (j, bi), (TC, TR), padding_mode=ZERO)
    return ct.load(X, (bi, j), (TR, TC), padding_mode=ZERO)


def max_and_bad_start(X, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """The tiles along the block's rows, and zero accumulators of max |x| and of inf/NaN counts in
    the loaded layout (elementwise: reduced once at the end, no transposed tile)."""
    if TRANS:
        return ct.cdiv(X.shape[0], TC), ct.zeros((TC, TR), ct.float64), ct.zeros((TC, TR), ct.int32)
    return ct.cdiv(X.shape[1], TC), ct.zeros((TR, TC), ct.float64), ct.zeros((TR, TC), ct.int32)


def max_and_bad_step(amax, bad, x):
    """One tile into the accumulators: |x| where finite, and a count of the inf/NaN entries."""
    finite = field(x) != EXP_MASK
    return ct.maximum(amax, ct.where(finite, ct.abs(x), 0.0)), bad + (~finite).astype(ct.int32)


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
    ntiles, amax, bad = max_and_bad_start(X, TR, TC, TRANS)
    for j in range(part, ntiles, parts):
        amax, bad = max_and_bad_step(amax, bad, rows_tile(X, bi, j, TR, TC, TRANS))
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
