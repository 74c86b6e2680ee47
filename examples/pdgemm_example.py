"""ozhpc.pdgemm from an MPI code that holds ScaLAPACK-layout matrices.

    mpiexec -n 4 python examples/pdgemm_example.py [--n 60]    # 2x2 grid; any rank count works

Each rank builds its own Fortran-order blocks of A, B and C and their ScaLAPACK descriptors (as
a ScaLAPACK code has them: DESCINIT's 9 integers, a row-major BLACS grid over COMM_WORLD), with a
different block size per matrix, and asks for C(2:, 3:) = alpha A(1:, 2:)^T B + beta C(2:, 3:)
in place. Rank 0 then gathers C and checks it is bitwise ozhpc.gemm's on one process.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import ozhpc
from ozhpc.parallel import BlockCyclic, near_square
from ozhpc.run.matrices import standard_matrix


def my_blocks(global_matrix, mb, nb, grid, coords):
    """This rank's Fortran-order local array of ``global_matrix`` and its ScaLAPACK descriptor."""
    layout = BlockCyclic(*global_matrix.shape, mb, nb, *grid)
    rows, cols = layout.rows.global_indices(coords[0]), layout.cols.global_indices(coords[1])
    local = np.asfortranarray(global_matrix[np.ix_(rows, cols)])
    return local, layout.descriptor(lld=max(1, rows.size), prow=coords[0]), (rows, cols)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="m = n, k = n + 5 (default 60)")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    grid = near_square(comm.Get_size())              # (NPROW, NPCOL), NPROW <= NPCOL
    coords = divmod(comm.Get_rank(), grid[1])        # BLACS's row-major ("Row") order
    m = n = args.n
    k = n + 5
    # Every rank can make the global matrices here (small data); a real code has only its blocks.
    A, B = standard_matrix(k, m + 1, 1.0, seed=1), standard_matrix(k, n, 1.0, seed=2)
    C = standard_matrix(m + 1, n + 2, 1.0, seed=3)
    a, desca, _ = my_blocks(A, 7, 5, grid, coords)
    b, descb, _ = my_blocks(B, 4, 9, grid, coords)
    c, descc, (rows, cols) = my_blocks(C, 6, 6, grid, coords)

    info = ozhpc.pdgemm("T", "N", m, n, k, 1.5, a, desca, b, descb, -0.5, c, descc,
                        ia=1, ja=2, ic=2, jc=3, comm=comm, grid=grid, engine="numpy", info=True)

    pieces = comm.gather((rows, cols, c), root=0)
    if comm.Get_rank() != 0:
        return 0
    gathered = np.empty_like(C)
    for r, cc, piece in pieces:
        gathered[np.ix_(r, cc)] = piece
    expected = C.copy()
    expected[1:, 2:] = ozhpc.gemm(A[:, 1:], B, C[1:, 2:], alpha=1.5, beta=-0.5, transa=True)
    same = gathered.tobytes() == expected.tobytes()
    print(f"pdgemm on a {grid[0]}x{grid[1]} grid, blocks 7x5 / 4x9 / 6x6: {info.scheme}, {info.bits} bits, "
          f"certified {info.certified}")
    print("bitwise equal to ozhpc.gemm on one process" if same else "DIFFERENT from ozhpc.gemm")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
