"""The NumPy engine's complex scheme II (:mod:`ozhpc.engines.gaussian`): the reference every other
engine must equal bit for bit.

Complex rows arrive as float64 arrays of twice the width, the real and imaginary parts interleaved
(``z.view(float64)`` of a complex128 array); C leaves as float64 ``(m, n, 2)``, ``.view(complex128)``
of which is the complex matrix. The residue planes are exact and unique, the products exact FP64
integer sums (``|r| <= 128``, as :meth:`~ozhpc.engines.numpy_engine.NumpyEngine.accumulate_moduli`),
and the reconstruction is the real CRT's (the engine's ``combine_moduli``) run on
each component's residue combinations with the folded weights of
:attr:`~ozhpc.engines.gaussian.GaussianTables.re` / ``.im``.
"""
from __future__ import annotations

import numpy as np

from . import crt as _crt
from .digits import ldexp_by
from .gaussian import PRODUCTS, SPLIT, combinations


def _balanced(y, row):
    """Balanced residue of exact FP64 integers ``|y| <= 2**53 - 2**10`` modulo ``row[0]`` (step 1 of
    :mod:`ozhpc.engines.crt`: one reduction, the range fix-ups; unique)."""
    p, inv_p, lo, hi = row[0], row[1], row[2], row[3]
    r = y - np.rint(y * inv_p) * p
    r = np.where(r > hi, r - p, r)
    return np.where(r < lo, r + p, r)


def part_residue(big, row, short: bool):
    """Balanced residue of the exact FP64 integers ``|big| <= 2**100`` modulo ``row[0]``: ``big = high
    2**52 + low``, then one reduction of ``high (2**52 mod p) + low`` (``short``: up to 80 bits, an exact
    integer below 2**52) or of the two halves' residues combined (scheme II's residues, per part)."""
    high = np.rint(big * (1.0 / _crt.SPLIT))
    low = big - high * _crt.SPLIT
    if short:
        return _balanced(high * row[4] + low, row)
    return _balanced(_balanced(high, row) * row[4] + _balanced(low, row), row)


def plane_residues(xr, xi, row, kind: str, root: int):
    """The residue planes of one modulus from the residues ``xr``, ``xi`` of the parts: split ``u =
    xr + w xi``, ``v = xr - w xi``; Karatsuba ``xr, xi, xr + xi`` (each reduced again: unique)."""
    if kind == SPLIT:
        return _balanced(xr + root * xi, row), _balanced(xr - root * xi, row)
    return xr, xi, _balanced(xr + xi, row)


def block_rows(cols: int) -> int:
    """Rows per block of about 2**16 entries (the element-wise passes run in cache)."""
    return max(1, (1 << 16) // max(1, cols))


class GaussianNumpy:
    """Complex scheme II on the CPU (mixed into :class:`~ozhpc.engines.numpy_engine.NumpyEngine`)."""

    def gaussian_residues(self, x, exps, tables, conj: bool = False):
        """int8 ``(tables.planes, rows, k)`` residue planes of the complex rows ``x`` (float64
        ``(rows, 2k)``, parts interleaved), scaled by ``2**(bits - e_i)``; ``conj``: of their conjugates."""
        x = np.asarray(x, dtype=np.float64)
        rows, k = x.shape[0], x.shape[1] // 2
        out = np.empty((tables.planes, rows, k), dtype=np.int8)
        shifts = tables.bits - np.asarray(exps, dtype=np.int64).reshape(-1, 1)
        short = tables.bits <= _crt.SHORT_BITS
        step = block_rows(2 * k)
        for r0 in range(0, rows, step):
            block, shift = x[r0:r0 + step], shifts[r0:r0 + step]
            re = np.rint(ldexp_by(np, block[:, 0::2], shift))
            im = np.rint(ldexp_by(np, block[:, 1::2], shift))
            if conj:
                im = -im
            plane = 0
            for row, kind, root in zip(tables.residue, tables.kinds, tables.roots):
                xr, xi = part_residue(re, row, short), part_residue(im, row, short)
                for values in plane_residues(xr, xi, row, kind, root):
                    out[plane, r0:r0 + step] = values
                    plane += 1
        return out

    def zeros_gaussian(self, tables, m: int, n: int):
        """Accumulators for :meth:`accumulate_gaussian`, one per residue plane (float64)."""
        return np.zeros((tables.planes, m, n), dtype=np.float64)

    def accumulate_gaussian(self, acc, da, eb, tables) -> None:
        """``acc[g] += da[g] @ eb[g].T`` for every residue plane (exact FP64 integer sums; only
        ``acc[g] mod p_g`` counts)."""
        self.accumulate_moduli(acc, da, eb, tables)

    def combine_gaussian(self, acc, row_exps, col_exps, tables):
        """C as float64 ``(m, n, 2)``: each component reconstructed by the real CRT from its residue
        combinations, scaled by ``2**(e_i + f_j - 2 bits)``."""
        _, m, n = acc.shape
        out = np.empty((m, n, 2), dtype=np.float64)
        row_exps = np.asarray(row_exps, dtype=np.int64).reshape(-1)
        step = block_rows(n)
        for i0 in range(0, m, step):
            sums = acc[:, i0:i0 + step].astype(np.float64)
            parts = ([], [])
            plane = 0
            for row, kind in zip(tables.residue, tables.kinds):
                count = PRODUCTS[kind]
                residues = [_balanced(sums[plane + j], row) for j in range(count)]
                plane += count
                for part, values in zip(parts, combinations(kind, residues)):
                    part.append(values)
            for c, (part, crt) in enumerate(zip(parts, (tables.re, tables.im))):
                out[i0:i0 + step, :, c] = self.combine_moduli(np.stack(part), row_exps[i0:i0 + step], col_exps, crt)
        return out

    def multiply_combine_gaussian(self, da, eb, row_exps, col_exps, tables):
        """The products over the whole k, then :meth:`combine_gaussian` (one panel)."""
        acc = self.zeros_gaussian(tables, da.shape[1], eb.shape[1])
        if da.shape[2]:
            self.accumulate_gaussian(acc, da, eb, tables)
        return self.combine_gaussian(acc, row_exps, col_exps, tables)
