"""A product's operands as the scheme sees them (:class:`Operands`), measured once per set of scales.

:func:`measure` reads this rank's rows of op(A) and op(B)^T and reduces, over every rank that
shares them, what every later step needs: the global row exponents (the scales), the finite
parts, the row sizes that scheme II's plan and the certificate read, the "auto" spread, whether
some input anywhere is inf/NaN, and the headroom that keeps a combine from overflowing. Every
value is exact and global (:mod:`ozhpc.ozaki.reductions`), so the plan resolved from them
(:meth:`Operands.plan`) is the same on every rank.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engines.statistics import EXP, NORM
from . import certificate
from .domain import REAL
from .plan import DataSizes, plan_type, resolve_plan
from .reductions import Reductions, is_local
from .scales import headroom, join_words, range_bumps, row_statistics, spread_bits, word_sums


@dataclass
class Operands:
    """This rank's op(A) and op(B)^T rows (``a``, ``b``: FP64 as given, inf/NaN included; None
    once no pass needs them) with the global facts measured from them: the row exponents
    (``row_exps`` of op(A), ``col_exps`` of op(B)), the finite parts (``fin_a``, ``fin_b``: what
    the split and the certificate read; None once neither does), ``mags`` (per row
    ``(norm, nnz, sq, gaps)`` of each operand, None when neither the plan nor the certificate reads
    them), ``spread``, ``nonfinite``, ``sizes`` (:class:`~ozhpc.ozaki.plan.DataSizes`) and ``lift``
    (:func:`~ozhpc.ozaki.scales.headroom` per row and column, None when nothing needs it)."""

    a: object
    b: object
    fin_a: object
    fin_b: object
    row_exps: object
    col_exps: object
    mags: tuple | None
    spread: int
    nonfinite: bool
    sizes: DataSizes | None
    lift: tuple | None
    k: int
    k_index: tuple | None = None
    """Global k index of each column of ``a`` / ``b`` (None: all of k in order, one process)."""
    domain: object = REAL
    """Real or complex operands (:mod:`ozhpc.ozaki.domain`)."""

    def plan(self, settings, width: int | None = None):
        """The plan of ``settings`` (at ``width``, a wider one of "auto") for these operands."""
        plan = resolve_plan(settings, self.spread, self.k, width, self.sizes, self.domain.forms)
        plan.check_k(self.k)
        return plan

    def global_k(self) -> tuple:
        """The global k index of each column of both operands."""
        return self.k_index if self.k_index is not None else (np.arange(self.k), np.arange(self.k))

    def combine_exps(self):
        """The exponents the combine scales by: the rows' and columns', less their headroom
        (raised back by :meth:`raised`)."""
        if self.lift is None:
            return self.row_exps, self.col_exps
        return self.row_exps - self.lift[0], self.col_exps - self.lift[1]

    def lift_of(self):
        """The power of two per entry that :meth:`raised` applies (int64 m x n)."""
        return self.lift[0].reshape(-1, 1) + self.lift[1].reshape(1, -1)

    def raised(self, xp, low):
        """``(C, lifted)``: C from the combine's result ``low`` at :meth:`combine_exps` (special
        values applied), the same bits as one scaling; ``lifted = (low, shift)`` with ``C =
        final_scale(low, shift)`` entry by entry (``shift`` = :meth:`lift_of`) where an entry
        overflows (``low`` still holds its total, for the certificate and for alpha), else None."""
        if self.lift is None:
            return low, None
        shift = self.lift_of()
        ab = self.domain.scaled(xp, low, shift)
        return ab, ((low, shift) if bool((xp.isinf(ab) & xp.isfinite(low)).any()) else None)


def measure(engine, a_rows, b_rows, *, k: int, settings, certifying: bool, reduce: Reductions,
            k_index=None, domain=REAL) -> Operands:
    """The :class:`Operands` of these rows: every input of the plan reduced over every rank
    (collective when ``reduce`` is). ``settings``: those the first plan resolves from (what it
    reads: sizes, spread); ``certifying``: "auto" (the certificate reads the sizes too); ``domain``:
    real or complex rows (the statistics read a complex row's parts as one real row of length 2k,
    so its scale is one exponent for both parts)."""
    xp = engine.xp
    real = domain.realified
    kind = plan_type(settings)
    want_sizes = kind.reads_sizes or certifying
    # one pass per operand and one copy to the host (one process: the one wait before the plan)
    (exp_a, summary_a, pieces_a, bad_a), (exp_b, summary_b, pieces_b, bad_b) = \
        row_statistics(engine, (real(a_rows), real(b_rows)), (reduce.a_max, reduce.b_max), want_sizes)
    exps, host_exps = [exp_a, exp_b], [summary_a[EXP], summary_b[EXP]]
    fin = (domain.finite(xp, a_rows, bad_a), domain.finite(xp, b_rows, bad_b))
    mags, gaps, host = None, np.zeros(8, dtype=np.int64), ()
    if want_sizes:
        mags, gaps, host = _row_sizes(engine, (tuple(pieces_a), tuple(pieces_b)),
                                      (summary_a[NORM:], summary_b[NORM:]), reduce)
        if kind.reads_sizes and certifying:   # the sizes set the plan's range
            mags, host = _relieve_rows(engine, mags, exps, host_exps, gaps, host, k)
    local = np.zeros(10, dtype=np.int64)
    if certifying and kind.reads_spread:   # scheme I's "auto" statistic
        local[0] = max(_spread(engine, real(a_rows), exps[0], reduce.a_sum),
                       _spread(engine, real(b_rows), exps[1], reduce.b_sum))
    local[1] = bad_a or bad_b
    for side, (norm, nnz, sq, _) in enumerate(host):
        local[2 + side] = sq.max(initial=0)
        local[4 + side] = nnz.max(initial=0)
        local[6 + side] = -norm[nnz > 0].min(initial=2**62)   # MAX of minus: the smallest
        local[8 + side] = -nnz[nnz > 0].min(initial=2**62)
    spread, nonfinite, *sizes = (int(v) for v in reduce.everywhere_max(local))
    data = (DataSizes(sq=tuple(sizes[0:2]), nnz=tuple(sizes[2:4]), norm_min=tuple(-v for v in sizes[4:6]),
                      k=k, norm_bits=certificate.NORM_BITS,
                      mean_gap=max(int(g) / max(int(n), 1) for g, n in (gaps[0:2], gaps[2:4])),
                      nnz_min=tuple(0 if -v >= 2**62 else -v for v in sizes[6:8]))
            if mags is not None else None)
    lift = tuple(headroom(np, e) for e in host_exps)   # on the host: no wait for the device
    lift = tuple(engine.asarray(v) for v in lift) if any(v.any() for v in lift) else None
    return Operands(a_rows, b_rows, *fin, *exps, mags, spread, bool(nonfinite), data, lift, k, k_index, domain)


def _row_sizes(engine, pieces, host, reduce: Reductions):
    """``(mags, totals, host)``: each operand's ``(norm, nnz, sq, gaps)`` per row (this piece's:
    ``pieces`` on the device, ``host`` the same on the host), reduced over the pieces of a row, on
    the device (``mags``) and on the host (``host``: the plan reads them there), and ``totals``,
    their sums over every rank (gap and nonzero counts, squares in words past 2**63)."""
    host = [tuple(h) for h in host]
    totals = np.zeros(8, dtype=np.int64)
    for side, (_, nnz, sq, gap) in enumerate(host):   # every entry lives on one rank: SUM over all
        totals[2 * side:2 * side + 2] = [int(gap.sum()), int(nnz.sum())]
        totals[4 + 2 * side:6 + 2 * side] = word_sums(np, sq)   # squares: past 2**63
    totals = reduce.everywhere_sum(totals)
    row_sums = (reduce.a_sum, reduce.b_sum)
    host = [tuple(row_sum(v) for v in piece) for piece, row_sum in zip(host, row_sums)]
    mags = tuple(piece if is_local(row_sum) else tuple(engine.asarray(v) for v in reduced)
                 for piece, reduced, row_sum in zip(pieces, host, row_sums))
    return mags, totals, host


def _relieve_rows(engine, mags, exps: list, host_exps: list, totals, host, k: int):
    """Rows (of op(A), columns of op(B)) whose entries sit unusually close to their scale would
    set scheme II's CRT range for everyone (a row of 16384 phi = 0.5 entries whose largest is
    below 2 instead of about 3.5 needs one more modulus for all): "auto" scales them by
    ``2**-b`` (:func:`ozhpc.ozaki.scales.range_bumps`, exact and global), and their statistics
    by the same power of two, rounded up. ``exps`` (on the device) and ``host_exps`` (the same on
    the host) are updated in place; returns ``(mags, host)`` as moved. Whatever moved goes to the
    device in one copy (this runs between the statistics' copy and the first launch, while the
    device waits)."""
    mags, host = list(mags), list(host)
    moved_sides = []
    for side in (0, 1):
        norm, nnz, sq, gaps = host[side]
        bump = range_bumps(sq, nnz, join_words(totals[4 + 2 * side:6 + 2 * side]), int(totals[2 * side + 1]), k)
        if not bump.any():
            continue
        step, moved = 2**bump, bump > 0
        norm = np.where(moved, (norm - nnz) // step + 1 + 2 * nnz, norm)
        sq = np.where(moved, (sq - nnz) // (step * step) + 1 + 2 * nnz, sq)
        host[side] = (norm, nnz, sq, gaps)
        host_exps[side] = host_exps[side] + bump
        moved_sides.append(side)
    if moved_sides:
        packed = engine.asarray(np.concatenate([np.stack([*host[side], host_exps[side]]).astype(np.int64)
                                                for side in moved_sides], axis=1))
        at = 0
        for side in moved_sides:
            block = packed[:, at:at + len(host_exps[side])]
            mags[side] = tuple(block[i] for i in range(4))
            exps[side] = block[4].astype(engine.xp.int32)
            at += len(host_exps[side])
    return tuple(mags), host


def _spread(engine, rows, exps, sum_pieces) -> int:
    summed = (lambda counts: engine.asarray(sum_pieces(engine.to_host(counts))))
    return spread_bits(engine.xp, engine.entry_gaps(rows, exps), summed, engine.count_gaps_le)
