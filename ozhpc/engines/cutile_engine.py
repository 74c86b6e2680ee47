"""cuTile engine: the Ozaki kernels (schemes I and II) on an NVIDIA GPU, bitwise equal to the NumPy engine.

Importing this module raises ImportError (no CuPy / cuda.tile) or RuntimeError (no
usable GPU, unknown architecture); :func:`ozhpc.engines.get_engine` turns either into a
clear "engine not available" message.

Layout: every slice array this engine makes is padded with zeros to a multiple of
``PAD`` rows and columns (so every row is 16-byte aligned, TMA applies, and the pair
kernels compile once per device instead of once per shape residue). :meth:`split` returns
the unpadded view; the engine recognises its own views and reuses the padded buffer.

Longer than 500 lines because it is the whole host side of the GPU engine behind one interface
(padding, blocking, workspaces, device tables for both schemes); the kernels themselves are one op
per module in :mod:`ozhpc.engines.cutile`.
"""
from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

try:
    import cupy as cp
except ImportError as exc:  # pragma: no cover - depends on the machine
    raise ImportError(f"CuPy is not installed ({exc})") from exc
try:
    import cuda.tile as ct  # noqa: F401  (the kernels package needs it too)
except ImportError as exc:  # pragma: no cover
    raise ImportError(f"cuda.tile is not installed ({exc})") from exc

try:
    _NDEV = cp.cuda.runtime.getDeviceCount()
except Exception as exc:  # CUDARuntimeError when there is no driver
    raise RuntimeError(f"no CUDA device ({exc})") from exc
if _NDEV < 1:
    raise RuntimeError("no CUDA device")

from . import certificate_kernels as cert_kernels
from . import cutile as ck
from . import host_copy
from .base import Engine
from .cutile_gaussian import CutileGaussian
from .digits import NO_GAP
from .kernel_tables import limb_constants, modulus_table
from .statistics import FIELDS, GAP_MAX, NORM_BITS, NONE_EXP, TINY

_DIGIT_KERNELS: dict = {}
"""CuPy kernels of the certificate's digit planes, made on first use."""

PAD = 16
"""Slice rows and k are padded to multiples of this (16 int8 = 16 bytes)."""

ACC_BLOCK_BYTES = 4 << 30
"""Largest int32 group-sum workspace of one :meth:`CutileEngine.accumulate` call (column blocks)."""


class DeviceTables(NamedTuple):
    """Scheme II's constants on one device: the residue and CRT kernels' (N, TABLE_COLS) table
    (moduli, weights), M's pieces (1, MP_COLS) and fl(1/M) (1, 1); the pair kernel's int32
    (N, MOD_COLS) modulus table."""

    table: object
    m_pieces: object
    inv_m: object
    mods: object

    @property
    def crt_args(self) -> tuple:
        """What :meth:`ozhpc.engines.cutile.launcher.Launcher.launch_crt` takes as ``tables``."""
        return self.table, self.m_pieces, self.inv_m


def _roundup(x: int, m: int = PAD) -> int:
    return max(m, -(-x // m) * m)


def _row_major(x):
    """``(src, trans)`` for a kernel that reads the rows of 2-D ``x``: ``x`` itself when it is
    C-contiguous, its transpose (``trans``) when that is, else a C-contiguous copy."""
    if x.flags.c_contiguous:
        return x, False
    if x.T.flags.c_contiguous:
        return x.T, True
    return cp.ascontiguousarray(x), False


class EventTimer:
    """Summed time of timed sections from CUDA events on the current stream: recorded in
    the loop, read once at the end, so timing never synchronises the panel loop."""

    def __init__(self):
        self.pairs, self.total = [], 0.0

    def start(self) -> None:
        self.pairs.append([cp.cuda.get_current_stream().record(), None])

    def stop(self) -> None:
        self.pairs[-1][1] = cp.cuda.get_current_stream().record()

    def seconds(self) -> float:
        if self.pairs:
            self.pairs[-1][1].synchronize()
            self.total += sum(cp.cuda.get_elapsed_time(a, b) for a, b in self.pairs) / 1e3
            self.pairs = []
        return self.total


class CutileEngine(CutileGaussian, Engine):
    """Both Ozaki schemes on one GPU with the cuTile kernels of :mod:`ozhpc.engines.cutile`.

    Parameters
    ----------
    device : int, optional
        CUDA device id (default: the current device).
    fused : bool
        In :meth:`multiply_combine_groups` (scheme I), feed the int32 group sums of the pair
        kernel straight to the combine kernel when k needs no chunking (no float64 accumulators).
    memory_fraction : float
        Fraction of free device memory the group accumulators of the unfused path may
        take; above it the engine blocks over M/N.
    config, occupancy, num_ctas :
        Tile config and pair-kernel hints (defaults: :data:`ozhpc.engines.cutile.CONFIGS` and
        :data:`ozhpc.engines.cutile.PAIR_HINTS`).
    pair_index : str
        Index width of the pair kernel: "auto" (int32 -- TMA on sm_90 -- whenever the
        offsets fit, which the engine arranges by blocking and copying operand blocks;
        else :data:`ozhpc.engines.cutile.PAIR_INDEX_FALLBACK`), or "int32" / "int64" to force one
        (benchmarks, tests).
    k_limit : int, optional
        Extra cap on (k-chunk) x (pairs) per int32 accumulator; only tests set it, to
        exercise the chunking (the digit bounds decide otherwise, see ``k_chunk``).
    """

    name = "cutile"
    xp = cp
    on_device = True
    k_align = PAD

    def __init__(self, device: int | None = None, *, fused: bool = True,
                 memory_fraction: float = 0.5, config: ck.TileConfig | None = None,
                 occupancy: int | None = None,
                 num_ctas: int | None = None, k_limit: int | None = None,
                 pair_index: str = "auto"):
        self.device = cp.cuda.Device(device if device is not None else cp.cuda.runtime.getDevice())
        cc = self.device.compute_capability
        self.capability = (int(cc[:-1]), int(cc[-1]))
        self.config = config or ck.config_for(self.capability)   # raises for unknown arch
        props = cp.cuda.runtime.getDeviceProperties(self.device.id)
        self.device_name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        self.num_sms = int(props["multiProcessorCount"])
        self.fused = fused
        self.memory_fraction = memory_fraction
        if k_limit is not None and not 0 < k_limit <= ck.K_PAIR_LIMIT:
            raise ValueError(f"k_limit must be in [1, {ck.K_PAIR_LIMIT}], got {k_limit}")
        self.k_limit = k_limit
        self.launcher = ck.Launcher(self.device.id, self.capability, self.num_sms, self.config,
                                    occupancy=occupancy, num_ctas=num_ctas, pair_index=pair_index)
        self._padded: dict[int, tuple] = {}
        self._padded_exps_of: dict[int, tuple] = {}
        self._crt_tables: dict[tuple[int, int, int], tuple] = {}
        with self.device:
            self._no_mods = cp.zeros((1, ck.MOD_COLS), dtype=cp.int32)   # scheme I's unused MODS
        self.workspace_bytes = 0
        self.last_path = None
        self.last_blocks = (1, 1)

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _stream():
        return cp.cuda.get_current_stream()

    def _remember(self, view, padded) -> None:
        key = id(view)
        self._padded[key] = (weakref.ref(view, lambda _r, k=key: self._padded.pop(k, None)), padded)

    def _as_padded(self, x):
        """The zero-padded (s, roundup(rows), roundup(k)) int8 buffer behind slices ``x``."""
        entry = self._padded.get(id(x))
        if entry is not None and entry[0]() is x:
            return entry[1]
        if x.dtype != cp.int8 or x.ndim != 3:
            raise TypeError(f"slices must be int8 (s, rows, k), got {x.dtype} {x.shape}")
        s, rows, k = x.shape
        if rows and k and rows % PAD == 0 and k % PAD == 0 and x.flags.c_contiguous:
            return x  # already the padded layout (SUMMA's panel buffers with aligned widths)
        buf = cp.zeros((s, _roundup(rows), _roundup(k)), dtype=cp.int8)
        buf[:, :rows, :k] = x
        return buf

    def _workspace_budget(self) -> int:
        """Bytes a workspace may take: ``memory_fraction`` of the free device memory (the driver's
        free memory and the blocks CuPy's pool holds free)."""
        free = cp.cuda.runtime.memGetInfo()[0] + cp.get_default_memory_pool().free_bytes()
        return int(free * self.memory_fraction)

    def _padded_exps(self, e, rows_pad: int):
        """int32 exponents ``e`` zero padded to ``rows_pad``: the buffer behind them when they are a
        prefix of one (:meth:`row_summaries` writes them so), else a padded copy, made once per
        array (the split and the combine of a product read the same exponents)."""
        entry = self._padded_exps_of.get(id(e))
        if entry is not None and entry[0]() is e and entry[1].shape[0] >= rows_pad:
            return entry[1][:rows_pad]
        out = cp.zeros(rows_pad, dtype=cp.int32)
        out[:e.shape[0]] = cp.asarray(e).astype(cp.int32, copy=False).ravel()
        if isinstance(e, cp.ndarray):
            self._remember_exps(e, out)
        return out

    def _remember_exps(self, e, padded) -> None:
        key = id(e)
        self._padded_exps_of[key] = (weakref.ref(e, lambda _r, k=key: self._padded_exps_of.pop(k, None)), padded)

    # ---------------------------------------------------------------- Engine
    def _slices_of(self, x, exps, depth: int, launch):
        """Padded int8 ``(depth, rows, cols)`` planes of the rows of ``x``, written by
        ``launch(src, trans, padded_exps, buf)`` (split or residue kernel); the unpadded view."""
        x = cp.asarray(x, dtype=cp.float64)
        if x.ndim != 2:
            raise ValueError(f"split needs a 2-D array, got shape {x.shape}")
        rows, cols = x.shape
        buf = cp.zeros((depth, _roundup(rows), _roundup(cols)), dtype=cp.int8) \
            if rows == 0 or cols == 0 or depth == 0 else \
            cp.empty((depth, _roundup(rows), _roundup(cols)), dtype=cp.int8)
        out = buf[:, :rows, :cols]
        if rows and cols and depth:
            src, trans = _row_major(x)
            # The kernel writes every element of buf (zeros where X is padded).
            launch(src, trans, self._padded_exps(exps, buf.shape[1]), buf)
        self._remember(out, buf)
        return out

    def split(self, x, exps, nslices: int):
        return self._slices_of(x, exps, nslices, lambda src, trans, e, buf: ck.split.launch(
            self._stream(), self.config, src, trans, e, buf, nslices))

    def residues(self, x, exps, tables):
        table = self._device_tables(tables).table
        return self._slices_of(x, exps, tables.count, lambda src, trans, e, buf: ck.residues.launch(
            self._stream(), self.config, src, trans, e, table, buf, tables.bits))

    def _device_tables(self, crt) -> DeviceTables:
        """The constants of ``crt`` on this device (made once per (bits, count, pieces))."""
        key = (crt.bits, crt.count, crt.pieces)
        if key not in self._crt_tables:
            table = np.zeros((crt.count, ck.TABLE_COLS), dtype=np.float64)
            table[:, :ck.WEIGHT_COL] = crt.moduli
            table[:, ck.WEIGHT_COL:ck.WEIGHT_COL + crt.pieces] = crt.weights
            table[:, ck.LIMB_COL:ck.LIMB_COL + 3] = limb_constants(crt.primes)
            m_row = np.zeros((1, ck.MP_COLS), dtype=np.float64)
            m_row[0, :crt.pieces] = crt.m_pieces
            mods = modulus_table(crt.primes)
            with self.device:
                self._crt_tables[key] = DeviceTables(cp.asarray(table), cp.asarray(m_row),
                                                     cp.full((1, 1), crt.inv_m, dtype=cp.float64), cp.asarray(mods))
        return self._crt_tables[key]

    def row_summaries(self, operands):
        """Each operand's rows by :mod:`ozhpc.engines.cutile.row_summary` (one launch each) into one
        int64 buffer, copied to the host once; the exponents are written zero padded, so the split
        and the combine take them without a copy (:meth:`_padded_exps`)."""
        xs = [cp.asarray(x, dtype=cp.float64) for x in operands]
        pads = [_roundup(x.shape[0], max(PAD, ck.SUMMARY_TILE[0])) for x in xs]
        packed = cp.empty((len(FIELDS), sum(pads)), dtype=cp.int64)
        dev, exps, cuts, off = [], [], [], 0
        for x, rows_pad in zip(xs, pads):
            rows, cols = x.shape
            out, e = packed[:, off:off + rows_pad], cp.empty(rows_pad, dtype=cp.int32)
            if rows and cols:
                src, trans = _row_major(x)
                ck.row_summary.launch(self._stream(), src, trans, out, e)
            else:   # no entries: exponent 0 and empty sums
                out.fill(0)
                e.fill(0)
            view = e[:rows]
            self._remember_exps(view, e)
            dev.append(out[:, :rows])
            exps.append(view)
            cuts.append((off, off + rows))
            off += rows_pad
        host = self.to_host(packed) if xs else None
        return [host[:, lo:hi] for lo, hi in cuts], dev, exps

    def magnitude_stats(self, x, exps):
        x = cp.asarray(x, dtype=cp.float64)
        if x.shape[0] == 0 or x.shape[1] == 0:
            return super().magnitude_stats(x, exps)
        return cert_kernels.magnitude_sums(cp, x, exps, NORM_BITS, GAP_MAX)

    def representation_errors(self, x, exps, steps):
        if x.shape[0] == 0 or x.shape[1] == 0:
            return super().representation_errors(x, exps, steps)
        return cert_kernels.representation_error_max(cp, x, exps, *steps, TINY)

    def inner_stats(self, rows):
        if rows.shape[0] == 0 or rows.shape[1] == 0:
            return super().inner_stats(rows)
        return cert_kernels.inner_stats(cp, rows, NONE_EXP)

    def entry_verdicts(self, c, row_exps, col_exps, row, col, lower, support, constants):
        """The certificate's verdicts in one pass (:func:`.certificate_kernels.entry_verdicts`; the
        row sizes converted inside it)."""
        return cert_kernels.entry_verdicts(cp, c, row_exps, col_exps, row, col, lower, support, constants,
                                           self.to_host, NORM_BITS)

    def complex_entry_verdicts(self, c, row_exps, col_exps, row, col, lower, support, constants):
        """Both components' verdicts in one pass over the complex C and the digit groups."""
        return cert_kernels.entry_verdicts(cp, c, row_exps, col_exps, row, col, lower, support, constants,
                                           self.to_host, NORM_BITS, components=2)

    def entry_gaps(self, x, exps):
        """Gap codes by :mod:`ozhpc.engines.cutile.gaps`, columns padded with NO_GAP to a
        multiple of ``GAP_COLS`` (the count kernel's tiles divide it)."""
        x = cp.asarray(x, dtype=cp.float64)
        rows, cols = x.shape
        out = cp.empty((rows, _roundup(cols, ck.GAP_COLS)), dtype=cp.int8)
        if rows == 0:
            return out
        if cols == 0:
            out.fill(NO_GAP)
            return out
        src, trans = _row_major(x)
        e = cp.ascontiguousarray(cp.asarray(exps).astype(cp.int32, copy=False).ravel())
        ck.gaps.launch(self._stream(), self.config, src, trans, e, out)
        return out

    def count_gaps_le(self, gaps, limits):
        limits = cp.asarray(limits)
        width = limits.shape[1]
        if gaps.shape[1] % ck.GAP_COLS or not gaps.flags.c_contiguous or width & (width - 1) \
                or width > ck.COUNT_MAX_FIELDS:
            return super().count_gaps_le(gaps, limits)   # not this engine's layout
        rows, cols = gaps.shape
        if rows == 0:
            return cp.zeros(limits.shape, dtype=cp.int64)
        # Ascending limits are the caller's promise (Engine.count_gaps_le), not checked here: the
        # check synchronised the device in every counting pass (0.1-0.3 ms of a 0.7-2 ms median
        # search at n = 4096-16384 on the H200, bench/results/gpu_gemm_h200_2026-12-01_split.md).
        lim = cp.ascontiguousarray(limits.astype(cp.int32, copy=False))
        words = gaps.view(cp.int32)   # four codes per word: word loads in the kernel
        parts = self.launcher.column_parts(rows, words.shape[1], ck.COUNT_TILE, ck.COUNT_MAX_TILES)
        out = cp.empty((parts, rows, width), dtype=cp.int32)
        ck.count.launch(self._stream(), words, lim, out)
        return out.sum(axis=0, dtype=cp.int64)

    def _k_chunks(self, k: int, slices: int, ngroups: int, diagonal: bool = False):
        kc = ck.k_chunk(slices, ngroups, self.k_limit, PAD, diagonal)
        return [(k0, min(k, k0 + kc)) for k0 in range(0, k, kc)]

    def _int32_operand(self, x):
        """``x``, or a contiguous copy of it when only the copy has int32 offsets (a block
        or k-chunk of a large slice buffer keeps the parent's strides). The copy costs one
        pass over int8 data, against ``2 * rows * cols * k`` pair-kernel operations."""
        if self.launcher.pair_index == "int64" or ck.fits_int32(x) or x.size > ck.INT32_INDEX_LIMIT:
            return x
        return cp.ascontiguousarray(x)

    def _pair_sums(self, pa, pb, k0: int, k1: int, sums, mods=None, accumulate: bool = False) -> None:
        """int32 group sums of padded slices over k in [k0, k1) (k0 a multiple of PAD), added
        to ``sums`` with ``accumulate``.

        ``mods`` (scheme II, the int32 modulus table): ``sums`` is int8, product l reduced to
        its balanced residue modulo modulus l. The products are independent, so they are
        launched in ranges (every modulus of a range in one grid) whose views keep int32 offsets
        (no operand copies, no M/N blocks), of at most ``diagonal_launch_groups`` when set.
        Scheme I: ``pair_launch_groups`` groups per launch."""
        a, b = pa[:, :, k0:_roundup(k1)], pb[:, :, k0:_roundup(k1)]
        if mods is None:   # scheme I: every launch reads all slices, group ranges from g0
            step = self.config.pair_launch_groups or sums.shape[0]
            a, b = self._int32_operand(a), self._int32_operand(b)
            for g0 in range(0, sums.shape[0], step):
                self.launcher.launch_pair(self._stream(), a, b, sums[g0:g0 + step], self._no_mods,
                                          accumulate=accumulate, first_group=g0)
            return
        step = self._group_step(a, b, sums)
        if self.config.diagonal_launch_groups:
            step = min(step, self.config.diagonal_launch_groups)
        for g0 in range(0, sums.shape[0], step):
            g = slice(g0, g0 + step)
            self.launcher.launch_pair(self._stream(), self._int32_operand(a[g]), self._int32_operand(b[g]),
                                      sums[g], mods[g], diagonal=True, accumulate=accumulate)

    def _group_step(self, *arrays) -> int:
        """Most leading-axis entries (groups) per launch whose views of ``arrays`` all have
        int32 offsets (at least 1; all of them when the int64 kernel is forced)."""
        step = arrays[0].shape[0]
        if self.launcher.pair_index == "int64":
            return max(1, step)
        for x in arrays:
            plane = abs(x.strides[0]) // x.itemsize
            inner = sum((d - 1) * abs(st) for d, st in zip(x.shape[1:], x.strides[1:])) // x.itemsize
            if plane:
                step = min(step, (ck.INT32_INDEX_LIMIT - 1 - inner) // plane + 1)
        return max(1, step)

    def accumulate_groups(self, acc, da, eb) -> None:
        """``acc[g] +=`` the int32 group sums, blocked over columns."""
        self._accumulate(acc, da, eb)

    def accumulate_moduli(self, acc, da, eb, tables) -> None:
        """``acc`` is the int8 residue array of :meth:`zeros_moduli`; the pair kernel adds the
        products into it and reduces in place (no workspace)."""
        self._accumulate(acc, da, eb, tables)

    def _accumulate(self, acc, da, eb, crt=None) -> None:
        """Both schemes share the pair kernel (``crt``: its diagonal, modular mode)."""
        d, m, n = acc.shape
        if da.shape[1] != m or eb.shape[1] != n or da.shape[2] != eb.shape[2] or da.shape[0] != eb.shape[0]:
            raise ValueError(f"shapes do not match: acc {acc.shape}, da {da.shape}, eb {eb.shape}")
        want = ("int8",) if crt is not None else ("float64", "int32")
        if acc.dtype.name not in want or (crt is not None and acc.strides[-1] != 1):
            raise TypeError(f"acc must come from {'zeros_moduli' if crt is not None else 'zeros_groups'} "
                            f"({' or '.join(want)}"
                            f"{', rows contiguous' if crt is not None else ''}), got {acc.dtype} "
                            f"with strides {acc.strides}")
        s, _, k = da.shape
        if d == 0 or m == 0 or n == 0 or k == 0:
            return
        pa, pb = self._as_padded(da), self._as_padded(eb)
        if crt is not None:
            mods = self._device_tables(crt).mods
            for k0, k1 in self._k_chunks(k, s, d, diagonal=True):
                self._pair_sums(pa, pb, k0, k1, acc, mods, accumulate=True)
            return
        chunks = self._k_chunks(k, s, d)
        if len(chunks) == 1 and acc.dtype == cp.int32 and acc.flags.c_contiguous and n % 4 == 0 \
                and ck.fits_int32(acc):
            # int32 accumulators whose rows are 16-byte aligned: the pair kernel adds into them
            # itself (no workspace, no pass over the sums; zeros_groups made them int32 only
            # where the whole k fits, so every partial sum is exact)
            self._pair_sums(pa, pb, *chunks[0], acc, accumulate=True)
            return
        # int32 group sums, blocked over columns so the workspace stays small (SUMMA panels:
        # acc is (d, m, n) for the whole local C, the sums only need one column block).
        mp, np_ = pa.shape[1], pb.shape[1]
        budget = max(min(ACC_BLOCK_BYTES, self._workspace_budget()), 4 * d * mp * 128)
        nblocks = -(-4 * d * mp * np_ // budget)
        bn = np_ if nblocks <= 1 else _roundup(-(-np_ // nblocks), 128)  # even column blocks
        sums = cp.empty((d, mp, min(bn, np_)), dtype=cp.int32)
        for j0 in range(0, n, bn):
            j1 = min(n, j0 + bn)
            jb = _roundup(j1 - j0)
            blk = sums if jb == sums.shape[2] else cp.empty((d, mp, jb), dtype=cp.int32)  # contiguous
            for k0, k1 in chunks:
                self._pair_sums(pa, pb[:, j0:j0 + jb], k0, k1, blk)
                # int32 -> float64 exactly, or int32 += int32 when zeros_accumulator
                # proved the total fits (the integer sums stay exact either way)
                acc[:, :, j0:j1] += blk[:, :m, :j1 - j0]

    def combine_groups(self, acc, row_exps, col_exps):
        return self._combine(acc, row_exps, col_exps)

    def combine_moduli(self, acc, row_exps, col_exps, tables):
        return self._combine(acc, row_exps, col_exps, tables)

    def _combine(self, acc, row_exps, col_exps, crt=None):
        d, m, n = acc.shape
        out = cp.empty((m, n), dtype=cp.float64)
        if m == 0 or n == 0:
            return out
        if acc.dtype not in ((cp.float64, cp.int32, cp.int8) if crt is not None else (cp.float64, cp.int32)):
            acc = acc.astype(cp.float64)
        if acc.strides[-1] != acc.itemsize:   # the kernels take any row stride
            acc = cp.ascontiguousarray(acc)
        re = cp.ascontiguousarray(cp.asarray(row_exps).astype(cp.int32, copy=False).ravel())
        ce = cp.ascontiguousarray(cp.asarray(col_exps).astype(cp.int32, copy=False).ravel())
        if crt is not None:
            self.launcher.launch_crt(self._stream(), acc, re, ce, self._device_tables(crt).crt_args, out, crt.shift,
                                     crt.pieces)
        else:
            ck.combine.launch(self._stream(), self.config, acc, re, ce, out)
        return out

    def multiply_combine_groups(self, da, eb, ngroups: int, row_exps, col_exps):
        return self._multiply_combine(da, eb, ngroups, row_exps, col_exps)

    def multiply_combine_moduli(self, da, eb, row_exps, col_exps, tables):
        return self._multiply_combine(da, eb, tables.count, row_exps, col_exps, tables)

    def _multiply_combine(self, da, eb, ngroups: int, row_exps, col_exps, crt=None):
        """Pair GEMMs over the whole k, then the combine; the same bits as the three steps.

        Scheme I: when k fits one int32 chunk (``fused``), the pair kernel's int32 group sums
        go straight to the combine kernel (no float64 accumulators, half the workspace);
        otherwise float64 accumulators take the chunk sums. Scheme II (``crt``): the products
        land as int8 residues, later k chunks adding into them, and go to the CRT kernel.
        Either way the work is blocked over M/N so the workspace stays within
        ``memory_fraction`` of free memory.
        """
        s, m, k = da.shape
        n = eb.shape[1]
        if m == 0 or n == 0 or k == 0:
            self.workspace_bytes = 0
            return cp.zeros((m, n), dtype=cp.float64)
        pa, pb = self._as_padded(da), self._as_padded(eb)
        mp, np_ = pa.shape[1], pb.shape[1]
        re = self._padded_exps(row_exps, mp)
        ce = self._padded_exps(col_exps, np_)
        diagonal = crt is not None
        chunks = self._k_chunks(k, s, ngroups, diagonal)
        single = self.fused and len(chunks) == 1
        if diagonal:
            self.last_path, per_elem = "int8-residues", ngroups
        else:
            self.last_path = "int32-sums" if single else "float64-acc"
            per_elem = 4 * ngroups if single else 12 * ngroups
        budget = max(self._workspace_budget(), per_elem * 128 * 128)
        # Blocks small enough for the int32-indexed (TMA) pair kernel too: an int32 sums
        # block and a contiguous copy of an operand block (see _int32_operand) must each
        # have fewer than 2**31 elements.
        # Scheme II launches group ranges (_pair_sums), so only one group's plane must fit.
        depth, width = (1, 1) if diagonal else (s, ngroups)
        limit, cap_m, cap_n = 2**63, mp, np_
        if self.launcher.pair_index != "int64":
            limit = ck.INT32_INDEX_LIMIT
            rows_cap = max(128, limit // (depth * _roundup(chunks[0][1] - chunks[0][0])) // 128 * 128)
            cap_m = mp if ck.fits_int32(pa[:depth]) else rows_cap
            cap_n = np_ if ck.fits_int32(pb[:depth]) else rows_cap
        bm, bn = mp, np_
        while (per_elem * bm * bn > budget or width * bm * bn >= limit
               or bm > cap_m or bn > cap_n) and (bm > 128 or bn > 128):
            if bm >= bn:
                bm = _roundup(bm // 2, 128)
            else:
                bn = _roundup(bn // 2, 128)
        self.last_blocks = (-(-mp // bm), -(-np_ // bn))
        self.workspace_bytes = pa.nbytes + pb.nbytes + per_elem * bm * bn
        block = dict(chunks=chunks, single=single, ngroups=ngroups, crt=crt)
        if (bm, bn) == (mp, np_) and (mp, np_) == (m, n):
            return self._block(pa, pb, re, ce, **block)
        out = cp.empty((m, n), dtype=cp.float64)
        for i0 in range(0, m, bm):
            i1 = min(m, i0 + bm)
            ib = _roundup(i1 - i0)
            a_blk = self._int32_operand(pa[:, i0:i0 + ib])  # copied (if at all) once per row block
            for j0 in range(0, n, bn):
                j1 = min(n, j0 + bn)
                jb = _roundup(j1 - j0)
                c = self._block(a_blk, pb[:, j0:j0 + jb], re[i0:i0 + ib], ce[j0:j0 + jb], **block)
                out[i0:i1, j0:j1] = c[:i1 - i0, :j1 - j0]
                del c
        return out

    def _block(self, pa, pb, re, ce, *, chunks, single: bool, ngroups: int, crt=None):
        """C of one padded M/N block (shape (pa rows, pb rows))."""
        if crt is not None:
            residues = cp.empty((ngroups, pa.shape[1], pb.shape[1]), dtype=cp.int8)
            mods = self._device_tables(crt).mods
            for i, (k0, k1) in enumerate(chunks):
                self._pair_sums(pa, pb, k0, k1, residues, mods, accumulate=i > 0)
            return self._combine(residues, re, ce, crt)
        sums = cp.empty((ngroups, pa.shape[1], pb.shape[1]), dtype=cp.int32)
        if single:
            self._pair_sums(pa, pb, *chunks[0], sums)
            return self._combine(sums, re, ce)
        acc = cp.zeros(sums.shape, dtype=cp.float64)
        for k0, k1 in chunks:
            self._pair_sums(pa, pb, k0, k1, sums)
            acc += sums
        del sums
        return self._combine(acc, re, ce)

    def zeros_moduli(self, tables, m: int, n: int):
        """int8 residues (the pair kernel reduces each product modulo its modulus in place),
        rows padded to 16 bytes (TMA), as the slices."""
        return cp.zeros((tables.count, _roundup(m), _roundup(n)), dtype=cp.int8)[:, :m, :n]

    def magnitudes(self, x, exps, upper: bool = False):
        """:func:`~ozhpc.engines.digits.magnitude_digits` / ``support_digits`` in one CuPy pass
        (the same roundings: an exact scaling, one explicitly rounded subtraction, rint / ceil; a
        support digit is at least 1 wherever x != 0, also when the scaling underflows)."""
        key = ("support" if upper else "magnitude")
        if key not in _DIGIT_KERNELS:
            expr = ("fmax(ceil(ldexp(fabs(x), (int)(6 - e))), x != 0.0 ? 1.0 : 0.0)" if upper
                    else "rint(__dsub_rn(ldexp(fabs(x), (int)(7 - e)), 0.5))")
            _DIGIT_KERNELS[key] = cp.ElementwiseKernel("float64 x, E e", "int8 d", f"d = (signed char){expr}",
                                                       f"ozhpc_{key}_digits")
        x = cp.asarray(x, dtype=cp.float64)
        rows, cols = x.shape
        shape = (1, _roundup(rows), _roundup(cols))   # the pair kernel's layout: zeros where padded
        buf = cp.empty(shape, dtype=cp.int8) if shape[1:] == (rows, cols) else cp.zeros(shape, dtype=cp.int8)
        out = buf[:, :rows, :cols]
        if rows and cols:
            _DIGIT_KERNELS[key](x, cp.asarray(exps).reshape(-1, 1), out[0])
        self._remember(out, buf)
        return out

    def group_sums(self, da, eb, ngroups: int = 1):
        """int32 sums straight from the pair kernel (no zeros to add into) when k fits one chunk."""
        s, m, k = da.shape
        n = eb.shape[1]
        if not (m and n and k) or len(self._k_chunks(k, s, ngroups)) != 1:
            return super().group_sums(da, eb, ngroups)
        pa, pb = self._as_padded(da), self._as_padded(eb)
        sums = cp.empty((ngroups, pa.shape[1], pb.shape[1]), dtype=cp.int32)
        self._pair_sums(pa, pb, 0, k, sums)
        return sums[:, :m, :n]

    def zeros_groups(self, ngroups: int, m: int, n: int, *, slices: int | None = None,
                     k: int | None = None):
        """int32 accumulators when ``k`` (the total) fits one int32 chunk for ``slices``
        (``k * group_product_bound < 2**31``: every partial sum is exact in int32), else
        float64. Narrow types cut the memory and the accumulation traffic of SUMMA's panel
        loop; the combine kernel reads either, with the same bits."""
        if k is not None and slices is not None and k <= ck.k_chunk(slices, ngroups, self.k_limit, PAD):
            return cp.zeros((ngroups, m, n), dtype=cp.int32)
        return cp.zeros((ngroups, m, n), dtype=cp.float64)

    def asarray(self, x):
        """On this device; a large NumPy array page-locked for the copy (:mod:`.host_copy`)."""
        with self.device:
            if isinstance(x, np.ndarray) and x.nbytes >= host_copy.MIN_BYTES:
                return host_copy.upload(x, self._stream())
            return cp.asarray(x)

    def to_host(self, x):
        if isinstance(x, cp.ndarray) and x.nbytes >= host_copy.MIN_BYTES:
            with self.device:
                return host_copy.download(x, self._stream())
        return cp.asnumpy(x)

    def synchronize(self) -> None:
        self._stream().synchronize()

    def timer(self) -> "EventTimer":
        return EventTimer()

    def describe(self) -> dict:
        from dataclasses import asdict
        return {
            "name": self.name,
            "device": self.device_name,
            "device_id": self.device.id,
            "compute_capability": f"{self.capability[0]}.{self.capability[1]}",
            "multiprocessors": self.num_sms,
            "tile_config": asdict(self.config),
            "pair_hints": {hint: getattr(self.launcher, hint)
                           or ", ".join(f"{target}: {v}" for target, v in by_target.items())
                           for hint, by_target in ck.PAIR_HINTS.items()},
            "pair_index": self.launcher.pair_index,
            "last_pair_index": self.launcher.last_pair_index,
            "fused": self.fused,
            "workspace_bytes": self.workspace_bytes,
            "last_path": self.last_path,
            "last_blocks": self.last_blocks,
        }
