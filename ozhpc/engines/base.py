"""The engine interface: the three heavy steps of the Ozaki scheme.

An engine owns an array module (``xp``: numpy or cupy) and implements

* ``split``: FP64 rows -> int8 digit slices (given the per-row exponents),
* ``accumulate_groups``: exact slice-pair products summed into group accumulators,
* ``combine_groups``: the one fixed-order FP64 rounding of the group accumulators,

and for Ozaki scheme II (:mod:`ozhpc.engines.crt`) ``residues`` (FP64 rows -> int8
balanced residues, one slice per modulus), ``accumulate_moduli`` (one product per modulus)
and ``combine_moduli`` (the CRT reconstruction). The engines know nothing of plans or
accuracy: :mod:`ozhpc.ozaki.plan` decides which of these primitives a product calls.

Everything else (scales, slice-count choice, special values, alpha/beta, the
distributed panel loop) is written once in :mod:`ozhpc.ozaki` and
:mod:`ozhpc.parallel` against ``xp`` and this interface, so engines stay small and
every engine produces the same bits.

The scheme's numbers (digit bits and bounds, gap codes, the final scaling) live in
:mod:`ozhpc.engines.digits`; they are re-exported here for the modules that still import them
from ``base``.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod

from . import statistics, superacc
from .digits import MAX_GAP, NO_GAP, count_gaps_le, row_abs_max
from .digits import (  # noqa: F401  (re-exported: ozaki/ imports the scheme's numbers from here)
    BITS, DBL_MAX, DIGIT_MAX, GAP_HISTOGRAM_ENTRIES, LATER_DIGIT_MAX, digit_bound, final_scale,
    group_product_bound, group_weight_exponent, ldexp_by, magnitude_digits, support_digits)


class HostTimer:
    """Summed wall time of timed sections (``start`` / ``stop`` pairs) on the host."""

    def __init__(self):
        self.total, self._t = 0.0, 0.0

    def start(self) -> None:
        self._t = time.perf_counter()

    def stop(self) -> None:
        self.total += time.perf_counter() - self._t

    def seconds(self) -> float:
        return self.total


VERDICT_CONSTANTS = ("DOWN", "UP", "TINYSUB", "COMB0", "COMB1", "PW", "P2W", "FLOOR", "SUW", "TAU", "RHOU",
                     "FOURU", "MAGUNIT", "FACTOR", "FAIL_MIN")
"""The numbers of scheme II's per-entry verdict by name (:meth:`Engine.entry_verdicts`' ``constants``:
:func:`ozhpc.ozaki.certificate.verdict_constants`)."""


class Engine(ABC):
    """Heavy kernels of the Ozaki scheme on one device (see module docstring)."""

    name: str = "abstract"
    xp = None  # array module
    on_device = False
    """Whether arrays live on an accelerator (SUMMA's transports and panel width follow it)."""
    k_align = 1
    """k-panel widths that are a multiple of this need no re-padding in the engine."""

    @abstractmethod
    def split(self, x, exps, nslices: int):
        """Digits of the rows of 2-D FP64 ``x`` (finite, any strides).

        ``exps`` holds one int exponent per row. Returns int8 ``(nslices, rows, cols)``.
        """

    @abstractmethod
    def residues(self, x, exps, crt):
        """Balanced residues of ``X = rint(x * 2**(crt.bits - e_i))`` modulo each of the
        ``crt.count`` moduli (:mod:`ozhpc.engines.crt`): int8 ``(crt.count, rows, cols)``.
        """

    @abstractmethod
    def accumulate_groups(self, acc, da, eb) -> None:
        """Scheme I: ``acc[g] += sum_{p+q=g} da[p] @ eb[q].T`` exactly, for ``g < len(acc)``.

        ``da`` is int8 ``(s, m, kb)``, ``eb`` int8 ``(s, n, kb)`` (B's slices stored
        k-contiguous, i.e. slices of B transposed), ``acc`` from :meth:`zeros_groups`
        (float64 exact integers by default).
        """

    @abstractmethod
    def combine_groups(self, acc, row_exps, col_exps):
        """Scheme I: FP64 ``ldexp(sum_g acc[g] * 2**group_weight_exponent(g), e_i + f_j)``.

        The sum runs from the last group down to group 0 (smallest terms first),
        each term exact, so the only roundings are the d-1 additions and the final
        scaling, in this order on every engine.
        """

    @abstractmethod
    def accumulate_moduli(self, acc, da, eb, tables) -> None:
        """Scheme II: ``acc[l] += da[l] @ eb[l].T`` modulo the l-th modulus of ``tables``
        (:class:`ozhpc.engines.crt.CrtTables`): only ``acc[l] mod p_l`` counts (the CRT reduces
        first), so an engine may keep reduced residues (the cuTile engine: int8)."""

    @abstractmethod
    def combine_moduli(self, acc, row_exps, col_exps, tables):
        """Scheme II: the CRT reconstruction of :mod:`ozhpc.engines.crt`, scaled by
        ``2**(e_i + f_j + tables.shift)``."""

    def multiply_combine_groups(self, da, eb, ngroups: int, row_exps, col_exps):
        """Scheme I pair products over the whole k, then :meth:`combine_groups` (one panel).

        Must give the same bits as the three steps, which is all this default does; an
        engine may fuse them (e.g. skip the group accumulators).
        """
        acc = self.zeros_groups(ngroups, da.shape[1], eb.shape[1])
        if da.shape[2]:
            self.accumulate_groups(acc, da, eb)
        return self.combine_groups(acc, row_exps, col_exps)

    def multiply_combine_moduli(self, da, eb, row_exps, col_exps, tables):
        """Scheme II products over the whole k, then :meth:`combine_moduli` (one panel)."""
        acc = self.zeros_moduli(tables, da.shape[1], eb.shape[1])
        if da.shape[2]:
            self.accumulate_moduli(acc, da, eb, tables)
        return self.combine_moduli(acc, row_exps, col_exps, tables)

    def group_sums(self, da, eb, ngroups: int = 1):
        """Fresh scheme I group sums of one whole k (:meth:`zeros_groups`, then
        :meth:`accumulate_groups`): the certificate's digit products. An engine may write them
        without the zeros (the cuTile engine: int32 straight from the pair kernel)."""
        acc = self.zeros_groups(ngroups, da.shape[1], eb.shape[1], slices=da.shape[0], k=da.shape[2])
        if da.shape[2]:
            self.accumulate_groups(acc, da, eb)
        return acc

    # -- complex scheme II (:mod:`ozhpc.engines.gaussian`) -----------------------------------------
    def gaussian_residues(self, x, exps, tables, conj: bool = False):
        """int8 ``(tables.planes, rows, k)`` residue planes of the complex128 rows ``x`` (any strides);
        ``conj``: of their conjugates."""
        raise NotImplementedError(f"engine {self.name!r} has no complex products")

    def zeros_gaussian(self, tables, m: int, n: int):
        """Accumulators of :meth:`accumulate_gaussian`, one per residue plane."""
        raise NotImplementedError(f"engine {self.name!r} has no complex products")

    def accumulate_gaussian(self, acc, da, eb, tables) -> None:
        """``acc[g] += da[g] @ eb[g].T`` modulo the modulus of plane g (only that residue counts)."""
        raise NotImplementedError(f"engine {self.name!r} has no complex products")

    def combine_gaussian(self, acc, row_exps, col_exps, tables):
        """complex128 ``(m, n)``: the CRT of each component (stored as one float64 ``(m, n, 2)``)."""
        raise NotImplementedError(f"engine {self.name!r} has no complex products")

    def multiply_combine_gaussian(self, da, eb, row_exps, col_exps, tables, out=None):
        """The products over the whole k, then :meth:`combine_gaussian` (same bits as the steps);
        ``out``: a complex128 ``(m, n)`` array (C-ordered) to write C into."""
        raise NotImplementedError(f"engine {self.name!r} has no complex products")

    def plane_budget(self) -> int | None:
        """Bytes one operand's int8 planes may take at once (None: no limit; a device engine answers
        from its free memory, and a complex product larger than that makes its planes in blocks)."""
        return None

    def zeros_groups(self, ngroups: int, m: int, n: int, *, slices: int | None = None,
                     k: int | None = None):
        """Group accumulators for :meth:`accumulate_groups` (float64 exact integers by default).

        ``slices`` and ``k`` (the total k that will be accumulated) are hints: an engine may
        return a narrower exact type when the sums provably fit (the cuTile engine: int32).
        """
        return self.xp.zeros((ngroups, m, n), dtype=self.xp.float64)

    def zeros_moduli(self, tables, m: int, n: int):
        """Accumulators for :meth:`accumulate_moduli`, one per modulus (float64 by default)."""
        return self.xp.zeros((tables.count, m, n), dtype=self.xp.float64)

    def magnitudes(self, x, exps, upper: bool = False):
        """:func:`magnitude_digits` (``upper``: :func:`support_digits`) of the rows of ``x`` as one
        int8 plane ``(1, rows, cols)``, in the layout :meth:`accumulate_groups` takes (their
        products: the certificate's bounds of ``|A||B|``)."""
        return (support_digits if upper else magnitude_digits)(self.xp, x, exps)[None]

    def exact_dots(self, a_rows, b_rows, rows, cols, shift: int = 0):
        """``fl(2**-shift (op(A) op(B))_ij)`` correctly rounded for the entries ``(rows[e], cols[e])``,
        from this engine's rows of op(A) (m x k) and op(B)^T (n x k), finite: the certified product's
        exact entries (:func:`ozhpc.engines.superacc.exact_dots`; exact integer steps only, so every
        engine gives the same bits)."""
        return superacc.exact_dots(self.xp, a_rows, b_rows, rows, cols, shift)

    def timer(self) -> "HostTimer":
        """A timer of device work (:class:`HostTimer` for engines that compute on the host)."""
        return HostTimer()

    def row_summaries(self, operands):
        """:func:`ozhpc.engines.statistics.row_summary` of each operand (rows of 2-D FP64 arrays),
        one pass over each, and one copy to the host for all of them: the scales (row exponents of
        this piece's rows), the inf/NaN counts and the row sizes before the plan, at the cost of one
        wait for the device. Returns ``(host, device, exps)``: int64 ``(len(FIELDS), rows)`` per
        operand on the host and on the device, and the exponents as int32 on the device."""
        xp = self.xp
        dev = [statistics.row_summary(xp, x) for x in operands]
        both = self.to_host(xp.concatenate(dev, axis=1)) if dev else None
        cuts = [0]
        for d in dev:
            cuts.append(cuts[-1] + d.shape[1])
        host = [both[:, lo:hi] for lo, hi in zip(cuts, cuts[1:])]
        return host, dev, [d[statistics.EXP].astype(xp.int32) for d in dev]

    def magnitude_stats(self, x, exps):
        """:func:`ozhpc.engines.statistics.magnitude_stats` of the finite part ``x`` for the
        given (global) row exponents: int64 ``(4, rows)`` on the device."""
        return statistics.magnitude_stats(self.xp, x, exps)

    def representation_errors(self, x, exps, steps):
        """Row maxima of :func:`ozhpc.engines.statistics.representation_error` (float64); a complex
        ``x``: of its rows read as real rows of length 2k (each entry's parts adjacent)."""
        if x.dtype.kind == "c":
            x = self.xp.ascontiguousarray(x).view(x.real.dtype).reshape(x.shape[0], 2 * x.shape[1])
        return statistics.representation_errors(self.xp, x, exps, steps)

    def inner_stats(self, rows):
        """:func:`ozhpc.engines.statistics.inner_stats` (int32 (2, k))."""
        return statistics.inner_stats(self.xp, rows)

    def entry_verdicts(self, c, row_exps, col_exps, row, col, lower, support, constants):
        """``(failing count, worst ratio)`` of the certificate's per-entry verdicts over ``c`` in one
        pass (:func:`ozhpc.ozaki.certificate.certify_entries`, its combine rounding ``a + b |C|``):
        ``row`` / ``col``: ``(delta, norm, nnz)`` per row of op(A) / column of op(B) (float64, int64,
        int64), ``lower``: the magnitude digits' sums (m x n, or None), ``support``: the support
        digits' sums or None, ``constants``: the formula's numbers by name (:data:`VERDICT_CONSTANTS`);
        or None: the engine has no such kernel, and the certificate's array code (the reference)
        runs instead."""
        return None

    def complex_entry_verdicts(self, c, row_exps, col_exps, row, col, lower, support, constants):
        """:meth:`entry_verdicts` of both components of the complex ``c`` in one pass, ``((failed,
        worst) of Re, (failed, worst) of Im)``; ``lower`` / ``support``: the three groups ``(3, m, n)``
        of the parts' digit products (Re's sums are groups 0 + 2, Im's group 1) or None. None: no such
        kernel (the certificate's array code runs instead)."""
        return None

    def entry_gaps(self, x, exps):
        """int8 gap ``e_i - exponent(|a_ij|)`` per entry, clipped to [0, MAX_GAP]; NO_GAP for 0,
        inf, NaN (the input of the "auto" spread statistic, :func:`ozhpc.ozaki.scales.spread_bits`).

        An entry with gap ``g`` satisfies ``2**(e_i-g-1) <= |a_ij| < 2**(e_i-g)`` (unclipped).
        An engine may return extra NO_GAP columns (padding): they are never counted.
        """
        xp = self.xp
        mag = xp.abs(x)
        keep = xp.isfinite(mag) & (mag > 0)
        _, ex = xp.frexp(xp.where(keep, mag, 1.0))
        gap = xp.clip(xp.asarray(exps).reshape(-1, 1).astype(xp.int32) - ex, 0, MAX_GAP).astype(xp.int8)
        return xp.where(keep, gap, xp.int8(NO_GAP))

    def count_gaps_le(self, gaps, limits):
        """int64 counts ``out[i, l] = #{j: gaps[i, j] <= limits[i, l]}`` for limits in [0, MAX_GAP],
        ascending along each row: the caller's promise (:func:`ozhpc.ozaki.scales.spread_bits`
        builds them so), unchecked; an engine may count per bucket between limits."""
        return count_gaps_le(self.xp, gaps, limits)

    def asarray(self, x):
        """Move ``x`` to this engine's device (no copy when already there)."""
        return self.xp.asarray(x)

    def to_host(self, x):
        """A NumPy array with the values of ``x``."""
        return x

    def describe(self) -> dict:
        """What the report says about this engine."""
        return {"name": self.name}

    def synchronize(self) -> None:
        """Wait for queued device work (timing boundaries)."""
