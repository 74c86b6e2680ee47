"""``ProcessGrid``: a P x Q Cartesian grid over a private copy of a communicator.

Rank ``r`` sits at ``(r // Q, r % Q)`` (row-major, ScaLAPACK's default ordering).
``row_comm`` holds the Q ranks of this process row (its rank there is the process
column), ``col_comm`` the P ranks of this process column (its rank is the process
row). The library never communicates on the caller's communicator: everything
goes through the Cartesian communicator created here, freed by :meth:`close`.
"""
from __future__ import annotations

import math

from .mpi import MPI

from ..errors import OptionError


def near_square(size: int) -> tuple[int, int]:
    """``(P, Q)`` with ``P * Q == size``, ``P <= Q`` and P as large as possible."""
    if size < 1:
        raise ValueError(f"need at least one rank, got {size}")
    p = math.isqrt(size)
    while size % p:
        p -= 1
    return p, size // p


class ProcessGrid:
    """P x Q process grid with row and column sub-communicators.

    Parameters
    ----------
    comm : mpi4py communicator, optional
        Ranks to use (default ``MPI.COMM_WORLD``); it is not used directly (a Cartesian
        copy is made), so the caller's traffic never mixes with ours.
    dims : (P, Q), optional
        Grid shape; default near-square (``P <= Q``).

    Raises
    ------
    OptionError
        ``P * Q`` differs from the number of ranks (raised on every rank alike, before
        any communication).
    """

    def __init__(self, comm=None, dims: tuple[int, int] | None = None):
        comm = MPI.COMM_WORLD if comm is None else comm
        size = comm.Get_size()
        if dims is None:
            dims = near_square(size)
        p, q = (int(d) for d in dims)
        if p < 1 or q < 1:
            raise OptionError(f"{{grid={p}x{q}}}: both dimensions must be positive")
        if p * q != size:
            raise OptionError(f"{{grid={p}x{q}}} needs {p * q} MPI ranks, but the job has {size} "
                              f"(run with mpiexec -n {p * q}, or leave {{grid}} out for a near-square grid)")
        self.dims = (p, q)
        self.comm = comm.Create_cart([p, q], periods=[False, False], reorder=False)
        self.rank = self.comm.Get_rank()
        self.size = size
        self.myrow, self.mycol = self.comm.Get_coords(self.rank)
        self.row_comm = self.comm.Sub([False, True])  # my process row: Q ranks, rank = mycol
        self.col_comm = self.comm.Sub([True, False])  # my process column: P ranks, rank = myrow

    @property
    def p(self) -> int:
        return self.dims[0]

    @property
    def q(self) -> int:
        return self.dims[1]

    @property
    def coords(self) -> tuple[int, int]:
        return self.myrow, self.mycol

    def __repr__(self) -> str:
        return f"ProcessGrid({self.p}x{self.q}, rank {self.rank} at {self.coords})"

    def close(self) -> None:
        """Free the communicators (collective over the grid); safe to call twice."""
        for name in ("row_comm", "col_comm", "comm"):
            c = getattr(self, name, None)
            if c is not None and c != MPI.COMM_NULL:
                c.Free()
            setattr(self, name, None)

    def __enter__(self) -> "ProcessGrid":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
