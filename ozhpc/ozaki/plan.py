"""Which scheme, how many int8 slices and groups a call uses, what that costs, what it guarantees.

Two plans with one interface (``split``, ``zeros``, ``accumulate``, ``combine``,
``multiply_combine``, what they cost and guarantee, what the certificate reads of them and how
"auto" widens them), so the product (:mod:`ozhpc.ozaki.product`), the certificate
(:mod:`ozhpc.ozaki.certificate`) and the policy (:mod:`ozhpc.ozaki.policy`) run either without
knowing which. This is the one module that names the schemes (with :mod:`ozhpc.ozaki.settings`,
which checks their options; ``tests/test_plan_interface.py`` holds the rest to it):

* :class:`SlicePlan`, Ozaki scheme I: ``slices`` 7-bit digits per entry, the pairs of the
  first ``groups`` anti-diagonals (``slices*(slices+1)/2`` int8 GEMMs for the triangle);
* :class:`ModularPlan`, Ozaki scheme II: entries as ``bits``-bit integers, one int8 GEMM
  per modulus (:mod:`ozhpc.engines.crt`), linear in the accuracy.

Longer than 500 lines because both plans must stay side by side: each method of one has its twin
in the other (the exact plan of the refinement and each plan's exact parts included), and the
interface test reads them here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dataclasses import replace

from ..engines import crt as _crt
from ..engines.base import BITS, DIGIT_MAX
from ..engines.numpy_engine import RESIDUE_K
from ..errors import InputError
from . import certificate as _cert
from .settings import DEFAULT_GUARANTEE, MAX_SLICES, MIN_SLICES, SCHEMES, OzakiSettings  # noqa: F401  (re-exported)

FP64_BITS = 53
AUTO_SLICES_MARGIN = 5
"""Scheme I's "auto" starts at ``53 + spread + AUTO_SLICES_MARGIN`` bits of digits. "auto" is
certified (:mod:`ozhpc.ozaki.policy` widens the plan until every entry passes), so this only saves
passes: on the standard matrices (phi 0 .. 1, k 64 .. 4096, 96 x 96) +5 is the smallest margin
whose first plan certifies (phi = 2 needs +7, phi = 4 +12..21, one wider pass)."""


class _Widens:
    """What "auto" widens, for a plan class with ``width``, ``max_width`` and ``width_bits`` (the
    bits one unit of its width adds)."""

    @classmethod
    def widen(cls, width: int, need: int, cap: int | None = None) -> int:
        """``width`` plus enough units for ``need`` more bits (at least one), at most ``cap``
        (default: the class's ``max_width``)."""
        return min(cls.max_width if cap is None else cap, width + max(1, -(-need // cls.width_bits)))

    def next_width(self, need: int) -> int:
        return self.widen(self.width, need)


@dataclass(frozen=True)
class SlicePlan(_Widens):
    """``slices`` digits per operand; pairs with ``p + q < groups`` are kept.

    ``groups == slices`` is the triangle (the default, "fast mode");
    ``groups == 2*slices - 1`` keeps every pair.
    """

    slices: int
    groups: int
    scheme = "ozaki1"
    final_rounding_ulps = 1
    """Roundings of the combine counted as "the final rounding of C" (relative to |C_ij|): the last
    of its d-1 additions (the ldexp is exact unless C is subnormal: + 2**-1074)."""
    needs_group_sums = True
    """The certified combine (:func:`ozhpc.ozaki.certificate.compensated_combine`) and its bound
    read the group accumulators, so a certified product keeps them (no fused multiply-combine)."""
    reads_sizes = False
    """Whether the plan reads the operands' row sizes (:class:`DataSizes`): not scheme I's."""
    reads_spread = True
    """Whether "auto" reads the spread statistic (:func:`ozhpc.ozaki.scales.spread_bits`)."""
    max_width = MAX_SLICES
    """The widest plan "auto" may widen to, in :attr:`width` units (slices)."""
    width_bits = BITS
    """Bits one unit of :attr:`width` adds (a slice: 7)."""

    def __post_init__(self):  # the counts are the user's: OzakiSettings words the error
        OzakiSettings("ozaki1", self.slices, self.groups)

    def pairs(self, g: int) -> list[tuple[int, int]]:
        """The (p, q) slice pairs of group g."""
        return [(p, g - p) for p in range(max(0, g - self.slices + 1), min(g, self.slices - 1) + 1)]

    @property
    def int8_gemms(self) -> int:
        """int8 GEMMs of one product: the kept slice pairs."""
        return sum(len(self.pairs(g)) for g in range(self.groups))

    @property
    def bits(self) -> int:
        """Bits of the operand grid below the row scale: 7 x slices (the certificate's ``w``)."""
        return BITS * self.slices

    @property
    def width(self) -> int:
        """What "auto" widens: slices."""
        return self.slices

    @property
    def split_steps(self) -> tuple[int, int]:
        """The split as the certificate redoes it (:func:`ozhpc.ozaki.certificate.representation_error`):
        no shift, then ``slices`` 7-bit digits taken off."""
        return 0, self.slices

    @property
    def rounding_bound(self) -> float:
        """The combine's last rounding, relative to ``|C_ij|`` (the additions before it:
        :meth:`combine_bound`)."""
        return 2.0**-53

    def combine_bound(self, k: int) -> float:
        """The combine's other roundings, in units of ``2**(e_i + f_j)``: its additions
        ``t_g = t_{g+1} + S_g 2**(-7(g+2))`` for g = d-2 .. 1 each err by at most ``u |t_g|``, and
        ``|t_g| <= k`` (per k term the kept digits' weighted sizes multiply to less than 1).
        Relative to the partial sums, not to C: with cancellation they dominate."""
        return max(self.groups - 2, 0) * k * 2.0**-53 * (1 + 2.0**-40)

    def max_exact_k(self) -> int:
        """Largest total k for which every group accumulator stays an exact FP64 integer."""
        widest = max(len(self.pairs(g)) for g in range(self.groups))
        return (2**FP64_BITS - 1) // (widest * DIGIT_MAX**2)

    # -- the steps, on an engine ------------------------------------------------------------
    @property
    def planes(self) -> int:
        """int8 planes per operand entry (one per slice)."""
        return self.slices

    def describe(self) -> dict:
        """What the report and the HDF5 attributes say about the plan."""
        return {"scheme": self.scheme, "bits": self.bits, "slices": self.slices, "groups": self.groups}

    def summary(self) -> str:
        return f"scheme ozaki1: {self.slices} slices, {self.groups} groups, {self.int8_gemms} pair GEMMs"

    @property
    def accumulators(self) -> int:
        """m x n accumulator planes (one per group)."""
        return self.groups

    def host_work_bytes(self, m: int, n: int, chunk: int) -> int:
        """Temporaries of one panel product on the NumPy engine: every slice of a k-chunk as
        FP64, and a few m x n products (packed pairs, their high and low parts)."""
        return 8 * self.slices * (m + n) * chunk + 5 * 8 * m * n

    def check_k(self, k: int) -> None:
        """Refuse a k whose group sums could leave the exact FP64 integers (the same on every rank)."""
        if k > self.max_exact_k():
            raise InputError(f"k = {k} is too long for exact accumulation with {self.slices} slices and "
                             f"{self.groups} groups (at most {self.max_exact_k()})")

    def split(self, eng, x, exps):
        return eng.split(x, exps, self.slices)

    def zeros(self, eng, m: int, n: int, k: int):
        return eng.zeros_groups(self.groups, m, n, slices=self.slices, k=k)

    def accumulate(self, eng, acc, da, eb) -> None:
        eng.accumulate_groups(acc, da, eb)

    def combine(self, eng, acc, row_exps, col_exps):
        return eng.combine_groups(acc, row_exps, col_exps)

    def multiply_combine(self, eng, da, eb, row_exps, col_exps):
        return eng.multiply_combine_groups(da, eb, self.groups, row_exps, col_exps)

    def exact_parts(self, xp, acc):
        """``(values, shifts)``: the group sums as FP64 integers ``(d, m, n)`` and the power of two each
        weighs, relative to ``2**(e_i + f_j)``: their exact sum is this product's exact value (all
        pairs kept, ``groups = 2 slices - 1``: the exact product of the digit grids)."""
        return acc.astype(xp.float64), [-BITS * (g + 2) for g in range(acc.shape[0])]

    def certified_combine(self, eng, acc, row_exps, col_exps):
        """The combine of a certified product: compensated, its bound read from ``acc``."""
        return _cert.compensated_combine(eng.xp, acc, row_exps, col_exps)

    combine_rounding_terms = None
    """Not of the form ``a + b |C|`` (it reads the group sums or the operands' norms)."""

    def combine_rounding(self, xp, acc=None, c_up=None, stats=None, compensated=False):
        """Bound of the combine's roundings other than the final one (normalised):
        :func:`ozhpc.ozaki.certificate.group_combine_rounding` for these groups."""
        return _cert.group_combine_rounding(xp, self.groups, acc, stats, compensated)

    def _dropped_pairs(self) -> Fraction:
        """``sum_{p+q >= d} m_p m_q`` (``m_0 = 1``, ``m_p = 2**(-7p-1)``): the most the dropped
        slice pairs add per k term whose two entries are nonzero (:meth:`truncation_bound`)."""
        s = self.slices
        size = [Fraction(1)] + [Fraction(1, 2 ** (BITS * p + 1)) for p in range(1, s)]
        return sum((size[p] * size[q] for p in range(s) for q in range(s) if p + q >= self.groups), Fraction(0))

    @property
    def dropped_pairs_bound(self) -> float:
        """:meth:`_dropped_pairs` rounded up to a float (the certificate's ``tau``)."""
        exact = self._dropped_pairs()
        out = float(exact)
        return math.nextafter(out, math.inf) if Fraction(out) < exact else out

    def beyond_cap(self, settings: OzakiSettings, need: int):
        """Past the widest plan: nothing wider (None)."""
        return None

    def truncation_bound(self, k: int) -> Fraction:
        """tau * k with ``|C_ij - (AB)_ij| <= 2**(e_i+f_j) * tau*k + rounding``.

        Kept digits represent ``a_ij * 2**-e_i`` to within ``2**(-BITS*s-1)`` (round to
        nearest), digit p>=1 is at most 64 = 2**(BITS-1), so its weighted size is at most
        ``m_p = 2**(-BITS*p-1)`` (``m_0 = 1``). The dropped pairs and the two
        remainders give, per k, at most
        ``sum_{dropped p,q} m_p m_q + 2*(1+r)*r + r**2`` with ``r = 2**(-BITS*s-1)``.
        The roundings are :meth:`combine_bound` and :attr:`rounding_bound`.
        """
        r = Fraction(1, 2 ** (BITS * self.slices + 1))
        return (self._dropped_pairs() + 2 * (1 + r) * r + r * r) * k


@dataclass(frozen=True)
class ModularPlan(_Widens):
    """Ozaki scheme II: ``bits``-bit integer operands, products modulo ``moduli`` coprimes.

    Every int8 GEMM is exact and the CRT gives the integer product exactly, so the only
    error is the rounding of the operands to ``bits`` bits (:meth:`truncation_bound`) and
    a few ulps of reconstruction (:data:`ozhpc.engines.crt.ROUNDING_ULPS`).
    """

    bits: int
    moduli: int
    pieces: int | None = None
    """Pieces of the reconstruction's big integers (None: the fewest that hold M); :meth:`for_k`
    takes :func:`ozhpc.engines.crt.reference_pieces`, so the bits of C do not depend on the moduli."""
    scheme = "ozaki2"
    final_rounding_ulps = 2
    """Roundings of the reconstruction counted as "the final rounding of C": the last piece
    addition plus the one before it (|R_1| <= (1 + 2**-34)|C'| whenever it matters)."""
    needs_group_sums = False
    reads_sizes = True
    """Scheme II reads the operands' row sizes (:class:`DataSizes`): its CRT range and "auto" (whose
    outlier rows are scaled down for that range: ``Product._relieve_rows``)."""
    reads_spread = False
    max_width = _crt.MAX_BITS
    """The widest plan "auto" may widen to, in :attr:`width` units (bits)."""
    width_bits = 1
    """Bits one unit of :attr:`width` adds."""
    dropped_pairs_bound = 0.0
    """Nothing is dropped: every int8 GEMM is exact."""

    def __post_init__(self):
        OzakiSettings("ozaki2", bits=self.bits)

    @classmethod
    def for_k(cls, bits: int, k: int, sizes: "DataSizes | None" = None) -> "ModularPlan":
        """The fewest moduli that hold every ``|C'_ij|`` for this (global) k, and for the operands'
        own sizes when given (:meth:`DataSizes.product_bound`: typically one modulus fewer)."""
        OzakiSettings("ozaki2", bits=bits)
        bound = None if sizes is None else sizes.product_bound(bits)
        try:
            return cls(bits, _crt.moduli_needed(bits, k, bound), _crt.reference_pieces(bits, k))
        except ValueError as exc:
            raise InputError(str(exc)) from None

    @classmethod
    def widest_for(cls, bits: int, k: int, sizes: "DataSizes | None" = None) -> "ModularPlan":
        """:meth:`for_k`, then the most bits (up to the cap) the same moduli still hold: more
        accuracy at no cost ("auto" plans)."""
        plan = cls.for_k(bits, k, sizes)
        while plan.bits < _crt.MAX_BITS:
            wider = cls.for_k(plan.bits + 1, k, sizes)
            if wider.moduli > plan.moduli:
                break
            plan = wider
        return plan

    @property
    def planes(self) -> int:
        """int8 planes per operand entry (one residue per modulus)."""
        return self.moduli

    def describe(self) -> dict:
        """What the report and the HDF5 attributes say about the plan."""
        return {"scheme": self.scheme, "bits": self.bits, "moduli": self.moduli}

    def summary(self) -> str:
        return f"scheme ozaki2: {self.bits} bits, {self.moduli} moduli ({self.int8_gemms} int8 GEMMs)"

    @property
    def width(self) -> int:
        """What "auto" widens: bits."""
        return self.bits

    @property
    def split_steps(self) -> tuple[int, int]:
        """The split as the certificate redoes it: ``x 2**(bits - e)`` rounded to an integer."""
        return self.bits, 0

    @property
    def accumulators(self) -> int:
        """m x n accumulator planes (one per modulus)."""
        return self.moduli

    def host_work_bytes(self, m: int, n: int, chunk: int) -> int:
        """Temporaries of one panel product on the NumPy engine: one residue plane of a k-chunk
        (at most :data:`~ozhpc.engines.numpy_engine.RESIDUE_K` long) as float32 at a time, and
        its m x n float32 product."""
        return 4 * (m + n) * min(chunk, RESIDUE_K) + 4 * m * n

    def check_k(self, k: int) -> None:
        """Refuse a k whose residue sums could leave the exact FP64 integers."""
        if k > self.max_exact_k():
            raise InputError(f"k = {k} is too long for exact accumulation with scheme ozaki2 "
                             f"({self.bits} bits; at most {self.max_exact_k()})")

    @property
    def int8_gemms(self) -> int:
        """int8 GEMMs of one product: one per modulus."""
        return self.moduli

    @property
    def tables(self) -> _crt.CrtTables:
        return _crt.crt_tables(self.bits, self.moduli, self.pieces)

    @property
    def rounding_bound(self) -> float:
        """The reconstruction's roundings relative to ``|C_ij|`` (:data:`ozhpc.engines.crt.ROUNDING_ULPS`)."""
        return _crt.ROUNDING_ULPS * 2.0**-53

    def combine_bound(self, k: int = 0) -> float:
        """The additions of the pieces below the last two, in units of ``2**(e_i + f_j)``: each
        partial sum of the low pieces is below ``2**(36 (P - 2) - 1) (1 + 2**-35)`` (0 with fewer
        than three pieces)."""
        pieces = self.tables.pieces
        return 2.0**-53 * 2.0 ** (36 * (pieces - 2) - 1 - 2 * self.bits) * 1.001 if pieces >= 3 else 0.0

    def max_exact_k(self) -> int:
        """Largest k for which the residue sums stay exact FP64 integers (|r| <= 128; the
        reduction needs them below 2**53 - 2**10)."""
        return (2**FP64_BITS - 2**10) // _crt.RESIDUE_MAX**2

    def truncation_bound(self, k: int) -> Fraction:
        """tau * k: ``a = (X + d) 2**(e - bits)`` with ``|X| <= 2**bits``, ``|d| <= 1/2``, so each
        of the k products is off by at most ``(2**bits + 1/4) 2**(e + f - 2 bits)``."""
        return (Fraction(1, 2**self.bits) + Fraction(1, 2 ** (2 * self.bits + 2))) * k

    def split(self, eng, x, exps):
        return eng.residues(x, exps, self.tables)

    def zeros(self, eng, m: int, n: int, k: int):
        return eng.zeros_moduli(self.tables, m, n)

    def accumulate(self, eng, acc, da, eb) -> None:
        eng.accumulate_moduli(acc, da, eb, self.tables)

    def combine(self, eng, acc, row_exps, col_exps):
        return eng.combine_moduli(acc, row_exps, col_exps, self.tables)

    def multiply_combine(self, eng, da, eb, row_exps, col_exps):
        return eng.multiply_combine_moduli(da, eb, row_exps, col_exps, self.tables)

    def exact_parts(self, xp, acc):
        """``(values, shifts)``: the CRT's exact pieces of ``C'`` (:func:`ozhpc.engines.crt.exact_pieces`)
        and the power of two each weighs relative to ``2**(e_i + f_j)``: their exact sum is the product
        of the operands' ``bits``-bit grids, exactly."""
        pieces = _crt.exact_pieces(xp, acc, self.tables)
        count = pieces.shape[0]
        return pieces, [_crt.PIECE_BITS * (count - 1 - t) - 2 * self.bits for t in range(count)]

    def certified_combine(self, eng, acc, row_exps, col_exps):
        """The combine of a certified product: the plain one (its bound needs no accumulators)."""
        return self.combine(eng, acc, row_exps, col_exps)

    @property
    def combine_rounding_terms(self) -> tuple[float, float]:
        """:meth:`combine_rounding` as ``a + b |C|``: the piece additions below the last two
        (:meth:`combine_bound`), and ``2**-80`` for the ``(1 + 2**-32)`` slack of the last two
        (the fused certificate kernel takes both)."""
        return self.combine_bound(), 2.0**-80

    def combine_rounding(self, xp, acc=None, c_up=None, stats=None, compensated=False):
        """Bound of the reconstruction's roundings other than the final ones (normalised;
        ``c_up`` bounds ``|C|``): :attr:`combine_rounding_terms`."""
        const, per_c = self.combine_rounding_terms
        return const + (0.0 if c_up is None else c_up * per_c)

    def beyond_cap(self, settings: OzakiSettings, need: int):
        """Past the most bits the moduli hold: scheme I's digits, as many slices as these bits
        and ``need`` more, "auto" (``(settings, width)`` for :func:`resolve_plan`)."""
        return (replace(settings, scheme=SlicePlan.scheme, bits="auto"),
                SlicePlan.widen(-(-self.bits // BITS), need))


@dataclass(frozen=True)
class DataSizes:
    """The operands' row sizes that scheme II's plans read, global and exact (MAX over every row of
    the SUM-reduced integers of :func:`ozhpc.engines.statistics.magnitude_stats`), per operand
    (op(A), op(B)^T): the largest ``||x_i 2**-e_i||_2**2`` and the smallest nonzero
    ``||x_i 2**-e_i||_1`` (units ``2**-norm_bits``, rounded up), the largest row count; the
    larger of the two operands' mean gaps (bits from a row's scale to its entries, averaged over
    every nonzero entry: "auto"'s statistic; a ratio of two exact global sums); and the smallest
    count of nonzeros in a row that has any (MIN over every row; 0: none), which says whether an
    entry of C can sum few products (:attr:`few_products`)."""

    sq: tuple[int, int]
    nnz: tuple[int, int]
    norm_min: tuple[int, int]
    k: int
    norm_bits: int = 32
    mean_gap: float = 0.0
    nnz_min: tuple[int, int] = (0, 0)

    @classmethod
    def typical(cls, k: int) -> "DataSizes":
        """What well-scaled data (the standard matrices with phi = 0.5) has, for estimates made
        before the data is read (memory, the run planner): a row's squared 2-norm over its scale
        about ``k / 64``, its entries about 4 bits below it."""
        k = max(int(k), 1)
        return cls(sq=(k << 26, k << 26), nnz=(k, k), norm_min=(k << 29, k << 29), k=k, mean_gap=4.0,
                   nnz_min=(k, k))

    @property
    def few_products(self) -> bool:
        """Whether some row of op(A) or column of op(B) holds at most half of k nonzeros: then an
        entry of C can sum a few products whose gaps below ``2**(e_i + f_j)`` the operands' mean gap
        does not see (sparse, banded, triangular data), and "auto" under "dgemm" also checks
        accuracy in fact on the certificate (:data:`IN_FACT_RATIO`). Dense operands (every row more
        than half full) never: their plan and cost are the mean-gap rule's alone."""
        return any(0 < count and 2 * count <= self.k for count in self.nnz_min)

    def product_bound(self, bits: int) -> int | None:
        """:func:`ozhpc.engines.crt.data_product_bound` (None when k is too long for the exact int64
        sums behind it: then the worst case ``k 4**bits`` decides)."""
        if self.k >= 2**30:
            return None
        return _crt.data_product_bound(bits, self.sq, self.nnz, self.norm_bits)


IN_FACT_KNEES = ((3.4, 1.5), (8.0, 1.0))
"""Scheme II's "auto" under "dgemm" takes ``53 + ceil(excess(mean_gap))`` bits (:func:`in_fact_excess`,
:class:`DataSizes`): the first plan whose sampled error is no larger than native DGEMM's (NumPy's)
on the standard matrices with phi 0 .. 4 and k 256 .. 32768 (bench/results/auto_rule_cpu_2026-12-02.md;
the fewest such bits vary by one to three from one matrix to the next, hence the margin, and
:meth:`ModularPlan.widest_for` adds what the same moduli hold). A typical entry sits ``mean_gap``
bits below its row's scale; native DGEMM's own error grows with that spread too, more slowly:
1.5 bits per bit of gap above 3.4, then 1 bit per bit above 8; never fewer than 53."""


IN_FACT_RATIO = 1.0
"""Accuracy in fact where an entry of C can sum few products (:attr:`DataSizes.few_products`): the
certificate's per-entry bound must also meet ``E_ij <= IN_FACT_RATIO u L_ij`` (``L`` its lower bound
of ``(|A||B|)_ij``), i.e. the "tight" level, before "auto" under "dgemm" stops widening
(:meth:`ozhpc.ozaki.policy.Widening.in_fact_step`). An entry that sums a few products ``a_it b_tj``
far below ``2**(e_i + f_j)`` errs by about ``2**-bits 2**(e_i + f_j)`` per product, where native
DGEMM rounds each product to ``u`` of itself; the mean-gap rule, fitted on entries that sum k
products of typical size, does not see them. The bound ``E`` is a worst case (the random walk of k
rounding errors makes a dense entry's error about ``sqrt(k)`` smaller), so on dense data it would
ask for bits that native DGEMM's accuracy does not need: dense operands are left to the mean-gap
rule. Measured: bench/results/distributions_cpu_2026-12-04.md (at 1, the "tight" level, every
distribution there is no worse than NumPy; without the check, sparse and banded data were up to
9.7x worse)."""


def in_fact_excess(gap: float) -> float:
    """Bits over 53 that scheme II's "auto" takes for a mean gap ``gap`` (:data:`IN_FACT_KNEES`):
    piecewise linear from 0 at the first knee, never below 0 (tightly clustered rows still need
    FP64's 53 bits: phi = 0, k = 256 errs more than native DGEMM at 51)."""
    (g0, slope0), (g1, slope1) = IN_FACT_KNEES
    return max(0.0, slope0 * (min(gap, g1) - g0) + slope1 * max(0.0, gap - g1))


AUTO_BITS_TIGHT_MARGIN = 3
"""Scheme II's "auto" under "tight" starts at ``53 + ceil(mean_gap) + AUTO_BITS_TIGHT_MARGIN`` bits (at least
the "dgemm" plan): the representation error of the typical entry, ``mean_gap`` bits below its
scale, carried to FP64 accuracy; the margin makes the first pass certify the standard matrices
with phi <= 1 up to n = 32768 on the H200 (a larger C has more extreme entries: at n = 16384, phi =
0.5 the fewest bits that certify are 60, at n = 64-256 about 58; phi = 2, 4 take one wider pass)."""


def auto_bits(sizes: DataSizes | None, guarantee: str = DEFAULT_GUARANTEE) -> int:
    """Scheme II's first plan for "auto" (before :meth:`ModularPlan.widest_for` adds what the same
    moduli hold for free)."""
    gap = 0.0 if sizes is None else sizes.mean_gap
    bits = FP64_BITS + math.ceil(in_fact_excess(gap))
    if guarantee == "tight":
        bits = max(bits, FP64_BITS + math.ceil(gap) + AUTO_BITS_TIGHT_MARGIN)
    return max(_crt.MIN_BITS, min(_crt.MAX_BITS, bits))


def auto_slices(spread: int) -> int:
    """Scheme I's first plan for "auto": a row whose median nonzero entry sits ``spread`` bits
    below its scale needs ``53 + spread`` bits of digits for that entry to be carried to FP64
    accuracy; :data:`AUTO_SLICES_MARGIN` more make the first plan certify on the standard matrices."""
    need = FP64_BITS + spread + AUTO_SLICES_MARGIN
    return max(MIN_SLICES, min(MAX_SLICES, -(-need // BITS)))


PLANS = {plan.scheme: plan for plan in (SlicePlan, ModularPlan)}
"""The plan class of each scheme."""

FINAL_ROUNDING_ULPS = {name: plan.final_rounding_ulps for name, plan in PLANS.items()}
"""``rho`` of the guarantee per scheme (the plans' :attr:`~SlicePlan.final_rounding_ulps`)."""


def plan_type(settings: OzakiSettings):
    """The plan class ``settings`` resolve to (what it reads before :func:`resolve_plan`)."""
    return PLANS[settings.scheme]


def resolve_plan(settings: OzakiSettings, spread: int, k: int, width: int | None = None,
                 sizes: DataSizes | None = None, forms: dict | None = None):
    """The plan of ``settings`` for this data (the same on every rank: all inputs are global).

    ``spread`` is the "auto" statistic (:func:`ozhpc.ozaki.scales.spread_bits`), ``k`` the
    global inner dimension (scheme II's moduli must hold every product sum), ``sizes`` the
    operands' row sizes (scheme II: its "auto" bits and a data-dependent CRT range); ``width``
    (bits or slices) replaces what "auto" picks (the certificate's wider plans); ``forms`` maps a
    plan class to the class of the same interface that the operands take (complex operands:
    :data:`ozhpc.ozaki.complex_plan.COMPLEX_FORM`).
    """
    forms = forms or {}
    if settings.scheme == "ozaki2":
        modular = forms.get(ModularPlan, ModularPlan)
        if settings.bits != "auto" and width is None:
            return modular.for_k(settings.bits, k, sizes)
        bits = width if width is not None else auto_bits(sizes, settings.guarantee)
        return modular.widest_for(bits, k, sizes)
    s = width if width is not None else auto_slices(spread) if settings.slices == "auto" else settings.slices
    d = {"auto": s, "all": 2 * s - 1}.get(settings.groups, settings.groups)
    return forms.get(SlicePlan, SlicePlan)(s, min(d, 2 * s - 1))


def exact_plan(bits: int, k: int):
    """A plan whose product of two operands on ``bits``-bit grids is exact (the level products of
    :mod:`ozhpc.ozaki.levels`): scheme II's moduli up to its 100 bits (one int8 GEMM per modulus),
    beyond them scheme I's digits with every pair kept. Any exact plan gives the same exact value,
    so which one runs never changes a bit of C."""
    if bits <= _crt.MAX_BITS:
        return ModularPlan.for_k(max(bits, _crt.MIN_BITS), k)
    s = -(-bits // BITS)
    return SlicePlan(s, 2 * s - 1)


def assumed_plan(settings: OzakiSettings, k: int, forms: dict | None = None):
    """The plan assumed before the data is read: the settings' typical plan
    (:meth:`OzakiSettings.typical`) on typical data (:meth:`DataSizes.typical`) of inner dimension
    ``k``. The memory check, the wire SUMMA picks and ``ozhpc plan`` all start from it, so they
    agree (with the first pass's extra planes: :func:`ozhpc.ozaki.passes.assumed_depth`)."""
    k = max(int(k), 1)
    return resolve_plan(settings.typical(), 0, k, sizes=DataSizes.typical(k), forms=forms)


def make_plan(slices, groups, spread: int, *, scheme: str = "ozaki1", bits="auto", k: int = 0):
    """:func:`resolve_plan` from loose options (tests, benchmarks)."""
    return resolve_plan(OzakiSettings(scheme, slices, groups, bits), spread, k)
