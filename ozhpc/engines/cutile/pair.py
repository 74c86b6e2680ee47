"""The int8 pair GEMM of both schemes: ``ct.mma(int8, int8, int32)`` only.

Scheme I: all pairs ``p + q = g`` of a group are summed in ONE int32 accumulator and stored as
int32 ``S_g``; the host cuts k into chunks with ``k_chunk * group_product_bound(s, d) < 2**31``
(digit bounds 127 for slice 0, 64 after: :func:`k_chunk`), so no int32 sum can overflow, and adds
chunk sums in FP64, where every value is an exact integer below 2**53 (bounded by
:meth:`ozhpc.ozaki.plan.SlicePlan.max_exact_k`). Scheme II: the diagonal pairs (``DIAGONAL``:
group l = residues of modulus l), each product stored as its int8 balanced residue (the CRT's
step 1, unique, so the same as NumPy's).
"""
from __future__ import annotations

import cuda.tile as ct

from .. import crt as crt_tables
from ..digits import DIGIT_MAX, group_product_bound
from ..kernel_store import stored_kernel
from .config import PAIR_NUM_CTAS, PAIR_OCCUPANCY, TileConfig, cdiv
from .tile_math import RINT_MAGIC32, RINT_MAGIC32_BITS, ZERO, BigArray, ConstBool, ConstInt

INT32_INDEX_LIMIT = 2**31
"""Arrays whose every element offset (and extent) is below this take the int32-indexed pair kernel."""

K_PAIR_LIMIT = (2**31 - 1) // DIGIT_MAX**2
"""Largest (k-chunk length) x (pairs summed into one int32 accumulator): 133144."""

MOD_COLS = 4
"""Row layout of the pair kernel's int32 modulus table (scheme II): ``p, 2**16 mod p, lo, hi``
(lo..hi the balanced range, :data:`ozhpc.engines.crt.CrtTables.moduli` columns 2-3)."""


# ----------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------

def _int8_residue(acc, row):
    """Balanced residue (int8) of int32 ``acc`` modulo ``p`` (``row``: the modulus's (1, MOD_COLS)
    int32 table row), in int32 and float32 arithmetic (float64 doubled the epilogue's registers).

    ``acc = h * 2**16 + l`` (arithmetic shift, ``0 <= l < 2**16``), so ``y = h * (2**16 mod p)
    + l`` is congruent and ``|y| < 2**23 + 2**16``: exact in float32. ``q``, the integer nearest
    ``fl(y) * fl(1/p)`` (rounded by adding 1.5 * 2**23, FMA or not, and read from the bits: no
    float-to-int conversion), is within 1.1 of ``y / p`` (relative error below 2**-23,
    ``|y / p| < 2**20``), so ``y - q p`` lies in (-1.1 p, 1.1 p) and one fix-up each way puts it
    in [lo, hi]: the unique balanced residue, whatever the rounding."""
    p = ct.extract(row, (0, 0), (1, 1))
    y = (acc >> 16) * ct.extract(row, (0, 1), (1, 1)) + (acc & 0xFFFF)
    inv = ct.full((1, 1), 1.0, ct.float32) / p.astype(ct.float32)
    t = y.astype(ct.float32) * inv + ct.full((1, 1), RINT_MAGIC32, ct.float32)
    r = y - (ct.bitcast(t, ct.int32) - RINT_MAGIC32_BITS) * p
    r = ct.where(r > ct.extract(row, (0, 3), (1, 1)), r - p, r)
    r = ct.where(r < ct.extract(row, (0, 2), (1, 1)), r + p, r)
    return r.astype(ct.int8)


def _swizzle(tile_id, num_m, num_n, GROUP_M: ConstInt):
    """Grouped tile order (TileGym ``_swizzle_2d``): GROUP_M row tiles share their B tiles in L2."""
    width = GROUP_M * num_n
    group = tile_id // width
    first_m = group * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    bm = first_m + tile_id % size_m
    bn = (tile_id % width) // size_m
    return bm, bn


def _group_sum(acc, DA, EB, g, s, bm, bn, ktiles, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """``acc`` + int32 ``sum_{p+q=g} D_p[bm] @ E_q[bn]^T`` over all k-tiles (scheme I; nested
    loops: a flattened (pair, k) loop measured more register spills)."""
    for p in range(max(0, g - s + 1), min(g, s - 1) + 1):
        for kt in range(ktiles):
            a = ct.load(DA, (p, bm, kt), (1, TM, TK), padding_mode=ZERO).reshape((TM, TK))
            # E_q is stored (n, k), k contiguous: load a transposed (TK, TN) tile.
            b = ct.load(EB, (g - p, kt, bn), (1, TK, TN), order=(0, 2, 1),
                        padding_mode=ZERO).reshape((TK, TN))
            acc = ct.mma(a, b, acc)
    return acc


def _diagonal_product(acc, DA, EB, g, bm, bn, ktiles, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """``acc`` + int32 ``DA[g][bm] @ EB[g][bn]^T`` over all k-tiles (scheme II's one pair)."""
    for kt in range(ktiles):
        a = ct.load(DA, (g, bm, kt), (1, TM, TK), padding_mode=ZERO).reshape((TM, TK))
        b = ct.load(EB, (g, kt, bn), (1, TK, TN), order=(0, 2, 1), padding_mode=ZERO).reshape((TK, TN))
        acc = ct.mma(a, b, acc)
    return acc


def _pair_body(DA, EB, S, MODS, g0, TM: ConstInt, TN: ConstInt, TK: ConstInt, GROUP_M: ConstInt,
               ACCUMULATE: ConstBool, DIAGONAL: ConstBool):
    """``S[g] = sum_{p+q=g0+g} DA[p] @ EB[q]^T`` in int32, for every g < S.shape[0]
    (``S[g] +=`` with ACCUMULATE: the launcher's k panels; ``g0``: the first group of a launch
    that covers only some groups). One C tile per block, in grouped order.

    DIAGONAL (scheme II): ``S[g]`` is int8, the balanced residue of ``(S[g] +) DA[g] @ EB[g]^T``
    modulo ``MODS[g, 0]`` (:func:`_int8_residue`; the CRT needs nothing more): a quarter of
    the int32 sums' store and of the CRT's reads. One (modulus, C tile) per block: the launch's
    moduli are the grid's slow axis (the launcher's grid is tiles x moduli), so one launch covers
    every modulus without a loop over them in the block (a loop over moduli, or a persistent loop
    over (modulus, tile), measured 3-12% slower on the H200: bench/results/gpu_tma_investigation.md).
    Otherwise MODS is not read.

    The launcher guarantees ``k * group_product_bound(s, d) < 2**31`` (it chunks k on the host;
    scheme II: ``k * 128**2 + 128``). The epilogue stores integers: converting the 128x128
    accumulator to float64 inside this kernel spilled registers (cuobjdump: 2-4 KB stack) and
    ran at a quarter of the speed.
    """
    s = DA.shape[0]
    num_m = ct.cdiv(DA.shape[1], TM)
    num_n = ct.cdiv(EB.shape[1], TN)
    ktiles = ct.cdiv(DA.shape[2], TK)
    if DIAGONAL:
        tiles = num_m * num_n
        g = ct.bid(0) // tiles
        bm, bn = _swizzle(ct.bid(0) - g * tiles, num_m, num_n, GROUP_M)
        if ACCUMULATE:
            acc = ct.load(S, (g, bm, bn), (1, TM, TN), padding_mode=ZERO).reshape((TM, TN)).astype(ct.int32)
        else:
            acc = ct.zeros((TM, TN), ct.int32)
        acc = _diagonal_product(acc, DA, EB, g, bm, bn, ktiles, TM, TN, TK)
        res = _int8_residue(acc, ct.load(MODS, (g, 0), (1, MOD_COLS)))
        ct.store(S, (g, bm, bn), res.reshape((1, TM, TN)))
    else:
        # (A persistent grid-stride loop over tiles cost 96 B of spills on sm_90 and measured slower.)
        bm, bn = _swizzle(ct.bid(0), num_m, num_n, GROUP_M)
        for g in range(S.shape[0]):
            if ACCUMULATE:
                acc = ct.load(S, (g, bm, bn), (1, TM, TN), padding_mode=ZERO).reshape((TM, TN)).astype(ct.int32)
            else:
                acc = ct.zeros((TM, TN), ct.int32)
            acc = _group_sum(acc, DA, EB, g0 + g, s, bm, bn, ktiles, TM, TN, TK)
            ct.store(S, (g, bm, bn), acc.reshape((1, TM, TN)))


# Two index widths of one body. On sm_90 tileiras 13.4 emits TMA loads/stores and a
# warp-specialised producer/consumer layout only when it can bound every shape and
# stride: int32 indices (or int64 constants, measured no faster and one compile per
# shape; bench/results/gpu_tma_investigation.md); with dynamic int64 it falls back to cp.async.
# The engine copies operand blocks so that the int32 kernel applies at any size.

@stored_kernel(occupancy=PAIR_OCCUPANCY, num_ctas=PAIR_NUM_CTAS)
def _pair_kernel(DA, EB, S, MODS, g0: int, TM: ConstInt, TN: ConstInt, TK: ConstInt, GROUP_M: ConstInt,
                 ACCUMULATE: ConstBool, DIAGONAL: ConstBool):
    """Pair kernel, int32 indices: only for arrays that pass :func:`fits_int32`."""
    _pair_body(DA, EB, S, MODS, g0, TM, TN, TK, GROUP_M, ACCUMULATE, DIAGONAL)


@stored_kernel(occupancy=PAIR_OCCUPANCY, num_ctas=PAIR_NUM_CTAS)
def _pair_kernel_int64(DA: BigArray, EB: BigArray, S: BigArray, MODS, g0: int,
                       TM: ConstInt, TN: ConstInt, TK: ConstInt, GROUP_M: ConstInt,
                       ACCUMULATE: ConstBool, DIAGONAL: ConstBool):
    """Pair kernel, dynamic int64 indices: any size, one compile, no TMA on sm_90."""
    _pair_body(DA, EB, S, MODS, g0, TM, TN, TK, GROUP_M, ACCUMULATE, DIAGONAL)


PAIR_KERNELS = {"int32": _pair_kernel, "int64": _pair_kernel_int64}
"""Pair kernel per index width (``Launcher(pair_index=...)``)."""

PAIR_INDEX_FALLBACK = "int64"
"""What ``pair_index="auto"`` launches for arrays too large for int32 indices."""


# ----------------------------------------------------------------------------------------
# Host side: index width and k chunks
# ----------------------------------------------------------------------------------------

def fits_int32(a) -> bool:
    """Whether every extent and element offset of array view ``a`` (shape, byte strides,
    itemsize: CuPy/NumPy) is below 2**31, so int32 index arithmetic cannot overflow
    however the compiler computes addresses."""
    if any(d == 0 for d in a.shape):
        return True
    last = sum((d - 1) * abs(st) for d, st in zip(a.shape, a.strides)) // a.itemsize
    return max(a.shape) < INT32_INDEX_LIMIT and last < INT32_INDEX_LIMIT


def widest_group(slices: int, ngroups: int) -> int:
    """Most slice pairs in one group g < ngroups."""
    return max(min(g, slices - 1) - max(0, g - slices + 1) + 1 for g in range(ngroups))


def k_chunk(slices: int, ngroups: int, k_limit: int | None = None, align: int = 16,
            diagonal: bool = False) -> int:
    """Longest k (a multiple of ``align``) whose int32 group sums cannot overflow.

    From the digit bounds (127 for slice 0, 64 after: :func:`ozhpc.engines.digits.group_product_bound`;
    ``diagonal``: one product of residues of at most 128); ``k_limit`` (tests only) caps
    k-chunk x pairs further, to force chunking.
    """
    # diagonal: the pair kernel adds the products to residues already there (|r| <= 128)
    bound = crt_tables.RESIDUE_MAX**2 if diagonal else group_product_bound(slices, ngroups)
    kc = (2**31 - 1 - (crt_tables.RESIDUE_MAX if diagonal else 0)) // bound
    if k_limit is not None:
        kc = min(kc, k_limit // (1 if diagonal else widest_group(slices, ngroups)))
    return max(align, kc // align * align)


def grid(cfg: TileConfig, m: int, n: int, groups: int, diagonal: bool) -> tuple[int]:
    """One block per C tile; scheme II: per (modulus, C tile)."""
    return (max(1, cdiv(m, cfg.pair_m) * cdiv(n, cfg.pair_n) * (groups if diagonal else 1)),)


def launch(stream, kernel, grid, cfg: TileConfig, a, b, sums, mods, first_group: int,
           diagonal: bool, accumulate: bool) -> None:
    """One launch of ``kernel`` (a :data:`PAIR_KERNELS` variant) over the k panel ``a``, ``b``
    (``grid``: :func:`grid`)."""
    ct.launch(stream, grid, kernel,
              (a, b, sums, mods, int(first_group), cfg.pair_m, cfg.pair_n,
               cfg.diagonal_k if diagonal else cfg.pair_k, cfg.group_m, bool(accumulate), bool(diagonal)))
