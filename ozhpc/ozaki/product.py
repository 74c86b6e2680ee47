"""The Ozaki product pipeline, written once: ``C = alpha * op(A) @ op(B) + beta * C``.

``ozhpc.gemm`` (one process, all of k in one panel) and the SUMMA driver (a grid of ranks,
k in panels) run the same object on their pieces of op(A) (rows along k) and op(B)^T (B's
columns as rows along k)::

    product = Product(settings, engine, a_rows, b_rows, k=k, reduce=reductions)
    # prepare (in the constructor): the operands measured, the plan, the first pass
    product.pack(side, offset, width, buf)        # an owner's k-panel, as it travels
    product.arrived(side, panel, scratch, k0)     # a panel's int8 planes (FP64: split on arrival)
    product.accumulate(planes_a, planes_b)        # exact, any order of panels
    # or, one process: product.multiply()  # the whole k at once (fused kernels)
    while product.settle(): ...                   # combine the pass; "auto": the policy may ask for another
    c = product.finish(alpha, beta, c0)           # alpha/beta

A product runs one :class:`~ozhpc.ozaki.passes.Pass` at a time on one set of
:class:`~ozhpc.ozaki.operands.Operands`; which pass follows a failed certificate is the policy's
answer (:mod:`ozhpc.ozaki.policy`), a value. Every value that decides a bit of C is reduced
across ranks with the exact, order-free callables of :class:`~ozhpc.ozaki.reductions.Reductions`,
so every grid, block size and panel width gives the same bits. Entries a pass certified are kept
through later passes, and the entries no pass is predicted to certify cheaply are recomputed by
levels of scales and exact dots (:class:`~ozhpc.ozaki.refine.Refinement`). What differs between the schemes
lives in the plan objects of :mod:`ozhpc.ozaki.plan`; what differs between devices in the engines.
"""
from __future__ import annotations

from ..errors import require_c, trans_mode
from . import certificate, refine
from .domain import domain_of
from .info import GemmInfo, Stopwatch, enforce_accuracy  # noqa: F401  (re-exported: summa, runner)
from .operands import measure
from .passes import Sums, bounds_pass, first_pass, wider_pass
from .policy import Widening, equilibrated_operands
from .reductions import LOCAL, Reductions, on_host  # noqa: F401  (Reductions re-exported)
from .settings import OzakiSettings


def op_rows(x, trans, is_left: bool):
    """The operand as rows along k: op(A) for the left side, op(B)^T for the right; ``trans`` a bool
    or BLAS's "N", "T", "C" (conjugate transposed: the conjugate of a complex ``x``)."""
    mode = trans_mode(trans)
    if mode == "C" and x.dtype.kind == "c":
        x = x.conj()
    return (x if mode == "N" else x.T) if is_left else (x.T if mode == "N" else x)


class Product:
    """One product on this rank's pieces, prepared in the constructor (collective when the
    reductions are): the operands measured (global row scales, sizes), the plan, the first pass.

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
    a_rows, b_rows : 2-D float or complex arrays on the engine's device
        This rank's rows of op(A) (m_loc x k_loc) and of op(B)^T (n_loc x k_loc'). When either is
        complex the product is (:mod:`ozhpc.ozaki.domain`): a real one is promoted.
    k : int, optional
        The global inner dimension (default: ``a_rows.shape[1]``, one process).
    reduce : Reductions
    k_index : (array, array), optional
        Global k index of each column of ``a_rows`` / ``b_rows`` (default: all of k in order).
    split_on_arrival : bool
        Panels travel as FP64 (:meth:`pack`) and every receiver splits them (:meth:`arrived`): no
        whole-operand planes are made, only the panels'. Default: int8 planes packed by the owner.
    global_shape : (int, int), optional
        The global (m, n) that :meth:`info` reports (default: this rank's, one process).
    """

    def __init__(self, settings: OzakiSettings, engine, a_rows, b_rows, *, k: int | None = None,
                 reduce: Reductions = LOCAL, k_index=None, split_on_arrival: bool = False, global_shape=None):
        self.settings, self.engine, self.xp = settings, engine, engine.xp
        self.domain = domain_of(a_rows, b_rows)
        a_rows, b_rows = (self.domain.operand(self.xp, x) for x in (a_rows, b_rows))
        self.k = a_rows.shape[1] if k is None else int(k)
        self.shape = (a_rows.shape[0], b_rows.shape[0])
        self.global_shape = self.shape if global_shape is None else tuple(int(v) for v in global_shape)
        self.reduce, self.certifying = reduce, settings.auto
        if self.certifying:
            certificate.check_k(self.k, self.domain.width)
        self.guarantee = settings.guarantee if self.certifying else None
        self.factor = self.domain.factor(self.k) if self.guarantee == "dgemm" else 1
        """The certified bound is ``factor u (|A||B|)_ij``: k for "dgemm" (k + 1 per component of a
        complex product), 1 for "tight"."""
        self.clock = Stopwatch(engine)
        self.policy = Widening(settings)
        self.cert, self.refinement = None, refine.Refinement(engine, reduce, self.domain.complex)
        self._on_arrival = split_on_arrival
        self._given = (a_rows, b_rows) if self.certifying else None   # to equilibrate, should a pass fail
        self._begin(a_rows, b_rows, k_index)

    def _begin(self, a_rows, b_rows, k_index) -> None:
        """A set of scales (the given operands, or equilibrated ones): the operands measured, the
        first plan ("auto": afresh), the first pass; the sums start anew (they follow the scales)."""
        settings = self.policy.settings
        self.ops = measure(self.engine, a_rows, b_rows, k=self.k, settings=settings, certifying=self.certifying,
                           reduce=self.reduce, k_index=k_index, domain=self.domain)
        few = self.guarantee == "dgemm" and not self.domain.complex and self.ops.sizes is not None \
            and self.ops.sizes.few_products
        self.policy.in_fact = self.factor if few else 0   # accuracy in fact checked (policy.Widening.in_fact_step)
        self.plan = self.ops.plan(settings)
        self.clock.lap("scales")
        self.pass_ = first_pass(self.engine, self.ops, self.plan, guarantee=self.guarantee, on_arrival=self._on_arrival)
        self.clock.lap("split")
        self.sums = Sums(self.engine, self.shape, self.k, domain=self.domain)
        self.sums.start(self.pass_)
        self._ab = self._lifted = self._group_sums = None
        self._stats = None   # the operands' certificate statistics for this plan (:meth:`_operand_stats`)

    @property
    def widths(self) -> list:
        """Plans "auto" ran, in order (:attr:`GemmInfo.widths`)."""
        return self.policy.widths

    @property
    def depth(self) -> int:
        """int8 planes per entry of a panel of the running pass."""
        return self.pass_.depth

    # -- panels ----------------------------------------------------------------------------
    def panel(self, side: int, width: int, out):
        """``out`` shaped as a panel of op(A) (``side`` 1) or op(B)^T (2) of ``width`` k indices as
        it travels (what a receiver fills)."""
        return self.pass_.view(self.shape[side - 1], width, out)

    def pack(self, side: int, offset: int, width: int, out):
        """Local columns ``offset:offset+width`` of op(A) (``side`` 1) or op(B)^T (2) as they
        travel (:meth:`panel`): the pass's int8 planes, or FP64 when split on arrival."""
        buf = self.panel(side, width, out)
        self.pass_.pack(self.ops, side, offset, width, buf)
        return buf

    def arrived(self, side: int, panel, out, k0: int = 0):
        """The int8 planes of a panel that arrived: the panel itself, or FP64 split into ``out``
        (at least ``depth * rows * width`` int8 entries; ``k0``: the panel's first global k index)."""
        return self.pass_.arrived(self.engine, self.ops, side, panel, out, k0)

    def release_operands(self) -> None:
        """Drop the split operands (after the last panel of a pass was packed)."""
        self.pass_.release()
        if not self.certifying:
            self.ops.a = self.ops.b = None

    def accumulate(self, panel_a, panel_b) -> None:
        """Add one k-panel's products (exact: any order of panels gives the same sums)."""
        plan, sums, s = self.plan, self.sums, self.pass_.plan_planes
        if s:
            if sums.acc is None:
                sums.acc = plan.zeros(self.engine, *self.shape, self.k)
            plan.accumulate(self.engine, sums.acc, panel_a[:s], panel_b[:s])
        for extra, lo, hi in self.pass_.extra_slots():
            w = extra.panel_width(panel_a.shape[2])
            sums.add(extra.target, panel_a[lo:hi, :, :w], panel_b[lo:hi, :, :w])

    def multiply(self) -> None:
        """All of k at once on this rank's own operands (one process: fused kernels, unless the
        certified combine reads the accumulators: ``plan.needs_group_sums``)."""
        plan, eng = self.plan, self.engine
        for extra in self.pass_.extras if self.k else ():   # first: the combine may read the certificate's sums
            if extra.a.shape[2]:
                self.sums.add(extra.target, extra.a, extra.b, whole=True)
        if self.pass_.products:   # a bounds pass only sums the certificate's digits (the extras)
            planes_a, planes_b = self.pass_.operand_planes
            if self.certifying and plan.needs_group_sums:
                self.sums.acc = plan.zeros(eng, *self.shape, self.k)
                if self.k:
                    plan.accumulate(eng, self.sums.acc, planes_a, planes_b)
            else:
                self._ab = plan.multiply_combine(eng, planes_a, planes_b, *self.ops.combine_exps())
        self.release_operands()
        self.clock.lap("multiply")

    # -- the end of a pass -------------------------------------------------------------------
    def settle(self) -> bool:
        """End this pass: combine it (one fixed order; unless it only summed the certificate's
        digits) and apply the special values; with "auto", certify every entry and start the pass
        the policy (:class:`~ozhpc.ozaki.policy.Widening`) answers. Returns True when there is one:
        run the products again (:meth:`multiply`, or every panel through :meth:`accumulate`)."""
        if self.pass_ is None:
            return False
        if self.pass_.products:
            self._combine()
            if not self.certifying:
                return self._done(None)
        cert, self._ab, self._lifted = self.refinement.keep(self._certify(fused=self.refinement.kept is None),
                                                            self._ab, self._lifted, lambda: self._certify(fused=False))
        self.clock.lap("certificate")
        step = self.policy.after(cert, self.plan, sampled=self.sums.lower_stride > 1,
                                 support="support" in self.sums.digits)
        if cert.uncertified:
            gemms = self.ops.plan(step.settings, step.width).int8_gemms if step and step.settings else self.plan.int8_gemms
            step = self.refinement.weigh(self.policy, step, cert, self.plan, (*self.global_shape, self.k), gemms)
        return self._start(step, cert)

    def _start(self, step, cert) -> bool:
        """Start the pass ``step`` names (:class:`~ozhpc.ozaki.policy.NextPass`; None: done)."""
        if step is not None and step.equilibrate:
            operands = equilibrated_operands(self.engine, self.reduce, self._given, self.k, self.ops.k_index,
                                             finite=not self.ops.nonfinite, domain=self.domain)
            if operands is not None:
                self._begin(*operands, self.ops.k_index)   # a new problem: "auto" picks its first plan afresh
                return True
            step = self.policy.nothing_to_equilibrate(cert, self.plan)
        if step is not None and step.restore:   # the equilibrated problem failed: the given one, wider
            self._begin(*self._given, self.ops.k_index)
            return True
        if step is None:
            return self._done(cert)
        if step.refine:
            cert, self._lifted = self.refinement.run(self.policy, step.refine, cert, (self.ops.fin_a, self.ops.fin_b),
                                                     self.k, self.ops.k_index, self._ab, self._lifted)
            self.clock.lap("refine")
            return self._done(cert)
        if step.bounds:
            self.pass_ = bounds_pass(self.engine, self.ops, self.plan, step.bounds, on_arrival=self._on_arrival)
        else:
            self.plan, self._ab = self.ops.plan(step.settings, step.width), None
            self.pass_ = wider_pass(self.engine, self.ops, self.plan, on_arrival=self._on_arrival)
            self.clock.lap("split")
        self.sums.start(self.pass_)
        return True

    def _done(self, cert) -> bool:
        """The last pass settled: keep C and the verdict, drop the operands and the sums."""
        self.cert, self.pass_, self.sums, self._group_sums, self._given = cert, None, None, None, None
        self.refinement.kept = None
        self._stats = None
        self.ops.a = self.ops.b = self.ops.fin_a = self.ops.fin_b = None
        return False

    def _combine(self) -> None:
        """The one fixed-order combine of this pass (certified: ``plan.certified_combine``, which
        may keep the accumulators for the certificate), then the special values."""
        plan, sums, ab = self.plan, self.sums, self._ab
        if ab is None:
            acc = sums.acc if sums.acc is not None else plan.zeros(self.engine, *self.shape, self.k)
            combine = plan.certified_combine if self.certifying else plan.combine
            ab = combine(self.engine, acc, *self.ops.combine_exps())
            sums.acc = acc
        self._group_sums = sums.acc if self.certifying and plan.needs_group_sums else None
        if self.ops.nonfinite:
            counts = sums.counts if sums.counts is not None else self.domain.zeros_counts(self.xp, *self.shape)
            ab = self.domain.apply_counts(self.xp, ab, counts)
        (self._ab, self._lifted), sums.acc = self.ops.raised(self.xp, ab), None
        self.clock.lap("combine")

    def _certify(self, fused: bool = True):
        """Every entry of this rank's block against the guarantee; the count and the worst ratio
        are global (SUM and MAX over every rank), so every rank takes the same decision (the group
        sums, where the plan keeps them, bound the certified combine's roundings).
        ``fused=False``: the per-entry verdicts from C (the refinement needs the mask)."""
        r, ops, eng = self.reduce, self.ops, self.engine
        reduce_sum, reduce_max = on_host(eng, r.everywhere_sum), on_host(eng, r.everywhere_max)
        digits = self.sums.digits
        return self.domain.certify(eng, self._ab, digits.get("lower"), self._operand_stats(), ops.row_exps,
                                   ops.col_exps, self.plan, self._group_sums, digits.get("support"),
                                   lifted=self._lifted,
                                   reduce_sum=reduce_sum, reduce_max=reduce_max, factor=self.factor, fused=fused)

    def _operand_stats(self):
        """Both operands' certificate statistics for this plan's split (the domain's
        :meth:`part_stats`; made once per plan: the certificate and the refinement read the same)."""
        steps = self.plan.split_steps
        if self._stats is None or self._stats[0] != steps:
            r, ops, eng = self.reduce, self.ops, self.engine
            self._stats = (steps, tuple(
                self.domain.part_stats(eng, fin, exps, self.plan, on_host(eng, reduce_max), mags, on_host(eng, row_sum))
                for fin, exps, reduce_max, row_sum, mags in ((ops.fin_a, ops.row_exps, r.a_max, r.a_sum, ops.mags[0]),
                                                             (ops.fin_b, ops.col_exps, r.b_max, r.b_sum, ops.mags[1]))))
        return self._stats[1]

    def info(self, seconds: dict | None = None) -> GemmInfo:
        """What this product did (the global shape; ``seconds``: the phases' times, when the caller
        measured more than :attr:`clock`)."""
        plan, cert = self.plan, self.cert
        described = plan.describe()
        return GemmInfo(m=self.global_shape[0], n=self.global_shape[1], k=self.k, engine=self.engine.name,
                        slices=described.get("slices"), groups=described.get("groups"),
                        moduli=described.get("moduli"), planes=plan.planes, int8_gemms=plan.int8_gemms,
                        spread_bits=self.ops.spread, truncation_bound=float(plan.truncation_bound(self.k)),
                        combine_bound=plan.combine_bound(self.k),
                        rounding_bound=plan.rounding_bound, nonfinite_inputs=self.ops.nonfinite, guarantee=self.guarantee,
                        seconds=dict(self.clock.seconds if seconds is None else seconds),
                        scheme=plan.scheme, bits=plan.bits, plan_summary=plan.summary(),
                        certified=None if cert is None else cert.uncertified == 0,
                        uncertified=0 if cert is None else cert.uncertified,
                        worst_ratio=0.0 if cert is None else cert.worst, widths=list(self.widths),
                        complex=self.domain.complex,
                        refined_entries=self.refinement.done.refined, levels=self.refinement.done.levels,
                        exact_entries=self.refinement.done.exact)

    # -- finish ----------------------------------------------------------------------------
    def finish(self, alpha: float = 1.0, beta: float = 0.0, c=None):
        """``alpha * op(A) op(B) + beta * c`` on this rank's block of C (``c`` read only when
        beta != 0), after :meth:`settle` (called here when the caller did not)."""
        require_c(beta, c)
        if self.pass_ is not None and self.settle():
            raise RuntimeError("the certificate chose a wider plan: run the products again "
                               "(loop while Product.settle() is True) before finish()")
        xp = self.xp
        # the epilogue is complex when the product, alpha, beta or C is (a real product is promoted)
        domain = self.domain if self.domain.complex else domain_of(c, xp.asarray(alpha), xp.asarray(beta))
        ab, lifted = self._ab, self._lifted
        if domain.complex and not self.domain.complex:
            ab, lifted = domain.operand(xp, ab), None if lifted is None else (domain.operand(xp, lifted[0]), lifted[1])
        if lifted is not None and alpha not in (0.0, 1.0):   # alpha times an entry's total, then its scale
            low, shift = lifted
            over = xp.isinf(ab) & xp.isfinite(low)
            ab, alpha = xp.where(over, domain.scaled(xp, domain.times(xp, alpha, low), shift),
                                 domain.times(xp, alpha, ab)), 1.0
        out = domain.epilogue(xp, ab, alpha, beta, c)
        self._ab = self._lifted = None
        self.clock.lap("combine")
        return out
