"""``ozhpc.pdgemm`` on the cases of tests/test_scalapack.py, under mpiexec (mpi4py's MPI).

Usage: mpiexec -n P*Q python pdgemm_worker.py NPROW NPCOL CASES SUFFIX
       mpiexec -n 2 python pdgemm_worker.py refusals


The same case file as tests/helpers/pdgemm_driver.c (ScaLAPACK's PDGEMM): each rank takes its
blocks of the global column-major A, B, C by the descriptors, as Fortran-order local arrays,
calls ``ozhpc.pdgemm``, and rank 0 writes the gathered C to ``OUT.bin`` + SUFFIX.
``refusals``: bad input on one rank only; rank 0 prints the error every rank got.
"""
import sys

import numpy as np
from mpi4py import MPI

import ozhpc
from ozhpc.parallel.layout import BlockCyclic


def main(nprow: int, npcol: int, cases: str, suffix: str) -> None:
    comm = MPI.COMM_WORLD
    myrow, mycol = divmod(comm.Get_rank(), npcol)
    for line in open(cases):
        f = line.split()
        ints = [int(x) for x in f[7:31]]
        ia, ja, ib, jb, ic, jc = ints[:6]
        shapes = [ints[6 + 6 * i: 12 + 6 * i] for i in range(3)]
        layouts = [BlockCyclic(s[0], s[1], s[2], s[3], nprow, npcol, s[4], s[5]) for s in shapes]
        locals_, descs = [], []
        for layout, path in zip(layouts, f[31:34]):
            glob = np.fromfile(path).reshape(layout.n, layout.m).T
            rows, cols = layout.rows.global_indices(myrow), layout.cols.global_indices(mycol)
            locals_.append(np.asfortranarray(glob[np.ix_(rows, cols)]))
            descs.append(layout.descriptor(lld=max(1, rows.size), prow=myrow))
        (a, b, c), (da, db, dc) = locals_, descs
        ozhpc.pdgemm(f[0], f[1], int(f[2]), int(f[3]), int(f[4]), float(f[5]), a, da, b, db, float(f[6]),
                     c, dc, ia=ia, ja=ja, ib=ib, jb=jb, ic=ic, jc=jc, comm=comm, grid=(nprow, npcol),
                     engine="numpy")
        rows, cols = layouts[2].rows.global_indices(myrow), layouts[2].cols.global_indices(mycol)
        pieces = comm.gather((rows, cols, c), root=0)
        if comm.Get_rank() == 0:
            out = np.empty(layouts[2].shape)
            for r, cc, piece in pieces:
                out[np.ix_(r, cc)] = piece
            out.T.tofile(f[34] + suffix)


def refusals() -> None:
    """Rank 1 alone passes another alpha, then a local array too small: both refused on every rank."""
    from ozhpc.errors import InputError

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    layout = BlockCyclic(6, 6, 2, 2, 1, comm.Get_size())
    shape = layout.local_shape(0, me)
    desc = layout.descriptor()
    said = []
    for case in ("alpha", "array"):
        alpha = 2.0 if case == "alpha" and me == 1 else 1.0
        a = np.zeros((shape[0], shape[1] - (1 if case == "array" and me == 1 else 0)), order="F")
        b, c = np.zeros(shape, order="F"), np.zeros(shape, order="F")
        try:
            ozhpc.pdgemm("N", "N", 6, 6, 6, alpha, a, desc, b, desc, 0.0, c, desc, comm=comm,
                         grid=(1, comm.Get_size()), engine="numpy")
            said.append(f"rank {me}: {case}: no error")
        except InputError as exc:
            said.append(f"rank {me}: {case}: {exc}")
    everyone = comm.gather(said, root=0)   # one printer: mpiexec may interleave two ranks' lines
    if me == 0:
        print("\n".join(line for lines in everyone for line in lines), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "refusals":
        refusals()
    else:
        main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
