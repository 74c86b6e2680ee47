"""One pass over whole rows: the scales, the inf/NaN count and the row sizes before the plan
(:func:`ozhpc.engines.statistics.row_summary`, bit for bit).

One block owns TR whole rows and reads them twice: first their largest finite ``|x|`` (hence the
row exponents) and inf/NaN count, then the sums that depend on the exponents. One launch per
operand and one copy of both operands' results to the host is all a call waits for before its
plan; the second read comes from L2 for small operands.
"""
from __future__ import annotations

import cuda.tile as ct

from ..kernel_store import stored_kernel
from ..statistics import EXP, GAPS, GAP_MAX, NNZ, NONFINITE, NORM, NORM_BITS, SQ
from .config import cdiv
from .ieee import EXP_MASK, FRAC_MASK, as_int, field, frexp_exponent, kept, ldexp_rne
from .tile_math import ZERO, ConstBool, ConstInt, pow2

SUMMARY_TILE = (16, 64)
"""Rows per block and columns per load (transposed rows: the loaded tile is (64, 16))."""
SUMMARY_OCCUPANCY = 2
"""Blocks per SM: 128 registers and no stack for either layout with the 16-aligned arrays' facts
(CPU AOT, sm_90; at 4 the C-ordered layout spills 304 B, the transposed 120 B; without the hint
tileiras takes 255 registers). H200, n = 16384 (``bench/speed/row_summary_kernel.py``,
2026-12-04), the same bits: 1.40 ms along rows, 1.40 transposed, 2.79 for complex rows of 2n,
against 2.61 / 2.08 / 5.11 at occupancy 4."""


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


def exponent_of(r):
    """:func:`ozhpc.engines.digits.exponents` of row maxima ``r`` (finite, >= 0; int64): frexp's
    exponent, plus one where ``rint(r 2**(7 - e)) > 127``, i.e. where the top 7 of the 52 fraction
    bits are all set (``r 2**(7 - e) >= 127.5``); 0 for a zero row."""
    bits = ct.bitcast(r, ct.int64)
    sub = ct.bitcast(r * pow2(ct.full((1, 1), 64, ct.int64)), ct.int64)
    frac = ct.where(field(r) == 0, sub, bits) & FRAC_MASK
    e = frexp_exponent(r) + ((frac >> 45) == 127).astype(ct.int64)
    return ct.where(r == 0.0, 0, e)


def _terms(x, e):
    """Per entry: (nonzero finite, ``ceil(|x| 2**(32-e)) + 1``, ``ceil((|x| 2**-e)**2 2**32) + 1``,
    ``min(e - frexp(x), 63)``), the terms of :func:`ozhpc.engines.statistics.magnitude_stats`."""
    a = ct.abs(x)
    keep = (field(a) != EXP_MASK) & (a != 0.0)
    norm = as_int(ct.ceil(ldexp_rne(a, NORM_BITS - e))) + 1
    y = ldexp_rne(a, -e)
    sq = as_int(ct.ceil(kept(y * y) * pow2(ct.full((1, 1), NORM_BITS, ct.int64)))) + 1
    gap = ct.minimum(ct.maximum(e - frexp_exponent(ct.where(keep, a, 1.0)), 0), GAP_MAX)
    return keep, norm, sq, gap


def _rows(acc, TRANS: ConstBool, reduce):
    """Per-row reduction of an accumulator in the loaded layout, kept 2-D ((1, TR) or (TR, 1))."""
    if TRANS:
        return reduce(acc, axis=0, keepdims=True)
    return reduce(acc, axis=1, keepdims=True)


@stored_kernel(occupancy=SUMMARY_OCCUPANCY)
def _row_summary_kernel(X, OUT, EXPS, TR: ConstInt, TC: ConstInt, TRANS: ConstBool):
    """For TR whole rows of X (TRANS: X holds their transpose, C-contiguous): ``OUT[f, rows]`` for
    the fields of :data:`ozhpc.engines.statistics.FIELDS` (int64) and ``EXPS[rows]`` (int32).
    Elementwise accumulators in the loaded layout, reduced once per pass."""
    bi = ct.bid(0)
    ntiles, amax, bad = max_and_bad_start(X, TR, TC, TRANS)
    for j in range(ntiles):
        amax, bad = max_and_bad_step(amax, bad, rows_tile(X, bi, j, TR, TC, TRANS))
    e = exponent_of(_rows(amax, TRANS, ct.max))
    norm = ct.zeros(amax.shape, ct.int64)
    sq = ct.zeros(amax.shape, ct.int64)
    nnz = ct.zeros(amax.shape, ct.int32)
    gaps = ct.zeros(amax.shape, ct.int32)
    for j in range(ntiles):
        keep, n_t, s_t, g_t = _terms(rows_tile(X, bi, j, TR, TC, TRANS), e)
        norm = norm + ct.where(keep, n_t, 0)
        sq = sq + ct.where(keep, s_t, 0)
        nnz = nnz + keep.astype(ct.int32)
        gaps = gaps + ct.where(keep, g_t, 0).astype(ct.int32)
    ct.store(OUT, (EXP, bi), e.reshape((1, TR)))
    ct.store(OUT, (NONFINITE, bi), _rows(bad.astype(ct.int64), TRANS, ct.sum).reshape((1, TR)))
    ct.store(OUT, (NORM, bi), _rows(norm, TRANS, ct.sum).reshape((1, TR)))
    ct.store(OUT, (NNZ, bi), _rows(nnz.astype(ct.int64), TRANS, ct.sum).reshape((1, TR)))
    ct.store(OUT, (SQ, bi), _rows(sq, TRANS, ct.sum).reshape((1, TR)))
    ct.store(OUT, (GAPS, bi), _rows(gaps.astype(ct.int64), TRANS, ct.sum).reshape((1, TR)))
    ct.store(EXPS, (bi,), e.reshape((TR,)).astype(ct.int32))


def launch(stream, x, trans: bool, out, exps) -> None:
    """``out``: int64 (len(FIELDS), rows padded to SUMMARY_TILE[0]); ``exps``: int32 (the same rows)."""
    ct.launch(stream, (max(1, cdiv(exps.shape[0], SUMMARY_TILE[0])), 1, 1), _row_summary_kernel,
              (x, out, exps, *SUMMARY_TILE, bool(trans)))
