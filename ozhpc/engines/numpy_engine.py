"""NumPy engine: the CPU reference for every Ozaki kernel.

Exactness of the pair products: digits are integers with |digit| <= 127, so a
float64 BLAS product of two slices sums ``kb`` integers of magnitude at most
``127**2``. Every partial sum, in whatever order or blocking the BLAS uses
(FMA included), is then an integer of magnitude at most ``kb * 127**2``, and
all integers below ``2**53`` are exact in FP64. The group accumulators add at
most ``K * pairs * 127**2`` in total; :func:`ozhpc.ozaki.plan.check_exact`
rejects any call where that could reach ``2**53``, so every accumulator value is
the exact integer ``sum_k sum_{p+q=g} D_p E_q``.
"""
from __future__ import annotations

import numpy as np

from .base import BITS, Engine, group_weight_exponent


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
            scaled = np.ldexp(rest, shift)
            digit = np.rint(scaled)
            out[p] = digit
            rest = np.ldexp(scaled - digit, -shift)
        return out

    def accumulate(self, acc, da, eb) -> None:
        s = da.shape[0]
        a64 = da.astype(np.float64)
        b64 = eb.astype(np.float64)
        for g in range(acc.shape[0]):
            for p in range(max(0, g - s + 1), min(g, s - 1) + 1):
                acc[g] += a64[p] @ b64[g - p].T

    def combine(self, acc, row_exps, col_exps):
        d = acc.shape[0]
        total = np.zeros(acc.shape[1:], dtype=np.float64)
        for g in range(d - 1, -1, -1):
            total = total + acc[g] * 2.0 ** group_weight_exponent(g)
        scale = (np.asarray(row_exps, dtype=np.int64)[:, None]
                 + np.asarray(col_exps, dtype=np.int64)[None, :])
        with np.errstate(over="ignore"):  # an overflowing product is inf, as in DGEMM
            return np.ldexp(total, scale)
