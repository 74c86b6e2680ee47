"""Counts of gap codes at or below per-row limits (:meth:`ozhpc.engines.base.Engine.count_gaps_le`)."""
from __future__ import annotations

import cuda.tile as ct

from ..kernel_store import stored_kernel
from .config import cdiv
from .tile_math import ZERO, BigArray, ConstInt

COUNT_TILE = (16, 32)
"""The count kernel's tile in int32 words (4 gap codes each; 4 * width divides GAP_COLS)."""
COUNT_FIELD_BITS = 8
"""Bits per bucket counter in the count kernel's packed int64 accumulators: each word lane adds
one to a field per code (4 codes per word), so a column part may hold at most COUNT_MAX_TILES
tiles."""
COUNT_FIELD_MASK = 2**COUNT_FIELD_BITS - 1
COUNT_MAX_TILES = COUNT_FIELD_MASK // 4
COUNT_MAX_FIELDS = 64 // COUNT_FIELD_BITS
"""Most limits per row of one count launch (fields of one int64)."""


@stored_kernel
def _count_kernel(G: BigArray, LIM, OUT, TR: ConstInt, TC: ConstInt, L: ConstInt):
    """``OUT[part, i, l] = #{gap codes in part of row i that are <= LIM[i, l]}`` for a block of
    TR rows, L <= 8 ascending limits per row and column part ``bid(1)`` of ``num_blocks(1)``.

    G is the int8 gap buffer viewed as int32 (four codes per word, G's columns a multiple of
    TC words, at most COUNT_MAX_TILES tiles per part; the engine adds the parts): word loads
    instead of byte loads, and the four byte lanes are counted alike (order does not matter).
    Each code falls in bucket ``b = #{l: g > lim_l}``; an elementwise int64 accumulator adds
    ``2**(8 b)`` (nothing for b = L), so the loop has no row reductions (the earlier kernel's
    32 warp reductions per tile) and 2 registers per word lane instead of L counters. The
    fields are summed along the rows once, at the end, and their prefix sums are the counts."""
    bi = ct.bid(0)
    part = ct.bid(1)
    parts = ct.num_blocks(1)
    lims = ct.load(LIM, (bi, 0), (TR, L), padding_mode=ZERO)
    lim = tuple(ct.extract(lims, (0, l), (TR, 1)) for l in ct.static_iter(range(L)))
    packed = ct.zeros((TR, TC), ct.int64)
    for j in range(part, ct.cdiv(G.shape[1], TC), parts):
        words = ct.load(G, (bi, j), (TR, TC), padding_mode=ZERO)
        for lane in ct.static_iter(range(4)):
            g = (words << (24 - 8 * lane)) >> 24          # sign-extended byte ``lane``
            bucket = ct.zeros((TR, TC), ct.int32)
            for l in ct.static_iter(range(L)):
                bucket = bucket + (g > lim[l]).astype(ct.int32)
            one = ct.full((TR, TC), 1, ct.int64) << (bucket * COUNT_FIELD_BITS).astype(ct.int64)
            packed = packed + ct.where(bucket < L, one, 0)
    count = ct.zeros((TR,), ct.int32)
    for l in ct.static_iter(range(L)):
        field = ((packed >> (l * COUNT_FIELD_BITS)) & COUNT_FIELD_MASK).astype(ct.int32)
        count = count + ct.sum(field, axis=1)
        ct.store(OUT, (part, bi, l), count.reshape((1, TR, 1)))


def launch(stream, gaps, limits, out) -> None:
    """``gaps``: the int8 gap codes viewed as int32 (columns a multiple of ``GAP_COLS // 4``);
    ``limits`` (rows, L), L a power of two <= 8; ``out`` (parts, rows, L), parts from
    :meth:`.launcher.Launcher.column_parts` (in words) with COUNT_MAX_TILES."""
    ct.launch(stream, (max(1, cdiv(gaps.shape[0], COUNT_TILE[0])), out.shape[0], 1), _count_kernel,
              (gaps, limits, out, *COUNT_TILE, limits.shape[1]))
