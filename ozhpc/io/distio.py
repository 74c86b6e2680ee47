"""Block-cyclic HDF5 I/O: each rank reads and writes only the blocks it owns.

Reads select a rank's blocks with one regular hyperslab per axis
(``h5py.MultiBlockSlice``: start, stride = P*NB, count, block = NB) plus the trailing
partial block, so a rank issues at most four reads per operand whatever the block
size. op(A) and op(B)^T are read straight into SUMMA's layouts: a transposed operand
is read with the axes swapped and handed on as a transposed view (never copied on the host), so
``--transa``/``--transb`` cost nothing extra.

With parallel HDF5 (``h5py.get_config().mpi``) files are opened with
``driver="mpio"`` on the grid's communicator and every rank writes its blocks
independently into the dataset rank 0 created. Otherwise (PyPI h5py is
serial) every rank opens the inputs read-only on its own, and the output is written in
turn: rank r waits for a token from rank r-1, writes its blocks, passes the token on.

The output goes to a temporary dataset in the target file (:mod:`ozhpc.io.h5out`), with
rank 0 holding the file's lock from the check to the commit; after every rank has written,
rank 0 computes the SHA-256 of C (C-ordered little-endian float64, read back in row
chunks, never the whole matrix at once), stores it as an attribute and renames the
dataset into place. Any failure on any rank is agreed on collectively, the temporary is
removed, and every rank raises.
"""
from __future__ import annotations

import os
from contextlib import ExitStack

import h5py
import numpy as np

from ..parallel.distmatrix import DistMatrix
from ..parallel.collective import collective_errors
from ..parallel.grid import ProcessGrid
from ..parallel.layout import BlockCyclic, Cyclic1D
from ..errors import trans_mode
from . import h5io, h5out
from .checksum import RowHasher, byte_order

PARALLEL_HDF5 = h5io.PARALLEL_HDF5
HASH_CHUNK_BYTES = 1 << 24
TOKEN_TAG = 7301


def _selections(axis: Cyclic1D, iproc: int):
    """``[(h5py selection, local_start, local_stop)]`` covering ``iproc``'s indices on one axis.

    Contiguous indices (one process on the axis: stride == block) are one plain slice, which
    HDF5 reads at the file's speed; the strided blocks of a cyclic layout are one regular
    hyperslab (``MultiBlockSlice``) plus the trailing partial block."""
    regular, tail = axis.regular_part(iproc)
    out, local = [], 0
    if regular is not None:
        start, stride, count, block = regular
        if stride == block or count == 1:
            out.append((slice(start, start + count * block), 0, count * block))
        else:
            out.append((h5py.MultiBlockSlice(start=start, stride=stride, count=count, block=block),
                        0, count * block))
        local = count * block
    if tail is not None:
        if out and isinstance(out[-1][0], slice) and out[-1][0].stop == tail[0]:
            first = out.pop()[0]
            out.append((slice(first.start, tail[1]), 0, local + tail[1] - tail[0]))
        else:
            out.append((slice(*tail), local, local + tail[1] - tail[0]))
    return out


def read_blocks(dset, rows: Cyclic1D, prow: int, cols: Cyclic1D, pcol: int, ref, what: str) -> np.ndarray:
    """This process's blocks of a 2-D dataset ``ref``, as C-ordered float64 (complex128 for a complex
    dataset) ``(local rows, local cols)`` (integers that FP64 cannot hold exactly and long doubles
    beyond its range refused: :func:`~ozhpc.io.h5io.exact_float64`)."""
    out = np.empty((rows.local_size(prow), cols.local_size(pcol)), dtype=h5io.value_dtype(dset.dtype))
    direct = dset.dtype == out.dtype
    for rsel, r0, r1 in _selections(rows, prow):
        for csel, c0, c1 in _selections(cols, pcol):
            if direct and isinstance(rsel, slice) and isinstance(csel, slice) and r1 > r0 and c1 > c0:
                # straight into place: no temporary array and copy (a whole operand on one rank)
                dset.read_direct(out, np.s_[rsel, csel], np.s_[r0:r1, c0:c1])
            else:
                out[r0:r1, c0:c1] = h5io.exact_float64(dset[rsel, csel], ref, what)
    return out


def write_blocks(dset, rows: Cyclic1D, prow: int, cols: Cyclic1D, pcol: int, local) -> None:
    """Write this process's blocks into a 2-D dataset (the inverse of :func:`read_blocks`)."""
    local = np.asarray(local, dtype=byte_order(local))
    for rsel, r0, r1 in _selections(rows, prow):
        for csel, c0, c1 in _selections(cols, pcol):
            dset[rsel, csel] = np.ascontiguousarray(local[r0:r1, c0:c1])


def _open_read(path: str, grid: ProcessGrid):
    if PARALLEL_HDF5 and grid.size > 1:  # collective: one attempt (ranks retrying apart would hang)
        return h5io.open_file(path, "r", wait_s=0, driver="mpio", comm=grid.comm)
    return h5io.open_file(path, "r")  # waits while another job writes into this file


def read_distributed(ref: h5io.DatasetRef, grid: ProcessGrid, layout: BlockCyclic, *,
                     transpose: bool = False, transposed_grid: bool = False, what: str = "input") -> DistMatrix:
    """Read this rank's blocks of ``X`` (= the dataset, or its transpose) in ``layout``.

    Collective over the grid (errors on any rank are raised on every rank).
    """
    with collective_errors(grid.comm, catch=h5io.InputError):
        try:
            with _open_read(ref.file, grid) as f:
                dset = f[ref.path]
                pr, pc = (grid.mycol, grid.myrow) if transposed_grid else (grid.myrow, grid.mycol)
                want = layout.shape[::-1] if transpose else layout.shape
                if tuple(dset.shape) != want:
                    raise h5io.InputError(f"{what} {ref} has shape {tuple(dset.shape)}, expected {want}")
                if transpose:
                    # a transposed view, no host copy: the engines read rows of any stride
                    # (the cuTile split reads transposed rows at full speed)
                    local = read_blocks(dset, layout.cols, pc, layout.rows, pr, ref, what).T
                else:
                    local = read_blocks(dset, layout.rows, pr, layout.cols, pc, ref, what)
        except (OSError, KeyError) as exc:
            raise h5io.InputError(f"cannot read {what} {ref}: {exc}") from None
    return DistMatrix(grid, layout, local, transposed_grid=transposed_grid)


def read_operands(summa, a_ref, b_ref, c_ref=None, *, transa=False, transb=False):
    """op(A), op(B)^T (and C when given) in the layouts of a :class:`~ozhpc.parallel.Summa`;
    ``transa`` / ``transb`` a bool or BLAS's "N", "T", "C" (conjugate transposed)."""
    g = summa.grid
    transa, transb = trans_mode(transa, "transa"), trans_mode(transb, "transb")
    a = read_distributed(a_ref, g, summa.a_layout, transpose=transa != "N", what="input A")
    bt = read_distributed(b_ref, g, summa.bt_layout, transpose=transb == "N", transposed_grid=True, what="input B")
    for x, mode in ((a, transa), (bt, transb)):
        if mode == "C" and x.local.dtype.kind == "c":
            x.local = x.local.conj()
    c = None if c_ref is None else read_distributed(c_ref, g, summa.c_layout, what="input C")
    return a, bt, c


def hash_dataset(path: str, dset_path: str) -> str:
    """SHA-256 of a 2-D dataset as C-ordered little-endian float64 (complex128), read in row chunks."""
    hasher = RowHasher()
    with h5io.open_file(path, "r") as f:
        dset = f[dset_path]
        rows = max(1, HASH_CHUNK_BYTES // max(1, 8 * dset.shape[1]))
        for lo in range(0, dset.shape[0], rows):
            hasher.update(dset[lo:lo + rows])
    return hasher.hexdigest()


def write_distributed(ref: h5io.DatasetRef, c: DistMatrix, *, attrs: dict | None = None,
                      force: bool = False, sha256: bool = True) -> str | None:
    """Write C's blocks to ``ref`` (crash safe, under the file's lock); returns the SHA-256 of C.

    Rank 0 takes the output file's lock and holds it across the collective write, checks the
    target again under it (another job may have written it during the run: refused without
    ``force``), creates the temporary dataset; every rank writes its blocks; rank 0 commits
    (:class:`~ozhpc.io.h5out.OutputTransaction`). ``sha256=False`` skips the read-back that
    computes the SHA-256 (returns None; pass your own fingerprint in ``attrs``). Collective
    over C's grid; a failure anywhere removes the temporary and raises on every rank.
    """
    grid = c.grid
    comm, rank = grid.comm, grid.rank
    tag = comm.bcast(h5out.new_tag() if rank == 0 else None, root=0)
    with ExitStack() as stack:
        txn = None

        def cleanup():
            if txn is not None:
                txn.abort()

        with collective_errors(comm, cleanup=cleanup):
            if rank == 0:
                txn = stack.enter_context(h5out.OutputTransaction(ref, force, tag))
                txn.create(c.layout.shape, attrs, complex=np.iscomplexobj(c.local))
        where = comm.bcast((txn.file, txn.tmp_name) if rank == 0 else None, root=0)
        with collective_errors(comm, cleanup=cleanup):
            if not os.path.exists(where[0]):  # rank 0 has just created or opened it
                raise h5io.InputError(f"rank {rank} cannot see the file {where[0]!r} that rank 0 is writing C "
                                      f"into: the output {ref.file!r} must be on a file system every rank shares")
            _write_all(where, c)
        with collective_errors(comm, cleanup=cleanup):
            digest = None
            if rank == 0:
                digest = hash_dataset(*where) if sha256 else None
                txn.commit(digest)
    return comm.bcast(digest, root=0)


def _write_all(where: tuple[str, str], c: DistMatrix) -> None:
    """Every rank writes its blocks into dataset ``where[1]`` of file ``where[0]``."""
    grid = c.grid
    comm, rank, size = grid.comm, grid.rank, grid.size
    path, name = where
    (pr, pc), rows, cols = c.coords, c.layout.rows, c.layout.cols
    if PARALLEL_HDF5 and size > 1:
        with h5out.open_output(path, "r+", driver="mpio", comm=comm) as f:
            write_blocks(f[name], rows, pr, cols, pc, c.local)
        return
    if rank > 0:  # in turn: rank r waits for rank r-1's token
        comm.recv(source=rank - 1, tag=TOKEN_TAG)
    try:
        with h5out.open_output(path, "r+") as f:
            write_blocks(f[name], rows, pr, cols, pc, c.local)
    finally:  # pass the token on even after a failure: the next rank must not wait forever
        if rank < size - 1:
            comm.send(None, dest=rank + 1, tag=TOKEN_TAG)
