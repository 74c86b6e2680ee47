"""SUMMA with the Ozaki scheme: ``C = alpha * op(A) @ op(B) + beta * C``, C stationary.

Layouts (``P x Q`` grid, C in ``MB x NB`` blocks, k-panels of width ``KB``):

* op(A), ``m x k``: rows like C's rows (MB over P), k in KB blocks over the process columns;
* op(B)^T, ``n x k`` (B's rows along k, k-contiguous as the engines want them): rows like
  C's columns (NB over Q), k in KB blocks over the process *rows* -- a
  :class:`DistMatrix` with ``transposed_grid=True``;
* C, ``m x n``: MB x NB over P x Q.

Steps (design.md, "SUMMA with Ozaki"):

1. Row scales of op(A): local row maxima, MAX-allreduce over the process row; column
   scales of op(B) likewise over the process column. Exact and order-free.
2. Slice count or bits ("auto"): per-row counts of exponent gaps SUM-allreduced along the same
   communicators (two passes of 8 limits find each row's median gap), then a MAX over the grid (with the "any
   non-finite input" flag in the same call). Every rank derives the same plan (scheme II: the
   moduli follow from the bits and the global k).
3. Each rank splits its own blocks once into int8 slices -- scheme I digits or scheme II
   residues, :mod:`ozhpc.ozaki.plan` -- (and int8 class codes when some input is non-finite
   anywhere).
4. For each k-panel t: the owner column broadcasts its A slice panel along the process
   row, the owner row its B slice panel along the process column (non-blocking: panel
   t+1 is posted before panel t is multiplied), and every rank adds the slice-pair
   products into its group accumulators -- exactly, so neither the panel width nor the
   grid can change a bit of the result.
5. One fixed-order combine (scheme II: the CRT reconstruction) per rank, special values,
   alpha/beta.

Memory per rank: its pieces of op(A), op(B)^T and C, their slices, the accumulators and
two panel buffers per operand.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from ..engines import get_engine
from ..errors import InputError
from ..ozaki import special
from ..ozaki.gemm import GemmInfo, Stopwatch, check_k, epilogue, make_info, op_rows
from ..ozaki.plan import make_plan
from ..ozaki.scales import exponents, spread_bits
from .distmatrix import DistMatrix
from .grid import ProcessGrid
from .layout import BlockCyclic
from .transport import Transport, TransportUnavailable, choose_transport, get_transport, is_gpu_engine

GPU_PANEL = 4096
"""Default k-panel width with a GPU engine: the pair kernel needs long k to run near its peak,
and any width gives the same bits. Smaller when k / max(P, Q) is smaller (see :func:`default_kb`)."""


CPU_PANEL = 1024
"""Default k-panel width with the NumPy engine: each panel is one pass of BLAS calls plus one pass
over the accumulators, so narrow panels (a small block size) cost many passes for the same work;
wider than ~1024 gains little and costs panel-buffer memory (bench/results/block_panel_cpu_*.md)."""


def default_kb(k: int, nb: int, dims: tuple[int, int], gpu: bool) -> int:
    """SUMMA's k-panel width when none is given: ``min(1024 on CPUs / 4096 on GPUs, k / max(P, Q))``
    rounded up to a multiple of 16 (the cuTile engine's padding, so panels need no re-padding).
    Never tied to the block size NB; any width gives the same bits."""
    share = -(-max(k, 1) // max(dims))
    return max(16, min(GPU_PANEL if gpu else CPU_PANEL, -(-share // 16) * 16))


FAIL_ENV = "OZHPC_TEST_FAIL_RANK"
"""Test hook: the rank named here raises in the middle of the panel loop (failure tests only)."""


@dataclass
class SummaInfo(GemmInfo):
    """:class:`GemmInfo` plus what the distribution did on this rank."""

    grid: tuple = (1, 1)
    block: tuple = (1, 1)
    kb: int = 1
    panels: int = 0
    transport: str = ""
    transport_reason: str = ""
    comm_seconds: float = 0.0
    post_seconds: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0
    messages: int = 0
    mpi_calls: int = 0
    extra: dict = field(default_factory=dict)


class Summa:
    """A distributed Ozaki product plan: layouts, engine and transport set up once.

    Parameters
    ----------
    grid : ProcessGrid
    m, n, k : int
        Global sizes of op(A) (m x k), op(B) (k x n) and C (m x n).
    block : (MB, NB)
        Block size of C (and of op(A)'s rows / op(B)'s columns).
    kb : int, optional
        Width of a k-panel and k-block size of op(A) and op(B) (default: NB with the NumPy
        engine, :func:`default_kb` with a GPU engine). Never changes the bits of C.
    engine : str or Engine
        By name, a GPU engine is created after this rank selected its own GPU
        (:func:`ozhpc.parallel.localrank.bind_device`: node-local rank % visible devices).
    transport : str or Transport
        ``"auto"``, ``"nccl"``, ``"cuda-mpi"`` or ``"mpi-host"`` (:func:`get_transport`).
    slices, groups, scheme, bits : as in :func:`ozhpc.gemm`
    on_panel : callable(done, total), optional
        Called on this rank after each panel's products are accumulated (pass it on
        rank 0 only to show progress; it must be cheap).

    Call it with op(A) and op(B)^T as :class:`DistMatrix` in :attr:`a_layout` /
    :attr:`bt_layout` (see :meth:`distribute` for global arrays, or
    :mod:`ozhpc.io.distio` for HDF5); it returns C as a DistMatrix in :attr:`c_layout`
    and keeps a :class:`SummaInfo` in :attr:`info`.
    """

    def __init__(self, grid: ProcessGrid, m: int, n: int, k: int, *, block=(256, 256), kb: int | None = None,
                 engine="numpy", transport="auto", slices="auto", groups="auto", on_panel=None,
                 transport_options: dict | None = None, scheme="ozaki1", bits="auto"):
        mb, nb = (block, block) if isinstance(block, int) else (int(block[0]), int(block[1]))
        if isinstance(engine, str) and engine != "numpy":
            from .localrank import bind_device
            bind_device(grid.comm)  # this rank's GPU, before the engine picks the current device
        self.engine = get_engine(engine)
        agree_on_setup(grid, self.engine, transport)
        kb = default_kb(k, nb, grid.dims, is_gpu_engine(self.engine)) if kb is None else int(kb)
        if min(mb, nb, kb) < 1:
            raise ValueError(f"block sizes must be positive, got {mb}x{nb} and kb={kb}")
        if min(m, n, k) < 0:
            raise ValueError(f"sizes must be >= 0, got m={m} n={n} k={k}")
        self.grid = grid
        self.m, self.n, self.k = int(m), int(n), int(k)
        self.mb, self.nb, self.kb = mb, nb, kb
        p, q = grid.dims
        self.a_layout = BlockCyclic(m, k, mb, kb, p, q)
        self.bt_layout = BlockCyclic(n, k, nb, kb, q, p)
        self.c_layout = BlockCyclic(m, n, mb, nb, p, q)
        self.transport = get_transport(transport, grid, self.engine, **(transport_options or {}))
        self.slices, self.groups = slices, groups
        self.scheme, self.bits = scheme, bits
        self.on_panel = on_panel
        self.info: SummaInfo | None = None

    @property
    def panels(self) -> int:
        return -(-self.k // self.kb)

    # -- distribution helpers (tests, small problems) --------------------------------------
    def distribute(self, A, B, C=None, *, transa=False, transb=False):
        """op(A), op(B)^T (and C) as DistMatrix from global arrays every rank holds."""
        a = DistMatrix.from_global(self.grid, op_rows(np.asarray(A), transa, True), self.a_layout)
        bt = DistMatrix.from_global(self.grid, op_rows(np.asarray(B), transb, False), self.bt_layout,
                                    transposed_grid=True)
        c = None if C is None else DistMatrix.from_global(self.grid, C, self.c_layout)
        return a, bt, c

    # -- the product --------------------------------------------------------------------------
    def __call__(self, a: DistMatrix, bt: DistMatrix, c: DistMatrix | None = None, *,
                 alpha: float = 1.0, beta: float = 0.0) -> DistMatrix:
        if a.layout != self.a_layout or bt.layout != self.bt_layout or not bt.transposed_grid:
            raise ValueError("operands are not in this plan's layouts (Summa.a_layout / bt_layout)")
        if beta != 0.0 and (c is None or c.layout != self.c_layout):
            raise ValueError("beta != 0 needs C in Summa.c_layout")
        eng, xp, g = self.engine, self.engine.xp, self.grid
        host_out = isinstance(a.local, np.ndarray)
        clock = Stopwatch(eng)
        a_loc = eng.asarray(a.local).astype(xp.float64, copy=False)
        b_loc = eng.asarray(bt.local).astype(xp.float64, copy=False)

        # 1-2. global scales, plan and special-value flag; identical on every rank.
        (amax, bad_a), (bmax, bad_b) = eng.row_stats(a_loc), eng.row_stats(b_loc)
        e = exponents(xp, eng.asarray(_allreduce(g.row_comm, eng.to_host(amax), MPI.MAX)))
        f = exponents(xp, eng.asarray(_allreduce(g.col_comm, eng.to_host(bmax), MPI.MAX)))
        local = np.zeros(2, dtype=np.int64)
        if (self.bits if self.scheme == "ozaki2" else self.slices) == "auto":
            def summed_over(comm):
                return lambda counts: eng.asarray(_allreduce(comm, eng.to_host(counts), MPI.SUM))
            local[0] = max(spread_bits(xp, eng.entry_gaps(a_loc, e), summed_over(g.row_comm), eng.count_gaps_le),
                           spread_bits(xp, eng.entry_gaps(b_loc, f), summed_over(g.col_comm), eng.count_gaps_le))
        local[1] = bad_a or bad_b
        spread, nonfinite = (int(v) for v in _allreduce(g.comm, local, MPI.MAX))
        nonfinite = bool(nonfinite)
        plan = make_plan(self.slices, self.groups, spread, scheme=self.scheme, bits=self.bits, k=self.k)
        check_k(plan, self.k)
        clock.lap("scales")

        # 3. split own blocks once.
        s = plan.slices
        da = plan.split(eng, special.finite_part(xp, a_loc, bad_a), e)
        eb = plan.split(eng, special.finite_part(xp, b_loc, bad_b), f)
        ca = special.classify(xp, a_loc) if nonfinite else None
        cb = special.classify(xp, b_loc) if nonfinite else None
        del a_loc, b_loc
        clock.lap("split")

        # 4. panel loop.
        m_loc, n_loc = self.c_layout.local_shape(*g.coords)
        acc = plan.zeros(eng, m_loc, n_loc, self.k)
        counts = special.zeros_counts(xp, m_loc, n_loc) if nonfinite else None
        depth = s + (1 if nonfinite else 0)
        nk = self.panels
        bufs_a = [xp.empty(depth * m_loc * min(self.kb, self.k), dtype=xp.int8) for _ in range(min(2, nk))]
        bufs_b = [xp.empty(depth * n_loc * min(self.kb, self.k), dtype=xp.int8) for _ in range(min(2, nk))]
        p, q = g.dims

        def post(t):
            lo = t * self.kb
            w = min(self.kb, self.k - lo)
            pa = self._post_one(da, ca, bufs_a[t % 2], m_loc, w, (t // q) * self.kb,
                                self.a_layout.cols.block_owner(t), g.mycol, "row")
            pb = self._post_one(eb, cb, bufs_b[t % 2], n_loc, w, (t // p) * self.kb,
                                self.bt_layout.cols.block_owner(t), g.myrow, "col")
            return pa, pb

        fail_here = os.environ.get(FAIL_ENV, "") == str(MPI.COMM_WORLD.Get_rank())
        wait_s = 0.0
        timer = _ComputeTimer(eng)  # time of the panel products alone (GPU events on a GPU)
        pending = post(0) if nk else None
        for t in range(nk):
            t0 = MPI.Wtime()
            pa, pb = pending[0].wait(), pending[1].wait()
            wait_s += MPI.Wtime() - t0
            if t + 1 < nk:
                pending = post(t + 1)
            if fail_here and t == nk // 2:
                raise RuntimeError(f"simulated failure on rank {g.rank} at panel {t} ({FAIL_ENV})")
            timer.start()
            plan.accumulate(eng, acc, pa[:s], pb[:s])
            if nonfinite:
                special.accumulate_counts(xp, counts, pa[s], pb[s])
            timer.stop()
            self.transport.progress()
            if self.on_panel is not None:
                self.on_panel(t + 1, nk)
        del bufs_a, bufs_b, da, eb, ca, cb
        clock.lap("multiply")

        # 5. one combine, special values, alpha/beta.
        ab = plan.combine(eng, acc, e, f)
        del acc
        if nonfinite:
            ab = special.apply_counts(xp, ab, counts)
        c_loc = None if beta == 0.0 else eng.asarray(c.local).astype(xp.float64, copy=False)
        out = epilogue(xp, ab, alpha, beta, c_loc)
        clock.lap("combine")
        if host_out:
            out = eng.to_host(out)

        seconds = dict(clock.seconds)
        seconds["comm_wait"] = wait_s
        seconds["compute"] = timer.seconds()
        stats = self.transport.stats()
        seconds["comm"] = stats["comm_seconds"]
        # Communication the panel loop could not hide: loop time beyond the products' own time.
        seconds["comm_exposed"] = max(0.0, seconds["multiply"] - seconds["compute"])
        base = make_info(plan, eng, self.m, self.n, self.k, spread, nonfinite, seconds)
        self.info = SummaInfo(**base.to_dict(), grid=tuple(g.dims), block=(self.mb, self.nb), kb=self.kb,
                              panels=nk, transport_reason=getattr(self.transport, "reason", ""), **stats)
        return DistMatrix(g, self.c_layout, out)

    def _post_one(self, slices, codes, flat, rows, w, offset, owner, me, axis):
        """Start the broadcast of one operand's panel; returns a Pending whose wait() gives (depth, rows, w)."""
        s = slices.shape[0]
        depth = s + (0 if codes is None else 1)
        buf = flat[:depth * rows * w].reshape(depth, rows, w)
        if me == owner:  # always true on a 1-rank row/column: the transport then just hands buf back
            buf[:s] = slices[:, :, offset:offset + w]
            if codes is not None:
                buf[s] = codes[:, offset:offset + w]
        return self.transport.ibcast(buf, owner, axis)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> "Summa":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def overlap_fraction(seconds: dict) -> float | None:
    """Share of the communication time hidden behind the products: ``1 - exposed / comm``
    (None when nothing was communicated). ``exposed`` = panel-loop time minus product time."""
    comm = seconds.get("comm", 0.0)
    if comm <= 0.0:
        return None
    return max(0.0, min(1.0, 1.0 - seconds.get("comm_exposed", 0.0) / comm))


class _ComputeTimer:
    """Summed time of the panel products: CUDA events on the engine's stream for a GPU
    engine (read once at the end, no synchronisation in the loop), host time otherwise."""

    def __init__(self, engine):
        self.gpu = is_gpu_engine(engine)
        self.xp = engine.xp
        self.pairs, self.total, self._t = [], 0.0, 0.0

    def start(self):
        if self.gpu:
            self.pairs.append([self.xp.cuda.get_current_stream().record(), None])
        else:
            self._t = MPI.Wtime()

    def stop(self):
        if self.gpu:
            self.pairs[-1][1] = self.xp.cuda.get_current_stream().record()
        else:
            self.total += MPI.Wtime() - self._t

    def seconds(self) -> float:
        if self.gpu and self.pairs:
            self.pairs[-1][1].synchronize()
            self.total += sum(self.xp.cuda.get_elapsed_time(a, b) for a, b in self.pairs) / 1e3
            self.pairs = []
        return self.total


def agree_on_setup(grid: ProcessGrid, engine, transport) -> None:
    """Every rank must run the same engine and transport (layouts and broadcasts depend on them).

    "auto" decides per rank (a node without a working GPU falls back to numpy, one without
    NCCL to MPI): compare the choices of all ranks and raise the same InputError on every
    rank when they differ or when one rank cannot set up its transport -- no rank is left
    waiting in a broadcast the others never post.
    """
    try:
        name = transport.name if isinstance(transport, Transport) else choose_transport(transport, grid, engine)[0]
        mine = (engine.name, name, None)
    except (TransportUnavailable, ValueError) as exc:
        mine = (engine.name, None, str(exc))
    everyone = grid.comm.allgather(mine)
    failed = [(r, err) for r, (_, _, err) in enumerate(everyone) if err]
    if failed:
        raise InputError(f"rank {failed[0][0]}: {failed[0][1]}")
    first = everyone[0][:2]
    odd = next((r for r, pick in enumerate(everyone) if pick[:2] != first), None)
    if odd is not None:
        raise InputError(f"ranks picked different engines or transports: rank 0 uses engine {first[0]} "
                         f"and transport {first[1]}, rank {odd} engine {everyone[odd][0]} and transport "
                         f"{everyone[odd][1]}; give --engine and --transport explicitly, or fix the nodes "
                         f"where the GPU engine or NCCL is unavailable (ozhpc info under mpiexec shows them)")


def _allreduce(comm, array, op):
    """Allreduce of a NumPy array into a new array (the input is left alone)."""
    buf = np.ascontiguousarray(array).copy()
    if comm.Get_size() > 1 and buf.size:
        comm.Allreduce(MPI.IN_PLACE, buf, op=op)
    return buf


def dist_gemm(grid: ProcessGrid, A, B, C=None, *, alpha=1.0, beta=0.0, transa=False, transb=False,
              block=(64, 64), kb=None, slices="auto", groups="auto", engine="numpy", transport="auto",
              on_panel=None, info=False, scheme="ozaki1", bits="auto"):
    """Distributed product of global arrays that EVERY rank holds (tests, small problems).

    Returns C as a :class:`DistMatrix` (``.gather()`` for the whole matrix), or
    ``(C, SummaInfo)`` with ``info=True``. Large problems read their blocks from HDF5
    (:func:`ozhpc.io.distio.read_operands`) instead.
    """
    m, k = op_rows(np.asarray(A), transa, True).shape
    n, kb2 = op_rows(np.asarray(B), transb, False).shape
    if k != kb2:
        raise ValueError(f"inner dimensions differ: op(A) is {m}x{k}, op(B) is {kb2}x{n}")
    with Summa(grid, m, n, k, block=block, kb=kb, engine=engine, transport=transport, slices=slices,
               groups=groups, on_panel=on_panel, scheme=scheme, bits=bits) as plan:
        a, bt, c = plan.distribute(A, B, C if beta != 0.0 else None, transa=transa, transb=transb)
        out = plan(a, bt, c, alpha=alpha, beta=beta)
        return (out, plan.info) if info else out
