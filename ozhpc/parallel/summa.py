"""SUMMA with the Ozaki scheme: ``C = alpha * op(A) @ op(B) + beta * C``, C stationary.

Layouts (``P x Q`` grid, C in ``MB x NB`` blocks, k-panels of width ``KB``):

* op(A), ``m x k``: rows like C's rows (MB over P), k in KB blocks over the process columns;
* op(B)^T, ``n x k`` (B's rows along k, k-contiguous as the engines want them): rows like
  C's columns (NB over Q), k in KB blocks over the process *rows* -- a
  :class:`DistMatrix` with ``transposed_grid=True``;
* C, ``m x n``: MB x NB over P x Q.

Steps (the product itself is :class:`ozhpc.ozaki.product.Product`, as in ``ozhpc.gemm``):

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
   grid can change a bit of the result. With ``wire="fp64"`` (:mod:`ozhpc.parallel.wire`)
   the panels travel as FP64 and every rank splits them on arrival (step 3 then makes no
   whole-operand planes).
5. One fixed-order combine (scheme II: the CRT reconstruction) per rank, special values,
   alpha/beta.

Memory per rank: its pieces of op(A), op(B)^T and C, their slices, the accumulators and
two panel buffers per operand.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from .mpi import MPI

from ..engines import get_engine
from ..errors import InputError, OptionError, literal, require_c, scalars
from ..ozaki.info import GemmInfo, enforce_accuracy
from ..ozaki.domain import COMPLEX, REAL, domain_of
from ..ozaki.passes import assumed_depth
from ..ozaki.product import Product, op_rows
from ..ozaki.reductions import Reductions
from ..ozaki.settings import DEFAULT_GUARANTEE, OzakiSettings
from .distmatrix import DistMatrix
from .grid import ProcessGrid
from .layout import BlockCyclic
from .localrank import hosts
from .transport import Transport
from .transport_choice import TransportUnavailable, choose_transport, is_gpu_engine, open_transport
from .wire import Wire, choose_wire

GPU_PANEL = 4096
"""Default k-panel width with a GPU engine: the pair kernel needs long k to run near its peak,
and any width gives the same bits. Smaller when k / max(P, Q) is smaller (see :func:`default_kb`)."""


CPU_PANEL = 1024
"""Default k-panel width with the NumPy engine: each panel is one pass of BLAS calls plus one pass
over the accumulators, so narrow panels (a small block size) cost many passes for the same work;
wider than ~1024 gains little and costs panel-buffer memory (bench/results/block_panel_cpu_2026-12-01.md)."""


def default_kb(k: int, dims: tuple[int, int], engine) -> int:
    """SUMMA's k-panel width when none is given: ``min(1024 on CPUs / 4096 on devices, k / max(P, Q))``
    rounded up to a multiple of 16 (a multiple of the cuTile engine's ``k_align``, so panels need
    no re-padding). Never tied to the block size NB; any width gives the same bits."""
    share = -(-max(k, 1) // max(dims))
    align = max(16, engine.k_align)
    return max(align, min(GPU_PANEL if engine.on_device else CPU_PANEL, -(-share // align) * align))


@dataclass
class SummaInfo(GemmInfo):
    """:class:`GemmInfo` plus what the distribution did on this rank."""

    grid: tuple = (1, 1)
    block: tuple = (1, 1)
    kb: int = 1
    panels: int = 0
    transport: str = ""
    transport_reason: str = ""
    pass_planes: list = field(default_factory=list)
    """int8 planes per entry of the panels in each pass of the panel loop ("auto" may run more
    than one: the certificate's magnitude / support digits, wider plans)."""
    wire: str = "planes"
    wire_reason: str = ""
    pass_bytes: list = field(default_factory=list)
    """Bytes per entry on the wire in each pass: ``pass_planes`` (planes) or 8 (FP64)."""
    comm_seconds: float = 0.0
    post_seconds: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0
    messages: int = 0
    mpi_calls: int = 0


def grid_reductions(grid: ProcessGrid) -> Reductions:
    """The product's reductions on a grid: op(A) rows are spread over the process row, op(B)^T
    rows over the process column; MAX of maxima and SUM of integer counts are exact."""
    return Reductions(a_max=lambda x: _allreduce(grid.row_comm, x, MPI.MAX),
                      b_max=lambda x: _allreduce(grid.col_comm, x, MPI.MAX),
                      a_sum=lambda x: _allreduce(grid.row_comm, x, MPI.SUM),
                      b_sum=lambda x: _allreduce(grid.col_comm, x, MPI.SUM),
                      everywhere_max=lambda x: _allreduce(grid.comm, x, MPI.MAX),
                      everywhere_sum=lambda x: _allreduce(grid.comm, x, MPI.SUM))


class Summa:
    """A distributed Ozaki product, set up once: layouts, engine and transport (called per product).

    Parameters
    ----------
    grid : ProcessGrid
    m, n, k : int
        Global sizes of op(A) (m x k), op(B) (k x n) and C (m x n).
    block : (MB, NB)
        Block size of C (and of op(A)'s rows / op(B)'s columns).
    kb : int, optional
        Width of a k-panel and k-block size of op(A) and op(B) (default: :func:`default_kb`).
        Never changes the bits of C.
    engine : str or Engine
        ``"auto"`` (the default, as :func:`ozhpc.gemm`'s: the GPU engine where it runs, else NumPy),
        ``"numpy"``, ``"cutile"`` or an Engine. By name, a GPU engine is created after this rank
        selected its own GPU (:func:`ozhpc.parallel.localrank.bind_device`: node-local rank %
        visible devices).
    transport : str or Transport
        ``"auto"``, ``"nccl"``, ``"cuda-mpi"`` or ``"mpi-host"`` (:mod:`ozhpc.parallel.transport_choice`).
    wire : str
        ``"auto"``, ``"fp64"`` or ``"planes"``: what panels travel as (:mod:`ozhpc.parallel.wire`);
        never changes the bits of C.
    slices, groups, scheme, bits, guarantee : as in :func:`ozhpc.gemm`, or ``settings`` (an OzakiSettings)
    complex : bool
        The operands will be complex (either of them: a real one is promoted), so "auto" chooses the
        wire for a complex product's planes. Never changes the bits of C.
    on_panel : callable(done, total), optional
        Called on this rank after each panel's products are accumulated (pass it on
        rank 0 only to show progress; it must be cheap).

    Call it with op(A) and op(B)^T as :class:`DistMatrix` in :attr:`a_layout` /
    :attr:`bt_layout` (see :meth:`distribute` for global arrays, or
    :mod:`ozhpc.io.distio` for HDF5); it returns C as a DistMatrix in :attr:`c_layout`
    and keeps a :class:`SummaInfo` in :attr:`info`.
    """

    def __init__(self, grid: ProcessGrid, m: int, n: int, k: int, *, block=(256, 256), kb: int | None = None,
                 engine="auto", transport="auto", slices="auto", groups="auto", on_panel=None,
                 transport_options: dict | None = None, scheme=None, bits="auto", guarantee=DEFAULT_GUARANTEE,
                 settings: OzakiSettings | None = None, wire="auto", complex: bool = False):
        mb, nb = (block, block) if isinstance(block, int) else (int(block[0]), int(block[1]))
        self.settings = settings or OzakiSettings(scheme, slices, groups, bits, guarantee=guarantee)
        if isinstance(engine, str) and engine != "numpy":
            from .localrank import bind_device
            bind_device(grid.comm)  # this rank's GPU, before the engine picks the current device
        self.engine = get_engine(engine)
        devices, chosen = agree_on_setup(grid, self.engine, transport)
        kb = default_kb(k, grid.dims, self.engine) if kb is None else int(kb)
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
        self.complex = bool(complex)
        self.transport = (transport if isinstance(transport, Transport)
                          else open_transport(*chosen, grid, self.engine, **(transport_options or {})))
        self.wire = self._choose_wire(wire)
        self.on_panel = on_panel
        self.info: SummaInfo | None = None

    def _choose_wire(self, wire: str) -> Wire:
        """The wire of :func:`~ozhpc.parallel.wire.choose_wire` from global facts: the first pass's
        planes per entry before the data is read (:func:`~ozhpc.ozaki.passes.assumed_depth`), the
        engine, one node or several."""
        depth = assumed_depth(self.settings, self.k, COMPLEX if self.complex else REAL)
        one_node = len(set(hosts(self.grid.comm))) == 1
        return choose_wire(wire, depth, ranks=self.grid.size, engine=self.engine.name, one_node=one_node,
                           complex=self.complex)

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
                 alpha: float = 1.0, beta: float = 0.0, on_device: bool = False) -> DistMatrix:
        """C on :attr:`c_layout`: NumPy blocks for NumPy operands, unless ``on_device`` (keep
        C's blocks on the engine's device, e.g. to fingerprint them there)."""
        if a.layout != self.a_layout or bt.layout != self.bt_layout or not bt.transposed_grid:
            raise ValueError("operands are not in this Summa's layouts (Summa.a_layout / bt_layout)")
        alpha, beta = scalars(alpha, beta)
        require_c(beta, c)
        if beta != 0.0 and c.layout != self.c_layout:
            raise ValueError("C is not in this Summa's layout (Summa.c_layout)")
        eng = self.engine
        g = self.grid
        kind = domain_of(a.local, bt.local).dtype   # the dtype is the dataset's: the same on every rank
        product = Product(self.settings, eng, eng.asarray(a.local).astype(kind, copy=False),
                          eng.asarray(bt.local).astype(kind, copy=False), k=self.k,
                          reduce=grid_reductions(g), k_index=(self.a_layout.cols.global_indices(g.mycol),
                                                              self.bt_layout.cols.global_indices(g.myrow)),
                          split_on_arrival=self.wire.split_on_arrival, global_shape=(self.m, self.n))
        timer = eng.timer()  # the panel products alone (CUDA events on a GPU: no sync in the loop)
        self._pass_planes = []
        wait_s = self._panel_loop(product, timer)
        while product.settle():   # "auto": a wider plan until every entry is certified (a global decision)
            wait_s += self._panel_loop(product, timer)
        c_loc = None if beta == 0.0 else eng.asarray(c.local).astype(domain_of(c.local).dtype, copy=False)
        out = product.finish(alpha, beta, c_loc)
        if isinstance(a.local, np.ndarray) and not on_device:
            out = eng.to_host(out)
        self.info = self._info(product, wait_s, timer.seconds())
        return DistMatrix(self.grid, self.c_layout, out)

    def _panel_loop(self, product: Product, timer) -> float:
        """Broadcast and multiply the k-panels, panel t+1 in flight while t is multiplied;
        returns the time spent waiting for panels."""
        nk, xp, depth = self.panels, product.engine.xp, product.depth
        rows_a, rows_b = product.shape
        self._pass_planes.append(depth)
        width = min(self.kb, self.k)
        entry, dtype = self.wire.panel_entry(depth, product.domain.complex)
        bufs_a = [xp.empty(entry * rows_a * width, dtype=dtype) for _ in range(min(2, nk))]
        bufs_b = [xp.empty(entry * rows_b * width, dtype=dtype) for _ in range(min(2, nk))]
        planes_a = planes_b = None
        if self.wire.split_on_arrival:   # the planes of the panel being multiplied
            planes_a = xp.empty(depth * rows_a * width, dtype="int8")
            planes_b = xp.empty(depth * rows_b * width, dtype="int8")
        wait_s = 0.0
        if self.on_panel is not None:
            self.on_panel(0, nk)  # the loop starts now (progress counts its ETA from here)
        pending = self._post(product, 0, bufs_a[0], bufs_b[0]) if nk else None
        for t in range(nk):
            t0 = MPI.Wtime()
            pa, pb = pending[0].wait(), pending[1].wait()
            wait_s += MPI.Wtime() - t0
            if t + 1 < nk:
                pending = self._post(product, t + 1, bufs_a[(t + 1) % 2], bufs_b[(t + 1) % 2])
            timer.start()
            k0 = t * self.kb   # the panel's first global k index (sampled planes pick theirs from it)
            product.accumulate(product.arrived(1, pa, planes_a, k0), product.arrived(2, pb, planes_b, k0))
            timer.stop()
            self.transport.progress()
            if self.on_panel is not None:
                self.on_panel(t + 1, nk)
        product.release_operands()
        product.clock.lap("multiply")
        return wait_s

    def _post(self, product: Product, t: int, buf_a, buf_b):
        """Start the broadcasts of k-panel t: op(A)'s along the process row from the owner
        column, op(B)^T's along the process column from the owner row."""
        g = self.grid
        lo = t * self.kb
        w = min(self.kb, self.k - lo)
        owner_a, local_a = self.a_layout.cols.to_local(lo)
        owner_b, local_b = self.bt_layout.cols.to_local(lo)
        pa = product.pack(1, local_a, w, buf_a) if g.mycol == owner_a else product.panel(1, w, buf_a)
        pb = product.pack(2, local_b, w, buf_b) if g.myrow == owner_b else product.panel(2, w, buf_b)
        return self.transport.ibcast(pa, owner_a, "row"), self.transport.ibcast(pb, owner_b, "col")

    def _info(self, product: Product, wait_s: float, compute_s: float) -> SummaInfo:
        seconds = dict(product.clock.seconds, comm_wait=wait_s, compute=compute_s)
        stats = self.transport.stats()
        seconds["comm"] = stats["comm_seconds"]
        # Communication the panel loop could not hide: loop time beyond the products' own time.
        seconds["comm_exposed"] = max(0.0, seconds["multiply"] - seconds["compute"])
        base = product.info(seconds).to_dict()
        return SummaInfo(**base, grid=tuple(self.grid.dims), block=(self.mb, self.nb), kb=self.kb,
                         panels=self.panels, transport_reason=getattr(self.transport, "reason", ""),
                         pass_planes=list(self._pass_planes), wire=self.wire.name, wire_reason=self.wire.reason,
                         pass_bytes=[self.wire.bytes_per_entry(d, product.domain.complex) for d in self._pass_planes],
                         **stats)

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


def agree_on_setup(grid: ProcessGrid, engine, transport) -> tuple[list, tuple[str, str]]:
    """Every rank must run the same engine and transport (layouts and broadcasts depend on them).

    "auto" decides per rank (a node without a working GPU falls back to numpy, one without
    NCCL to MPI): a rank that cannot set up its transport fails every rank alike, and so do
    ranks whose choices differ -- no rank is left waiting in a broadcast the others never post.
    Returns every rank's GPU (:func:`~ozhpc.parallel.localrank.device_identity`; None entries
    for the NumPy engine; one allgather: the choice must know which ranks share a GPU) and the
    transport's ``(name, why)``, decided here once (:func:`~ozhpc.parallel.transport_choice.choose_transport`).
    """
    from .collective import collective_errors
    from .localrank import device_identity

    devices = grid.comm.allgather(device_identity() if is_gpu_engine(engine) else None)
    with collective_errors(grid.comm, catch=InputError):
        try:
            chosen = ((transport.name, getattr(transport, "reason", "")) if isinstance(transport, Transport)
                      else choose_transport(transport, grid, engine, devices))
        except (TransportUnavailable, ValueError) as exc:
            words = exc.template if isinstance(exc, OptionError) else literal(exc)
            raise OptionError(f"rank {grid.rank}: {words}") from None
    everyone = grid.comm.allgather((engine.name, chosen[0]))
    odd = next((r for r, pick in enumerate(everyone) if pick != everyone[0]), None)
    if odd is not None:
        raise OptionError(f"ranks picked different engines or transports: rank 0 uses engine {everyone[0][0]} "
                          f"and transport {everyone[0][1]}, rank {odd} engine {everyone[odd][0]} and transport "
                          f"{everyone[odd][1]}; give {{engine}} and {{transport}} explicitly, or fix the nodes "
                          f"where the GPU engine or NCCL is unavailable (ozhpc info under mpiexec shows them)")
    return devices, chosen


def _allreduce(comm, array, op):
    """Allreduce of a NumPy array into a new array (the input is left alone)."""
    buf = np.ascontiguousarray(array).copy()
    if comm.Get_size() > 1 and buf.size:
        comm.Allreduce(MPI.IN_PLACE, buf, op=op)
    return buf


def dist_gemm(grid: ProcessGrid, A, B, C=None, *, alpha=1.0, beta=0.0, transa=False, transb=False,
              block=(64, 64), kb=None, slices="auto", groups="auto", engine="auto", transport="auto",
              on_panel=None, info=False, scheme=None, bits="auto", accuracy="warn", guarantee=DEFAULT_GUARANTEE,
              wire="auto"):
    """Distributed product of global arrays that EVERY rank holds (tests, small problems).

    Returns C as a :class:`DistMatrix` (``.gather()`` for the whole matrix), or
    ``(C, SummaInfo)`` with ``info=True``. Large problems read their blocks from HDF5
    (:func:`ozhpc.io.distio.read_operands`) instead. ``guarantee`` and ``accuracy`` as in :func:`ozhpc.gemm`: a C
    that "auto" cannot certify gives an AccuracyWarning ("warn") or an AccuracyError ("strict")
    on every rank.
    """
    m, k = op_rows(np.asarray(A), transa, True).shape
    n, kb2 = op_rows(np.asarray(B), transb, False).shape
    if k != kb2:
        raise ValueError(f"inner dimensions differ: op(A) is {m}x{k}, op(B) is {kb2}x{n}")
    with Summa(grid, m, n, k, block=block, kb=kb, engine=engine, transport=transport, on_panel=on_panel,
               settings=OzakiSettings(scheme, slices, groups, bits, accuracy, guarantee), wire=wire) as summa:
        a, bt, c = summa.distribute(A, B, C if beta != 0.0 else None, transa=transa, transb=transb)
        out = summa(a, bt, c, alpha=alpha, beta=beta)
        enforce_accuracy(summa.info, accuracy)
        return (out, summa.info) if info else out
