"""How many slices and groups a call uses, what that costs, and what it guarantees."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..engines.base import BITS, DIGIT_MAX
from ..errors import InputError

FP64_BITS = 53
AUTO_MARGIN_BITS = -3
"""Bits added to ``53 + spread`` by "auto". Negative: round-to-nearest digits give an
unbiased error that cancels, measured at about 2**-4 of the worst case on the standard
test matrices (bench/accuracy.py); -3 keeps a factor of two in hand."""
MIN_SLICES, MAX_SLICES = 1, 24
"""24 slices hold 168 bits: any spread of a FP64 row that still matters to a product."""


@dataclass(frozen=True)
class SlicePlan:
    """``slices`` digits per operand; pairs with ``p + q < groups`` are kept.

    ``groups == slices`` is the triangle (the default, "fast mode" of design.md);
    ``groups == 2*slices - 1`` keeps every pair.
    """

    slices: int
    groups: int

    # InputError (a ValueError): a bad count is the user's option, and every rank of a
    # distributed run builds the same plan, so all of them raise it alike.
    def __post_init__(self):
        if not MIN_SLICES <= self.slices <= MAX_SLICES:
            raise InputError(f"slices must be in [{MIN_SLICES}, {MAX_SLICES}], got {self.slices}")
        if not 1 <= self.groups <= 2 * self.slices - 1:
            raise InputError(
                f"groups must be in [1, {2 * self.slices - 1}] for {self.slices} slices, got {self.groups}")

    def pairs(self, g: int) -> list[tuple[int, int]]:
        """The (p, q) slice pairs of group g."""
        return [(p, g - p) for p in range(max(0, g - self.slices + 1), min(g, self.slices - 1) + 1)]

    @property
    def pair_gemms(self) -> int:
        return sum(len(self.pairs(g)) for g in range(self.groups))

    def max_exact_k(self) -> int:
        """Largest total k for which every group accumulator stays an exact FP64 integer."""
        widest = max(len(self.pairs(g)) for g in range(self.groups))
        return (2**FP64_BITS - 1) // (widest * DIGIT_MAX**2)

    def truncation_bound(self, k: int) -> Fraction:
        """tau * k with ``|C_ij - (AB)_ij| <= 2**(e_i+f_j) * tau*k + rounding``.

        Kept digits represent ``a_ij * 2**-e_i`` to within ``2**(-BITS*s-1)`` (round to
        nearest), digit p>=1 is at most 64 = 2**(BITS-1), so its weighted size is at most
        ``m_p = 2**(-BITS*p-1)`` (``m_0 = 1``). The dropped pairs and the two
        remainders give, per k, at most
        ``sum_{dropped p,q} m_p m_q + 2*(1+r)*r + r**2`` with ``r = 2**(-BITS*s-1)``.
        The rounding part is at most ``groups * 2**-53 * |C_ij|`` (d-1 additions and the
        final scaling, each a relative error of at most 2**-53).
        """
        s = self.slices
        size = [Fraction(1)] + [Fraction(1, 2 ** (BITS * p + 1)) for p in range(1, s)]
        dropped = sum(size[p] * size[q] for p in range(s) for q in range(s) if p + q >= self.groups)
        r = Fraction(1, 2 ** (BITS * s + 1))
        return (dropped + 2 * (1 + r) * r + r * r) * k


def auto_slices(spread: int) -> int:
    """Slices that keep the truncation below the final FP64 rounding.

    A row whose median nonzero entry sits ``spread`` bits below its scale needs
    ``53 + spread`` bits of digits for that entry to be carried to FP64 accuracy;
    ``AUTO_MARGIN_BITS`` more keep the error of "auto" at or below native DGEMM's on
    the standard test matrices (bench/accuracy.py measures it).
    """
    need = FP64_BITS + spread + AUTO_MARGIN_BITS
    return max(MIN_SLICES, min(MAX_SLICES, -(-need // BITS)))


def make_plan(slices, groups, spread: int) -> SlicePlan:
    """Resolve the user's ``slices`` ("auto" or int) and ``groups`` ("auto", "all" or int)."""
    if slices == "auto":
        s = auto_slices(spread)
    elif isinstance(slices, int) and not isinstance(slices, bool):
        s = slices
    else:
        raise InputError(f"slices must be 'auto' or an integer, got {slices!r}")
    if groups in ("auto", None):
        d = s
    elif groups == "all":
        d = 2 * s - 1
    elif isinstance(groups, int) and not isinstance(groups, bool):
        d = groups
    else:
        raise InputError(f"groups must be 'auto', 'all' or an integer, got {groups!r}")
    return SlicePlan(s, d)
