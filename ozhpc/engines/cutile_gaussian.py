"""The cuTile engine's complex scheme II (:mod:`ozhpc.engines.gaussian`), mixed into
:class:`~ozhpc.engines.cutile_engine.CutileEngine`: the residue planes
(:mod:`.cutile.gaussian_residues`), the products by the real pair kernel in its diagonal mode (one
int8 product per plane, reduced modulo the plane's modulus in the kernel's epilogue, later k chunks
added into the int8 residues: :meth:`CutileEngine._pair_sums`), and the two-component CRT
(:mod:`.cutile.gaussian_crt`). Bitwise equal to the NumPy engine's ``*_gaussian`` methods.

Uses the engine's layout helpers (padding to ``k_align``, remembered padded buffers, k chunks,
workspace budget); it holds no state of its own but the device tables, cached per plan.
"""
from __future__ import annotations

from typing import NamedTuple

import cupy as cp
import numpy as np

from . import cutile as ck
from .cutile import gaussian_crt, gaussian_residues
from .kernel_tables import limb_constants, modulus_table


class GaussianDeviceTables(NamedTuple):
    """One plan's constants on the device: the residue kernel's table, the CRT kernel's tables
    (re, im, M's pieces, fl(1/M)) and the pair kernel's int32 modulus rows per plane."""

    residue: object
    crt: tuple
    mods: object


def _host_tables(tables) -> tuple:
    """The device tables of :class:`GaussianDeviceTables` as NumPy arrays: the residue table's
    layout is :data:`.cutile.gaussian_residues.RESIDUE_COLS` (the real table's columns 0-4, the root of
    -1, fl32(1/p), the 16-bit and 14-bit limb constants ``balanced(2**(16 j) mod p)``,
    ``balanced(2**(14 j) mod p)`` and ``balanced(w 2**(14 j) mod p)``); the CRT tables': weights at
    ``WEIGHT_COL`` (:mod:`.cutile.tile_math`); the pair kernel's rows ``p, 2**16 mod p, lo, hi``."""
    n = tables.count
    gr = gaussian_residues
    residue = np.zeros((n, gr.RESIDUE_COLS))
    residue[:, :5] = tables.residue[:, :5]
    residue[:, gr.ROOT_COL] = tables.roots
    primes = list(tables.primes)
    residue[:, gr.INV32_COL] = [np.float32(1.0 / p) for p in primes]
    residue[:, ck.LIMB_COL:ck.LIMB_COL + 3] = limb_constants(primes)
    residue[:, gr.LIMB14_COL:gr.LIMB14_COL + 3] = limb_constants(primes, gr.LIMB14_BITS)
    residue[:, gr.ROOT_LIMB14_COL:gr.ROOT_LIMB14_COL + 4] = limb_constants(primes, gr.LIMB14_BITS, range(4),
                                                                           tables.roots)
    parts = []
    for component in (tables.re, tables.im):
        table = np.zeros((n, ck.TABLE_COLS))
        table[:, ck.WEIGHT_COL:ck.WEIGHT_COL + component.pieces] = component.weights
        parts.append(table)
    m_row = np.zeros((1, ck.MP_COLS))
    m_row[0, :tables.pieces] = tables.re.m_pieces
    return residue, (*parts, m_row, np.full((1, 1), tables.re.inv_m)), modulus_table(tables.plane_primes)


def _blocks(x: int) -> int:
    """``x`` rounded up to whole 128-row tiles of the pair kernel."""
    return max(128, -(-x // 128) * 128)


class CutileGaussian:
    """Complex scheme II on the GPU (see the module docstring)."""

    def _gaussian_tables(self, tables) -> GaussianDeviceTables:
        key = ("gaussian", tables.bits, tables.count, tables.pieces)
        cache = self.__dict__.setdefault("_gaussian_device", {})
        if key not in cache:
            residue, crt, mods = _host_tables(tables)
            with self.device:
                cache[key] = GaussianDeviceTables(cp.asarray(residue), tuple(cp.asarray(t) for t in crt),
                                                  cp.asarray(mods))
        return cache[key]

    def _padded_extent(self, x: int) -> int:
        return max(self.k_align, -(-x // self.k_align) * self.k_align)

    def gaussian_residues(self, z, exps, tables, conj: bool = False):
        z = cp.asarray(z, dtype=cp.complex128)
        if z.ndim != 2:
            raise ValueError(f"the complex split needs a 2-D array, got shape {z.shape}")
        rows, k = z.shape
        depth = tables.planes
        alloc = cp.zeros if rows == 0 or k == 0 else cp.empty
        buf = alloc((depth, self._padded_extent(rows), self._padded_extent(k)), dtype=cp.int8)
        out = buf[:, :rows, :k]
        if rows and k:
            trans = not z.flags.c_contiguous and z.T.flags.c_contiguous
            src = z.T if trans else cp.ascontiguousarray(z)
            parts = src.view(cp.float64).reshape(src.shape[0], src.shape[1], 2)
            gaussian_residues.launch(self._stream(), parts, trans, self._padded_exps(exps, buf.shape[1]),
                                     self._gaussian_tables(tables).residue, buf, tables.bits, tables.splits, conj)
        self._remember(out, buf)
        return out

    def zeros_gaussian(self, tables, m: int, n: int):
        """int8 residues, one plane per product (the pair kernel reduces in place), padded as the slices."""
        return cp.zeros((tables.planes, self._padded_extent(m), self._padded_extent(n)), dtype=cp.int8)[:, :m, :n]

    def accumulate_gaussian(self, acc, da, eb, tables) -> None:
        g, m, n = acc.shape
        if da.shape[:2] != (g, m) or eb.shape[:2] != (g, n) or da.shape[2] != eb.shape[2]:
            raise ValueError(f"shapes do not match: acc {acc.shape}, da {da.shape}, eb {eb.shape}")
        if acc.dtype != cp.int8 or acc.strides[-1] != 1:
            raise TypeError(f"acc must come from zeros_gaussian (int8, rows contiguous), got {acc.dtype} "
                            f"with strides {acc.strides}")
        if m == 0 or n == 0 or da.shape[2] == 0:
            return
        pa, pb = self._as_padded(da), self._as_padded(eb)
        mods = self._gaussian_tables(tables).mods
        for k0, k1 in self._k_chunks(da.shape[2], 1, g, diagonal=True):
            self._pair_sums(pa, pb, k0, k1, acc, mods, accumulate=True)

    def combine_gaussian(self, acc, row_exps, col_exps, tables):
        _, m, n = acc.shape
        out = cp.empty((m, n, 2), dtype=cp.float64)
        self._gaussian_crt(acc, row_exps, col_exps, tables, out)
        return out.view(cp.complex128).reshape(m, n)

    def _gaussian_crt(self, acc, row_exps, col_exps, tables, out) -> None:
        if out.shape[0] == 0 or out.shape[1] == 0:
            return
        if acc.dtype != cp.int8:
            raise TypeError(f"acc must be the int8 residues of zeros_gaussian, got {acc.dtype}")
        re = cp.ascontiguousarray(cp.asarray(row_exps).astype(cp.int32, copy=False).ravel())
        ce = cp.ascontiguousarray(cp.asarray(col_exps).astype(cp.int32, copy=False).ravel())
        gaussian_crt.launch(self._stream(), acc, re, ce, self._gaussian_tables(tables).crt, out, tables.shift,
                            tables.splits, tables.pieces)

    def plane_budget(self) -> int:
        """A quarter of the workspace budget (an eighth of free memory): a complex operand whose
        planes take more makes them a row block at a time, which leaves room for op(B)^T's planes,
        C and the products' residues (n = 32768 on one H200)."""
        return self._workspace_budget() // 4

    def multiply_combine_gaussian(self, da, eb, row_exps, col_exps, tables, out=None):
        """The products over the whole k into int8 residues, then the CRT, blocked over M/N so the
        residues stay within ``memory_fraction`` of free memory (``out``: C's complex128 rows to
        write into)."""
        g, m, k = da.shape
        n = eb.shape[1]
        if out is None:
            out = cp.zeros((m, n, 2), dtype=cp.float64)
        else:
            if out.shape != (m, n) or out.dtype != cp.complex128 or not out.flags.c_contiguous:
                raise ValueError(f"out must be C-ordered complex128 of shape {(m, n)}, got {out.dtype} {out.shape}")
            out = out.view(cp.float64).reshape(m, n, 2)
            if not k:
                out.fill(0)
        self.last_path = "gaussian-int8-residues"
        if m and n and k:
            pa, pb = self._as_padded(da), self._as_padded(eb)
            re, ce = self._padded_exps(row_exps, pa.shape[1]), self._padded_exps(col_exps, pb.shape[1])
            mods = self._gaussian_tables(tables).mods
            chunks = self._k_chunks(k, 1, g, diagonal=True)
            budget = max(self._workspace_budget(), g * 128 * 128)
            bm, bn = pa.shape[1], pb.shape[1]
            while g * bm * bn > budget and (bm > 128 or bn > 128):
                bm, bn = (_blocks(bm // 2), bn) if bm >= bn else (bm, _blocks(bn // 2))
            self.last_blocks = (-(-pa.shape[1] // bm), -(-pb.shape[1] // bn))
            self.workspace_bytes = pa.nbytes + pb.nbytes + g * bm * bn
            for i0 in range(0, m, bm):
                a_blk = self._int32_operand(pa[:, i0:i0 + bm])
                for j0 in range(0, n, bn):
                    b_blk = pb[:, j0:j0 + bn]
                    residues = cp.empty((g, a_blk.shape[1], b_blk.shape[1]), dtype=cp.int8)
                    for i, (k0, k1) in enumerate(chunks):
                        self._pair_sums(a_blk, b_blk, k0, k1, residues, mods, accumulate=i > 0)
                    self._gaussian_crt(residues, re[i0:i0 + bm], ce[j0:j0 + bn], tables,
                                       out[i0:i0 + bm, j0:j0 + bn])
                    del residues
        return out.view(cp.complex128).reshape(m, n)
