"""CPU benchmark: block size vs SUMMA panel width (NumPy engine), n x n x n, 1 and 2 ranks.

    python bench/scaling/block_panel_cpu.py                         # n = 1024 and 2048, ranks 1 and 2
    python bench/scaling/block_panel_cpu.py --n 1024 --ranks 1 --configs 256:256 256:auto

A config is ``BLOCK:PANEL`` (PANEL ``auto`` = the default of ``ozhpc.parallel.summa.default_kb``).
One mpiexec job per (n, ranks) times every config (a barrier, then the product alone; the
slowest rank's wall time) and checks that C has the same SHA-256 for all of them. Prints a
Markdown table. Benchmark, not a test; inputs are generated on every rank.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import mpiexec_cmd, parser  # noqa: E402

CONFIGS = ["5:5", "5:auto", "64:64", "64:auto", "256:256", "256:auto", "512:auto", "1024:auto", "2000:2000"]


def worker(args) -> None:
    import numpy as np
    from mpi4py import MPI

    from ozhpc.parallel import ProcessGrid, Summa
    from ozhpc.run.matrices import standard_matrix
    from ozhpc.run.report import sha256_of_matrix

    comm, n = MPI.COMM_WORLD, args.n
    a, b = standard_matrix(n, n, 0.5, 3), standard_matrix(n, n, 0.5, 4)
    rows = []
    with ProcessGrid(comm) as grid:
        for text in args.configs:
            block, panel = text.split(":")
            kb = None if panel == "auto" else int(panel)
            with Summa(grid, n, n, n, block=int(block), kb=kb, engine="numpy") as summa:
                da, dbt, _ = summa.distribute(a, b)
                comm.Barrier()
                t0 = MPI.Wtime()
                dc = summa(da, dbt)
                wall = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
                whole = dc.gather(0)
                rows.append({"config": text, "kb": summa.kb, "panels": summa.panels, "wall": wall,
                             "slices": summa.info.slices,
                             "sha256": sha256_of_matrix(whole) if grid.rank == 0 else None})
        if grid.rank == 0:
            print(json.dumps({"n": n, "ranks": grid.size, "grid": "x".join(map(str, grid.dims)), "rows": rows}))


def driver(args) -> None:
    lines = [f"machine: {platform.node()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}; "
             "NumPy engine, slices auto, 1 BLAS thread per rank", "",
             "| n | ranks | grid | block | panel (kb) | panels | wall s | vs block:block |", "|---|---|---|---|---|---|---|---|"]
    same = True
    for n in args.n:
        for r in args.ranks:
            env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
            cmd = mpiexec_cmd(r) + [sys.executable, __file__, "--worker", "--n", str(n),
                   "--configs", *args.configs]
            out = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
                             .stdout.strip().splitlines()[-1])
            same &= len({row["sha256"] for row in out["rows"]}) == 1
            base = {row["config"].split(":")[0]: row["wall"] for row in out["rows"]
                    if row["config"].split(":")[0] == row["config"].split(":")[1]}
            for row in out["rows"]:
                block = row["config"].split(":")[0]
                ratio = f"{row['wall'] / base[block]:.2f}" if block in base else ""
                lines.append(f"| {n} | {r} | {out['grid']} | {block} | {row['config'].split(':')[1]} ({row['kb']}) | "
                             f"{row['panels']} | {row['wall']:.2f} | {ratio} |")
            print(lines[-1], file=sys.stderr, flush=True)
    lines += ["", f"C bitwise identical across all configs of each n and rank count: {same}"]
    print("\n".join(lines))


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--n", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--configs", nargs="+", default=CONFIGS)
    p.add_argument("--worker", action="store_true", help="run one job's measurements (under mpiexec)")
    args = p.parse_args()
    if args.worker:
        args.n = args.n[0]
        worker(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
