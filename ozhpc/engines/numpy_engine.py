"""NumPy engine: the CPU reference for every Ozaki kernel.

Exactness of the pair products: digits are integers with |digit| <= 127, so a
float64 BLAS product of two slices sums ``kb`` integers of magnitude at most
``127**2`` (scheme II's residues, at most 128 in magnitude, go through float32 in
k-chunks of :data:`RESIDUE_K`, the same argument below ``2**24``). Every partial sum, in whatever order or blocking the BLAS uses
(FMA included), is then an integer of magnitude at most ``kb * 127**2``, and
all integers below ``2**53`` are exact in FP64 (see ``PACK_SCALE`` for two products
packed into one call, which halves the BLAS work). The group accumulators add at
most ``K * pairs * 127**2`` in total; :meth:`ozhpc.ozaki.plan.SlicePlan.check_k`
rejects any call where that could reach ``2**53``, so every accumulator value is
the exact integer ``sum_k sum_{p+q=g} D_p E_q``.
"""
from __future__ import annotations

import numpy as np

from . import crt as _crt
from . import gaussian as _gaussian
from .base import Engine
from .digits import BITS, final_scale, group_weight_exponent, ldexp_by

PACK_K = 4096
PACK_SCALE = 2.0**27
"""Two pair products per BLAS call: ``D_p @ (E_q + 2**27 E_q')^T``. For k-chunks of at most
4096, ``|D_p E_q^T| <= 4096 * 127**2 < 2**26``, so the low product sits below half of 2**27
and the packed sum below 2**53: both are recovered exactly (``rint`` of the scaled sum gives
the high product, the difference the low one)."""
RESIDUE_K = 1024
"""Scheme II's int8 products run as float32 BLAS products of k-chunks this long: a chunk's
``|sum| <= 1024 * 128**2 = 2**24``, and every partial sum, in any order, blocking or FMA, is an
integer no larger, exact in float32 (whose integers are exact up to ``2**24``); each chunk is
added to the float64 accumulator exactly. float32 BLAS runs about twice the float64 rate."""
_DIGIT_RADIX = float(2**BITS)


class NumpyEngine(Engine):
    name = "numpy"
    xp = np

    def split(self, x, exps, nslices: int):
        """Digits of ``y_p = r_p * 2**(7p - e)``: ``y_0 = ldexp(x, -e)`` once, then
        ``D_p = rint(128 y_p)``, ``y_{p+1} = 128 y_p - D_p`` (all exact; the cuTile kernel's
        steps, :mod:`ozhpc.engines.cutile.split`)."""
        x = np.asarray(x, dtype=np.float64)
        out = np.empty((nslices,) + x.shape, dtype=np.int8)
        y = ldexp_by(np, x, -np.asarray(exps, dtype=np.int64).reshape(-1, 1))
        for p in range(nslices):
            y *= _DIGIT_RADIX
            digit = np.rint(y)
            out[p] = digit
            y -= digit
        return out

    def residues(self, x, exps, tables):
        x = np.asarray(x, dtype=np.float64)
        out = np.empty((tables.count,) + x.shape, dtype=np.int8)
        shifts = tables.bits - np.asarray(exps, dtype=np.int64).reshape(-1, 1)
        short = tables.bits <= _crt.SHORT_BITS
        step = block_rows(x.shape[1])
        for r0 in range(0, x.shape[0], step):
            halves = _halves(np.rint(ldexp_by(np, x[r0:r0 + step], shifts[r0:r0 + step])))
            for l, row in enumerate(tables.moduli):
                out[l, r0:r0 + step] = _residue(halves, row, short)
        return out

    # -- complex scheme II (ozhpc.engines.gaussian): complex rows in, complex C out ----------------
    def gaussian_residues(self, x, exps, tables, conj: bool = False):
        x = np.asarray(x, dtype=np.complex128)
        rows, k = x.shape
        out = np.empty((tables.planes, rows, k), dtype=np.int8)
        shifts = tables.bits - np.asarray(exps, dtype=np.int64).reshape(-1, 1)
        short = tables.bits <= _crt.SHORT_BITS
        step = block_rows(2 * k)
        for r0 in range(0, rows, step):
            block, shift = x[r0:r0 + step], shifts[r0:r0 + step]
            re = _halves(np.rint(ldexp_by(np, block.real, shift)))
            im = _halves((-1.0 if conj else 1.0) * np.rint(ldexp_by(np, block.imag, shift)))
            plane = 0
            for row, kind, root in zip(tables.residue, tables.kinds, tables.roots):
                for values in _gaussian_planes(_residue(re, row, short), _residue(im, row, short), row, kind, root):
                    out[plane, r0:r0 + step] = values
                    plane += 1
        return out

    def zeros_gaussian(self, tables, m: int, n: int):
        return np.zeros((tables.planes, m, n), dtype=np.float64)

    def accumulate_gaussian(self, acc, da, eb, tables) -> None:
        self.accumulate_moduli(acc, da, eb, tables)

    def combine_gaussian(self, acc, row_exps, col_exps, tables):
        """Each component by the real CRT's steps 2-5 from its plane combinations of the balanced
        residues (summed as they are, as the cuTile kernel sums them: the same pieces)."""
        _, m, n = acc.shape
        out = np.empty((m, n, 2), dtype=np.float64)   # a complex128 matrix's layout
        row_exps = np.asarray(row_exps, dtype=np.int64).reshape(-1)
        step = block_rows(n)
        for i0 in range(0, m, step):
            sums, parts, plane = acc[:, i0:i0 + step].astype(np.float64), ([], []), 0
            for row, kind in zip(tables.residue, tables.kinds):
                count = _gaussian.PRODUCTS[kind]
                residues = [_balanced(sums[plane + j], row) for j in range(count)]
                plane += count
                for part, values in zip(parts, _gaussian.combinations(kind, residues)):
                    part.append(values)
            for c, (part, crt) in enumerate(zip(parts, (tables.re, tables.im))):
                out[i0:i0 + step, :, c] = _crt_combine(np.stack(part), row_exps[i0:i0 + step], col_exps, crt,
                                                       reduce=False)
        return out.view(np.complex128).reshape(m, n)

    def multiply_combine_gaussian(self, da, eb, row_exps, col_exps, tables, out=None):
        acc = self.zeros_gaussian(tables, da.shape[1], eb.shape[1])
        if da.shape[2]:
            self.accumulate_gaussian(acc, da, eb, tables)
        c = self.combine_gaussian(acc, row_exps, col_exps, tables)
        if out is None:
            return c
        out[...] = c
        return out

    def accumulate_moduli(self, acc, da, eb, tables) -> None:
        # exact integers: float32 chunks of RESIDUE_K, float64 sums of them (k < 2**29 chunks)
        for k0 in range(0, da.shape[2], RESIDUE_K):
            for g in range(acc.shape[0]):
                acc[g] += (da[g, :, k0:k0 + RESIDUE_K].astype(np.float32)
                           @ eb[g, :, k0:k0 + RESIDUE_K].astype(np.float32).T)

    def accumulate_groups(self, acc, da, eb) -> None:
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

    def combine_moduli(self, acc, row_exps, col_exps, tables):
        """The reference CRT."""
        return _crt_combine(acc, row_exps, col_exps, tables)

    def combine_groups(self, acc, row_exps, col_exps):
        d = acc.shape[0]
        total = np.zeros(acc.shape[1:], dtype=np.float64)
        for g in range(d - 1, -1, -1):
            total = total + acc[g] * 2.0 ** group_weight_exponent(g)
        scale = (np.asarray(row_exps, dtype=np.int64)[:, None]
                 + np.asarray(col_exps, dtype=np.int64)[None, :])
        return final_scale(np, total, scale)


def _balanced(y, row):
    """Balanced residue of exact FP64 integers ``|y| <= 2**53 - 2**10`` modulo ``row[0]``
    (``row`` = one line of :attr:`CrtTables.moduli`): one reduction and the range fix-ups,
    step 1 of :mod:`ozhpc.engines.crt`; the result is unique, so every engine agrees."""
    return _crt.balanced(np, y, row)


def _halves(big):
    """Exact FP64 integers ``|big| <= 2**100`` as ``(high, low)`` with ``big = high 2**52 + low``,
    ``|low| <= 2**51``."""
    high = np.rint(big * (1.0 / _crt.SPLIT))
    return high, big - high * _crt.SPLIT


def _residue(halves, row, short: bool):
    """Balanced residue modulo ``row[0]`` of ``high 2**52 + low`` (:func:`_halves`): one reduction of
    ``high (2**52 mod p) + low`` (``short``: up to 80 bits, an exact integer below 2**52), or of the
    halves' residues combined."""
    high, low = halves
    if short:
        return _balanced(high * row[4] + low, row)
    return _balanced(_balanced(high, row) * row[4] + _balanced(low, row), row)


def _gaussian_planes(xr, xi, row, kind: str, root: int):
    """The residue planes of one complex modulus from the residues of the parts: split ``xr + w xi``,
    ``xr - w xi``; Karatsuba ``xr, xi, xr + xi`` (each reduced again, so unique)."""
    if kind == _gaussian.SPLIT:
        return _balanced(xr + root * xi, row), _balanced(xr - root * xi, row)
    return xr, xi, _balanced(xr + xi, row)


BLOCK_ENTRIES = 1 << 16
"""Entries per row block of the element-wise passes (residues, CRT): 512 KiB per FP64
temporary, so the passes over the moduli run in cache (n = 2048, 16 moduli: residues 6.5 s
-> 0.8 s with the one-reduction path, CRT 1.17 s at 512 rows per block -> 0.63 s at 32)."""


def block_rows(cols: int) -> int:
    """Rows per block of :data:`BLOCK_ENTRIES` entries (at least one)."""
    return max(1, BLOCK_ENTRIES // max(1, cols))


def _crt_combine(acc, row_exps, col_exps, crt, reduce: bool = True):
    """Scheme II reconstruction, steps 1-5 of :mod:`ozhpc.engines.crt` (the reference order); without
    ``reduce``, ``acc`` holds exact small integers (a complex component's residue combinations,
    :mod:`ozhpc.engines.gaussian`) that step 2 sums as they are."""
    n_mod, m, n = acc.shape
    scale = (np.asarray(row_exps, dtype=np.int64)[:, None]
             + np.asarray(col_exps, dtype=np.int64)[None, :] + crt.shift)
    out = np.empty((m, n), dtype=np.float64)
    rows = block_rows(n)
    for i0 in range(0, m, rows):
        pieces = _crt.exact_pieces(np, acc[:, i0:i0 + rows], crt, reduce=reduce)
        npieces = pieces.shape[0]
        total = pieces[npieces - 1]
        for t in range(npieces - 2, -1, -1):
            total = total + pieces[t] * 2.0 ** (_crt.PIECE_BITS * (npieces - 1 - t))
        out[i0:i0 + rows] = final_scale(np, total, scale[i0:i0 + rows])
    return out
