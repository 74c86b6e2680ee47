"""One pass of the products as a value (:class:`Pass`): what travels with it and what it sums.

A pass is a plan whose products run (none in a pass that only sums the certificate's digits),
the int8 planes of both operands (or none: FP64 panels split on arrival), and the extra planes
that travel beside the plan's (:class:`Extra`): the certificate's magnitude digits ("lower"),
its support digits ("support") and, when some input anywhere is inf/NaN, the class codes
("codes"). Three starters make them from a product's :class:`~ozhpc.ozaki.operands.Operands`:
:func:`first_pass` (with every set of scales), :func:`bounds_pass` (the certificate's digits
alone) and :func:`wider_pass` (a wider plan on the same scales); which one follows a failed
certificate is the policy's (:mod:`ozhpc.ozaki.policy`). :class:`Sums` holds what the passes
of one set of scales add up.

Every plane is elementwise in the global scales, so a panel packed by its owner
(:meth:`Pass.pack`) and the same panel split on arrival (:meth:`Pass.arrived`) hold the same
bytes: the bits of C never depend on the wire.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import special
from .plan import assumed_plan

SAMPLE_COLUMNS = 1024
SAMPLE_STRIDE_MAX = 16
"""Under "dgemm" the first pass's magnitude plane holds every ``stride``-th global k index,
``stride = min(16, k // 1024)``: a lower bound of ``(|A||B|)_ij`` at 1/stride of one int8 GEMM's
cost, about 1/stride of the full one on dense data, where the guarantee has a factor k of slack
(with 256 samples, phi = 1 at n = 16384 still needed the full plane for a few entries).
Structured data the samples miss gets the full plane in a second, one-plane pass."""


def sample_stride(k: int, guarantee: str | None) -> int:
    """Every how many global k indices the first pass's magnitude plane holds: 0 (no plane: not
    certified), about 1024 of them but at most every 16th under "dgemm", every one under "tight"
    (exact integer sums over the same global indices on every grid: grid-independent verdicts)."""
    if guarantee is None:
        return 0
    return max(1, min(SAMPLE_STRIDE_MAX, k // SAMPLE_COLUMNS)) if guarantee == "dgemm" else 1


def first_extras(certifying: bool, nonfinite: bool) -> tuple:
    """The extra planes of a first pass, in order: the certificate's magnitudes ("lower") under
    "auto", the class codes ("codes") when some input anywhere is inf/NaN."""
    return (("lower",) if certifying else ()) + (("codes",) if nonfinite else ())


def assumed_depth(settings, k: int) -> int:
    """int8 planes per entry of the first pass before the data is read: the planes of
    :func:`~ozhpc.ozaki.plan.assumed_plan` and the first pass's extra planes on finite data."""
    return assumed_plan(settings, k).planes + len(first_extras(settings.auto, nonfinite=False))


@dataclass
class Extra:
    """An int8 plane that travels with a pass's panels besides the plan's planes: ``target`` (what
    its products feed: "lower" / "support", the certificate's sums; "codes", the special values),
    the planes of op(A) and op(B)^T (1, rows, cols; None when split on arrival) and, for a sampled
    plane (``stride`` > 1), the local columns they hold (those whose global k index is a multiple
    of ``stride``, compacted)."""

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
        index) into ``dst`` (rows x width), as :meth:`pack` would have sent it."""
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


@dataclass
class Pass:
    """One pass of the products: ``plan``, whether its products run (``products``; False: only
    the certificate's digits), the ``extras`` that travel with it, and ``operand_planes`` (the
    plan's int8 planes of op(A) and op(B)^T; None when ``on_arrival``: panels travel as FP64 and
    every receiver splits them)."""

    plan: object
    products: bool = True
    extras: list = field(default_factory=list)
    operand_planes: tuple | None = None
    on_arrival: bool = False

    @property
    def plan_planes(self) -> int:
        """The plan's planes in this pass (none in a pass that only sums the certificate's digits)."""
        return self.plan.planes if self.products else 0

    @property
    def depth(self) -> int:
        """int8 planes per entry of a panel: the plan's, plus this pass's extra planes."""
        return self.plan_planes + len(self.extras)

    def view(self, rows: int, width: int, out):
        """``out`` shaped as a panel of ``rows`` x ``width`` as it travels (what a receiver fills):
        (rows, width) FP64 on arrival, else (depth, rows, width) int8 planes."""
        if self.on_arrival:
            return out[:rows * width].reshape(rows, width)
        return self._planes_view(rows, width, out)

    def _planes_view(self, rows: int, width: int, out):
        return out[:self.depth * rows * width].reshape(self.depth, rows, width)

    def pack(self, operands, side: int, offset: int, width: int, buf) -> None:
        """Local columns ``offset:offset+width`` of op(A) (``side`` 1) or op(B)^T (2) into ``buf``
        (:meth:`view`) as they travel: FP64 (inf/NaN included) on arrival, else the int8 planes."""
        if self.on_arrival:
            buf[...] = (operands.a if side == 1 else operands.b)[:, offset:offset + width]
            return
        s = self.plan_planes
        if s:
            buf[:s] = self.operand_planes[side - 1][:, :, offset:offset + width]
        for i, extra in enumerate(self.extras):
            extra.pack(side, offset, width, buf[s + i])

    def arrived(self, engine, operands, side: int, panel, out, k0: int = 0):
        """The int8 planes of a panel that arrived: as it is, or (FP64 on arrival) split into
        ``out`` as :meth:`pack` would have sent them (``k0``: the panel's first global k index,
        for sampled planes)."""
        if not self.on_arrival:
            return panel
        exps = operands.row_exps if side == 1 else operands.col_exps
        buf = self._planes_view(panel.shape[0], panel.shape[1], out)
        fin = special.finite_part(engine.xp, panel, operands.nonfinite)
        s = self.plan_planes
        if s:
            buf[:s] = self.plan.split(engine, fin, exps)
        for i, extra in enumerate(self.extras):
            extra.from_panel(engine, panel, fin, exps, k0, buf[s + i])
        return buf

    def release(self) -> None:
        """Drop the split operands (after the last panel of the pass was packed)."""
        self.operand_planes, self.extras = None, []


def first_pass(engine, operands, plan, *, guarantee: str | None, on_arrival: bool) -> Pass:
    """The first pass of a set of scales: the plan's planes of both operands and the first extra
    planes (:func:`first_extras`; the magnitudes sampled at :func:`sample_stride`). Drops what no
    later step reads: the finite parts unless certified ("auto" splits again at a wider plan,
    and certifies), the FP64 rows unless they travel."""
    xp = engine.xp
    planes = None if on_arrival else split(engine, operands, plan)
    extras = []
    for target in first_extras(guarantee is not None, operands.nonfinite):
        if target == "lower":
            extras.append(magnitude_extra(engine, operands, target, sample_stride(operands.k, guarantee), on_arrival))
        elif on_arrival:
            extras.append(Extra(target, None, None))
        else:
            extras.append(Extra(target, special.classify(xp, operands.a)[None], special.classify(xp, operands.b)[None]))
    if guarantee is None:
        operands.fin_a = operands.fin_b = None
    if not on_arrival:
        operands.a = operands.b = None
    return Pass(plan, True, extras, planes, on_arrival)


def bounds_pass(engine, operands, plan, bounds: tuple, *, on_arrival: bool) -> Pass:
    """The pass of the certificate's digits alone (no products of the plan): the full magnitude
    plane ("lower") where the first pass sampled k, support digits ("support") where an entry
    had no lower bound."""
    return Pass(plan, False, [magnitude_extra(engine, operands, target, 1, on_arrival)
                              for target in ("lower", "support") if target in bounds], None, on_arrival)


def wider_pass(engine, operands, plan, *, on_arrival: bool) -> Pass:
    """A pass of a wider plan on the same scales: the operands split anew."""
    return Pass(plan, True, [], None if on_arrival else split(engine, operands, plan), on_arrival)


def split(engine, operands, plan) -> tuple:
    """The plan's int8 planes of both operands' finite parts."""
    return (plan.split(engine, operands.fin_a, operands.row_exps), plan.split(engine, operands.fin_b, operands.col_exps))


def magnitude_extra(engine, operands, target: str, stride: int, on_arrival: bool) -> Extra:
    """Magnitude ("lower") or support ("support") digits of both operands as an :class:`Extra`, of
    the k indices that are multiples of ``stride`` (compacted) when it is above 1; on arrival
    made per panel (:meth:`Extra.from_panel`)."""
    if on_arrival:
        return Extra(target, None, None, stride)
    xp, upper = engine.xp, target == "support"
    fin_a, fin_b, cols = operands.fin_a, operands.fin_b, (None, None)
    if stride > 1:
        cols = tuple(np.flatnonzero(np.asarray(ix) % stride == 0) for ix in operands.global_k())
        fin_a, fin_b = (_columns(xp, engine, fin, c) for fin, c in ((fin_a, cols[0]), (fin_b, cols[1])))
    return Extra(target, engine.magnitudes(fin_a, operands.row_exps, upper=upper),
                 engine.magnitudes(fin_b, operands.col_exps, upper=upper), stride, *cols)


def _columns(xp, eng, x, cols):
    """Columns ``cols`` (ascending) of ``x``: a strided view where they are evenly spaced (one
    process: every ``stride``-th index from 0), which the magnitude kernel reads in place of a copy."""
    if cols.size > 1 and np.all(np.diff(cols) == cols[1] - cols[0]):
        return x[:, int(cols[0]):int(cols[-1]) + 1:int(cols[1] - cols[0])]
    return xp.take(x, eng.asarray(cols), axis=1)


@dataclass
class Sums:
    """What the passes of one set of scales add up on this rank's block (m x n): ``acc``, the
    plan's accumulators of the running pass; ``counts``, the special values' (first pass);
    ``digits``, the certificate's digit products ("lower", "support": (1, m, n) each) and
    ``lower_stride``, every how many k indices the "lower" sums hold (1: all; 0: none)."""

    engine: object
    shape: tuple
    k: int
    acc: object = None
    counts: object = None
    digits: dict = field(default_factory=dict)
    lower_stride: int = 0

    def start(self, pass_: Pass) -> None:
        """A pass begins: its magnitude plane restarts the "lower" sums (at its stride), its
        support plane starts the "support" sums at zero."""
        for extra in pass_.extras:
            if extra.target == "lower":
                self.lower_stride = extra.stride
                self.digits.pop("lower", None)
            elif extra.target == "support":
                self.digits["support"] = self._zeros()

    def add(self, target: str, plane_a, plane_b, whole: bool = False) -> None:
        """One extra plane's products (3-D, one plane each): magnitude or support digits into the
        certificate's sums, class codes into the special-value counts. ``whole``: the planes hold
        all of k, so sums not yet started are written fresh (no zeros to add into)."""
        xp = self.engine.xp
        if target == "codes":
            if self.counts is None:
                self.counts = special.zeros_counts(xp, *self.shape)
            special.accumulate_counts(xp, self.counts, plane_a[0], plane_b[0])
            return
        if self.digits.get(target) is None and whole:
            self.digits[target] = self.engine.group_sums(plane_a, plane_b)
            return
        if self.digits.get(target) is None:
            self.digits[target] = self._zeros()
        self.engine.accumulate_groups(self.digits[target], plane_a, plane_b)

    def _zeros(self):
        return self.engine.zeros_groups(1, *self.shape, slices=1, k=self.k)
