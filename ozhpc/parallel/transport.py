"""Panel broadcasts along the process rows and columns of a :class:`ProcessGrid`.

A transport moves SUMMA's int8 slice panels. The interface is deliberately small so
that GPU transports (CUDA-aware MPI, NCCL through CuPy) can slot in for panels that
live on the device:

``ibcast(buf, root, axis) -> Pending``
    Start broadcasting ``buf`` (an engine-device array, C-contiguous; filled on the
    root, same shape/dtype and allocated on every other rank) from rank ``root`` of
    the process row (``axis="row"``, root = a process column) or process column
    (``axis="col"``, root = a process row). Non-blocking: SUMMA posts panel t+1
    before multiplying panel t.
``Pending.wait() -> buf``
    Complete it; afterwards ``buf`` holds the root's data on every rank of that
    row/column, ready for the engine (GPU transports record an event / stream wait
    here).
``progress()``
    Give queued broadcasts a chance to advance (MPI without an asynchronous progress
    thread only moves data inside MPI calls); optional.

Every transport counts what it moves: ``bytes_sent`` is the payload this rank put
on the wire as a broadcast root times the number of receivers (the logical volume
of the SUMMA model, independent of the MPI library's broadcast tree),
``bytes_received`` what it received, ``messages`` the broadcasts it took part in,
``mpi_calls`` the MPI calls they took (more than ``messages`` when cut into chunks),
``comm_seconds`` the time spent communicating (host time blocked in MPI for the MPI
transports, GPU time of the broadcasts for NCCL) and ``post_seconds`` the host time spent
posting broadcasts.

Transports by name (:func:`get_transport`): ``"mpi-host"`` (:class:`HostMPITransport`),
``"cuda-mpi"`` and ``"nccl"`` (:mod:`ozhpc.parallel.gpu_transport`), and ``"auto"``: with a GPU
engine (``engine.xp`` is not NumPy) and a grid with more than one rank, NCCL when
``cupy.cuda.nccl`` is usable, else CUDA-aware MPI when ``MPI.Query_cuda_support()`` says so,
else host-staged MPI; with the NumPy engine (or one rank) always ``"mpi-host"``.

:class:`HostMPITransport` is the host-staged MPI path: NumPy buffers go straight to
``Ibcast``; device buffers are copied to the host on the root and back to the device
on ``wait()``. Panels go as MPI.BYTE; messages longer than ``max_count`` bytes
(default ``INT_MAX``, the classic MPI count limit) are cut into several ``Ibcast``
calls, posted in the same order on every rank; tests force a tiny limit to exercise
that path.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from mpi4py import MPI

INT_MAX = 2**31 - 1


class Pending(ABC):
    @abstractmethod
    def wait(self):
        """Finish the broadcast; returns the buffer, now holding the root's data."""


class Done(Pending):
    """A broadcast that needed no communication (one rank in that row/column)."""

    def __init__(self, buf):
        self.buf = buf

    def wait(self):
        return self.buf


class Transport(ABC):
    """Broadcasts of slice panels along grid rows/columns (see module docstring)."""

    name = "abstract"
    reason = ""  # why get_transport picked it (for the report)

    def __init__(self, grid, engine=None):
        self.grid = grid
        self.engine = engine
        self.bytes_sent = 0
        self.bytes_received = 0
        self.messages = 0
        self.mpi_calls = 0
        self.comm_seconds = 0.0
        self.post_seconds = 0.0

    def comm_for(self, axis: str):
        if axis == "row":
            return self.grid.row_comm
        if axis == "col":
            return self.grid.col_comm
        raise ValueError(f"axis must be 'row' or 'col', got {axis!r}")

    def _count(self, comm, root: int, nbytes: int) -> None:
        self.messages += 1
        if comm.Get_rank() == root:
            self.bytes_sent += nbytes * (comm.Get_size() - 1)
        else:
            self.bytes_received += nbytes

    @abstractmethod
    def ibcast(self, buf, root: int, axis: str) -> Pending:
        """Start broadcasting ``buf`` from ``root`` along ``axis`` ("row" or "col")."""

    def progress(self) -> None:
        """Let queued broadcasts advance (no-op by default)."""

    def stats(self) -> dict:
        return {"transport": self.name, "bytes_sent": self.bytes_sent,
                "bytes_received": self.bytes_received, "messages": self.messages, "mpi_calls": self.mpi_calls,
                "comm_seconds": self.comm_seconds, "post_seconds": self.post_seconds}

    def close(self) -> None:
        """Release transport resources (communicators of GPU transports)."""


class _MPIPending(Pending):
    def __init__(self, requests, buf, host, engine, owner=None):
        self.requests, self.buf, self.host, self.engine, self.owner = requests, buf, host, engine, owner

    def wait(self):
        import time

        t0 = time.perf_counter()
        if self.requests:
            MPI.Request.Waitall(self.requests)
            self.requests = []
        if self.host is not None and self.host is not self.buf:
            self.buf[...] = self.engine.asarray(self.host)  # device staging: host -> device
            self.host = None
        if self.owner is not None:
            self.owner.comm_seconds += time.perf_counter() - t0
        return self.buf


class ChunkedMPITransport(Transport):
    """What the MPI transports share: ``Ibcast`` in pieces of at most ``max_count`` bytes
    (large-count safe: every call's count fits a C int), and progress of open requests."""

    def __init__(self, grid, engine=None, max_count: int = INT_MAX):
        super().__init__(grid, engine)
        if max_count < 1:
            raise ValueError(f"max_count must be positive, got {max_count}")
        self.max_count = int(max_count)
        self._open: list = []

    def _post(self, comm, flat, root: int) -> list:
        """Start the broadcast of the flat byte buffer ``flat``; returns its requests."""
        step = self.max_count
        requests = [comm.Ibcast([flat[i:i + step], MPI.BYTE], root=root) for i in range(0, flat.size, step)]
        self._count(comm, root, flat.size)
        self.mpi_calls += len(requests)
        return requests

    def _track(self, pending: Pending) -> Pending:
        self._open = [p for p in self._open if p.requests] + [pending]
        return pending

    def progress(self) -> None:
        for p in self._open:
            if p.requests:
                MPI.Request.Testall(p.requests)


class HostMPITransport(ChunkedMPITransport):
    """Host-staged non-blocking MPI broadcasts, chunked below ``max_count`` elements.

    Parameters
    ----------
    grid : ProcessGrid
    engine : Engine, optional
        Needed only for device-resident buffers (``to_host`` / ``asarray``).
    max_count : int
        Largest count (bytes) of one MPI call (default ``INT_MAX``).
    """

    name = "mpi-host"

    def ibcast(self, buf, root: int, axis: str) -> Pending:
        import time

        comm = self.comm_for(axis)
        if comm.Get_size() == 1:
            return Done(buf)
        t0 = time.perf_counter()
        if isinstance(buf, np.ndarray):
            host = buf
        elif comm.Get_rank() == root:
            host = np.ascontiguousarray(self.engine.to_host(buf))
        else:
            host = np.empty(tuple(buf.shape), dtype=np.dtype(str(buf.dtype)))
        if not host.flags.c_contiguous:
            raise ValueError("panel buffers must be C-contiguous")
        requests = self._post(comm, host.reshape(-1).view(np.uint8), root)
        pending = self._track(_MPIPending(requests, buf, host, self.engine, self))
        self.post_seconds += time.perf_counter() - t0
        return pending


def _nccl_transport(grid, engine=None, **options):
    from .gpu_transport import NcclTransport
    return NcclTransport(grid, engine, **options)


def _cuda_mpi_transport(grid, engine=None, **options):
    from .gpu_transport import CudaMPITransport
    return CudaMPITransport(grid, engine, **options)


TRANSPORTS = {"mpi-host": HostMPITransport, "cuda-mpi": _cuda_mpi_transport, "nccl": _nccl_transport}
TRANSPORT_NAMES = ("auto", "nccl", "cuda-mpi", "mpi-host")


class TransportUnavailable(RuntimeError):
    """A requested transport cannot run here (no CuPy/NCCL, MPI without CUDA support, CPU engine)."""


def nccl_available() -> str | None:
    """None when ``cupy.cuda.nccl`` can be used, else the reason it cannot."""
    try:
        from cupy.cuda import nccl
    except Exception as exc:  # noqa: BLE001 -- ImportError, or CuPy built without NCCL
        return f"cupy.cuda.nccl cannot be imported ({exc})"
    if not getattr(nccl, "available", True):
        return "CuPy was built without NCCL (pip install nvidia-nccl-cu13, or a CuPy wheel with NCCL)"
    return None


def mpi_cuda_support() -> bool:
    """Whether the MPI library says it is CUDA-aware (``MPI.Query_cuda_support``, MPI-4.1 / Open MPI ext)."""
    query = getattr(MPI, "Query_cuda_support", None)
    if query is None:
        return False
    try:
        return bool(query())
    except Exception:  # noqa: BLE001 -- not implemented by this library
        return False


def is_gpu_engine(engine) -> bool:
    return engine is not None and getattr(engine, "xp", np) is not np


def choose_transport(name, grid, engine=None) -> tuple[str, str]:
    """``(transport name, why)`` for ``name`` in TRANSPORT_NAMES; raises TransportUnavailable / ValueError.

    Rank-independent as long as every rank has the same software (the usual case): every
    rank must pick the same transport, since NCCL and MPI broadcasts do not mix.
    """
    name = "auto" if name is None else name
    if name not in TRANSPORT_NAMES:
        raise ValueError(f"unknown transport {name!r}; choose one of: {', '.join(TRANSPORT_NAMES)}")
    gpu = is_gpu_engine(engine)
    if name == "mpi-host":
        return name, "requested"
    if name in ("nccl", "cuda-mpi") and not gpu:
        raise TransportUnavailable(f"transport {name!r} moves GPU panels: it needs the cutile engine "
                                   f"(got {getattr(engine, 'name', engine)!r}); use --transport mpi-host or auto")
    if name == "nccl":
        why = nccl_available()
        if why:
            raise TransportUnavailable(f"transport 'nccl' is not available: {why}")
        return name, "requested"
    if name == "cuda-mpi":
        if not mpi_cuda_support():
            raise TransportUnavailable("transport 'cuda-mpi' is not available: the MPI library does not report "
                                       "CUDA support (MPI.Query_cuda_support()); use nccl or mpi-host")
        return name, "requested"
    # auto
    if not gpu:
        return "mpi-host", "auto: CPU engine"
    if grid is not None and grid.size == 1:
        return "mpi-host", "auto: one rank, nothing to move"
    why = nccl_available()
    if why is None:
        return "nccl", "auto: GPU engine, cupy.cuda.nccl available"
    if mpi_cuda_support():
        return "cuda-mpi", f"auto: GPU engine, CUDA-aware MPI ({why})"
    return "mpi-host", f"auto: GPU engine, no NCCL ({why}) and MPI without CUDA support"


def get_transport(name, grid, engine=None, **options) -> Transport:
    """A transport by name (see the module docstring for ``"auto"``) or a ready instance."""
    if isinstance(name, Transport):
        return name
    chosen, why = choose_transport(name, grid, engine)
    transport = TRANSPORTS[chosen](grid, engine, **options)
    transport.reason = why
    return transport
