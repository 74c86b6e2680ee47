"""The Ozaki product pipeline, written once: ``C = alpha * op(A) @ op(B) + beta * C``.

``ozhpc.gemm`` (one process, all of k in one panel) and the SUMMA driver (a grid of ranks,
k in panels) run the same object on their pieces of op(A) (rows along k) and op(B)^T (B's
columns as rows along k)::

    product = Product(settings, engine, a_rows, b_rows, k=k, reduce=reductions)
    # prepare (in the constructor): row scales, the plan, the split, special-value codes
    product.pack_a(offset, width, buf)      # an owner's k-panel as opaque int8 planes
    product.accumulate(panel_a, panel_b)    # exact, any order of panels
    # or, one process: product.multiply()  # the whole k at once (fused kernels)
    while product.settle(): ...             # combine the pass; "auto": the policy may ask for another
    c = product.finish(alpha, beta, c0)     # alpha/beta

A product is one pass at a time (scales, split, pack, accumulate, combine, certificate); which
pass follows a failed certificate is :mod:`ozhpc.ozaki.policy`'s answer. Every value that
decides a bit of C (scales, plan, special-value flag, the certificate's verdict) is reduced
across ranks with the exact, order-free callables of :class:`Reductions`, so every grid, block
size and panel width gives the same bits. What differs between the schemes lives in the plan
objects of :mod:`ozhpc.ozaki.plan`; what differs between devices in the engines.

Longer than most modules because a pass has two wires that must give the same planes: int8
planes packed by the owner (:meth:`Product.pack_a`) or FP64 split on arrival
(:meth:`Product.split_panel`); both share every other step of the pass, so they stay together.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..engines.base import final_scale
from ..errors import require_c
from . import certificate, refine, special
from .info import GemmInfo, enforce_accuracy  # noqa: F401  (re-exported: summa, runner)
from .plan import DataSizes, plan_type, resolve_plan
from .policy import Widening, equilibrated_operands
from .scales import exponents, headroom, join_words, range_bumps, spread_bits, word_sums
from .settings import OzakiSettings


def _same(x):
    return x


def _columns(xp, eng, x, cols):
    """Columns ``cols`` (ascending) of ``x``: a strided view where they are evenly spaced (one
    process: every ``stride``-th index from 0), which the magnitude kernel reads in place of a copy."""
    if cols.size > 1 and np.all(np.diff(cols) == cols[1] - cols[0]):
        return x[:, int(cols[0]):int(cols[-1]) + 1:int(cols[1] - cols[0])]
    return xp.take(x, eng.asarray(cols), axis=1)


@dataclass(frozen=True)
class Reductions:
    """Exact, order-free reductions over the ranks that share a piece of the product.

    Each takes and returns a NumPy array. ``a_max`` / ``a_sum``: over the pieces of each
    op(A) row (a MAX of row maxima, a SUM of integer counts); ``b_max`` / ``b_sum``: the same
    for op(B)^T rows; ``everywhere_max`` / ``everywhere_sum``: over every rank (the plan's
    inputs, the certificate's verdict, per-k statistics indexed by global k). One process:
    the identity (:data:`LOCAL`).
    """

    a_max: Callable = _same
    b_max: Callable = _same
    a_sum: Callable = _same
    b_sum: Callable = _same
    everywhere_max: Callable = _same
    everywhere_sum: Callable = _same


LOCAL = Reductions()


def op_rows(x, trans: bool, is_left: bool):
    """The operand as rows along k: op(A) for the left side, op(B)^T for the right."""
    return (x.T if trans else x) if is_left else (x if trans else x.T)


def epilogue(xp, ab, alpha: float, beta: float, c):
    """``alpha * ab + beta * c``, each operation rounded separately, as BLAS defines it:
    ``c`` is not read when beta == 0, and ``ab`` is not used when alpha == 0 (so inf/NaN in
    op(A) op(B) do not reach the result). A zero result is +0.0 (a BLAS adds the products to
    +0.0 or to ``beta * c``), also when ``alpha < 0``."""
    if alpha == 0.0:
        if beta == 0.0:
            return xp.zeros_like(ab)
        return c.copy() if beta == 1.0 else beta * c
    if alpha == 1.0 and beta == 0.0:
        return ab   # every combine ends in final_scale, whose zeros are +0.0 already: no pass over C
    out = ab if alpha == 1.0 else alpha * ab
    if beta != 0.0:
        out = out + (c if beta == 1.0 else beta * c)
    return out + 0.0


class Stopwatch:
    """Time per phase from the engine's timers (CUDA events on a GPU, recorded in order and read
    only when :attr:`seconds` is asked for: timing never synchronises the device mid-call)."""

    def __init__(self, engine):
        self.engine = engine
        self._laps: dict[str, list] = {}
        self._timer = self._started()

    def _started(self):
        timer = self.engine.timer()
        timer.start()
        return timer

    def lap(self, phase: str) -> None:
        self._timer.stop()
        self._laps.setdefault(phase, []).append(self._timer)
        self._timer = self._started()

    @property
    def seconds(self) -> dict[str, float]:
        return {phase: sum(t.seconds() for t in timers) for phase, timers in self._laps.items()}


SAMPLE_COLUMNS = 1024
SAMPLE_STRIDE_MAX = 16
"""Under "dgemm" the first pass's magnitude plane holds every ``stride``-th global k index,
``stride = min(16, k // 1024)``: a lower bound of ``(|A||B|)_ij`` at 1/stride of one int8 GEMM's
cost, about 1/stride of the full one on dense data, where the guarantee has a factor k of slack
(with 256 samples, phi = 1 at n = 16384 still needed the full plane for a few entries).
Structured data the samples miss gets the full plane in a second, one-plane pass."""


@dataclass
class Extra:
    """An int8 plane that travels with a pass's panels besides the plan's planes: ``target`` (what
    its products feed: "lower" / "support", the certificate's sums; "codes", the special values),
    the planes of op(A) and op(B)^T (1, rows, cols) and, for a sampled plane (``stride`` > 1), the
    local columns they hold (those whose global k index is a multiple of ``stride``, compacted)."""

    target: str
    a: object
    b: object
    stride: int = 1
    cols_a: object = None
    cols_b: object = None

    def panel_width(self, width: int) -> int:
        """Columns of a panel of ``width`` k indices this plane fills (a sampled one: the
        multiples of ``stride`` among any ``width`` consecutive indices, at most ``ceil(width /
        stride)``, compacted to the front, zeros after; both operands' panels alike)."""
        return width if self.stride == 1 else -(-width // self.stride)

    def from_panel(self, eng, panel, fin, exps, k0: int, dst) -> None:
        """This plane of one FP64 panel (``fin``: its finite part; ``k0``: its first global k
        index) into ``dst`` (rows x width), as :meth:`pack` would have sent it (FP64 on the wire)."""
        if self.target == "codes":
            dst[...] = special.classify(eng.xp, panel)
            return
        upper = self.target == "support"
        if self.stride == 1:
            dst[...] = eng.magnitudes(fin, exps, upper=upper)[0]
            return
        cols = np.arange((-k0) % self.stride, fin.shape[1], self.stride)
        dst[:, :cols.size] = eng.magnitudes(eng.xp.take(fin, eng.asarray(cols), axis=1), exps, upper=upper)[0]
        dst[:, cols.size:self.panel_width(fin.shape[1])] = 0

    def pack(self, side: int, offset: int, width: int, dst) -> None:
        """Local columns ``offset:offset+width`` of this plane (``side`` 1: op(A), 2: op(B)^T) into
        the panel slot ``dst`` (rows x width)."""
        plane = (self.a if side == 1 else self.b)[0]
        if self.stride == 1:
            dst[...] = plane[:, offset:offset + width]
            return
        lo, hi = (int(v) for v in np.searchsorted(self.cols_a if side == 1 else self.cols_b, [offset, offset + width]))
        dst[:, :hi - lo] = plane[:, lo:hi]
        dst[:, hi - lo:self.panel_width(width)] = 0


class Product:
    """One product on this rank's pieces, prepared in the constructor (collective when the
    reductions are): global row scales, the plan, the split of both operands.

    With "auto" accuracy the product is certified (:mod:`ozhpc.ozaki.certificate`): one more int8
    plane of magnitudes travels with the first pass (a lower bound of ``|op(A)||op(B)|``), and
    :meth:`settle` checks every entry; when some entry fails, the policy
    (:class:`~ozhpc.ozaki.policy.Widening`) names the next pass and the caller runs
    :meth:`multiply` or :meth:`accumulate` again. Every decision is global and exact, so the bits
    stay grid-independent.

    Parameters
    ----------
    settings : OzakiSettings
    engine : Engine
    a_rows, b_rows : 2-D float arrays on the engine's device
        This rank's rows of op(A) (m_loc x k_loc) and of op(B)^T (n_loc x k_loc').
    k : int, optional
        The global inner dimension (default: ``a_rows.shape[1]``, one process).
    reduce : Reductions
    k_index : (array, array), optional
        Global k index of each column of ``a_rows`` / ``b_rows`` (default: all of k in order).
    wire : "planes" or "fp64"
        How panels travel: as int8 planes (:meth:`pack_a`), or as FP64 (:meth:`pack_fp64`) split on
        arrival (:meth:`split_panel`) -- then no whole-operand planes are made, only the panels'.
    global_shape : (int, int), optional
        The global (m, n) that :meth:`info` reports (default: this rank's, one process).
    """

    def __init__(self, settings: OzakiSettings, engine, a_rows, b_rows, *, k: int | None = None,
                 reduce: Reductions = LOCAL, k_index=None, wire: str = "planes", global_shape=None):
        self.settings, self.engine, self.xp = settings, engine, engine.xp
        self.k = a_rows.shape[1] if k is None else int(k)
        self.shape = (a_rows.shape[0], b_rows.shape[0])
        self.global_shape = self.shape if global_shape is None else tuple(int(v) for v in global_shape)
        self.reduce, self.certifying = reduce, settings.auto
        if self.certifying:
            certificate.check_k(self.k)
        self.guarantee = settings.guarantee if self.certifying else None
        self.factor = max(self.k, 1) if self.guarantee == "dgemm" else 1
        """The certified bound is ``factor u (|A||B|)_ij``: k for "dgemm", 1 for "tight"."""
        self.clock = Stopwatch(engine)
        self._k_index = k_index
        self._given = (a_rows, b_rows) if self.certifying else None   # to equilibrate, should a pass fail
        self.policy = Widening(settings, self._resolve_plan)
        self.cert = None
        self.refined = refine.Refined()
        self.wire, self._rows = wire, None
        self._prepare(a_rows, b_rows)

    @property
    def widths(self) -> list:
        """Plans "auto" ran, in order (:attr:`GemmInfo.widths`)."""
        return self.policy.widths

    def _prepare(self, a_rows, b_rows) -> None:
        """Scales, plan, split and the first pass's extra planes; the certificate's sums start
        anew (they follow the scales)."""
        self._scales_and_plan(a_rows, b_rows)
        self.clock.lap("scales")
        self._split(a_rows, b_rows)
        self.clock.lap("split")
        self._acc = self._counts = self._ab = self._group_sums = None
        self._sums: dict = {}   # "lower" / "support": the certificate's digit products (1, m, n)
        self._settled = self._bounds_pass = False

    # -- prepare ---------------------------------------------------------------------------
    def _resolve_plan(self, settings: OzakiSettings, width: int | None = None):
        """The plan of ``settings`` (at ``width``, a wider one of "auto") for this product's data."""
        plan = resolve_plan(settings, self.spread, self.k, width, self.sizes)
        plan.check_k(self.k)
        return plan

    def _scales_and_plan(self, a_rows, b_rows) -> None:
        """Row exponents, the finite parts, the operands' row sizes (what the plan reads, and the
        certificate), the "auto" statistics and the plan: every input of the plan reduced over every rank."""
        eng, xp, reduce = self.engine, self.xp, self.reduce
        (amax, bad_a), (bmax, bad_b) = eng.row_stats(a_rows), eng.row_stats(b_rows)
        self._bad_a, self._bad_b = (bool(v) for v in eng.to_host(xp.stack([xp.asarray(bad_a), xp.asarray(bad_b)])))
        self.row_exps = exponents(xp, self._on_host(reduce.a_max)(amax))
        self.col_exps = exponents(xp, self._on_host(reduce.b_max)(bmax))
        self._fin_a = special.finite_part(xp, a_rows, self._bad_a)
        self._fin_b = special.finite_part(xp, b_rows, self._bad_b)
        kind = plan_type(self.policy.settings)
        self._mags, gaps, host = None, np.zeros(8, dtype=np.int64), ()
        if kind.reads_sizes or self.certifying:
            pieces = (certificate.magnitude_stats(xp, self._fin_a, self.row_exps),
                      certificate.magnitude_stats(xp, self._fin_b, self.col_exps))
            # (norm, nnz, sq, gaps) of both operands in one copy to the host: the plan reads them there
            both = eng.to_host(xp.concatenate([xp.stack(piece) for piece in pieces], axis=1))
            rows = pieces[0][0].shape[0]
            host = [tuple(both[:, :rows]), tuple(both[:, rows:])]
            for side, (_, nnz, sq, gap) in enumerate(host):   # every entry lives on one rank: SUM over all
                gaps[2 * side:2 * side + 2] = [int(gap.sum()), int(nnz.sum())]
                gaps[4 + 2 * side:6 + 2 * side] = word_sums(np, sq)   # squares: past 2**63
            gaps = reduce.everywhere_sum(gaps)
            row_sums = (reduce.a_sum, reduce.b_sum)
            host = [tuple(row_sum(v) for v in piece) for piece, row_sum in zip(host, row_sums)]
            self._mags = tuple(piece if row_sum is _same else tuple(eng.asarray(v) for v in reduced)
                               for piece, reduced, row_sum in zip(pieces, host, row_sums))
            if kind.reads_sizes and self.certifying:   # the sizes set the plan's range
                host = self._relieve_rows(gaps, host)
        local = np.zeros(8, dtype=np.int64)
        if self.certifying and kind.reads_spread:   # scheme I's "auto" statistic
            local[0] = max(self._spread(a_rows, self.row_exps, reduce.a_sum),
                           self._spread(b_rows, self.col_exps, reduce.b_sum))
        local[1] = self._bad_a or self._bad_b
        for side, (norm, nnz, sq, _) in enumerate(host):
            local[2 + side] = sq.max(initial=0)
            local[4 + side] = nnz.max(initial=0)
            local[6 + side] = -norm[nnz > 0].min(initial=2**62)   # MAX of minus: the smallest
        spread, nonfinite, *sizes = (int(v) for v in reduce.everywhere_max(local))
        self.spread, self.nonfinite = spread, bool(nonfinite)
        self.sizes = (DataSizes(sq=tuple(sizes[0:2]), nnz=tuple(sizes[2:4]), norm_min=tuple(-v for v in sizes[4:6]),
                                k=self.k, norm_bits=certificate.NORM_BITS,
                                mean_gap=max(int(g) / max(int(n), 1) for g, n in (gaps[0:2], gaps[2:4])))
                      if self._mags is not None else None)
        self.plan = self._resolve_plan(self.policy.settings)
        lift = (headroom(xp, self.row_exps), headroom(xp, self.col_exps))
        self._lift = lift if any(bool(v.any()) for v in lift) else None
        self._low = None

    def _combine_exps(self):
        """The exponents the combine scales by: the rows' and columns', less their
        :func:`~ozhpc.ozaki.scales.headroom` (raised back by :meth:`_raise`)."""
        if self._lift is None:
            return self.row_exps, self.col_exps
        return self.row_exps - self._lift[0], self.col_exps - self._lift[1]

    def _lift_of(self):
        """The power of two per entry that :meth:`_raise` applies (int64 m x n)."""
        return self._lift[0].reshape(-1, 1) + self._lift[1].reshape(1, -1)

    def _raise(self, low):
        """C from the combine's result at :meth:`_combine_exps` (special values applied): the same
        bits as one scaling. Where an entry overflows, ``low`` is kept (:attr:`_low`): it still holds
        the entry's total, for the certificate and for alpha."""
        self._low = None
        if self._lift is None:
            return low
        ab = final_scale(self.xp, low, self._lift_of())
        if bool((self.xp.isinf(ab) & self.xp.isfinite(low)).any()):
            self._low = low
        return ab

    def _relieve_rows(self, totals, host) -> list:
        """Rows (of op(A), columns of op(B)) whose entries sit unusually close to their scale would
        set scheme II's CRT range for everyone (a row of 16384 phi = 0.5 entries whose largest is
        below 2 instead of about 3.5 needs one more modulus for all): "auto" scales them by
        ``2**-b`` (:func:`ozhpc.ozaki.scales.range_bumps`, exact and global), and their statistics
        by the same power of two, rounded up. ``host``: the row-reduced ``(norm, nnz, sq, gaps)``
        of each operand on the host; returns them as moved."""
        eng = self.engine
        mags, exps, host = list(self._mags), [self.row_exps, self.col_exps], list(host)
        for side in (0, 1):
            norm, nnz, sq, gaps = host[side]
            bump = range_bumps(sq, nnz, join_words(totals[4 + 2 * side:6 + 2 * side]), int(totals[2 * side + 1]),
                               self.k)
            if not bump.any():
                continue
            step, moved = 2**bump, bump > 0
            norm = np.where(moved, (norm - nnz) // step + 1 + 2 * nnz, norm)
            sq = np.where(moved, (sq - nnz) // (step * step) + 1 + 2 * nnz, sq)
            host[side] = (norm, nnz, sq, gaps)
            mags[side] = tuple(eng.asarray(v) for v in host[side])
            exps[side] = exps[side] + eng.asarray(bump.astype(np.int32))
        self._mags, (self.row_exps, self.col_exps) = tuple(mags), exps
        return host

    def _spread(self, rows, exps, sum_pieces) -> int:
        eng = self.engine
        summed = (lambda counts: eng.asarray(sum_pieces(eng.to_host(counts))))
        return spread_bits(self.xp, eng.entry_gaps(rows, exps), summed, eng.count_gaps_le)

    def _split(self, a_rows, b_rows) -> None:
        """int8 planes of both operands, and the planes that travel with the first pass only:
        the magnitudes ("auto": the certificate's lower bound of |A||B|; under "dgemm" only every
        :meth:`sample_stride`-th k index, which its factor k of slack leaves room for) and the
        class codes (when some input anywhere is inf/NaN)."""
        xp = self.xp
        self._split_planes()
        self._extras = []
        self._lower_stride = 0
        if self.certifying:
            self._lower_stride = self.sample_stride() if self.guarantee == "dgemm" else 1
        if self.wire == "fp64":   # every plane is made per panel (split_panel), from the FP64 operands
            self._rows = (a_rows, b_rows)
            if self.certifying:
                self._extras.append(self._magnitude_extra(self._lower_stride))
            if self.nonfinite:
                self._extras.append(Extra("codes", None, None))
            if not self.certifying:
                self._fin_a = self._fin_b = None
            return
        if self.certifying:
            self._extras.append(self._magnitude_extra(self._lower_stride))
        if self.nonfinite:
            self._extras.append(Extra("codes", special.classify(xp, a_rows)[None], special.classify(xp, b_rows)[None]))
        if not self.certifying:
            self._fin_a = self._fin_b = None   # kept only to split again at a wider plan

    def sample_stride(self) -> int:
        """Every how many global k indices the first pass's magnitude plane samples ("dgemm"):
        about 1024 of them, at most every 16th (exact integer sums over the same global indices on
        every grid, so the verdicts stay grid-independent)."""
        return max(1, min(SAMPLE_STRIDE_MAX, self.k // SAMPLE_COLUMNS))

    def _magnitude_extra(self, stride: int, target: str = "lower", upper: bool = False) -> "Extra":
        """Magnitude (``upper``: support) digits of both operands as an :class:`Extra`, of the k
        indices that are multiples of ``stride`` (compacted) when it is above 1."""
        eng, xp = self.engine, self.xp
        if self.wire == "fp64":   # made per panel by split_panel
            return Extra(target, None, None, stride)
        fin_a, fin_b, cols = self._fin_a, self._fin_b, (None, None)
        if stride > 1:
            ia, ib = self._k_index if self._k_index is not None else (np.arange(self.k), np.arange(self.k))
            cols = tuple(np.flatnonzero(np.asarray(ix) % stride == 0) for ix in (ia, ib))
            fin_a, fin_b = (_columns(xp, eng, fin, c) for fin, c in ((fin_a, cols[0]), (fin_b, cols[1])))
        return Extra(target, eng.magnitudes(fin_a, self.row_exps, upper=upper),
                     eng.magnitudes(fin_b, self.col_exps, upper=upper), stride, *cols)

    def _split_planes(self) -> None:
        if self.wire == "fp64":
            return
        self._planes_a = self.plan.split(self.engine, self._fin_a, self.row_exps)
        self._planes_b = self.plan.split(self.engine, self._fin_b, self.col_exps)

    @property
    def _products(self) -> int:
        """The plan's planes in this pass (none in a pass that only sums the certificate's digits)."""
        return 0 if self._bounds_pass else self.plan.planes

    @property
    def depth(self) -> int:
        """int8 planes per entry of a panel: the plan's, plus this pass's extra planes."""
        return self._products + len(self._extras)

    # -- panels ----------------------------------------------------------------------------
    def pack_a(self, offset: int, width: int, out):
        """Columns ``offset:offset+width`` of this rank's op(A) planes into ``out``, an int8
        buffer of at least ``depth * rows * width`` entries; returns it as (depth, rows, width)."""
        return self._pack(self._planes_a, 1, offset, width, out)

    def pack_b(self, offset: int, width: int, out):
        """As :meth:`pack_a`, for op(B)^T."""
        return self._pack(self._planes_b, 2, offset, width, out)

    def panel_view(self, rows: int, width: int, out):
        """``out`` shaped as a panel of ``rows`` x ``width`` (what a receiver fills)."""
        return out[:self.depth * rows * width].reshape(self.depth, rows, width)

    def _pack(self, planes, side, offset, width, out):
        buf = self.panel_view(self.shape[side - 1], width, out)
        s = self._products
        if s:
            buf[:s] = planes[:, :, offset:offset + width]
        for i, extra in enumerate(self._extras):
            extra.pack(side, offset, width, buf[s + i])
        return buf

    def release_operands(self) -> None:
        """Drop the split operands (after the last panel of a pass was packed)."""
        self._planes_a = self._planes_b = None
        self._extras = []
        if not self.certifying:
            self._rows = None

    # -- FP64 on the wire --------------------------------------------------------------------
    def pack_fp64(self, side: int, offset: int, width: int, out):
        """Columns ``offset:offset+width`` of this rank's op(A) (``side`` 1) or op(B)^T (2) as
        FP64 (inf/NaN included) into ``out`` (at least rows * width entries); returns (rows, width)."""
        rows = self._rows[side - 1]
        buf = out[:rows.shape[0] * width].reshape(rows.shape[0], width)
        buf[...] = rows[:, offset:offset + width]
        return buf

    def split_panel(self, side: int, panel, out, k0: int = 0):
        """A FP64 panel of :meth:`pack_fp64` as the int8 planes :meth:`pack_a` / :meth:`pack_b` would
        have sent, into ``out`` (``k0``: the panel's first global k index, for sampled planes): every
        plane is elementwise in the global scales, which every rank of the panel's process row
        (column) holds, so the bits cannot depend on the wire."""
        xp, eng = self.xp, self.engine
        exps = self.row_exps if side == 1 else self.col_exps
        buf = self.panel_view(panel.shape[0], panel.shape[1], out)
        fin = special.finite_part(xp, panel, self.nonfinite)
        s = self._products
        if s:
            buf[:s] = self.plan.split(eng, fin, exps)
        for i, extra in enumerate(self._extras):
            extra.from_panel(eng, panel, fin, exps, k0, buf[s + i])
        return buf

    def accumulate(self, panel_a, panel_b) -> None:
        """Add one k-panel's products (exact: any order of panels gives the same sums)."""
        eng, s = self.engine, self._products
        if s:
            if self._acc is None:
                self._acc = self.plan.zeros(eng, *self.shape, self.k)
            self.plan.accumulate(eng, self._acc, panel_a[:s], panel_b[:s])
        for i, extra in enumerate(self._extras):
            w = extra.panel_width(panel_a.shape[2])
            self._accumulate_extra(extra.target, panel_a[s + i:s + i + 1, :, :w], panel_b[s + i:s + i + 1, :, :w])

    def _accumulate_extra(self, target: str, plane_a, plane_b) -> None:
        """One extra plane's products (3-D, one plane each): magnitude or support digits into
        the certificate's sums, class codes into the special-value counts."""
        xp, eng = self.xp, self.engine
        if target == "codes":
            if self._counts is None:
                self._counts = special.zeros_counts(xp, *self.shape)
            special.accumulate_counts(xp, self._counts, plane_a[0], plane_b[0])
            return
        if self._sums.get(target) is None:
            self._sums[target] = eng.zeros_groups(1, *self.shape, slices=1, k=self.k)
        eng.accumulate_groups(self._sums[target], plane_a, plane_b)

    def multiply(self) -> None:
        """All of k at once on this rank's own operands (one process: fused kernels, unless the
        certified combine reads the accumulators: ``plan.needs_group_sums``)."""
        if not self._bounds_pass:   # a bounds pass only sums the certificate's digits (the extras)
            self._multiply_plan()
        for extra in self._extras if self.k else ():
            if extra.a.shape[2]:
                self._accumulate_extra(extra.target, extra.a, extra.b)
        self.release_operands()
        self.clock.lap("multiply")

    def _multiply_plan(self) -> None:
        plan, eng = self.plan, self.engine
        if self.certifying and plan.needs_group_sums:
            self._acc = plan.zeros(eng, *self.shape, self.k)
            if self.k:
                plan.accumulate(eng, self._acc, self._planes_a, self._planes_b)
        else:
            self._ab = plan.multiply_combine(eng, self._planes_a, self._planes_b, *self._combine_exps())

    # -- the end of a pass -------------------------------------------------------------------
    def settle(self) -> bool:
        """End this pass: combine it (one fixed order; unless it only summed the certificate's
        digits) and apply the special values; with "auto", certify every entry and start the pass
        the policy (:class:`~ozhpc.ozaki.policy.Widening`) answers. Returns True when there is one:
        run the products again (:meth:`multiply`, or every panel through :meth:`accumulate`)."""
        if self._bounds_pass:
            self._bounds_pass = False
        else:
            self._combine()
            if not self.certifying:
                return False
        cert = self._certify()
        self.clock.lap("certificate")
        step = self.policy.after(cert, self.plan, sampled=self._lower_stride > 1, support="support" in self._sums)
        operands = None
        if step is not None and step.equilibrate:
            operands = equilibrated_operands(self.engine, self.reduce, self._given, self.k, self._k_index,
                                             finite=not self.nonfinite)
            if operands is None:
                step = self.policy.nothing_to_equilibrate(cert, self.plan)
        if cert.uncertified and not (step is not None and step.bounds):
            cert, step = self._refine_or(step, cert)
        if step is not None and step.equilibrate:
            self._prepare(*operands)   # a new problem: "auto" picks its first plan afresh
            return True
        if step is not None and step.restore:   # the equilibrated problem failed: the given one, wider
            self._prepare(*self._given)
            return True
        if step is None:
            self.cert, self._fin_a, self._fin_b, self._sums, self._group_sums = cert, None, None, {}, None
            self._rows = None
            self._given, self._settled = None, True
            return False
        if step.bounds:
            self._start_bounds_pass(step.bounds)
        else:
            self._start_wider(step.plan)
        return True

    def _refine_or(self, step, cert):
        """The failing entries recomputed by levels and exact dots (:func:`ozhpc.ozaki.refine.refine`)
        where that is predicted cheaper than ``step`` (another pass of every entry), or where
        ``step`` is None (no plan is left): then every entry is certified, and the ones that passed
        keep their bits. Returns ``(cert, step)``: the certificate after it, and the pass still to
        run (None after a refinement)."""
        if cert.passed is None:   # the fused kernel keeps no per-entry verdicts
            cert = self._certify(fused=False)
        failing = ~cert.passed
        block = self._failing_block(failing)
        if not self.policy.refine_first(step, self.plan, block, (*self.global_shape, self.k)):
            return cert, step
        done = refine.refine(self.engine, self.reduce, (self._fin_a, self._fin_b), self.k, self._k_index,
                             self.policy.refine_bits(self.plan), self._ab, failing, self.factor)
        if self._low is not None:   # a recomputed entry's total is its exact value, rounded: no lift left
            self._low = self.xp.where(failing, self.xp.nan, self._low)
        self.refined = done
        worst = max(cert.passed_worst, done.worst)
        self.policy.refined(self.policy.refine_bits(self.plan), worst)
        self.clock.lap("refine")
        return certificate.Certificate(None, 0, worst, worst), None

    def _failing_block(self, failing) -> tuple[int, int]:
        """How many rows of op(A) and columns of op(B) hold a failing entry (global, exact: rows are
        counted once per rank that shares them, and divided by how many do)."""
        r = self.reduce
        out = []
        for axis, r_max, r_sum in ((1, r.a_max, r.a_sum), (0, r.b_max, r.b_sum)):
            flag = np.asarray(self.engine.to_host(failing.any(axis=axis))).astype(np.int64)
            agreed = int((np.asarray(r_max(flag)) > 0).sum())
            share = int(np.asarray(r_sum(np.ones(flag.shape, dtype=np.int64))).max(initial=0))
            total = int(r.everywhere_sum(np.array([agreed], dtype=np.int64))[0])
            ranks = int(r.everywhere_max(np.array([share], dtype=np.int64))[0])
            out.append(total // max(ranks, 1))
        return tuple(out)

    def _start_bounds_pass(self, bounds) -> None:
        """The pass of the certificate's digits alone: the full magnitude plane ("lower") where the
        first pass sampled k, support digits ("support") where an entry had no lower bound."""
        extras = []
        if "lower" in bounds:
            self._lower_stride = 1
            self._sums.pop("lower", None)
            extras.append(self._magnitude_extra(1))
        if "support" in bounds:
            self._sums["support"] = self.engine.zeros_groups(1, *self.shape, slices=1, k=self.k)
            extras.append(self._magnitude_extra(1, "support", upper=True))
        self._extras, self._bounds_pass, self._settled = extras, True, False

    def _start_wider(self, plan) -> None:
        """A pass of a wider plan on the same scales: the operands split anew."""
        self.plan = plan
        self._ab, self._settled = None, False
        self._split_planes()
        self.clock.lap("split")

    def _combine(self) -> None:
        """The one fixed-order combine of this pass (certified: ``plan.certified_combine``, which
        may keep the accumulators for the certificate), then the special values."""
        ab = self._ab
        if ab is None:
            acc = self._acc if self._acc is not None else self.plan.zeros(self.engine, *self.shape, self.k)
            combine = self.plan.certified_combine if self.certifying else self.plan.combine
            ab = combine(self.engine, acc, *self._combine_exps())
            self._acc = acc
        self._group_sums = self._acc if self.certifying and self.plan.needs_group_sums else None
        if self.nonfinite:
            counts = self._counts if self._counts is not None else special.zeros_counts(self.xp, *self.shape)
            ab = special.apply_counts(self.xp, ab, counts)
        self._ab, self._acc, self._settled = self._raise(ab), None, True
        self.clock.lap("combine")

    def _certify(self, fused: bool = True):
        """Every entry of this rank's block against the guarantee; the count and the worst ratio
        are global (SUM and MAX over every rank), so every rank takes the same decision (the group
        sums, where the plan keeps them, bound the certified combine's roundings)."""
        xp, r, plan = self.xp, self.reduce, self.plan
        stats = tuple(certificate.operand_stats(xp, fin, exps, plan, self._on_host(reduce_max), mags=mags[:2])
                      for fin, exps, reduce_max, mags in ((self._fin_a, self.row_exps, r.a_max, self._mags[0]),
                                                          (self._fin_b, self.col_exps, r.b_max, self._mags[1])))
        sums = {key: None if value is None else value[0] for key, value in self._sums.items()}
        return certificate.certify_entries(xp, self._ab, sums.get("lower"), stats, self.row_exps, self.col_exps, plan,
                                           self._group_sums, sums.get("support"),
                                           lifted=None if self._low is None else (self._low, *self._lift),
                                           reduce_sum=self._on_host(r.everywhere_sum),
                                           reduce_max=self._on_host(r.everywhere_max), factor=self.factor,
                                           fused=fused)

    def _on_host(self, reduce):
        """``reduce`` (NumPy arrays, MPI underneath) for arrays on the engine's device; the identity
        of one process stays on the device (no round trip, no synchronisation)."""
        if reduce is _same:
            return _same
        eng = self.engine
        return lambda x: eng.asarray(reduce(eng.to_host(x)))

    def info(self, seconds: dict | None = None) -> GemmInfo:
        """What this product did (the global shape; ``seconds``: the phases' times, when the caller
        measured more than :attr:`clock`)."""
        plan = self.plan
        described = plan.describe()
        cert = self.cert
        return GemmInfo(m=self.global_shape[0], n=self.global_shape[1], k=self.k, engine=self.engine.name,
                        slices=described.get("slices"), groups=described.get("groups"),
                        moduli=described.get("moduli"), planes=plan.planes, int8_gemms=plan.int8_gemms,
                        spread_bits=self.spread, truncation_bound=float(plan.truncation_bound(self.k)),
                        combine_bound=plan.combine_bound(self.k),
                        rounding_bound=plan.rounding_bound, nonfinite_inputs=self.nonfinite, guarantee=self.guarantee,
                        seconds=dict(self.clock.seconds if seconds is None else seconds),
                        scheme=plan.scheme, bits=plan.bits, plan_summary=plan.summary(),
                        certified=None if cert is None else cert.uncertified == 0,
                        uncertified=0 if cert is None else cert.uncertified,
                        worst_ratio=0.0 if cert is None else cert.worst, widths=list(self.widths),
                        refined_entries=self.refined.refined, levels=self.refined.levels,
                        exact_entries=self.refined.exact)

    # -- finish ----------------------------------------------------------------------------
    def finish(self, alpha: float = 1.0, beta: float = 0.0, c=None):
        """``alpha * op(A) op(B) + beta * c`` on this rank's block of C (``c`` read only when
        beta != 0), after :meth:`settle` (called here when the caller did not)."""
        require_c(beta, c)
        if not self._settled and self.settle():
            raise RuntimeError("the certificate chose a wider plan: run the products again "
                               "(loop while Product.settle() is True) before finish()")
        ab = self._ab
        if self._low is not None and alpha not in (0.0, 1.0):   # alpha times an entry's total, then its scale
            xp = self.xp
            over = xp.isinf(ab) & xp.isfinite(self._low)
            ab, alpha = xp.where(over, final_scale(xp, alpha * self._low, self._lift_of()), alpha * ab), 1.0
        out = epilogue(self.xp, ab, alpha, beta, c)
        self._ab = self._low = None
        self.clock.lap("combine")
        return out
