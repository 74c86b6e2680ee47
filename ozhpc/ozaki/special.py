"""Inf and NaN: which output entries a native DGEMM makes non-finite, and how.

The Ozaki digits only see finite values (non-finite entries are split as 0).
For every other entry the IEEE result of ``sum_k a_ik b_kj`` is decided by the
classes of the operands alone: NaN if any product is NaN (a NaN operand, or
inf * 0) or if +inf and -inf products meet; else +-inf if any product is
infinite. Those class counts are sums of 0/1 products, exact in any order, so
they go through the same panel loop as the slices and give the same answer for
any grid or block size.
"""
from __future__ import annotations

ZERO, POS, NEG, PINF, NINF, NAN = range(6)


def has_nonfinite(xp, x) -> bool:
    return bool(x.size) and not bool(xp.isfinite(x).all())


def finite_part(xp, x, nonfinite=None):
    """``x`` with non-finite entries replaced by 0 (``x`` itself when all are finite;
    ``nonfinite``: whether ``x`` holds inf/NaN, when the caller knows already)."""
    if not (has_nonfinite(xp, x) if nonfinite is None else nonfinite):
        return x
    return xp.where(xp.isfinite(x), x, 0.0)


def classify(xp, x):
    """int8 class code per entry: ZERO, POS, NEG (finite), PINF, NINF or NAN."""
    code = xp.where(x > 0, POS, xp.where(x < 0, NEG, ZERO)).astype(xp.int8)
    code = xp.where(xp.isposinf(x), PINF, code)
    code = xp.where(xp.isneginf(x), NINF, code)
    return xp.where(xp.isnan(x), NAN, code).astype(xp.int8)


def _indicators(xp, code, kinds):
    return xp.concatenate([xp.isin(code, xp.asarray(k, dtype=code.dtype)).astype(xp.float64) for k in kinds], axis=1)


_INF = (PINF, NINF)
_ANY = (ZERO, POS, NEG, PINF, NINF, NAN)
# NaN products: inf*0, 0*inf, NaN*anything, anything*NaN.
_NAN_LEFT = (_INF, (ZERO,), (NAN,), _ANY)
_NAN_RIGHT = ((ZERO,), _INF, _ANY, (NAN,))
# Infinite products, by sign.
_SIGN_LEFT = ((PINF,), (NINF,), (POS, PINF), (NEG, NINF))
_POS_RIGHT = ((POS, PINF), (NEG, NINF), (PINF,), (NINF,))
_NEG_RIGHT = ((NEG, NINF), (POS, PINF), (NINF,), (PINF,))


def zeros_counts(xp, m: int, n: int):
    """Accumulator of (NaN products, +inf products, -inf products) per entry."""
    return xp.zeros((3, m, n), dtype=xp.float64)


def accumulate_counts(xp, counts, code_a, code_bt) -> None:
    """Add the class counts of one k-panel: ``code_a`` (m, kb), ``code_bt`` (n, kb)."""
    sign_a = _indicators(xp, code_a, _SIGN_LEFT)
    counts[0] += _indicators(xp, code_a, _NAN_LEFT) @ _indicators(xp, code_bt, _NAN_RIGHT).T
    counts[1] += sign_a @ _indicators(xp, code_bt, _POS_RIGHT).T
    counts[2] += sign_a @ _indicators(xp, code_bt, _NEG_RIGHT).T


def apply_counts(xp, c, counts):
    """Overwrite the entries of the product ``c`` that IEEE arithmetic makes non-finite."""
    nan = (counts[0] > 0) | ((counts[1] > 0) & (counts[2] > 0))
    c = xp.where(counts[1] > 0, xp.inf, c)
    c = xp.where(counts[2] > 0, -xp.inf, c)
    return xp.where(nan, xp.nan, c)


# -- complex operands: each component of C is a real dot product of the parts over 2k -------------
# (``Re C = [Ar Ai] . [Br -Bi]``, ``Im C = [Ar Ai] . [Bi Br]``), so a ZGEMM that multiplies by the
# schoolbook rule makes a component inf/NaN exactly where those real products do.

_NEGATED = (ZERO, NEG, POS, NINF, PINF, NAN)
"""The class of ``-x`` by the class of ``x``."""


def assemble(xp, re, im):
    """complex128 from its parts, by assignment (``re + 1j * im`` would turn ``-0.0 + 0j`` and an
    inf part's NaN products into other values)."""
    out = xp.empty(re.shape, dtype=xp.complex128)
    out.real, out.imag = re, im
    return out


def finite_parts(xp, z, nonfinite=None):
    """Complex ``z`` with each non-finite part replaced by 0 (``z`` itself when all are finite)."""
    if not (has_nonfinite(xp, z) if nonfinite is None else nonfinite):
        return z
    return assemble(xp, xp.where(xp.isfinite(z.real), z.real, 0.0), xp.where(xp.isfinite(z.imag), z.imag, 0.0))


def classify_parts(xp, z):
    """int8 class codes ``(2, rows, cols)`` of the real and the imaginary parts of ``z``."""
    return xp.stack([classify(xp, z.real), classify(xp, z.imag)])


def zeros_complex_counts(xp, m: int, n: int):
    """The class counts of both components: ``(2, 3, m, n)``."""
    return xp.zeros((2, 3, m, n), dtype=xp.float64)


def accumulate_complex_counts(xp, counts, codes_a, codes_bt) -> None:
    """Add one k-panel of the parts' codes (``codes_a`` (2, m, kb), ``codes_bt`` (2, n, kb)) to the
    counts of both components."""
    a = xp.concatenate([codes_a[0], codes_a[1]], axis=1)
    negated = xp.asarray(_NEGATED, dtype=xp.int8)[codes_bt[1].astype(xp.int64)]
    accumulate_counts(xp, counts[0], a, xp.concatenate([codes_bt[0], negated], axis=1))
    accumulate_counts(xp, counts[1], a, xp.concatenate([codes_bt[1], codes_bt[0]], axis=1))


def apply_complex_counts(xp, c, counts):
    """Both components of the complex product ``c`` with the special values of :func:`apply_counts`."""
    return assemble(xp, apply_counts(xp, c.real, counts[0]), apply_counts(xp, c.imag, counts[1]))
