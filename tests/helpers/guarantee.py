"""The certified guarantee checked exactly (Fractions), for the certificate's tests."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ozhpc.ozaki.plan import FINAL_ROUNDING_ULPS
from ozhpc.run.reference import exact_entry

U = Fraction(1, 2**53)


def exact_abs(a_row, b_col) -> Fraction:
    """(|a||b|) of one row and column, exactly."""
    return sum((abs(Fraction(float(x)) * Fraction(float(y))) for x, y in zip(a_row, b_col)), Fraction(0))


def guarantee_holds(c, a_op, b_op, scheme, i, j, guarantee="tight") -> bool:
    """|C_ij - (AB)_ij| <= c u (|A||B|)_ij + rho u |C_ij| + 2**-1074 (the guarantee, exactly), with
    c = 1 for "tight" and k for "dgemm"; an infinite C_ij only where the exact value rounds to it
    (finite inputs)."""
    exact = exact_entry(a_op[i], b_op[:, j])
    if not np.isfinite(c[i, j]):   # an overflow: right only where the exact value rounds to that inf
        return bool(np.isinf(c[i, j])) and (exact > 0) == (c[i, j] > 0) and \
            abs(exact) >= Fraction(2) ** 1024 - Fraction(2) ** 970
    factor = max(a_op.shape[1], 1) if guarantee == "dgemm" else 1
    slack = factor * U * exact_abs(a_op[i], b_op[:, j])
    final = FINAL_ROUNDING_ULPS[scheme] * U * abs(Fraction(float(c[i, j]))) + Fraction(1, 2**1074)
    return abs(Fraction(float(c[i, j])) - exact) <= slack + final


def worst_entries(c, a_op, b_op, count=8):
    """The entries with the most cancellation (smallest |C| / (|A||B|)) and the smallest |A||B|."""
    with np.errstate(all="ignore"):
        mag = np.abs(a_op) @ np.abs(b_op)
        ratio = np.where(mag > 0, np.abs(c) / np.where(mag > 0, mag, 1), np.inf)
    flat = list(np.argsort(ratio, axis=None)[:count]) + list(np.argsort(mag, axis=None)[:count])
    return [(int(x // c.shape[1]), int(x % c.shape[1])) for x in flat]
