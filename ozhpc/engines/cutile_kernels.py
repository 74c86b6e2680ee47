"""cuTile kernels of the Ozaki schemes: fused split (I) / residues (II), int8 pair GEMM, FP64 combine (I) / CRT (II).

TileGym order: config table per architecture -> kernels -> launchers (cached per
shape, dtype, device and capability). This module needs only ``cuda.tile``: no
CuPy, no GPU, so CI type-checks every kernel (tests/test_cutile_typecheck.py).
The host-side engine that validates and allocates is
:mod:`ozhpc.engines.cutile_engine`.

Numerics (identical to :class:`ozhpc.engines.numpy_engine.NumpyEngine`, bit for bit):

* split: ``D_p = rint(r_p * 2**(7(p+1)-e))``, ``r_{p+1} = r_p - D_p * 2**(e-7(p+1))``,
  computed on ``y_p = r_p * 2**(7p-e)``: ``y_0 = x * 2**-e``, ``D_p = rint(128 y_p)``,
  ``y_{p+1} = 128 y_p - D_p``. cuTile has no ``ldexp``/``rint``: powers of two are built by
  bitcasting ``(x + 1023) << 52``; ``2**-e`` is applied as two factors ``2**a * 2**b``
  (``a = -e >> 1``, each in the normal range, the intermediate between x and y_0, so y_0 is
  exact unless it is below 2**-1022, when every digit is zero either way: ``|128**p y_0| < 1/2``
  for p < 145), and ``rint`` is ``(t + 1.5*2**52) - 1.5*2**52`` (exact round-half-even for
  ``|t| < 2**51``; ``|t| < 128`` here). ``128 y_p`` is exact, so contracting it into an FMA
  changes nothing, and ``128 y_p - D_p`` is exact (Sterbenz, or ``D_p = 0``).
* pair GEMM: ``ct.mma(int8, int8, int32)`` only. All pairs ``p + q = g`` of a
  group are summed in ONE int32 accumulator and stored as int32 ``S_g``; the host
  cuts k into chunks with ``k_chunk * group_product_bound(s, d) < 2**31`` (digit
  bounds 127 for slice 0, 64 after: :func:`k_chunk`), so no int32 sum can overflow,
  and adds chunk sums in FP64, where every
  value is an exact integer below 2**53 (bounded by :meth:`ozhpc.ozaki.plan.SlicePlan.max_exact_k`).
* combine: ``total = sum_{g=d-1..0} S_g * 2**(-7(g+2))`` in that order, then
  ``ldexp(total, e_i + f_j)`` with one rounding (subnormal results rounded once
  through a magic-constant rint at the 2**-1074 grid). ``S_g * w`` is exact, so
  the FMA that cuTile makes of ``total + S_g * w`` rounds exactly like NumPy's
  separate multiply and add.
* scheme II (:mod:`ozhpc.engines.crt`): residues are unique balanced integers (two
  reductions, then the canonical range), so how cuTile rounds the quotient estimates or
  contracts ``y - q*p`` cannot change them; the pair kernel runs the diagonal pairs
  (``DIAGONAL``: group l = residues of modulus l) and stores each product as its int8 balanced
  residue (the CRT's step 1, unique, so the same as NumPy's); the CRT kernel repeats the NumPy
  reconstruction step for step (exact products, the same additions in the same order).
"""
from __future__ import annotations

from dataclasses import dataclass

import cuda.tile as ct

from . import crt as _crt
from .base import BITS, DIGIT_MAX, MAX_GAP, NO_GAP, group_product_bound
from .kernel_store import stored_kernel

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]
BigArray = ct.IndexedWithInt64
ZERO = ct.PaddingMode.ZERO

INT32_INDEX_LIMIT = 2**31
"""Arrays whose every element offset (and extent) is below this take the int32-indexed pair kernel."""

K_PAIR_LIMIT = (2**31 - 1) // DIGIT_MAX**2
"""Largest (k-chunk length) x (pairs summed into one int32 accumulator): 133144."""

_RINT_MAGIC = 6755399441055744.0   # 1.5 * 2**52
_RINT_MAGIC32 = 12582912.0         # 1.5 * 2**23: float32 t + this has the bits _RINT_MAGIC32_BITS + rint(t)
_RINT_MAGIC32_BITS = 0x4B400000    # for |t| < 2**22
_TWO52 = 4503599627370496.0        # 2**52
_DIGIT_RADIX = float(2**BITS)       # 128: one slice's digits
_LIMB_UP = (2.0**16, 2.0**32, 2.0**48)
_LIMB_DOWN = (2.0**-16, 2.0**-32, 2.0**-48)


# ----------------------------------------------------------------------------------------
# 1. Config table (explicit entries; an unknown architecture raises)
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TileConfig:
    """Tile sizes of the three kernels for one architecture."""

    split_rows: int
    split_cols: int
    pair_m: int
    pair_n: int
    pair_k: int
    group_m: int
    combine_rows: int
    combine_cols: int
    pair_k_panel: int = 4096
    """k per pair-kernel launch; longer k is summed over launches in the int32 sums (L2 reuse:
    see :meth:`Launcher.launch_pair`). 0: the whole k in one launch."""
    diagonal_k_panel: int = 0
    """k per launch of scheme II's diagonal products (0: the whole k); later panels add into the
    int8 residues. H200, n = 16384, 17 moduli (``bench/gpu_gemm.py --tune-ozaki2``, 2026-12-01):
    one product per launch 1126 TOP/s with 8192, 1013 with the whole k; all products per launch
    1012 / 960 (4096: 884-895)."""
    pair_launch_groups: int = 0
    """Scheme I groups per pair-kernel launch; 0: all of them (every CTA loops over the groups).
    H200, n = 16384, 7 slices: with k tiles of 128 one group per launch 1221 TOP/s, all 1173;
    with k tiles of 64 1019 / 1010 (2026-12-01)."""
    diagonal_pair_k: int = 0
    """k tile of scheme II's products (0: ``pair_k``). H200, n = 16384, 17 moduli, one product per
    launch, k panels of 8192 (``bench/gpu_gemm.py --tune-diagonal``, 2026-12-01): 256 x 128 x 128
    1221 TOP/s against 1135 with k tiles of 64; 128 x 128 x 128 at occupancy 2 without clusters
    1205; GROUP_M 4 / 16 1100 / 1069; 128 x 256 x 64 1082."""

    diagonal_launch_groups: int = 0
    """Products (moduli) per launch of scheme II's diagonal products; 0: as many as keep int32
    offsets (every CTA loops over the launch's products). One per launch measured 11% faster on
    the H200 (see ``diagonal_k_panel``)."""
    crt_rows: int = 16
    crt_cols: int = 64
    crt_occupancy: int = 4
    """CRT tile and CTAs per SM: the float64 piece sums (4 for 16-17 moduli, up to 7) live in
    registers. CPU AOT, sm_90, 4 pieces: 16 x 64 at occupancy 4 116 registers, 32 x 64 at
    occupancy 1 220, no spills. H200, n = 16384, 17 moduli, 4 pieces (``bench/gpu_gemm.py
    --tune-ozaki2``, 2026-12-01): 8.2 ms at 16 x 64 / occupancy 4, 9.9-10.0 ms at occupancy 2,
    10-11 ms for 8 x 64 and 16 x 32 at occupancy 4, 20.9 ms at 32 x 64 / occupancy 1 (22.4 ms
    there with 7 pieces, before the piece count followed M)."""
    residue_rows: int = 16
    residue_cols: int = 128
    """Residue tile: 32 x 128 (the split's) spills on sm_90 (CPU AOT: 255 registers, 8 B stack),
    16 x 128 needs 149 (C-ordered rows) / 251 (transposed rows) registers and no stack."""

    @property
    def diagonal_k(self) -> int:
        """The k tile of scheme II's products."""
        return self.diagonal_pair_k or self.pair_k


CONFIGS: dict[tuple[int, int], TileConfig] = {
    # H100/H200: 256x128 int8 tiles on a 2-CTA cluster (multicast TMA), occupancy 1, GROUP_M 8,
    # k tiles of 128, k panels of 4096, one group per launch: scheme I 1221 TOP/s at n = 16384
    # (7 slices), against 1173 with all groups per launch and 1010-1019 with k tiles of 64;
    # 128x128x128 at occupancy 2 870, k panels of 8192 965 (bench/gpu_gemm.py --tune, 2026-12-01).
    # Split (and gap-code) tile 8 x 256: 3.30 / 3.45 TB/s on C-ordered / transposed rows at
    # n = 16384, 8 slices (78% / 82% of the 4.23 TB/s copy rate in the same run; 16 x 128
    # 2.97 / 3.19; bench/gpu_gemm.py --tune-split, 2026-12-01).
    (9, 0): TileConfig(split_rows=8, split_cols=256, pair_m=256, pair_n=128, pair_k=128,
                       group_m=8, combine_rows=32, combine_cols=64, pair_launch_groups=1,
                       diagonal_k_panel=8192, diagonal_launch_groups=1),
    # B200: TileGym's Blackwell GEMM tiles (256x256, 2-CTA clusters) scaled to int8 k.
    (10, 0): TileConfig(split_rows=32, split_cols=128, pair_m=256, pair_n=256, pair_k=128,
                        group_m=8, combine_rows=32, combine_cols=64),
}

# Kernel hints per target (ct.ByTarget keys "sm_90", "sm_100"; no default on purpose).
PAIR_OCCUPANCY = ct.ByTarget(sm_90=1, sm_100=1)
PAIR_NUM_CTAS = ct.ByTarget(sm_90=2, sm_100=2)


def config_for(capability: tuple[int, int]) -> TileConfig:
    """The tile config of a compute capability; raises for one not in :data:`CONFIGS`."""
    try:
        return CONFIGS[tuple(capability)]
    except KeyError:
        raise RuntimeError(
            f"no cuTile tile config for compute capability {capability[0]}.{capability[1]}; "
            f"known: {', '.join(f'{a}.{b}' for a, b in CONFIGS)}") from None


# ----------------------------------------------------------------------------------------
# 2. Tile helpers (inlined into the kernels)
# ----------------------------------------------------------------------------------------

def _pow2(e):
    """``2.0**e`` for an int64 tile ``e`` in [-1022, 1023], exactly (bitcast of the exponent field)."""
    return ct.bitcast((e + 1023) << 52, ct.float64)


def _pow2_const(e: int):
    """``2.0**e`` as a float64 (1, 1) tile, for a constant ``e`` in [-1022, 1023]."""
    return _pow2(ct.full((1, 1), e, ct.int64))


def _ldexp(x, sc):
    """``np.ldexp(x, sc)`` with one rounding, for float64 ``x`` that is 0 or has
    ``2**-400 <= |x| < 2**900`` and int64 ``sc``.

    Normal results: ``x * 2**a * 2**b`` (both factors of one sign, the intermediate
    between x and the result, so exact up to an overflow that the result has too).
    Subnormal results: ``rint(|x| * 2**(sc+1074))`` on the integer grid, then times
    2**-1074 (exact). ``sc`` is clamped to [-2044, 2046], which changes no result for
    such ``x`` (all overflow, or all underflow to a signed zero).
    """
    sc = ct.minimum(ct.maximum(sc, -2044), 2046)
    ex = ((ct.bitcast(x, ct.int64) >> 52) & 0x7FF) - 1023
    a = sc >> 1
    normal = x * _pow2(a) * _pow2(sc - a)
    y = ct.abs(x) * _pow2(ct.minimum(sc + 1074, 1023))
    r = (y + _TWO52) - _TWO52
    r = ct.where(x < 0.0, -r, r)
    sub = r * _pow2(ct.full((1, 1), -52, ct.int64)) * _pow2(ct.full((1, 1), -1022, ct.int64))
    return ct.where(ex + sc >= -1022, normal, sub)


def _final_scale(x, sc):
    """``engines.base.final_scale``: :func:`_ldexp`, then the two BLAS details -- +-DBL_MAX
    where only the operands' rounding made the result overflow (``|x 2**(sc-1)| <= 2**1023``),
    and +0.0 for a zero (a BLAS sums from +0.0). Selects, not arithmetic, so no compiler
    folding can change them."""
    out = _ldexp(x, sc)
    dbl_max = ct.bitcast(ct.full((1, 1), 0x7FEFFFFFFFFFFFFF, ct.int64), ct.float64)
    clamp = (ct.abs(out) > dbl_max) & (ct.abs(_ldexp(x, sc - 1)) <= _pow2_const(1023))
    out = ct.where(clamp, ct.where(x < 0.0, -dbl_max, dbl_max), out)
    return ct.where(out == 0.0, 0.0, out)


def _rint_small(t):
    """``rint(t)`` (half to even) for ``|t| < 2**51``."""
    return (t + _RINT_MAGIC) - _RINT_MAGIC


def _rint_any(t):
    """``rint(t)`` for any finite float64 (``|t| >= 2**52`` is already an integer)."""
    mag = ct.abs(t)
    r = (mag + _TWO52) - _TWO52
    r = ct.where(t < 0.0, -r, r)
    return ct.where(mag >= _TWO52, t, r)


TABLE_COLS = 16
"""Row layout of the scheme II constant table (one row per modulus, one tile load per row):
``p, fl(1/p), lo, hi, balanced(2**52 mod p)``, the pieces of ``W_l`` (up to 7, columns 5-11),
``balanced(2**16 mod p), balanced(2**32 mod p), balanced(2**48 mod p)`` (columns 12-14), zero."""
WEIGHT_COL = 5
LIMB_COL = 12
LIMB_BITS = 16
FLOAT32_RESIDUE_BITS = 63
"""Up to this many bits the residue kernel works in float32: ``X = sum_j l_j 2**(16 j)`` with
balanced limbs ``|l_j| <= 2**15`` (j < 4), so ``sum_j l_j (2**(16 j) mod p)`` (constants at most
128 in magnitude) is an integer below ``2**15 * 385 < 2**24``: exact in float32."""
MP_COLS = 8
"""The pieces of M as one (1, 8) zero-padded row (tile shapes are powers of two)."""


def _entry(row, i: int):
    """Column ``i`` of a (1, TABLE_COLS) table row as a (1, 1) tile."""
    return ct.extract(row, (0, i), (1, 1))


def _balanced(y, row):
    """Balanced residue of exact integers ``|y| <= 2**53 - 2**10`` modulo ``p`` (``row``: the
    modulus's table row): one reduction and the range fix-ups, step 1 of :mod:`ozhpc.engines.crt`
    (unique, so the rounding of the quotient does not matter)."""
    p = _entry(row, 0)
    r = y - _rint_small(y * _entry(row, 1)) * p
    r = ct.where(r > _entry(row, 3), r - p, r)
    return ct.where(r < _entry(row, 2), r + p, r)


def _float32_limbs(big):
    """Balanced 16-bit limbs ``(l0, l1, l2, l3)`` (float32) of exact float64 integers
    ``|big| <= 2**63``: ``big = sum_j l_j 2**(16 j)``, each ``|l_j| <= 2**15`` (rint of a quotient
    below 2**51, the rests exact)."""
    l3 = _rint_small(big * _LIMB_DOWN[2])
    rest = big - l3 * _LIMB_UP[2]
    l2 = _rint_small(rest * _LIMB_DOWN[1])
    rest = rest - l2 * _LIMB_UP[1]
    l1 = _rint_small(rest * _LIMB_DOWN[0])
    rest = rest - l1 * _LIMB_UP[0]
    return (rest.astype(ct.float32), l1.astype(ct.float32), l2.astype(ct.float32),
            l3.astype(ct.float32))


def _float32_residue(limbs, row):
    """Balanced residue (int8) of ``sum_j limbs[j] 2**(16 j)`` modulo ``p`` (``row``: the modulus's
    float64 table row), in float32: ``y = sum_j l_j c_j`` (``c_j = balanced(2**(16 j) mod p)``) is an
    exact integer, ``|y| < 2**24`` (:data:`FLOAT32_RESIDUE_BITS`); the quotient ``q = rint(fl(y *
    fl(1/p)))`` (relative error below 2**-22, ``|y / p| < 2**20`` for p > 16) is within 5/8 of ``y / p``,
    so ``y - q p`` (exact) lies within 5/8 p of 0 and one fix-up each way puts it in [lo, hi]: the
    unique balanced residue. To int8 through the bits of ``r + 1.5 * 2**23`` (no conversion)."""
    p = _entry(row, 0).astype(ct.float32)
    y = limbs[0]
    for j in ct.static_iter(range(1, 4)):
        y = y + limbs[j] * _entry(row, LIMB_COL + j - 1).astype(ct.float32)
    inv = ct.full((1, 1), 1.0, ct.float32) / p
    q = (y * inv + _RINT_MAGIC32) - _RINT_MAGIC32
    r = y - q * p
    r = ct.where(r > _entry(row, 3).astype(ct.float32), r - p, r)
    r = ct.where(r < _entry(row, 2).astype(ct.float32), r + p, r)
    return ct.bitcast(r + _RINT_MAGIC32, ct.int32).astype(ct.int8)


def _small_int8(r):
    """Exact integers in [-128, 127] (float64) to int8: the low bits of ``r + 1.5 * 2**52``
    are r in two's complement (an add and a truncation instead of a float-to-int conversion)."""
    return ct.bitcast(r + _RINT_MAGIC, ct.int64).astype(ct.int8)


MOD_COLS = 4
"""Row layout of the pair kernel's int32 modulus table (scheme II): ``p, 2**16 mod p, lo, hi``
(lo..hi the balanced range, :data:`ozhpc.engines.crt.CrtTables.moduli` columns 2-3)."""


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
    t = y.astype(ct.float32) * inv + ct.full((1, 1), _RINT_MAGIC32, ct.float32)
    r = y - (ct.bitcast(t, ct.int32) - _RINT_MAGIC32_BITS) * p
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


def _group_sum(acc, DA, EB, g, s, bm, bn, ktiles, TM: ConstInt, TN: ConstInt, TK: ConstInt,
               DIAGONAL: ConstBool):
    """``acc`` + int32 ``sum_{p+q=g} D_p[bm] @ E_q[bn]^T`` over all k-tiles (nested loops: a
    flattened (pair, k) loop measured more register spills). DIAGONAL: the one pair (g, g)."""
    if DIAGONAL:
        first = g
        last = g
    else:
        first = max(0, g - s + 1)
        last = min(g, s - 1)
    for p in range(first, last + 1):
        if DIAGONAL:
            q = p
        else:
            q = g - p
        for kt in range(ktiles):
            a = ct.load(DA, (p, bm, kt), (1, TM, TK), padding_mode=ZERO).reshape((TM, TK))
            # E_q is stored (n, k), k contiguous: load a transposed (TK, TN) tile.
            b = ct.load(EB, (q, kt, bn), (1, TK, TN), order=(0, 2, 1),
                        padding_mode=ZERO).reshape((TK, TN))
            acc = ct.mma(a, b, acc)
    return acc


def _group_weight(g):
    """``2**(-BITS*(g+2))`` as a float64 scalar tile."""
    return _pow2(ct.astype(-BITS * (g + 2), ct.int64))


def _row_col_scale(RE, CE, bm, bn, TM: ConstInt, TN: ConstInt):
    re = ct.load(RE, (bm,), (TM,), padding_mode=ZERO).astype(ct.int64).reshape((TM, 1))
    ce = ct.load(CE, (bn,), (TN,), padding_mode=ZERO).astype(ct.int64).reshape((1, TN))
    return re + ce


# ----------------------------------------------------------------------------------------
# 3. Kernels
# ----------------------------------------------------------------------------------------

def _row_tile(X, EXPS, bi, bj, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """Tile (bi, bj) of the rows of X as float64 (TR, TC), and its row exponents as int64 (TR, 1).

    TRANS: X holds the transpose of the rows (a C-contiguous (cols, rows) array); the tile is
    read along its contiguous axis and transposed in registers.
    """
    if TRANS:
        x = ct.transpose(ct.load(X, (bj, bi), (TC, TR), padding_mode=ZERO))
    else:
        x = ct.load(X, (bi, bj), (TR, TC), padding_mode=ZERO)
    return x, ct.load(EXPS, (bi,), (TR,), padding_mode=ZERO).astype(ct.int64).reshape((TR, 1))


@stored_kernel
def _split_kernel(X, EXPS, OUT: BigArray, nslices: int,
                  TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """All ``nslices`` int8 digit slices of a (TR, TC) tile of the rows of X (TRANS: see
    :func:`_row_tile`).

    The tile is scaled once, ``y = x * 2**-e`` (two factors), then each slice is
    ``u = y * 128 + 1.5 * 2**52`` (one FMA; the low byte of ``u`` is the digit in two's
    complement: no float-to-int conversion), ``d = u - 1.5 * 2**52``, ``y = y * 128 - d``:
    three float64 operations per digit instead of five and a conversion (the C-ordered split
    had 131 registers, three CTAs per SM; now 96). Exact: see the module docstring.
    """
    bi = ct.bid(0)
    bj = ct.bid(1)
    x, e = _row_tile(X, EXPS, bi, bj, TR, TC, TRANS)
    a = (-e) >> 1
    y = x * _pow2(a) * _pow2(-e - a)
    for p in range(nslices):
        u = y * _DIGIT_RADIX + _RINT_MAGIC
        ct.store(OUT, (p, bi, bj), ct.bitcast(u, ct.int64).astype(ct.int8).reshape((1, TR, TC)))
        y = y * _DIGIT_RADIX - (u - _RINT_MAGIC)


def _pair_body(DA, EB, S, MODS, g0, TM: ConstInt, TN: ConstInt, TK: ConstInt, GROUP_M: ConstInt,
               ACCUMULATE: ConstBool, DIAGONAL: ConstBool):
    """``S[g] = sum_{p+q=g0+g} DA[p] @ EB[q]^T`` in int32, for every g < S.shape[0]
    (``S[g] +=`` with ACCUMULATE: the launcher's k panels; ``g0``: the first group of a launch
    that covers only some groups).

    DIAGONAL (scheme II): ``S[g]`` is int8, the balanced residue of ``(S[g] +) DA[g] @ EB[g]^T``
    modulo ``MODS[g, 0]`` (:func:`_int8_residue`; the CRT needs nothing more): a quarter of
    the int32 sums' store and of the CRT's reads. Otherwise MODS is not read.

    The launcher guarantees ``k * group_product_bound(s, d) < 2**31`` (it chunks k on the host;
    scheme II: ``k * 128**2 + 128``). The epilogue stores integers: converting the 128x128
    accumulator to float64 inside this kernel spilled registers (cuobjdump: 2-4 KB stack) and
    ran at a quarter of the speed.
    """
    s = DA.shape[0]
    num_m = ct.cdiv(DA.shape[1], TM)
    num_n = ct.cdiv(EB.shape[1], TN)
    ktiles = ct.cdiv(DA.shape[2], TK)
    # One C tile per block, in grouped order. (A persistent grid-stride loop over tiles
    # cost 96 B of spills on sm_90 and measured slower.)
    bm, bn = _swizzle(ct.bid(0), num_m, num_n, GROUP_M)
    for g in range(S.shape[0]):
        if ACCUMULATE:
            acc = ct.load(S, (g, bm, bn), (1, TM, TN), padding_mode=ZERO).reshape((TM, TN)).astype(ct.int32)
        else:
            acc = ct.zeros((TM, TN), ct.int32)
        acc = _group_sum(acc, DA, EB, g0 + g, s, bm, bn, ktiles, TM, TN, TK, DIAGONAL)
        if DIAGONAL:
            res = _int8_residue(acc, ct.load(MODS, (g, 0), (1, MOD_COLS)))
            ct.store(S, (g, bm, bn), res.reshape((1, TM, TN)))
        else:
            ct.store(S, (g, bm, bn), acc.reshape((1, TM, TN)))


# Two index widths of one body. On sm_90 tileiras 13.4 emits TMA loads/stores and a
# warp-specialised producer/consumer layout only when it can bound every shape and
# stride: int32 indices (or int64 constants, measured no faster and one compile per
# shape; docs/gpu_tma_investigation.md); with dynamic int64 it falls back to cp.async.
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


def fits_int32(a) -> bool:
    """Whether every extent and element offset of array view ``a`` (shape, byte strides,
    itemsize: CuPy/NumPy) is below 2**31, so int32 index arithmetic cannot overflow
    however the compiler computes addresses."""
    if any(d == 0 for d in a.shape):
        return True
    last = sum((d - 1) * abs(st) for d, st in zip(a.shape, a.strides)) // a.itemsize
    return max(a.shape) < INT32_INDEX_LIMIT and last < INT32_INDEX_LIMIT


@stored_kernel
def _combine_kernel(ACC: BigArray, RE, CE, C, TM: ConstInt, TN: ConstInt):
    """``C = ldexp(sum_{g=d-1..0} ACC[g] * 2**(-7(g+2)), e_i + f_j)``, NumPy's order.

    ACC is float64 group accumulators or the int32 group sums of :func:`_pair_kernel`
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
    ct.store(C, (bm, bn), _final_scale(total, _row_col_scale(RE, CE, bm, bn, TM, TN)))


@stored_kernel
def _residue_kernel(X, EXPS, TAB, OUT: BigArray, nmod: int, bits: int,
                    TR: ConstInt, TC: ConstInt, TRANS: ConstBool, SHORT: ConstBool, FLOAT32: ConstBool):
    """Scheme II: balanced residues of ``X = rint(x * 2**(bits - e_i))`` modulo each of the
    ``nmod`` moduli in TAB, for a (TR, TC) tile of the rows of X (TRANS as in the split).

    FLOAT32 (``bits <= 63``): X as four balanced 16-bit limbs, every residue in float32
    (:func:`_float32_residue`; float64 arithmetic bounded the kernel: about ten float64
    operations per residue). Otherwise ``X`` (up to 2**100) is split exactly as
    ``H * 2**52 + L``; its residue is ``balanced(balanced(H) * (2**52 mod p) + balanced(L))``,
    or with SHORT (``bits <= 80``: ``|H * (2**52 mod p)| < 2**35``, so ``H * c + L`` is an exact
    integer below 2**52) ``balanced(H * (2**52 mod p) + L)``: the same unique residue with one
    reduction.
    """
    bi = ct.bid(0)
    bj = ct.bid(1)
    x, e = _row_tile(X, EXPS, bi, bj, TR, TC, TRANS)
    shift = bits - e
    a = shift >> 1
    big = _rint_any(x * _pow2(a) * _pow2(shift - a))
    # The next modulus's table row is loaded before this one's arithmetic (as in the CRT kernel).
    row_next = ct.load(TAB, (0, 0), (1, TABLE_COLS))
    if FLOAT32:
        limbs = _float32_limbs(big)
        for l in range(nmod):
            row = row_next
            row_next = ct.load(TAB, (min(l + 1, nmod - 1), 0), (1, TABLE_COLS))
            ct.store(OUT, (l, bi, bj), _float32_residue(limbs, row).reshape((1, TR, TC)))
    else:
        high = _rint_small(big * (1.0 / _crt.SPLIT))
        low = big - high * _crt.SPLIT
        for l in range(nmod):
            row = row_next
            row_next = ct.load(TAB, (min(l + 1, nmod - 1), 0), (1, TABLE_COLS))
            if SHORT:
                r = _balanced(high * _entry(row, 4) + low, row)
            else:
                r = _balanced(_balanced(high, row) * _entry(row, 4) + _balanced(low, row), row)
            ct.store(OUT, (l, bi, bj), _small_int8(r).reshape((1, TR, TC)))


@stored_kernel
def _crt_kernel(ACC: BigArray, RE, CE, TAB, MP, INVM, C, shift: int,
                TM: ConstInt, TN: ConstInt, PIECES: ConstInt, RESIDUES: ConstBool):
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
    # Powers of two as float64 tiles: a Python float literal in a kernel may be typed float32,
    # where 2**72 and up overflow (the first H200 run gave NaN everywhere).
    unit = _pow2_const(_crt.PIECE_BITS)
    s = tuple(ct.zeros((TM, TN), ct.float64) for _ in ct.static_iter(range(PIECES)))
    nmod = ACC.shape[0]
    # The next modulus's sums are loaded before this one's arithmetic (software pipelining:
    # the runtime loop otherwise waits for each load; 27 ms at n = 16384, 17 moduli).
    y_next = ct.load(ACC, (0, bm, bn), (1, TM, TN), padding_mode=ZERO).reshape((TM, TN))
    for l in range(nmod):
        y = y_next
        y_next = ct.load(ACC, (min(l + 1, nmod - 1), bm, bn), (1, TM, TN),
                         padding_mode=ZERO).reshape((TM, TN))
        row = ct.load(TAB, (l, 0), (1, TABLE_COLS))
        if RESIDUES:
            r = y.astype(ct.float64)
        else:
            r = _balanced(y.astype(ct.float64), row)
        s = tuple(s[t] + r * _entry(row, WEIGHT_COL + t) for t in ct.static_iter(range(PIECES)))
    x = s[0]
    for t in ct.static_iter(range(1, PIECES)):
        x = x * unit + s[t]
    q = _rint_small(x * ct.load(INVM, (0, 0), (1, 1)))
    m_row = ct.load(MP, (0, 0), (1, MP_COLS))
    s = tuple(s[t] - q * _entry(m_row, t) for t in ct.static_iter(range(PIECES)))
    # Carries from the least significant piece up (NumPy: pieces[t-1] += rint(pieces[t] / unit)).
    inv_unit = _pow2_const(-_crt.PIECE_BITS)
    low = ()
    carried = s[PIECES - 1]
    for t in ct.static_iter(range(PIECES - 1, 0, -1)):
        c = _rint_small(carried * inv_unit)
        low = (carried - c * unit,) + low
        carried = s[t - 1] + c
    pieces = (carried,) + low
    total = pieces[PIECES - 1]
    for t in ct.static_iter(range(PIECES - 2, -1, -1)):
        total = total + pieces[t] * _pow2_const(_crt.PIECE_BITS * (PIECES - 1 - t))
    ct.store(C, (bm, bn), _final_scale(total, _row_col_scale(RE, CE, bm, bn, TM, TN) + shift))


@stored_kernel
def _gap_kernel(X, EXPS, OUT: BigArray, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """The "auto" statistic's gap codes (:meth:`Engine.entry_gaps`) of a (TR, TC) tile of the rows
    of X: ``clip(e_i - frexp_exponent(|x|), 0, MAX_GAP)``, NO_GAP for 0, inf and NaN (and for the
    zero padding). The exponent comes from the bit pattern (subnormals scaled by 2**64 first)."""
    bi = ct.bid(0)
    bj = ct.bid(1)
    x, e = _row_tile(X, EXPS, bi, bj, TR, TC, TRANS)
    field = (ct.bitcast(x, ct.int64) >> 52) & 0x7FF
    field_sub = (ct.bitcast(ct.abs(x) * _pow2_const(64), ct.int64) >> 52) & 0x7FF
    ex = ct.where(field == 0, field_sub - (1022 + 64), field - 1022)
    gap = ct.minimum(ct.maximum(e - ex, 0), MAX_GAP)
    keep = (field != 0x7FF) & (x != 0.0)
    ct.store(OUT, (bi, bj), ct.where(keep, gap, NO_GAP).astype(ct.int32).astype(ct.int8))


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


KERNELS = {
    "split": _split_kernel,
    "pair": _pair_kernel,
    "pair_int64": _pair_kernel_int64,
    "combine": _combine_kernel,
    "residue": _residue_kernel,
    "crt": _crt_kernel,
    "gaps": _gap_kernel,
    "count": _count_kernel,
    "row_stats": _row_stats_kernel,
}


# ----------------------------------------------------------------------------------------
# 4. Launchers (grid + kernel cached per (shape, dtype, device, capability))
# ----------------------------------------------------------------------------------------

GAP_COLS = 256
"""Gap-code buffers have a multiple of this many columns (NO_GAP padding): whole count tiles."""
CRT_WIDE_PIECES = 6
"""From this many CRT pieces (M above 2**180: about 80 bits and up) the CRT kernel runs at half
``crt_occupancy``: 16 x 64 at occupancy 4 spills 56 B with 6 pieces and 104 B with 7, at
occupancy 2 it needs 180 / 200 registers and no stack (CPU AOT, sm_90; 4-5 pieces: 116-128)."""
ROW_STATS_TILE = (32, 64)
"""The row-statistics kernel's tile (rows, columns): 167-201 registers, no spills; 32 x 128
spills 40 B when transposed (CPU AOT, sm_90)."""
COUNT_TILE = (16, 32)
"""The count kernel's tile in int32 words (4 gap codes each; 4 * width divides GAP_COLS)."""
STAT_CTAS_PER_SM = 8
"""The row-statistics and count kernels split the columns into parts until their grid has
about this many blocks per SM (each block loops over its part; the engine reduces the parts)."""


def _tile_grid(rows: int, cols: int, tile_rows: int, tile_cols: int) -> tuple[int, int, int]:
    """One block per (tile_rows, tile_cols) tile of a rows x cols array."""
    return (_cdiv(rows, tile_rows), _cdiv(cols, tile_cols), 1)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Launcher:
    """Grids and hint variants for one device; ``stream`` is anything ``ct.launch`` takes.

    ``launch_*`` take device arrays (``__cuda_array_interface__``), already validated
    and laid out by the engine: slices (s, rows, k) k-contiguous, accumulators and
    outputs C-contiguous, exponents int32.
    """

    def __init__(self, device: int, capability: tuple[int, int], num_sms: int,
                 config: TileConfig | None = None,
                 occupancy: int | None = None, num_ctas: int | None = None,
                 pair_index: str = "auto"):
        if pair_index != "auto" and pair_index not in PAIR_KERNELS:
            raise ValueError(f"pair_index must be 'auto' or one of {sorted(PAIR_KERNELS)}, "
                             f"got {pair_index!r}")
        self.device = device
        self.capability = tuple(capability)
        self.config = config or config_for(self.capability)
        self.num_sms = num_sms
        self.occupancy = occupancy
        self.num_ctas = num_ctas
        self.pair_index = pair_index
        self.last_pair_index: str | None = None
        self.stat_ctas_per_sm = STAT_CTAS_PER_SM
        self._cache: dict = {}
        hints = {}
        if occupancy is not None:
            hints["occupancy"] = occupancy
        if num_ctas is not None:
            hints["num_ctas"] = num_ctas
        self._pair = {name: k.replace_hints(**hints) if hints else k
                      for name, k in PAIR_KERNELS.items()}
        occupancy = self.config.crt_occupancy
        self._crt = {wide: _crt_kernel.replace_hints(occupancy=max(1, occupancy // 2) if wide else occupancy)
                     for wide in (False, True)}

    def pair_index_for(self, *arrays) -> str:
        """The pair kernel (index width) for these arrays: int32 when they all fit."""
        if self.pair_index != "auto":
            if self.pair_index == "int32" and not all(fits_int32(a) for a in arrays):
                raise ValueError("pair_index='int32' but an array has offsets >= 2**31: "
                                 + ", ".join(f"{a.shape}" for a in arrays))
            return self.pair_index
        return "int32" if all(fits_int32(a) for a in arrays) else PAIR_INDEX_FALLBACK

    def _key(self, name, *arrays):
        return (name, tuple(tuple(a.shape) for a in arrays), tuple(str(a.dtype) for a in arrays),
                self.device, self.capability)

    def _pair_grid(self, m: int, n: int) -> tuple[int]:
        cfg = self.config
        return (max(1, _cdiv(m, cfg.pair_m) * _cdiv(n, cfg.pair_n)),)

    def launch_split(self, stream, x, trans: bool, exps, out, nslices: int) -> None:
        cfg = self.config
        grid = _tile_grid(out.shape[1], out.shape[2], cfg.split_rows, cfg.split_cols)
        ct.launch(stream, grid, _split_kernel,
                  (x, exps, out, int(nslices), cfg.split_rows, cfg.split_cols, bool(trans)))

    def launch_pair(self, stream, da, eb, sums, mods, *, diagonal: bool = False,
                    accumulate: bool = False, first_group: int = 0) -> None:
        """``sums[g] (+)= sum_{p+q=first_group+g} da[p] @ eb[q].T`` (int32; ``diagonal``: int8
        residues of ``(sums[g] +) da[g] @ eb[g].T`` modulo ``mods[g, 0]``, ``mods`` (G, MOD_COLS)
        int32, ``first_group`` 0); the caller bounds k.

        One launch per k panel of ``config.pair_k_panel``, later panels adding into ``sums``:
        within a panel the GROUP_M row tiles of A and the B tiles they share stay in L2
        across the pairs of a group (the whole k of a large problem does not fit there).
        """
        cfg = self.config
        k = da.shape[2]
        width = (cfg.diagonal_k_panel if diagonal else cfg.pair_k_panel) or max(k, 1)
        for k0 in range(0, max(k, 1), width):
            a, b = da[:, :, k0:k0 + width], eb[:, :, k0:k0 + width]
            key = self._key("pair", a, b, sums) + (a.strides, b.strides, sums.strides)
            entry = self._cache.get(key)
            if entry is None:
                entry = self._cache[key] = (self._pair_grid(a.shape[1], b.shape[1]),
                                            self.pair_index_for(a, b, sums))
            grid, index = entry
            self.last_pair_index = index
            ct.launch(stream, grid, self._pair[index],
                      (a, b, sums, mods, int(first_group), cfg.pair_m, cfg.pair_n,
                       cfg.diagonal_k if diagonal else cfg.pair_k, cfg.group_m,
                       bool(accumulate or k0 > 0), bool(diagonal)))

    def launch_combine(self, stream, acc, row_exps, col_exps, c) -> None:
        cfg = self.config
        grid = _tile_grid(c.shape[0], c.shape[1], cfg.combine_rows, cfg.combine_cols)
        ct.launch(stream, grid, _combine_kernel,
                  (acc, row_exps, col_exps, c, cfg.combine_rows, cfg.combine_cols))


    def launch_residues(self, stream, x, trans: bool, exps, table, out, bits: int) -> None:
        cfg = self.config
        grid = _tile_grid(out.shape[1], out.shape[2], cfg.residue_rows, cfg.residue_cols)
        ct.launch(stream, grid, _residue_kernel,
                  (x, exps, table, out, int(out.shape[0]), int(bits), cfg.residue_rows, cfg.residue_cols,
                   bool(trans), bits <= _crt.SHORT_BITS, bits <= FLOAT32_RESIDUE_BITS))

    def launch_gaps(self, stream, x, trans: bool, exps, out) -> None:
        cfg = self.config
        grid = _tile_grid(out.shape[0], out.shape[1], cfg.split_rows, cfg.split_cols)
        ct.launch(stream, grid, _gap_kernel, (x, exps, out, cfg.split_rows, cfg.split_cols, bool(trans)))

    def column_parts(self, rows: int, cols: int, tile: tuple[int, int], max_tiles: int | None = None) -> int:
        """Column parts for the row-statistics / count kernels: about ``stat_ctas_per_sm``
        blocks per SM, at most one tile per part, at most ``max_tiles`` tiles per part."""
        row_blocks, col_tiles = max(1, _cdiv(rows, tile[0])), max(1, _cdiv(cols, tile[1]))
        parts = _cdiv(self.stat_ctas_per_sm * self.num_sms, row_blocks)
        if max_tiles is not None:
            parts = max(parts, _cdiv(col_tiles, max_tiles))
        return max(1, min(parts, col_tiles))

    def launch_row_stats(self, stream, x, trans: bool, amax, bad) -> None:
        """``amax`` (float64) and ``bad`` (int32): (parts, rows), parts from :meth:`column_parts`."""
        ct.launch(stream, (max(1, _cdiv(amax.shape[1], ROW_STATS_TILE[0])), amax.shape[0], 1),
                  _row_stats_kernel, (x, amax, bad, *ROW_STATS_TILE, bool(trans)))

    def launch_count(self, stream, gaps, limits, out) -> None:
        """``gaps``: the int8 gap codes viewed as int32 (columns a multiple of ``GAP_COLS // 4``);
        ``limits`` (rows, L), L a power of two <= 8; ``out`` (parts, rows, L), parts from
        :meth:`column_parts` (in words) with COUNT_MAX_TILES."""
        ct.launch(stream, (max(1, _cdiv(gaps.shape[0], COUNT_TILE[0])), out.shape[0], 1), _count_kernel,
                  (gaps, limits, out, *COUNT_TILE, limits.shape[1]))

    def launch_crt(self, stream, acc, row_exps, col_exps, tables, c, shift: int, pieces: int) -> None:
        """``tables``: device arrays (table (N, TABLE_COLS), m_pieces (1, MP_COLS), inv_m (1, 1));
        ``pieces``: :attr:`CrtTables.pieces`; an int8 ``acc`` holds balanced residues."""
        cfg = self.config
        grid = _tile_grid(c.shape[0], c.shape[1], cfg.crt_rows, cfg.crt_cols)
        ct.launch(stream, grid, self._crt[pieces >= CRT_WIDE_PIECES],
                  (acc, row_exps, col_exps, *tables, c, int(shift), cfg.crt_rows, cfg.crt_cols,
                   int(pieces), str(acc.dtype) == "int8"))


def widest_group(slices: int, ngroups: int) -> int:
    """Most slice pairs in one group g < ngroups."""
    return max(min(g, slices - 1) - max(0, g - slices + 1) + 1 for g in range(ngroups))


def k_chunk(slices: int, ngroups: int, k_limit: int | None = None, align: int = 16,
            diagonal: bool = False) -> int:
    """Longest k (a multiple of ``align``) whose int32 group sums cannot overflow.

    From the digit bounds (127 for slice 0, 64 after: :func:`base.group_product_bound`;
    ``diagonal``: one product of residues of at most 128); ``k_limit`` (tests only) caps
    k-chunk x pairs further, to force chunking.
    """
    # diagonal: the pair kernel adds the products to residues already there (|r| <= 128)
    bound = _crt.RESIDUE_MAX**2 if diagonal else group_product_bound(slices, ngroups)
    kc = (2**31 - 1 - (_crt.RESIDUE_MAX if diagonal else 0)) // bound
    if k_limit is not None:
        kc = min(kc, k_limit // (1 if diagonal else widest_group(slices, ngroups)))
    return max(align, kc // align * align)
