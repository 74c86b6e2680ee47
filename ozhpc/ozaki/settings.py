"""The Ozaki settings of a product (scheme, slices/groups or bits): checked once, here.

The command line, job files and the Python API all build an :class:`OzakiSettings`; a bad
value raises an :class:`~ozhpc.errors.OptionError` whose message each front end spells its
own way (``--bits``, ``ozaki.bits``, ``bits``).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

from ..engines.crt import MAX_BITS, MIN_BITS
from ..errors import OptionError, digit_count, shown

SCHEMES = ("ozaki1", "ozaki2")
DEFAULT_SCHEME = "ozaki2"
"""Scheme II: linear in the accuracy (one int8 GEMM per modulus), the fast one on a GPU; the same
default on every engine, so the bits do not depend on the engine. A scheme left unsaid (None) is
scheme I where ``slices`` or ``groups`` are given (they are its options), else this one."""
GUARANTEES = ("dgemm", "tight")
DEFAULT_GUARANTEE = GUARANTEES[0]
"""What certified "auto" proves for every finite entry of C, plus the final rounding of C:
"dgemm" ``k u (|op(A)||op(B)|)_ij``, the bound native DGEMM itself guarantees (the default);
"tight" ``u (|op(A)||op(B)|)_ij``, about 7 more bits per entry (bench/results/guarantee_bits_cpu_2026-12-02.md)."""
ACCURACY = ("warn", "strict")
"""What "auto" does when its certificate fails on some entry at the widest plan: "warn" (return /
write C, say so in the info, the report, the HDF5 attributes and one warning) or "strict" (an
:class:`~ozhpc.errors.AccuracyError`: exit 3, nothing written)."""
TYPICAL_SLICES, TYPICAL_BITS = 9, 54
"""What certified "auto" ends at for well-scaled data (standard matrices with phi = 0.5): the plan
a memory estimate assumes before the data is read."""
MIN_SLICES, MAX_SLICES = 1, 24
"""24 slices hold 168 bits: any spread of a FP64 row that still matters to a product."""


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


WORDS = {"slices": ("auto",), "groups": ("auto", "all"), "bits": ("auto",)}
MAX_COUNT = 2**31 - 1
"""What a message names as the top of ``groups``, which has no range of its own (2*slices-1 bounds it)."""
RANGES = {"slices": (MIN_SLICES, MAX_SLICES), "groups": (1, None), "bits": (MIN_BITS, MAX_BITS)}


def option_value(name: str, value):
    """One of ``slices``, ``groups``, ``bits`` checked alone: its word ("auto", "all") or an
    integer in range (strings of digits too, as the command line gives them; NumPy integers as
    Python ints)."""
    if value in WORDS[name]:
        return value
    lo, hi = RANGES[name]
    if digit_count(value):
        raise OptionError(f"{{{name}}} must be between {lo} and {hi or MAX_COUNT}, got {shown(value)}")
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            pass
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)   # a NumPy integer (a loop over np.arange) is an integer
    if not _is_int(value):
        allowed = " or ".join([", ".join(f"'{w}'" for w in WORDS[name]), "an integer"])
        raise OptionError(f"{{{name}}} must be {allowed}, got {shown(value)}")
    if hi is None and value < lo:
        raise OptionError(f"{{{name}}} must be at least {lo}, got {value}")
    if hi is not None and not lo <= value <= hi:
        raise OptionError(f"{{{name}}} must be between {lo} and {hi}, got {value}")
    return value


@dataclass(frozen=True)
class OzakiSettings:
    """What the user asked of the Ozaki scheme; "auto" values are resolved per product.

    ``scheme`` "ozaki1" is tuned by ``slices`` ("auto" or 1..24) and ``groups`` ("auto" =
    slices, "all" = 2*slices-1, or fewer); "ozaki2" by ``bits`` ("auto" or 8..100). The
    options of the other scheme must stay "auto". ``guarantee`` ("dgemm" or "tight"): the bound
    "auto" certifies (:data:`GUARANTEES`); ``accuracy`` ("warn" or "strict"): what a failed
    certificate does (:data:`ACCURACY`); fixed slices / bits are not certified.
    """

    scheme: str | None = None
    slices: int | str = "auto"
    groups: int | str = "auto"
    bits: int | str = "auto"
    accuracy: str = "warn"
    guarantee: str = DEFAULT_GUARANTEE

    def __post_init__(self):
        if self.scheme is None:
            implied = self.slices != "auto" or self.groups != "auto"
            object.__setattr__(self, "scheme", "ozaki1" if implied else DEFAULT_SCHEME)
        if self.scheme not in SCHEMES:
            raise OptionError(f"{{scheme}} must be one of {', '.join(SCHEMES)}, got {self.scheme!r}")
        if self.accuracy not in ACCURACY:
            raise OptionError(f"{{accuracy}} must be one of {', '.join(ACCURACY)}, got {self.accuracy!r}")
        if self.guarantee not in GUARANTEES:
            raise OptionError(f"{{guarantee}} must be one of {', '.join(GUARANTEES)}, got {self.guarantee!r}")
        for name in WORDS:
            object.__setattr__(self, name, option_value(name, getattr(self, name)))
        if _is_int(self.slices) and _is_int(self.groups) and self.groups > 2 * self.slices - 1:
            raise OptionError(f"{{groups={self.groups}}} is more than the {2 * self.slices - 1} groups that "
                              f"{self.slices} slices have (at most 2*slices-1)")
        self._check_scheme_options()

    @property
    def auto(self) -> bool:
        """Whether the accuracy is chosen from the data ("auto" slices or bits)."""
        return (self.bits if self.scheme == "ozaki2" else self.slices) == "auto"

    def typical(self) -> "OzakiSettings":
        """These settings with "auto" replaced by what it picks for well-scaled data."""
        if self.scheme == "ozaki2":
            return replace(self, bits=TYPICAL_BITS if self.bits == "auto" else self.bits)
        return replace(self, slices=TYPICAL_SLICES if self.slices == "auto" else self.slices)

    def _check_scheme_options(self) -> None:
        if self.scheme == "ozaki2":
            given = [f"{{{name}={getattr(self, name)}}}" for name in ("slices", "groups")
                     if getattr(self, name) != "auto"]
            if given:
                one = len(given) == 1
                raise OptionError(f"{' and '.join(given)} {'is an option' if one else 'are options'} of "
                                  f"{{scheme=ozaki1}}; with {{scheme=ozaki2}} leave {'it' if one else 'them'} "
                                  f"out and set the accuracy with {{bits}}")
        elif self.bits != "auto":
            raise OptionError(f"{{bits={self.bits}}} needs {{scheme=ozaki2}} (the scheme here is "
                              f"{{={self.scheme}}}, whose accuracy is set by {{slices}})")
