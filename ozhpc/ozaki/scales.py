"""Per-row scales, the operands' row statistics and the exponent-spread statistic.

All are computed from quantities that reduce exactly and order-free across
ranks (a MAX of row maxima, SUMs of integer counts), so every rank of a
distributed run derives the same exponents and picks the same slice count.
"""
from __future__ import annotations

from ..engines.base import BITS, DIGIT_MAX, MAX_GAP, NO_GAP, count_gaps_le, row_abs_max  # noqa: F401  (re-exported)
from ..engines.digits import exponents  # noqa: F401  (re-exported)

COUNT_WIDTH = 8
"""Limits per counting pass: the MAX_GAP + 1 = 64 gap values take two passes (8 x 8)."""
COUNT_PASSES = 2
assert COUNT_WIDTH**COUNT_PASSES == MAX_GAP + 1


def spread_bits(xp, gaps, sum_rows=None, count_le=None) -> int:
    """Bits between the scale and the median nonzero entry, maximised over rows (0 if all are zero).

    The median gap of row i is the smallest ``g`` with ``2 * #{gap <= g} >= #{nonzero}``; the
    row's spread is ``g + 1`` (the median entry is at least ``2**(e_i-g-1)``). Found per row by
    two counting passes over the int8 gaps with 8 limits each: the first places the median in
    one of 8 ranges of 8 gap values (its last limit, MAX_GAP, counts the nonzeros), the second
    within that range.
    ``sum_rows(counts)`` adds the per-row counts of the other pieces of each row (an exact
    integer SUM-allreduce in a distributed run), so every piece agrees on the median.
    ``gaps`` come from :meth:`Engine.entry_gaps`; ``count_le(gaps, limits)`` is the engine's
    :meth:`Engine.count_gaps_le` (per-row counts of ``gaps <= limits[:, l]``; exact integers, so
    every engine finds the same median).
    """
    sum_rows = sum_rows or (lambda counts: counts)
    count_le = count_le or (lambda g, limits: count_gaps_le(xp, g, limits))
    rows = gaps.shape[0]   # no early return for 0 rows: every rank joins sum_rows' collectives
    ladder = xp.arange(1, COUNT_WIDTH + 1, dtype=xp.int32).reshape(1, -1)
    lo = xp.zeros((rows, 1), dtype=xp.int32)
    step, total = MAX_GAP + 1, None
    for _ in range(COUNT_PASSES):
        step //= COUNT_WIDTH
        counts = sum_rows(count_le(gaps, lo + ladder * step - 1))   # ends of 8 ranges from lo
        if total is None:
            total = counts[:, -1:]
        first = xp.argmax(2 * counts >= total, axis=1).astype(xp.int32)  # the last range qualifies
        lo = lo + first.reshape(-1, 1) * step
    nonzero = total[:, 0] > 0
    if not bool(nonzero.any()):
        return 0
    return int(xp.where(nonzero, lo[:, 0], -1).max()) + 1


WORD_BITS = 32


def word_sums(xp, values) -> tuple[int, int]:
    """``(high, low)`` with ``sum(values) = high * 2**32 + low`` exactly (:func:`join_words`), for int64
    ``values`` (one per row, any sign): the sums of their high and low 32-bit words, which neither
    wrap here (fewer than 2**31 rows) nor in an int64 SUM over the ranks of a grid, in any order,
    where the plain sum of squared row norms passes 2**63 at m k ~ 2**31 entries near their scale."""
    v = xp.asarray(values).astype(xp.int64)
    return int((v >> WORD_BITS).sum()), int((v & (2**WORD_BITS - 1)).sum())


def join_words(words) -> int:
    """The exact integer of :func:`word_sums` (after the SUM over ranks)."""
    high, low = (int(w) for w in words)
    return (high << WORD_BITS) + low


RANGE_BUMP_MAX = 8
"""At most this many powers of two per row (:func:`range_bumps`)."""


def range_bumps(sq, nnz, sq_total: int, nnz_total: int, k: int):
    """Extra exponent ``b_i`` in [0, RANGE_BUMP_MAX] per row for scheme II's "auto": rows whose squared
    2-norm over their scale (``sq``, units ``2**-32``, :func:`ozhpc.ozaki.certificate.magnitude_stats`)
    is more than twice the operand's average per entry times their count, and large enough to set
    the CRT range (above half of ``k`` average entries), are scaled by ``2**-b_i`` until they are
    not. Host NumPy on exact global integers (the same float operations on every rank), so every
    rank and engine takes the same exponents."""
    import numpy as np

    sq, nnz = np.asarray(sq, dtype=np.float64), np.asarray(nnz, dtype=np.float64)
    mean = float(sq_total) / max(float(nnz_total), 1.0)
    if mean <= 0:
        return np.zeros(sq.shape, dtype=np.int64)
    ratio = sq / (2.0 * mean * np.maximum(nnz, 1.0))
    # b_i = #{t: ratio_i > 4**t}: how many thresholds lie strictly below the ratio
    bump = np.searchsorted(BUMP_THRESHOLDS, ratio, side="left").astype(np.int64)
    return np.where(sq > mean * k / 2, bump, 0)


BUMP_THRESHOLDS = tuple(4.0**t for t in range(RANGE_BUMP_MAX))
"""The ratios past which a row takes one more power of two (:func:`range_bumps`)."""


HEADROOM_EXP = 480
"""Row (column) exponents above this are lowered by the excess for the combine (:func:`headroom`)."""


def headroom(xp, exps):
    """int64 ``d_i = max(e_i - HEADROOM_EXP, 0)`` per row: the combine scales by ``2**(e_i - d_i +
    f_j - d_j)``, so its result (normalised below 2**40: k < 2**39 terms below 1 each) stays below
    2**1000, never overflows, and is normal wherever ``d_i + d_j > 0`` (a nonzero total is at least
    2**-336 and ``e_i - d_i + f_j - d_j >= 480 - 1074``); then ``final_scale`` by ``2**(d_i + d_j)``
    gives the same bits as the one scaling (both round the same significand), while the lowered
    result still holds the total of an entry that overflows: the certificate's proof that its exact
    value rounds to inf, and ``alpha * AB`` for ``|alpha| < 1``."""
    return xp.maximum(xp.asarray(exps).astype(xp.int64) - HEADROOM_EXP, 0)


def row_statistics(engine, operands, reduce_max, sizes: bool = True) -> list:
    """Per operand (rows along k): ``(exps, host, device, nonfinite)``: the global row exponents
    (int32 on the device), :func:`ozhpc.engines.statistics.row_summary`'s fields on the host (the
    exponents global), the row sizes ``(norm, nnz, sq, gaps)`` on the device, and whether this
    piece holds inf/NaN. One pass over each operand and one copy to the host
    (:meth:`~ozhpc.engines.base.Engine.row_summaries`); where ``reduce_max`` (MAX over the pieces of
    each row) raises a row's exponent, the exponents are uploaded and, with ``sizes``, the sizes
    made again for them. Zero pieces do not take part in the MAX (their exponent 0 is no bound)."""
    import numpy as np

    from ..engines.statistics import EXP, NNZ, NONE_EXP, NONFINITE, NORM
    from . import special

    host, dev, exps = engine.row_summaries(operands)
    out = []
    for x, h, d, e, reduce in zip(operands, host, dev, exps, reduce_max):
        bad, d = bool(h[NONFINITE].any()), d[NORM:]
        local = np.where(h[NNZ] > 0, h[EXP], NONE_EXP)
        glob = np.asarray(reduce(local))
        glob = np.where(glob == NONE_EXP, 0, glob)
        if (glob != h[EXP]).any():   # a piece of a longer row: the whole row's exponent
            h = h.copy()
            h[EXP] = glob
            e = engine.asarray(glob.astype(np.int32))
            if sizes:
                d = engine.magnitude_stats(special.finite_part(engine.xp, x, bad), e)
                h[NORM:] = engine.to_host(d)
        out.append((e, h, d, bad))
    return out
