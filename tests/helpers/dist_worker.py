"""MPI worker for tests/test_fingerprint.py (and gen/check tests): one job per rank count.

    mpiexec -n R python tests/helpers/dist_worker.py fingerprint   # DistMatrix fingerprints, every grid/block
    mpiexec -n R python tests/helpers/dist_worker.py gemm DIR      # runner.execute: report/attribute fingerprints

Rank 0 prints one JSON line; exit status 0 when everything matched.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
from mpi4py import MPI

from ozhpc.parallel import ProcessGrid
from ozhpc.parallel.distmatrix import DistMatrix
from ozhpc.parallel.layout import BlockCyclic
from ozhpc.run.fingerprint import fingerprint_distributed, fingerprint_matrix
from ozhpc.run.matrices import standard_matrix

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


def gemm(comm, directory) -> dict:
    """ozhpc gemm's report and attribute fingerprints on every grid and two blocks = the product's."""
    import h5py

    import ozhpc
    from ozhpc.io.h5io import DatasetRef
    from ozhpc.run.config import RunConfig
    from ozhpc.run.runner import execute

    a, b = standard_matrix(45, 70, 1.0, 1), standard_matrix(70, 38, 1.0, 2)
    src = os.path.join(directory, "in.h5")
    if comm.Get_rank() == 0:
        with h5py.File(src, "w") as f:
            f["A"], f["B"] = a, b
    comm.Barrier()
    want = fingerprint_matrix(ozhpc.gemm(a, b, engine="numpy"))
    failures, seen = [], 0
    for dims in GRIDS[comm.Get_size()]:
        for block in ((5, 5), (32, 13)):
            out = DatasetRef(os.path.join(directory, "out.h5"), f"/C{seen}")
            report = execute(RunConfig(a=DatasetRef(src, "/A"), b=DatasetRef(src, "/B"), out=out, grid=dims,
                                       block=block, engine="numpy", progress="off"), comm=comm)
            seen += 1
            if comm.Get_rank() == 0:
                with h5py.File(out.file, "r") as f:
                    attr = f[out.path].attrs["ozhpc_fingerprint"]
                if not report["fingerprint"] == attr == want:
                    failures.append(f"grid {dims} block {block}: {report['fingerprint']} / {attr}")
    return {"cases": seen, "failures": failures, "fingerprint": want}


def main() -> int:
    comm = MPI.COMM_WORLD
    modes = {"fingerprint": fingerprints, "gemm": gemm}
    result = modes[sys.argv[1]](comm, *sys.argv[2:])
    if comm.Get_rank() == 0:
        print(json.dumps(result))
    return 0 if not result["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
