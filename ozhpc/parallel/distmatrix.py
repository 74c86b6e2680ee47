"""``DistMatrix``: this rank's blocks of a block-cyclic matrix, its layout and grid.

The layout's process rows are normally the grid's rows. SUMMA also keeps matrices
whose rows run over the grid's *columns* (op(B) transposed: n rows spread like the
columns of C); ``transposed_grid=True`` says so, i.e. the layout's process
coordinates are ``(grid.mycol, grid.myrow)``.

:meth:`from_global`, :meth:`scatter` and :meth:`gather` move whole matrices: they are
for tests and small problems; large runs read and write blocks with
:mod:`ozhpc.io.distio`.
"""
from __future__ import annotations

import numpy as np

from .grid import ProcessGrid
from .layout import BlockCyclic


class DistMatrix:
    """Local block-cyclic piece of a global matrix.

    Parameters
    ----------
    grid : ProcessGrid
    layout : BlockCyclic
        Its process grid must be ``grid.dims`` (or its transpose with ``transposed_grid``).
    local : array
        This rank's blocks, shape ``layout.local_shape(*self.coords)``.
    transposed_grid : bool
        Layout rows over grid columns (see module docstring).

    Raises
    ------
    ValueError
        The layout does not fit the grid or the local array has the wrong shape.
    """

    def __init__(self, grid: ProcessGrid, layout: BlockCyclic, local, *, transposed_grid: bool = False):
        want = (grid.q, grid.p) if transposed_grid else (grid.p, grid.q)
        if (layout.p, layout.q) != want:
            raise ValueError(f"layout is for a {layout.p}x{layout.q} grid, the grid is "
                             f"{grid.p}x{grid.q}{' (transposed)' if transposed_grid else ''}")
        self.grid = grid
        self.layout = layout
        self.transposed_grid = transposed_grid
        shape = layout.local_shape(*self.coords)
        if tuple(local.shape) != shape:
            raise ValueError(f"local block has shape {tuple(local.shape)}, layout wants {shape}")
        self.local = local

    @property
    def coords(self) -> tuple[int, int]:
        """This rank's (process row, process column) in the layout's process grid."""
        g = self.grid
        return (g.mycol, g.myrow) if self.transposed_grid else (g.myrow, g.mycol)

    @property
    def shape(self) -> tuple[int, int]:
        return self.layout.shape

    @property
    def dtype(self):
        return self.local.dtype

    def global_rows(self) -> np.ndarray:
        return self.layout.rows.global_indices(self.coords[0])

    def global_cols(self) -> np.ndarray:
        return self.layout.cols.global_indices(self.coords[1])

    def _coords_of(self, rank: int) -> tuple[int, int]:
        r, c = divmod(rank, self.grid.q)
        return (c, r) if self.transposed_grid else (r, c)

    @classmethod
    def from_global(cls, grid: ProcessGrid, array, layout: BlockCyclic, *, transposed_grid: bool = False,
                    dtype=None) -> "DistMatrix":
        """Take this rank's blocks of a global array that every rank holds (tests, small data);
        ``dtype`` by default float64, complex128 for a complex array."""
        array = np.asarray(array)
        dtype = (np.complex128 if array.dtype.kind == "c" else np.float64) if dtype is None else dtype
        if array.shape != layout.shape:
            raise ValueError(f"array has shape {array.shape}, layout is {layout.shape}")
        probe = cls.__new__(cls)
        probe.grid, probe.layout, probe.transposed_grid = grid, layout, transposed_grid
        rows, cols = probe.global_rows(), probe.global_cols()
        local = np.ascontiguousarray(array[np.ix_(rows, cols)], dtype=dtype)
        return cls(grid, layout, local, transposed_grid=transposed_grid)

    @classmethod
    def scatter(cls, grid: ProcessGrid, array, layout: BlockCyclic, *, root: int = 0,
                transposed_grid: bool = False, dtype=np.float64) -> "DistMatrix":
        """Send each rank its blocks of ``array``, which only ``root`` needs to hold."""
        pieces = None
        if grid.rank == root:
            array = np.asarray(array)
            if array.shape != layout.shape:
                raise ValueError(f"array has shape {array.shape}, layout is {layout.shape}")
            pieces = []
            for rank in range(grid.size):
                pr, pc = (divmod(rank, grid.q)[::-1] if transposed_grid else divmod(rank, grid.q))
                rows, cols = layout.rows.global_indices(pr), layout.cols.global_indices(pc)
                pieces.append(np.ascontiguousarray(array[np.ix_(rows, cols)], dtype=dtype))
        local = grid.comm.scatter(pieces, root=root)
        return cls(grid, layout, local, transposed_grid=transposed_grid)

    def gather(self, root: int = 0):
        """The whole matrix on ``root`` (None on the other ranks). Tests and small data only."""
        pieces = self.grid.comm.gather(np.asarray(self.local), root=root)
        if self.grid.rank != root:
            return None
        out = np.empty(self.layout.shape, dtype=pieces[0].dtype if pieces else np.float64)
        for rank, piece in enumerate(pieces):
            pr, pc = self._coords_of(rank)
            out[np.ix_(self.layout.rows.global_indices(pr), self.layout.cols.global_indices(pc))] = piece
        return out

    def allgather(self):
        """The whole matrix on every rank (tests)."""
        return self.grid.comm.bcast(self.gather(0), root=0)
