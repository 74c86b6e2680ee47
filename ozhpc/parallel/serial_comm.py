"""A one-process stand-in for ``mpi4py.MPI``, used when no MPI library can be loaded.

A one-GPU (or one-CPU) user needs no MPI: every command then runs as one process, a 1x1 grid.
This module offers the part of mpi4py's API that ozhpc calls, for a communicator of one rank:
collectives return or copy this rank's own contribution, requests are complete at once.
:mod:`ozhpc.parallel.mpi` decides which of the two the package uses.
"""
from __future__ import annotations

import os
import time

import numpy as np

LIBRARY = "none: one process (no MPI library could be loaded)"

IN_PLACE = object()
COMM_NULL = None
COMM_TYPE_SHARED = 1
UNDEFINED = -32766
# Reduction operations and datatypes only need names here: one rank reduces nothing.
SUM, MAX, MIN, PROD, LAND, LOR = "SUM", "MAX", "MIN", "PROD", "LAND", "LOR"
BYTE, CHAR, INT, INT64_T, DOUBLE, FLOAT = "BYTE", "CHAR", "INT", "INT64_T", "DOUBLE", "FLOAT"


def Wtime() -> float:  # noqa: N802 -- mpi4py's spelling
    return time.perf_counter()


def Is_initialized() -> bool:  # noqa: N802
    return True


def Is_finalized() -> bool:  # noqa: N802
    return False


def Query_cuda_support() -> bool:  # noqa: N802
    return False


def Get_library_version() -> str:  # noqa: N802
    return LIBRARY


class Request:
    """A request that completed when it was made."""

    @staticmethod
    def Waitall(requests, statuses=None) -> None:  # noqa: N802
        return None

    @staticmethod
    def Testall(requests, statuses=None) -> bool:  # noqa: N802
        return True


def _array(buf):
    """The array of an mpi4py buffer spec (``arr`` or ``[arr, datatype, ...]``)."""
    return buf[0] if isinstance(buf, (list, tuple)) else buf


def _copy(sendbuf, recvbuf) -> None:
    if sendbuf is IN_PLACE:
        return
    dst = np.asarray(_array(recvbuf))
    dst.reshape(-1)[...] = np.asarray(_array(sendbuf)).reshape(-1).view(dst.dtype)


class Comm:
    """A communicator of one rank (rank 0)."""

    rank = 0
    size = 1

    def __init__(self, dims=None):
        self._dims = list(dims) if dims is not None else None
        self._mailbox: dict[int, list] = {}

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    # -- object collectives: one contribution, returned as a one-rank result
    def allgather(self, obj):
        return [obj]

    def gather(self, obj, root=0):
        return [obj]

    def bcast(self, obj, root=0):
        return obj

    def scatter(self, objs, root=0):
        return objs[0]

    def allreduce(self, obj, op=SUM):
        return obj

    def reduce(self, obj, op=SUM, root=0):
        return obj

    def barrier(self) -> None:
        return None

    Barrier = barrier

    # -- buffer collectives: the receive buffer gets the send buffer
    def Allreduce(self, sendbuf, recvbuf, op=SUM) -> None:  # noqa: N802
        _copy(sendbuf, recvbuf)

    def Alltoallv(self, sendbuf, recvbuf) -> None:  # noqa: N802
        _copy(sendbuf, recvbuf)

    def Ibcast(self, buf, root=0) -> Request:  # noqa: N802
        return Request()

    # -- messages to oneself, in order per tag
    def send(self, obj, dest=0, tag=0) -> None:
        self._mailbox.setdefault(tag, []).append(obj)

    def recv(self, buf=None, source=0, tag=0, status=None):
        return self._mailbox[tag].pop(0)

    # -- new communicators: all of one rank
    def Split_type(self, split_type, key=0, info=None) -> "Comm":  # noqa: N802
        return Comm()

    def Create_cart(self, dims, periods=None, reorder=False) -> "Comm":  # noqa: N802
        if int(np.prod(dims)) != 1:
            raise ValueError(f"a one-process communicator has no {dims} grid")
        return Comm(dims)

    def Get_coords(self, rank) -> list[int]:  # noqa: N802
        return [0] * len(self._dims or ())

    def Sub(self, remain_dims) -> "Comm":  # noqa: N802
        return Comm([d for d, keep in zip(self._dims or (), remain_dims) if keep])

    def Free(self) -> None:  # noqa: N802
        return None

    def Abort(self, errorcode=0):  # noqa: N802
        os._exit(errorcode)


COMM_WORLD = Comm()
COMM_SELF = Comm()
