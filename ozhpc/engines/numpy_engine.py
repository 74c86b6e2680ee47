"""NumPy engine: the CPU reference for every Ozaki kernel.

Exactness of the pair products: digits are integers with |digit| <= 127, so a
float64 BLAS product of two slices sums ``kb`` integers of magnitude at most
``127**2``. Every partial sum, in whatever order or blocking the BLAS uses
(FMA included), is then an integer of magnitude at most ``kb * 127**2``, and
all integers below ``2**53`` are exact in FP64 (see ``PACK_SCALE`` for two products
packed into one call, which halves the BLAS work). The group accumulators add at
most ``K * pairs * 127**2`` in total; :func:`ozhpc.ozaki.gemm.check_k` (with ``SlicePlan.max_exact_k``)
rejects any call where that could reach ``2**53``, so every accumulator value is
the exact integer ``sum_k sum_{p+q=g} D_p E_q``.
"""
from __future__ import annotations

import numpy as np

from .base import BITS, Engine, group_weight_exponent

PACK_K = 4096
PACK_SCALE = 2.0**27
"""Two pair products per BLAS call: ``D_p @ (E_q + 2**27 E_q')^T``. For k-chunks of at most
4096, ``|D_p E_q^T| <= 4096 * 127**2 < 2**26``, so the low product sits below half of 2**27
and the packed sum below 2**53: both are recovered exactly (``rint`` of the scaled sum gives
the high product, the difference the low one)."""


def _scalers(shift):
    """Functions multiplying by ``2**shift`` and ``2**-shift`` (per row), as exact ldexp.

    A product with a normal power of two is correctly rounded, like ``ldexp``, so both give the
    same bits; the product is 4x faster, ``ldexp`` covers shifts beyond the normal range.
    """
    if shift.size == 0 or (-1022 <= shift.min() and shift.max() <= 1022):
        up, down = np.ldexp(1.0, shift), np.ldexp(1.0, -shift)
        return (lambda x: x * up), (lambda x: x * down)
    return (lambda x: np.ldexp(x, shift)), (lambda x: np.ldexp(x, -shift))


class NumpyEngine(Engine):
    name = "numpy"
    xp = np

    def split(self, x, exps, nslices: int):
        x = np.asarray(x, dtype=np.float64)
        out = np.empty((nslices,) + x.shape, dtype=np.int8)
        rest = x.copy()
        exps = np.asarray(exps, dtype=np.int64).reshape(-1, 1)
        for p in range(nslices):
            shift = BITS * (p + 1) - exps
            up, down = _scalers(shift)
            scaled = up(rest)
            digit = np.rint(scaled)
            out[p] = digit
            rest = down(scaled - digit)
        return out

    def accumulate(self, acc, da, eb) -> None:
        s, ngroups = da.shape[0], acc.shape[0]
        for k0 in range(0, da.shape[2], PACK_K):
            a64 = da[:, :, k0:k0 + PACK_K].astype(np.float64)
            b64 = eb[:, :, k0:k0 + PACK_K].astype(np.float64)
            for p in range(s):
                partners = [q for q in range(s) if p + q < ngroups]
                for i in range(0, len(partners), 2):
                    q_lo, *rest = partners[i:i + 2]
                    if not rest:
                        acc[p + q_lo] += a64[p] @ b64[q_lo].T
                        continue
                    q_hi = rest[0]
                    packed = a64[p] @ (b64[q_lo] + PACK_SCALE * b64[q_hi]).T
                    high = np.rint(packed * (1.0 / PACK_SCALE))
                    acc[p + q_hi] += high
                    acc[p + q_lo] += packed - high * PACK_SCALE

    def combine(self, acc, row_exps, col_exps):
        d = acc.shape[0]
        total = np.zeros(acc.shape[1:], dtype=np.float64)
        for g in range(d - 1, -1, -1):
            total = total + acc[g] * 2.0 ** group_weight_exponent(g)
        scale = (np.asarray(row_exps, dtype=np.int64)[:, None]
                 + np.asarray(col_exps, dtype=np.int64)[None, :])
        with np.errstate(over="ignore"):  # an overflowing product is inf, as in DGEMM
            return np.ldexp(total, scale)
