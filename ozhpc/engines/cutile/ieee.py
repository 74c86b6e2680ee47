"""IEEE-exact building blocks for the statistics kernels (inlined into them): ``ldexp`` of any
finite value with NumPy's rounding, frexp's exponent, float integers to int64 without a
conversion, and products kept apart from the sums they feed.

cuTile contracts ``a * b + c`` into one FMA (its front end's ``fuse_mul_addsub``), which rounds
once where NumPy rounds twice. :func:`kept` passes a product through two bitcasts: the front end
then sees no multiplication feeding the sum, and the backend (whose float operations carry an
explicit round-to-nearest mode) emits DMUL and DADD (seen in the sm_90 SASS), so every operation
of the statistics rounds like NumPy's.
"""
from __future__ import annotations

import cuda.tile as ct

from .tile_math import TWO52, pow2

EXP_MASK = 0x7FF
FRAC_MASK = (1 << 52) - 1
TWO52_BITS = 0x4330000000000000
"""The bits of 2**52: ``bitcast(v + 2**52) - TWO52_BITS`` is the integer ``v`` in [0, 2**52)."""
LDEXP_RANGE = 2200
"""Shifts are clamped to +-this: beyond it every finite value over- or underflows alike."""


def kept(p):
    """The product ``p`` rounded on its own (no FMA with the sum it feeds; module docstring)."""
    return ct.bitcast(ct.bitcast(p, ct.int64), ct.float64)


def field(x):
    """The biased exponent field of float64 ``x`` (int64)."""
    return (ct.bitcast(x, ct.int64) >> 52) & EXP_MASK


def frexp_exponent(a):
    """``frexp(a)[1]`` for finite ``a > 0`` (int64): subnormals through ``a * 2**64``."""
    f = field(a)
    return ct.where(f == 0, field(a * pow2(ct.full((1, 1), 64, ct.int64))) - (1022 + 64), f - 1022)


def as_int(v):
    """Float64 integers ``v`` in [0, 2**52) as int64 (the bits of ``v + 2**52``; no conversion)."""
    return ct.bitcast(v + TWO52, ct.int64) - TWO52_BITS


def _pow2_in_range(e):
    return pow2(ct.minimum(ct.maximum(e, -1022), 1023))


def ldexp_rne(x, sc):
    """``np.ldexp(x, sc)`` for any finite float64 ``x`` and int64 ``sc`` (clamped to +-LDEXP_RANGE):
    one rounding to nearest even, also for subnormal results, inf on overflow.

    Normal results (``exponent(x) + sc >= -1022``): ``x`` times four powers of two of one sign, whose
    partial products lie between ``x`` and the result, so each is exact and only an overflow, the
    result's own, can happen. Others: ``v = |x| 2**(sc + 1074)`` (below 2**52; two factors, exact
    where it matters: ``v`` >= 1/2), rounded to an integer by ``(v + 2**52) - 2**52``, times 2**-1074.
    """
    sc = ct.minimum(ct.maximum(sc, -LDEXP_RANGE), LDEXP_RANGE)
    mag = ct.abs(sc)
    q = mag >> 2
    sign = ct.where(sc < 0, -1, 1)
    fq, fr = pow2(sign * q), pow2(sign * (mag - 3 * q))
    normal = x * fq * fq * fq * fr
    t = sc + 1074
    first = ct.minimum(ct.maximum(t, -1022), 1023)
    v = kept(ct.abs(x) * _pow2_in_range(first) * _pow2_in_range(t - first))
    r = (v + TWO52) - TWO52
    sub = r * pow2(ct.full((1, 1), -52, ct.int64)) * pow2(ct.full((1, 1), -1022, ct.int64))
    sub = ct.where(x < 0.0, -sub, sub)
    return ct.where(field(x) - 1023 + sc >= -1022, normal, sub)
