"""MPI worker for tests/test_fingerprint.py (and gen/check tests): one job per rank count.

    mpiexec -n R python tests/dist_worker.py fingerprint   # DistMatrix fingerprints, every grid/block

Rank 0 prints one JSON line; exit status 0 when everything matched.
"""
from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI

from ozhpc.fingerprint import fingerprint_distributed, fingerprint_matrix
from ozhpc.matrices import standard_matrix
from ozhpc.parallel import ProcessGrid
from ozhpc.parallel.distmatrix import DistMatrix
from ozhpc.parallel.layout import BlockCyclic

GRIDS = {1: [(1, 1)], 2: [(1, 2), (2, 1)], 3: [(3, 1), (1, 3)], 4: [(2, 2), (1, 4), (4, 1)]}
BLOCKS = [(1, 1), (5, 13), (32, 32), (64, 7), (200, 200)]


def fingerprints(comm) -> dict:
    """The fingerprint of one matrix for every grid and block: all must equal the whole's."""
    c = standard_matrix(157, 96, 2.0, 5)
    c[3, 4], c[10, 0] = np.nan, -0.0
    want = fingerprint_matrix(c)
    failures, seen = [], 0
    for dims in GRIDS[comm.Get_size()]:
        with ProcessGrid(comm, dims) as grid:
            for mb, nb in BLOCKS:
                layout = BlockCyclic(157, 96, mb, nb, *dims)
                got = fingerprint_distributed(DistMatrix.from_global(grid, c, layout))
                seen += 1
                if got != want:
                    failures.append(f"grid {dims} block {mb}x{nb}: {got}")
    return {"cases": seen, "failures": failures, "fingerprint": want}


def main() -> int:
    comm = MPI.COMM_WORLD
    result = {"fingerprint": fingerprints}[sys.argv[1]](comm)
    if comm.Get_rank() == 0:
        print(json.dumps(result))
    return 0 if not result["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
