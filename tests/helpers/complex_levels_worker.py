"""Complex products refined by levels of scales under mpiexec (tests/test_complex_levels.py):

    mpiexec -n R python tests/helpers/complex_levels_worker.py

Every grid of this rank count, two layouts (int8 planes and FP64 panels), both schemes: certified,
the same passes and counts, and C bit for bit equal to ``ozhpc.gemm``'s (a rank's refinement reads the whole complex rows along
k, their parts side by side, agreed over the ranks). Rank 0 prints one JSON line; exit status 0
when everything matched.
"""
from __future__ import annotations

import itertools
import json
import sys

from mpi4py import MPI

import ozhpc
from ozhpc.parallel import ProcessGrid, Summa
from ozhpc.run.report import sha256_of_matrix

from anyinput_cases import cases

GRIDS = {1: [(1, 1)], 2: [(1, 2), (2, 1)], 3: [(3, 1), (1, 3)], 4: [(2, 2), (1, 4), (4, 1)]}
LAYOUTS = [dict(block=(3, 2), kb=2), dict(block=(5, 7), kb=3, wire="fp64")]
NAMES = ["docs A@I", "blocks I@A", "1e300 over 1e-30", "compensated 2**1000"]


def main() -> int:
    comm = MPI.COMM_WORLD
    failures, done = [], 0
    for name in NAMES:
        a_real, b_real = cases()[name]
        A, B = a_real * (1 + 1j), b_real * (0.5 - 0.25j)
        for scheme in ("ozaki1", "ozaki2"):
            ref, ref_info = ozhpc.gemm(A, B, engine="numpy", scheme=scheme, guarantee="tight", info=True)
            for dims, layout in itertools.product(GRIDS[comm.Get_size()], LAYOUTS):
                with ProcessGrid(comm, dims) as grid:
                    with Summa(grid, A.shape[0], B.shape[1], A.shape[1], engine="numpy", scheme=scheme,
                               guarantee="tight", complex=True, **layout) as summa:
                        a, bt, c = summa.distribute(A, B, None)
                        whole, info = summa(a, bt, c).gather(0), summa.info
                done += 1
                if comm.Get_rank() == 0 and (not (info.certified and ref_info.certified)
                                             or info.widths != ref_info.widths
                                             or (info.levels, info.refined_entries, info.exact_entries)
                                             != (ref_info.levels, ref_info.refined_entries, ref_info.exact_entries)
                                             or sha256_of_matrix(whole) != sha256_of_matrix(ref)):
                    failures.append(f"{name} {scheme} {dims} {layout}: certified {info.certified}, "
                                    f"passes {info.widths} (one process: {ref_info.widths})")
    if comm.Get_rank() == 0:
        print(json.dumps({"cases": done, "failures": failures}), flush=True)
    return int(bool(comm.bcast(failures, root=0)))


if __name__ == "__main__":
    sys.exit(main())
