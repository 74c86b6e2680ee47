"""``pdgemm``: ScaLAPACK's PDGEMM interface over SUMMA, for MPI codes that already hold their matrices.

The caller's operands stay as ScaLAPACK keeps them: on each rank a column-major local array of
its blocks, described by a 9-integer descriptor ``(DTYPE=1, CTXT, M, N, MB, NB, RSRC, CSRC,
LLD)``, on a row-major ``NPROW x NPCOL`` grid (rank ``r`` at ``(r // NPCOL, r % NPCOL)``, as
``Cblacs_gridinit(&ctxt, "Row", NPROW, NPCOL)`` places the ranks of the communicator). The
sub-matrices ``A(IA:, JA:)`` etc. are moved with one ``Alltoallv`` per operand into the layouts
:class:`~ozhpc.parallel.summa.Summa` multiplies (op(A) by rows, op(B) transposed), and C's
result back the same way into the caller's array. SUMMA's bits do not depend on the grid or
the blocks, so C is the same as from :func:`ozhpc.gemm` on the gathered matrices.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import InputError, finite_or_named
from ..ozaki.info import enforce_accuracy
from ..ozaki.settings import DEFAULT_GUARANTEE, OzakiSettings
from .collective import collective_errors
from .grid import ProcessGrid, near_square
from .layout import BLOCK_CYCLIC_2D, DLEN, BlockCyclic
from .mpi import MPI
from .summa import Summa

TRANSPOSES = {"N": False, "T": True, "C": True}
"""ScaLAPACK's TRANS letters (either case); "C" is the transpose, the operands being real."""


@dataclass(frozen=True)
class Window:
    """A sub-matrix of a block-cyclic matrix as the ranks hold it: ``shape`` entries from ``offset``
    (0-based) of ``layout``, rank ``r``'s local array at layout coordinates ``coords(r)``."""

    layout: BlockCyclic
    offset: tuple[int, int]
    shape: tuple[int, int]
    coords: Callable[[int], tuple[int, int]]

    def held(self, axis: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """Along ``axis``: ``rank``'s local indices inside the window, and their window positions."""
        cyclic = self.layout.rows if axis == 0 else self.layout.cols
        pos = cyclic.global_indices(self.coords(rank)[axis]) - self.offset[axis]
        keep = np.nonzero((pos >= 0) & (pos < self.shape[axis]))[0]
        return keep, pos[keep]

    def place(self, axis: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Along ``axis``: owner process and local index of window positions ``pos``."""
        cyclic = self.layout.rows if axis == 0 else self.layout.cols
        return cyclic.locate(pos + self.offset[axis])


def redistribute(comm, src: Window, src_local, dst: Window, dst_local, *, transpose: bool = False) -> None:
    """Move ``src``'s window into ``dst``'s (its transpose with ``transpose``), one ``Alltoallv``.

    Both layouts are separable (an entry's owner is its row's process times its column's), so
    what rank s sends rank d is a sub-grid of s's local array; sender and receiver each derive
    it from the layouts alone, and only values travel.
    """
    size, me = comm.Get_size(), comm.Get_rank()
    to_axis = (1, 0) if transpose else (0, 1)   # dst axis of src rows, src cols
    known: dict = {}

    def routes(rank):
        """Per src axis of ``rank``: (its local indices, dst process, dst local index); one
        computation per process row / column of the source."""
        out = []
        for axis in (0, 1):
            key = (axis, src.coords(rank)[axis])
            if key not in known:
                local, pos = src.held(axis, rank)
                known[key] = (local, *dst.place(to_axis[axis], pos))
            out.append(known[key])
        return out

    def selection(route, coords):
        return [route[axis][1] == coords[to_axis[axis]] for axis in (0, 1)]

    mine, pieces = routes(me), []
    for d in range(size):
        rows, cols = selection(mine, dst.coords(d))
        pieces.append(np.asarray(src_local)[np.ix_(mine[0][0][rows], mine[1][0][cols])].ravel())
    sendbuf = np.concatenate(pieces).astype(np.float64, copy=False) if pieces else np.zeros(0)
    incoming, here = [], dst.coords(me)
    for s in range(size):
        theirs = routes(s)
        rows, cols = selection(theirs, here)
        incoming.append((theirs[0][2][rows], theirs[1][2][cols]))
    recv_counts = [r.size * c.size for r, c in incoming]
    recvbuf = np.empty(sum(recv_counts))
    comm.Alltoallv([sendbuf, ([p.size for p in pieces], _displacements([p.size for p in pieces]))],
                   [recvbuf, (recv_counts, _displacements(recv_counts))])
    start = 0
    for (rows, cols), count in zip(incoming, recv_counts):
        values = recvbuf[start:start + count].reshape(rows.size, cols.size)
        start += count
        if transpose:
            dst_local[np.ix_(cols, rows)] = values.T
        else:
            dst_local[np.ix_(rows, cols)] = values


def _displacements(counts: list[int]) -> list[int]:
    return np.concatenate(([0], np.cumsum(counts[:-1], dtype=np.int64))).astype(int).tolist() if counts else []


def _layout(name: str, desc, dims: tuple[int, int]) -> BlockCyclic:
    """The block-cyclic layout a descriptor describes, checked as ScaLAPACK checks it (not LLD)."""
    fields = "(DTYPE, CTXT, M, N, MB, NB, RSRC, CSRC, LLD)"
    if not _integer_sequence(desc):
        raise InputError(f"{name} must be {DLEN} integers {fields}, got {desc!r}")
    desc = [int(x) for x in desc]
    if len(desc) != DLEN:
        raise InputError(f"{name} must be {DLEN} integers {fields}, got {len(desc)}")
    dtype, _, rows, cols, mb, nb, rsrc, csrc, _ = desc
    if dtype != BLOCK_CYCLIC_2D:
        raise InputError(f"{name}: DTYPE must be {BLOCK_CYCLIC_2D} (dense block-cyclic), got {dtype}")
    if rows < 0 or cols < 0 or mb < 1 or nb < 1:
        raise InputError(f"{name}: M, N must be >= 0 and MB, NB >= 1, got M={rows} N={cols} MB={mb} NB={nb}")
    if not (0 <= rsrc < dims[0] and 0 <= csrc < dims[1]):
        raise InputError(f"{name}: RSRC={rsrc}, CSRC={csrc} outside the {dims[0]}x{dims[1]} process grid")
    return BlockCyclic(rows, cols, mb, nb, dims[0], dims[1], rsrc, csrc)


def _window(name: str, desc, dims, coords, local, start: tuple[int, int], shape: tuple[int, int],
            *, writable: bool = False) -> Window:
    """The sub-matrix ``name(start:, :)`` of a descriptor and this rank's local array, checked."""
    letter, lower = name[0], name[0].lower()
    layout = _layout(f"desc{lower}", desc, dims)
    (i, j), (rows, cols) = start, shape
    if i < 1 or j < 1 or i - 1 + rows > layout.m or j - 1 + cols > layout.n:
        raise InputError(f"{letter}(i{lower}={i}, j{lower}={j}) with {rows}x{cols} entries does not fit the "
                         f"{layout.m}x{layout.n} matrix of desc{lower}")
    need = layout.local_shape(*coords)
    lld = int(desc[8])
    if lld < max(1, need[0]):
        raise InputError(f"desc{lower}: LLD={lld} is below the {need[0]} local rows of process {coords}")
    if not isinstance(local, np.ndarray) or local.ndim != 2:
        raise InputError(f"{lower}: this rank's local array must be a 2-D NumPy array, got {type(local).__name__}")
    if local.shape[0] < need[0] or local.shape[1] < need[1]:
        raise InputError(f"{lower}: the local array is {local.shape[0]}x{local.shape[1]} on process {coords}, "
                         f"desc{lower} needs at least {need[0]}x{need[1]}")
    if local.dtype.kind not in "biuf":
        raise InputError(f"{lower}: the local array must be real, got dtype {local.dtype}")
    if writable and (local.dtype != np.float64 or not local.flags.writeable):
        raise InputError(f"{lower}: the local array is updated in place, so it must be a writable float64 "
                         f"array, got {'read-only ' if not local.flags.writeable else ''}{local.dtype}")
    return Window(layout, (i - 1, j - 1), (rows, cols), lambda r, q=dims[1]: divmod(r, q))


def _integral(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _integer_sequence(values) -> bool:
    """A list, tuple or 1-D array of integers (not a string, whose characters would pass ``int``)."""
    return (isinstance(values, (list, tuple)) or isinstance(values, np.ndarray) and values.ndim == 1) and \
        all(_integral(x) for x in values)


def _integers(**values) -> list[int]:
    out = []
    for name, value in values.items():
        if not _integral(value):
            raise InputError(f"{name} must be an integer, got {value!r}")
        out.append(int(value))
    return out


def _same_on_every_rank(comm, arguments: dict) -> None:
    """Every rank must pass the same sizes, scalars, descriptors (but LLD) and offsets, as PDGEMM
    requires: a difference would make the ranks' moves disagree. One allgather; raised everywhere."""
    everyone = comm.allgather(arguments)
    for rank, theirs in enumerate(everyone):
        odd = next((name for name in arguments if theirs[name] != everyone[0][name]), None)
        if odd is not None:
            raise InputError(f"rank {rank} passed other {odd} than rank 0: every rank must pass the same "
                             f"arguments (only the local arrays and LLD differ)")


def _scalar(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be a real number, got {value!r}")
    try:
        return finite_or_named(name, value)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _trans(name: str, value) -> bool:
    if not isinstance(value, str) or value.upper() not in TRANSPOSES:
        raise InputError(f"{name} must be 'N', 'T' or 'C', got {value!r}")
    return TRANSPOSES[value.upper()]


def _communicator(comm):
    """``comm`` (default COMM_WORLD), or one InputError for what is no communicator (nothing to agree
    over, so raised where it is passed)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    null = getattr(MPI, "COMM_NULL", None)
    if null is not None and comm == null:
        raise InputError("comm must be an mpi4py communicator of the grid's ranks, got MPI.COMM_NULL")
    if not all(callable(getattr(comm, name, None)) for name in ("Get_size", "Get_rank", "Alltoallv")):
        raise InputError(f"comm must be an mpi4py communicator of the grid's ranks, got {repr(comm)[:80]}")
    return comm


def _grid_dims(grid, size: int) -> tuple[int, int]:
    if grid is None:
        return near_square(size)
    if not _integer_sequence(grid) or len(grid) != 2:
        raise InputError(f"grid must be two integers (NPROW, NPCOL), got {grid!r}")
    p, q = (int(d) for d in grid)
    if p < 1 or q < 1 or p * q != size:
        raise InputError(f"grid={p}x{q} needs {p * q} ranks, the communicator has {size}")
    return p, q


def pdgemm(transa, transb, m, n, k, alpha, a, desca, b, descb, beta, c, descc, *,
           ia=1, ja=1, ib=1, jb=1, ic=1, jc=1, comm=None, grid=None, engine="auto", transport="auto",
           wire="auto", scheme=None, slices="auto", groups="auto", bits="auto", guarantee=DEFAULT_GUARANTEE,
           accuracy="warn", info=False):
    """ScaLAPACK's PDGEMM by the Ozaki scheme: ``sub(C) = alpha op(sub(A)) op(sub(B)) + beta sub(C)``.

    Collective over ``comm``; each rank passes its own local arrays, the same descriptors and
    arguments. C's local array is updated in place. The bits of C are those of :func:`ozhpc.gemm`
    on the gathered sub-matrices, whatever the grid, block sizes and offsets.

    Parameters
    ----------
    transa, transb : {"N", "T", "C"}
        op(X) = X ("N") or its transpose ("T"; "C" is the same for real matrices).
    m, n, k : int
        op(sub(A)) is m x k, op(sub(B)) k x n, sub(C) m x n.
    alpha, beta : real
    a, b, c : 2-D NumPy arrays
        This rank's local blocks, column-major as ScaLAPACK holds them (any order works; Fortran
        order shares memory with a ScaLAPACK code), at least ``LOCr x LOCc`` of the descriptor.
        ``c`` is written in place: a writable float64 array; only sub(C)'s entries change.
    desca, descb, descc : sequences of 9 ints
        ScaLAPACK descriptors ``(DTYPE=1, CTXT, M, N, MB, NB, RSRC, CSRC, LLD)``; each matrix may
        have its own block sizes and source process. CTXT is not read: the grid is ``comm`` and
        ``grid``.
    ia, ja, ib, jb, ic, jc : int
        1-based first row / column of sub(A), sub(B), sub(C) (ScaLAPACK's IA, JA, ...).
    comm : mpi4py communicator, optional
        The ranks of the BLACS grid (default ``MPI.COMM_WORLD``); never used for our own
        traffic (a private copy is made).
    grid : (NPROW, NPCOL), optional
        The process grid, ranks placed row-major (rank r at ``(r // NPCOL, r % NPCOL)``: BLACS's
        default "Row" order over the same communicator). Default: near-square, NPROW <= NPCOL.
    engine, transport, wire : as in :class:`ozhpc.parallel.summa.Summa`
    scheme, slices, groups, bits, guarantee, accuracy : as in :func:`ozhpc.gemm`
    info : bool
        Return the :class:`~ozhpc.parallel.summa.SummaInfo` (else None).

    Raises
    ------
    InputError
        On every rank alike, before any compute and with C untouched: a bad descriptor, a
        sub-matrix outside its matrix, a local array too small, a bad option.
    AccuracyError
        ``accuracy="strict"`` and some entry not certified (C untouched).
    """
    comm = _communicator(comm)
    with collective_errors(comm):
        dims = _grid_dims(grid, comm.Get_size())
        coords = divmod(comm.Get_rank(), dims[1])
        ta, tb = _trans("transa", transa), _trans("transb", transb)
        (m, n, k), (ia, ja, ib, jb, ic, jc) = _integers(m=m, n=n, k=k), _integers(ia=ia, ja=ja, ib=ib, jb=jb,
                                                                                   ic=ic, jc=jc)
        if min(m, n, k) < 0:
            raise InputError(f"m, n, k must be >= 0, got m={m} n={n} k={k}")
        alpha, beta = _scalar("alpha", alpha), _scalar("beta", beta)
        wa = _window("A", desca, dims, coords, a, (ia, ja), (k, m) if ta else (m, k))
        wb = _window("B", descb, dims, coords, b, (ib, jb), (n, k) if tb else (k, n))
        wc = _window("C", descc, dims, coords, c, (ic, jc), (m, n), writable=True)
        settings = OzakiSettings(scheme, slices, groups, bits, accuracy, guarantee)
    _same_on_every_rank(comm, {"transa": ta, "transb": tb, "m": m, "n": n, "k": k, "alpha": alpha.hex(),
                               "beta": beta.hex(), "desca": wa.layout, "descb": wb.layout, "descc": wc.layout,
                               "ia, ja": wa.offset, "ib, jb": wb.offset, "ic, jc": wc.offset,
                               "the Ozaki options": settings})
    with ProcessGrid(comm, dims) as pgrid, Summa(pgrid, m, n, k, block=(wc.layout.mb, wc.layout.nb), engine=engine,
                                                 transport=transport, wire=wire, settings=settings) as summa:
        out = _multiply(summa, (wa, a, ta), (wb, b, tb), (wc, c), alpha, beta)
        enforce_accuracy(summa.info, settings.accuracy)
        redistribute(pgrid.comm, _summa_window(summa.c_layout), out.local, wc, c)
        return summa.info if info else None


def _summa_window(layout: BlockCyclic, transposed_grid: bool = False) -> Window:
    """A whole matrix in one of Summa's layouts (on the grid's row-major ranks)."""
    q = layout.p if transposed_grid else layout.q
    return Window(layout, (0, 0), layout.shape,
                  (lambda r: divmod(r, q)[::-1]) if transposed_grid else (lambda r: divmod(r, q)))


def _multiply(summa: Summa, a_side, b_side, c_side, alpha: float, beta: float):
    """Move op(A), op(B)^T (and C when beta != 0) into Summa's layouts and multiply."""
    from .distmatrix import DistMatrix

    g = summa.grid
    wa, a, ta = a_side
    a_local = np.empty(summa.a_layout.local_shape(g.myrow, g.mycol))
    redistribute(g.comm, wa, a, _summa_window(summa.a_layout), a_local, transpose=ta)
    wb, b, tb = b_side
    bt_local = np.empty(summa.bt_layout.local_shape(g.mycol, g.myrow))
    redistribute(g.comm, wb, b, _summa_window(summa.bt_layout, True), bt_local, transpose=not tb)
    c0 = None
    if beta != 0.0:
        wc, c = c_side
        c_local = np.empty(summa.c_layout.local_shape(g.myrow, g.mycol))
        redistribute(g.comm, wc, c, _summa_window(summa.c_layout), c_local)
        c0 = DistMatrix(g, summa.c_layout, c_local)
    return summa(DistMatrix(g, summa.a_layout, a_local), DistMatrix(g, summa.bt_layout, bt_local,
                                                                      transposed_grid=True),
                 c0, alpha=alpha, beta=beta)
