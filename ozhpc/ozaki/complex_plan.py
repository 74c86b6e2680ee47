"""The plans of complex products: each real plan class of :mod:`ozhpc.ozaki.plan` has a complex
form with the same interface, so the product, the certificate and the policy run it as they run
the real one.

* :class:`GaussianPlan` (scheme II): Gaussian integers modulo split and Karatsuba moduli, two or
  three int8 products per modulus (:mod:`ozhpc.engines.gaussian`);
* :class:`ComplexSlicePlan` (scheme I): the digits of each part, the four real products of the
  schoolbook rule summed into each component's groups (``Re``: ``Dr Er - Di Ei``; ``Im``: ``Dr Ei +
  Di Er``), exact as the real ones.

Operands are complex rows (op(A), op(B)^T as complex128; a real operand is promoted), with ONE row
scale for both parts. What differs from a real product is per component: each of ``Re C`` and ``Im
C`` is a sum of two real products of the parts over k (``Ar Br - Ai Bi``, ``Ar Bi + Ai Br``), so
the a-priori bounds are twice the real ones and the certificate
(:mod:`ozhpc.ozaki.complex_certificate`) works per component from the parts' statistics.
:func:`ozhpc.ozaki.plan.resolve_plan` resolves them with ``forms=COMPLEX_FORM``.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..engines import gaussian as _gaussian
from ..errors import InputError
from .plan import DataSizes, ModularPlan, SlicePlan
from .settings import OzakiSettings
from .special import assemble


@dataclass(frozen=True)
class GaussianPlan(ModularPlan):
    """Scheme II on complex operands: ``bits``-bit integer parts, ``moduli`` complex moduli from the
    front of :data:`ozhpc.engines.gaussian.MODULI` (their residue planes: :attr:`planes`)."""

    complex = True

    @classmethod
    def for_k(cls, bits: int, k: int, sizes: "DataSizes | None" = None) -> "GaussianPlan":
        """The fewest complex moduli that hold both components of every ``C'_ij`` (worst case ``2 k
        4**bits``; ``sizes`` from the parts of the rows, as a real dot product of length 2k)."""
        OzakiSettings(cls.scheme, bits=bits)
        bound = None if sizes is None else sizes.product_bound(bits)
        try:
            return cls(bits, _gaussian.moduli_needed(bits, k, bound), _gaussian.reference_pieces(bits, k))
        except ValueError as exc:
            raise InputError(str(exc)) from None

    @property
    def tables(self) -> _gaussian.GaussianTables:
        return _gaussian.gaussian_tables(self.bits, self.moduli, self.pieces)

    @property
    def planes(self) -> int:
        """int8 residue planes per operand entry: two per split modulus, three per Karatsuba one."""
        return self.tables.planes

    @property
    def int8_gemms(self) -> int:
        """One int8 product per residue plane."""
        return self.tables.planes

    @property
    def accumulators(self) -> int:
        return self.tables.planes

    def describe(self) -> dict:
        return {**super().describe(), "complex": True}

    def summary(self) -> str:
        t = self.tables
        return (f"scheme ozaki2, complex: {self.bits} bits, {self.moduli} moduli ({t.splits} split, "
                f"{self.moduli - t.splits} Karatsuba; {self.int8_gemms} int8 GEMMs)")


    def truncation_bound(self, k: int) -> Fraction:
        """Per component: two real products of the parts, each bounded as scheme II's."""
        return 2 * super().truncation_bound(k)

    def split(self, eng, x, exps):
        """The residue planes of the complex rows ``x``, or, where the engine's :meth:`plane_budget`
        cannot hold them at once, :class:`DeferredPlanes` that make them a block at a time."""
        budget = eng.plane_budget()
        rows, k = x.shape
        if budget is not None and self.planes * rows * k > budget and rows and k:
            return DeferredPlanes(eng, x, exps, self.tables)
        return eng.gaussian_residues(x, exps, self.tables)

    def zeros(self, eng, m: int, n: int, k: int):
        return eng.zeros_gaussian(self.tables, m, n)

    def accumulate(self, eng, acc, da, eb) -> None:
        eng.accumulate_gaussian(acc, da, eb, self.tables)

    def combine(self, eng, acc, row_exps, col_exps):
        return eng.combine_gaussian(acc, row_exps, col_exps, self.tables)

    def multiply_combine(self, eng, da, eb, row_exps, col_exps):
        """The products and the CRT. Deferred planes (:meth:`split`) are made a block at a time into
        one C, the blocks sized by the engine's plane budget once C is allocated: op(A)'s by rows
        within the budget, op(B)^T's whole when they take at most three budgets, else by rows within
        two (each of its blocks then meets every block of op(A))."""
        if not isinstance(da, DeferredPlanes) and not isinstance(eb, DeferredPlanes):
            return eng.multiply_combine_gaussian(da, eb, row_exps, col_exps, self.tables)
        xp = eng.xp
        m, n, k = da.shape[1], eb.shape[1], da.shape[2]
        out = xp.empty((m, n), dtype=xp.complex128)
        budget = eng.plane_budget()
        per_row = self.planes * max(k, 1)
        rows_a = m if budget is None or not isinstance(da, DeferredPlanes) else _rows_within(m, budget, per_row)
        rows_b = n if budget is None or not isinstance(eb, DeferredPlanes) or n * per_row <= 3 * budget \
            else _rows_within(n, 2 * budget, per_row)
        for j0 in range(0, n, rows_b):
            j1 = min(n, j0 + rows_b)
            eb_blk = _rows(eb, j0, j1)
            for i0 in range(0, m, rows_a):
                i1 = min(m, i0 + rows_a)
                if j0 == 0 and j1 == n:   # whole rows of C: written in place
                    eng.multiply_combine_gaussian(_rows(da, i0, i1), eb_blk, row_exps[i0:i1], col_exps, self.tables,
                                                  out=out[i0:i1])
                else:
                    out[i0:i1, j0:j1] = eng.multiply_combine_gaussian(_rows(da, i0, i1), eb_blk, row_exps[i0:i1],
                                                                      col_exps[j0:j1], self.tables)
            del eb_blk
        return out


def _rows(planes, lo: int, hi: int):
    """Rows ``lo:hi`` of planes: made, for deferred ones; the array itself when that is all of it (an
    engine may know its padded buffer)."""
    if not isinstance(planes, DeferredPlanes) and lo == 0 and hi == planes.shape[1]:
        return planes
    return planes[:, lo:hi]


def _rows_within(total: int, budget: int, per_row: int) -> int:
    """Rows per block of ``total`` rows of planes (``per_row`` bytes each), about ``budget`` bytes a
    block: at least one row; the blocks even, in whole 128-row tiles from 256 rows on."""
    rows = max(1, budget // per_row)
    blocks = -(-total // rows)
    rows = -(-total // blocks)
    return -(-rows // 128) * 128 if rows >= 256 else rows


class DeferredPlanes:
    """The residue planes of complex rows, made when read: ``planes[:, rows, cols]`` splits that block
    (every plane is elementwise in the rows' global scales, so a block's planes are the bytes the
    whole split would have held there). Used where an operand's planes would not fit at once
    (:meth:`GaussianPlan.split`): the fused product reads them a block of rows at a time
    (:meth:`GaussianPlan.multiply_combine`), SUMMA's owner packs each k-panel from them."""

    def __init__(self, eng, rows, exps, tables):
        self.eng, self.rows, self.exps, self.tables = eng, rows, exps, tables
        self.shape = (tables.planes, *rows.shape)
        self.dtype = "int8"

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if key[0] != slice(None) or len(key) > 3 or any(not isinstance(s, slice) for s in key[1:]):
            raise IndexError(f"deferred planes are read as [:, rows, cols] slices, got {key!r}")
        rows = key[1] if len(key) > 1 else slice(None)
        cols = key[2] if len(key) > 2 else slice(None)
        return self.eng.gaussian_residues(self.rows[rows, cols], self.exps[rows], self.tables)


@dataclass(frozen=True)
class ComplexSlicePlan(SlicePlan):
    """Scheme I on complex operands: ``slices`` digits of each part (planes ``[Dr_0 .. Dr_{s-1},
    Di_0 .. Di_{s-1}]``), the groups of each component accumulated apart (a pair of accumulators)."""

    complex = True

    @property
    def planes(self) -> int:
        return 2 * self.slices

    @property
    def int8_gemms(self) -> int:
        """The four products of the parts for each kept slice pair."""
        return 4 * super().int8_gemms

    @property
    def accumulators(self) -> int:
        return 2 * self.groups

    def describe(self) -> dict:
        return {**super().describe(), "complex": True}

    def summary(self) -> str:
        return (f"scheme ozaki1, complex: {self.slices} slices per part, {self.groups} groups, "
                f"{self.int8_gemms} pair GEMMs")

    def host_work_bytes(self, m: int, n: int, chunk: int) -> int:
        return 2 * super().host_work_bytes(m, n, chunk)

    def max_exact_k(self) -> int:
        """Each component's group sums add two real products over k."""
        return super().max_exact_k() // 2

    def truncation_bound(self, k: int) -> Fraction:
        return super().truncation_bound(2 * k)

    def combine_bound(self, k: int) -> float:
        return super().combine_bound(2 * k)

    def split(self, eng, x, exps):
        xp = eng.xp
        parts = [eng.split(xp.ascontiguousarray(part), exps, self.slices) for part in (x.real, x.imag)]
        return xp.concatenate(parts)

    def zeros(self, eng, m: int, n: int, k: int):
        return tuple(eng.zeros_groups(self.groups, m, n, slices=self.slices, k=2 * k) for _ in range(2))

    def accumulate(self, eng, acc, da, eb) -> None:
        """``Re += Dr Er - Di Ei``, ``Im += Dr Ei + Di Er`` in each component's groups (digits are
        at most 127 in magnitude, so ``-Ei`` is an int8 plane too)."""
        s = self.slices
        dr, di, er, ei = da[:s], da[s:], eb[:s], eb[s:]
        eng.accumulate_groups(acc[0], dr, er)
        eng.accumulate_groups(acc[0], di, -ei)
        eng.accumulate_groups(acc[1], dr, ei)
        eng.accumulate_groups(acc[1], di, er)

    def _per_component(self, eng, acc, row_exps, col_exps, combine):
        re, im = (combine(eng, part, row_exps, col_exps) for part in acc)
        return assemble(eng.xp, re, im)

    def combine(self, eng, acc, row_exps, col_exps):
        return self._per_component(eng, acc, row_exps, col_exps, super().combine)

    def multiply_combine(self, eng, da, eb, row_exps, col_exps):
        acc = self.zeros(eng, da.shape[1], eb.shape[1], da.shape[2])
        if da.shape[2]:
            self.accumulate(eng, acc, da, eb)
        return self.combine(eng, acc, row_exps, col_exps)

    def certified_combine(self, eng, acc, row_exps, col_exps):
        return self._per_component(eng, acc, row_exps, col_exps, super().certified_combine)




COMPLEX_FORM = {ModularPlan: GaussianPlan, SlicePlan: ComplexSlicePlan}
"""The complex form of each real plan class (``forms`` of :func:`ozhpc.ozaki.plan.resolve_plan`)."""
