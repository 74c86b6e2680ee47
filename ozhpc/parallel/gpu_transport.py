"""Panel broadcasts of device-resident (CuPy) slice panels: NCCL and CUDA-aware MPI.

Both implement :class:`ozhpc.parallel.transport.Transport` for SUMMA's int8 panels that live
on the GPU; the host-staged path is :class:`~ozhpc.parallel.transport.HostMPITransport`.

:class:`NcclTransport` (``"nccl"``)
    One ``cupy.cuda.nccl.NcclCommunicator`` per process row and per process column that
    has more than one rank (unique id made by the sub-communicator's rank 0 and broadcast
    over MPI; rows first, then columns, in the same order on every rank). Broadcasts run on
    a dedicated non-blocking communication stream:

    * ``ibcast`` records an event on the compute stream (the engine's current stream) and
      makes the communication stream wait for it: the root's panel has been copied into
      the buffer, and every rank's GPU has finished reading the buffer's previous contents
      (SUMMA refills a buffer two panels later, after enqueueing the products that read it).
      Then ``ncclBroadcast`` (in place) and an "arrived" event on the communication stream.
    * ``Pending.wait`` makes the compute stream wait for "arrived" without blocking the
      host, so panel t+1 moves while the pair GEMMs of panel t run.
    * ``comm_seconds`` in :meth:`stats` is the GPU time of the broadcasts (events around
      each ``ncclBroadcast``), read once at the end.

    ``NCCL_NVLS_ENABLE=0`` is set in the process before the first communicator is made
    when the variable is absent (NVLink multicast objects are never created).

:class:`CudaMPITransport` (``"cuda-mpi"``)
    ``MPI.Ibcast`` straight on CuPy arrays, for MPI libraries built with CUDA support. The
    compute stream is synchronised before each post (MPI does not know CUDA streams), so
    the root's data is complete and nobody still reads the buffer; ``wait`` is ``Waitall``.

This module imports CuPy lazily (inside the constructors): it is importable on CPU-only
machines, and :func:`ozhpc.parallel.transport.get_transport` only builds these classes when asked
or when auto-detection finds a GPU engine.
"""
from __future__ import annotations

import os
import time

from .mpi import MPI

from .transport import INT_MAX, ChunkedMPITransport, Done, Pending, Transport

NVLS_ENV = "NCCL_NVLS_ENABLE"
WARMUP_BYTES = 8 << 20
"""Size of the broadcast each NCCL communicator runs once at set-up (connections, buffers)."""


def ensure_nvls_off(environ=None) -> str:
    """Set ``NCCL_NVLS_ENABLE=0`` unless already set (before any NCCL init); returns the value."""
    env = os.environ if environ is None else environ
    env.setdefault(NVLS_ENV, "0")
    return env[NVLS_ENV]


class _NcclPending(Pending):
    def __init__(self, buf, arrived, compute_stream):
        self.buf, self.arrived, self.compute_stream = buf, arrived, compute_stream

    def wait(self):
        if self.arrived is not None:
            self.compute_stream.wait_event(self.arrived)  # GPU-side wait: the host goes on
            self.arrived = None
        return self.buf


class NcclTransport(Transport):
    """Broadcasts of CuPy int8 panels with NCCL on a communication stream (module docstring)."""

    name = "nccl"

    def __init__(self, grid, engine=None):
        super().__init__(grid, engine)
        ensure_nvls_off()
        import cupy
        from cupy.cuda import nccl

        self._cp, self._nccl = cupy, nccl
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._comms = {}
        for axis in ("row", "col"):  # same order on every rank: NCCL init is collective per sub-comm
            comm = self.comm_for(axis)
            if comm.Get_size() == 1:
                continue
            uid = nccl.get_unique_id() if comm.Get_rank() == 0 else None
            uid = comm.bcast(uid, root=0)
            self._comms[axis] = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
        # NCCL connects peers lazily, at the first collective (about 1 s on 2 x H200): do it
        # here, while the Summa is built, instead of inside the first panel broadcast.
        warm = cupy.zeros(WARMUP_BYTES, dtype=cupy.int8)
        for c in self._comms.values():
            c.broadcast(warm.data.ptr, warm.data.ptr, warm.nbytes, nccl.NCCL_INT8, 0, self.stream.ptr)
        self.stream.synchronize()
        del warm
        self._timing = []  # (start, arrived) events of the broadcasts not yet read back
        self._gpu_seconds = 0.0

    def ibcast(self, buf, root: int, axis: str) -> Pending:
        comm = self.comm_for(axis)
        if comm.Get_size() == 1:
            return Done(buf)
        cp = self._cp
        if not buf.flags.c_contiguous:
            raise ValueError("panel buffers must be C-contiguous")
        t0 = time.perf_counter()
        compute = cp.cuda.get_current_stream()
        ready = compute.record()
        self.stream.wait_event(ready)       # root: panel copied in; all: previous reads done
        start = self.stream.record()
        self._comms[axis].broadcast(buf.data.ptr, buf.data.ptr, buf.nbytes, self._nccl.NCCL_INT8, root,
                                    self.stream.ptr)  # ncclBroadcast, in place
        arrived = self.stream.record()
        self._timing.append((start, arrived))
        self._count(comm, root, buf.nbytes)
        self.mpi_calls += 1
        self.post_seconds += time.perf_counter() - t0
        return _NcclPending(buf, arrived, compute)

    def stats(self) -> dict:
        if self._timing:  # GPU time of the broadcasts (synchronises with the last one)
            self._timing[-1][1].synchronize()
            self._gpu_seconds += sum(self._cp.cuda.get_elapsed_time(a, b) for a, b in self._timing) / 1e3
            self._timing = []
        self.comm_seconds = self._gpu_seconds
        return super().stats()

    def close(self) -> None:
        if self._comms:
            self.stream.synchronize()
        for c in self._comms.values():
            c.destroy()
        self._comms = {}


class _CudaMPIPending(Pending):
    def __init__(self, requests, buf, owner):
        self.requests, self.buf, self.owner = requests, buf, owner

    def wait(self):
        if self.requests:
            t0 = time.perf_counter()
            MPI.Request.Waitall(self.requests)
            self.owner.comm_seconds += time.perf_counter() - t0
            self.requests = []
        return self.buf


class CudaMPITransport(ChunkedMPITransport):
    """``Ibcast`` on device buffers through a CUDA-aware MPI (module docstring)."""

    name = "cuda-mpi"

    def __init__(self, grid, engine=None, max_count: int = INT_MAX):
        super().__init__(grid, engine, max_count)
        import cupy

        self._cp = cupy

    def ibcast(self, buf, root: int, axis: str) -> Pending:
        comm = self.comm_for(axis)
        if comm.Get_size() == 1:
            return Done(buf)
        if not buf.flags.c_contiguous:
            raise ValueError("panel buffers must be C-contiguous")
        t0 = time.perf_counter()
        self._cp.cuda.get_current_stream().synchronize()  # MPI sees memory, not streams
        requests = self._post(comm, buf.reshape(-1).view(self._cp.uint8), root)
        pending = self._track(_CudaMPIPending(requests, buf, self))
        self.comm_seconds += time.perf_counter() - t0
        return pending
