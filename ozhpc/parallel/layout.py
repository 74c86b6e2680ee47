"""2D block-cyclic layout, ScaLAPACK conventions, as pure integer maths (no MPI).

A global ``M x N`` matrix is cut into ``MB x NB`` blocks; block row ``I`` lives on
process row ``(RSRC + I) mod P`` and block column ``J`` on process column
``(CSRC + J) mod Q``. Each process keeps its blocks in increasing global order, so
its local array is ``numroc(M, MB, p, RSRC, P) x numroc(N, NB, q, CSRC, Q)``.
Indices here are 0-based (ScaLAPACK's are 1-based; :meth:`BlockCyclic.descriptor`
exports the usual 9-integer descriptor, whose entries hold no indices).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DLEN = 9
BLOCK_CYCLIC_2D = 1  # DTYPE_ of a dense ScaLAPACK descriptor


def numroc(n: int, nb: int, iproc: int, isrcproc: int, nprocs: int) -> int:
    """Number of rows (or columns) of an ``n``-long, ``nb``-blocked axis held by ``iproc``.

    Same contract as ScaLAPACK's ``NUMROC`` (with 0-based process numbers).
    """
    if n < 0 or nb < 1 or nprocs < 1 or not 0 <= iproc < nprocs or not 0 <= isrcproc < nprocs:
        raise ValueError(f"numroc: bad arguments n={n} nb={nb} iproc={iproc} "
                         f"isrcproc={isrcproc} nprocs={nprocs}")
    mydist = (nprocs + iproc - isrcproc) % nprocs
    nblocks = n // nb
    count = (nblocks // nprocs) * nb
    extra = nblocks % nprocs
    if mydist < extra:
        count += nb
    elif mydist == extra:
        count += n % nb
    return count


@dataclass(frozen=True)
class Cyclic1D:
    """One axis of a block-cyclic layout: ``n`` indices, blocks of ``nb``, over ``nprocs``."""

    n: int
    nb: int
    nprocs: int
    src: int = 0

    def __post_init__(self):
        if self.n < 0:
            raise ValueError(f"length must be >= 0, got {self.n}")
        if self.nb < 1:
            raise ValueError(f"block size must be >= 1, got {self.nb}")
        if self.nprocs < 1 or not 0 <= self.src < self.nprocs:
            raise ValueError(f"bad process count {self.nprocs} / source {self.src}")

    @property
    def nblocks(self) -> int:
        return -(-self.n // self.nb)

    def owner(self, ig: int) -> int:
        """Process holding global index ``ig``."""
        return (self.src + ig // self.nb) % self.nprocs

    def local_size(self, iproc: int) -> int:
        return numroc(self.n, self.nb, iproc, self.src, self.nprocs)

    def locate(self, ig) -> tuple[np.ndarray, np.ndarray]:
        """``(processes, local indices)`` of an array of global indices (vectorised :meth:`to_local`)."""
        block, offset = np.divmod(np.asarray(ig, dtype=np.int64), self.nb)
        return (self.src + block) % self.nprocs, (block // self.nprocs) * self.nb + offset

    def to_local(self, ig: int) -> tuple[int, int]:
        """``(process, local index)`` of global index ``ig``."""
        if not 0 <= ig < self.n:
            raise IndexError(f"global index {ig} outside 0:{self.n}")
        block, offset = divmod(ig, self.nb)
        return (self.src + block) % self.nprocs, (block // self.nprocs) * self.nb + offset

    def to_global(self, iproc: int, il: int) -> int:
        """Global index of local index ``il`` on process ``iproc``."""
        if not 0 <= il < self.local_size(iproc):
            raise IndexError(f"local index {il} outside 0:{self.local_size(iproc)} on process {iproc}")
        lblock, offset = divmod(il, self.nb)
        dist = (self.nprocs + iproc - self.src) % self.nprocs
        return (lblock * self.nprocs + dist) * self.nb + offset

    def global_indices(self, iproc: int) -> np.ndarray:
        """All global indices held by ``iproc``, in local order (int64)."""
        dist = (self.nprocs + iproc - self.src) % self.nprocs
        starts = np.arange(dist * self.nb, self.n, self.nprocs * self.nb, dtype=np.int64)
        if not starts.size:
            return np.zeros(0, dtype=np.int64)
        idx = (starts[:, None] + np.arange(min(self.nb, self.n), dtype=np.int64)[None, :]).ravel()
        return idx[idx < self.n]

    def segments(self, iproc: int) -> list[tuple[int, int, int]]:
        """Contiguous pieces held by ``iproc``: ``(global_start, global_stop, local_start)``."""
        out, local = [], 0
        dist = (self.nprocs + iproc - self.src) % self.nprocs
        for start in range(dist * self.nb, self.n, self.nprocs * self.nb):
            stop = min(start + self.nb, self.n)
            out.append((start, stop, local))
            local += stop - start
        return out

    def regular_part(self, iproc: int) -> tuple[tuple[int, int, int, int] | None, tuple[int, int] | None]:
        """The held indices as (full blocks at a fixed stride) + (a last partial block).

        Returns ``((start, stride, count, block) or None, (start, stop) or None)``: the
        first is an HDF5-style regular hyperslab (``h5py.MultiBlockSlice``) covering every
        full block held, the second the trailing partial block when ``iproc`` holds it.
        Local order is the full blocks first, then the tail.
        """
        segs = self.segments(iproc)
        full = [s for s in segs if s[1] - s[0] == self.nb]
        tail = [s for s in segs if s[1] - s[0] != self.nb]
        regular = (full[0][0], self.nprocs * self.nb, len(full), self.nb) if full else None
        return regular, ((tail[0][0], tail[0][1]) if tail else None)


@dataclass(frozen=True)
class BlockCyclic:
    """``M x N`` matrix in ``MB x NB`` blocks over a ``P x Q`` process grid (ScaLAPACK layout)."""

    m: int
    n: int
    mb: int
    nb: int
    p: int
    q: int
    rsrc: int = 0
    csrc: int = 0

    def __post_init__(self):
        Cyclic1D(self.m, self.mb, self.p, self.rsrc)  # validates, with clear messages
        Cyclic1D(self.n, self.nb, self.q, self.csrc)

    @property
    def rows(self) -> Cyclic1D:
        return Cyclic1D(self.m, self.mb, self.p, self.rsrc)

    @property
    def cols(self) -> Cyclic1D:
        return Cyclic1D(self.n, self.nb, self.q, self.csrc)

    @property
    def shape(self) -> tuple[int, int]:
        return self.m, self.n

    def local_shape(self, prow: int, pcol: int) -> tuple[int, int]:
        return self.rows.local_size(prow), self.cols.local_size(pcol)

    def owner(self, i: int, j: int) -> tuple[int, int]:
        """Process coordinates ``(prow, pcol)`` of global entry ``(i, j)``."""
        return self.rows.owner(i), self.cols.owner(j)

    def to_local(self, i: int, j: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """``((prow, pcol), (il, jl))`` of global entry ``(i, j)``."""
        (pr, il), (pc, jl) = self.rows.to_local(i), self.cols.to_local(j)
        return (pr, pc), (il, jl)

    def to_global(self, prow: int, pcol: int, il: int, jl: int) -> tuple[int, int]:
        return self.rows.to_global(prow, il), self.cols.to_global(pcol, jl)

    def descriptor(self, ctxt: int = 0, lld: int | None = None, prow: int = 0) -> tuple[int, ...]:
        """ScaLAPACK array descriptor ``(DTYPE, CTXT, M, N, MB, NB, RSRC, CSRC, LLD)``.

        ``LLD`` defaults to ``max(1, local rows on process row prow)`` (column-major local
        storage, as ScaLAPACK expects; our local arrays are C-ordered, i.e. the descriptor
        describes their transpose unless they are copied to Fortran order).
        """
        if lld is None:
            lld = max(1, self.rows.local_size(prow))
        return (BLOCK_CYCLIC_2D, ctxt, self.m, self.n, self.mb, self.nb, self.rsrc, self.csrc, lld)

    def transpose(self) -> "BlockCyclic":
        """The layout of the transposed matrix on the transposed (Q x P) grid."""
        return BlockCyclic(self.n, self.m, self.nb, self.mb, self.q, self.p, self.csrc, self.rsrc)
