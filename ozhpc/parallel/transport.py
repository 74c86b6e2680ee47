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

Transports by name: :mod:`ozhpc.parallel.transport_choice` (which imports this module and
:mod:`ozhpc.parallel.gpu_transport`, never the reverse).

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
from .mpi import MPI

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
