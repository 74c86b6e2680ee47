"""Distributed CPU benchmark: SUMMA + Ozaki (NumPy engine) at n = 2048 on 1, 2, 4 ranks.

    python bench/scaling/dist_cpu.py                       # spawns mpiexec -n 1, 2, 4 itself
    python bench/scaling/dist_cpu.py --n 1024 --ranks 1 2  # smaller
    mpiexec -n 4 python bench/scaling/dist_cpu.py --worker --n 2048 --block 256

Each job first checks correctness (a 192 x 160 x 288 product, bit for bit against
single-process ``ozhpc.gemm``), then times the n x n x n product: a barrier, the
product, and per phase the slowest rank's time (MPI MAX). It prints one JSON line;
the driver collects them into a Markdown table with bytes moved against the SUMMA
model (every k-panel of op(A) goes to Q-1 ranks per process row, of op(B) to P-1:
``s * k * (m (Q-1) + n (P-1))`` bytes of int8 slices) and checks that C has the
same SHA-256 for every rank count. Benchmark, not a test; inputs are generated on
every rank (the timed product itself never holds a global matrix).
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import mpiexec_cmd, parser  # noqa: E402


def worker(args) -> None:
    import numpy as np
    from mpi4py import MPI

    import ozhpc
    from ozhpc.parallel import ProcessGrid, Summa
    from ozhpc.run.matrices import standard_matrix
    from ozhpc.run.report import sha256_of_matrix

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    with ProcessGrid(comm) as grid:
        # correctness first
        a, b = standard_matrix(192, 288, 0.5, 1), standard_matrix(288, 160, 0.5, 2)
        with Summa(grid, 192, 160, 288, block=(32, 32), engine="numpy", slices=args.slices) as summa:
            c = summa(*summa.distribute(a, b)[:2]).gather()
        if rank == 0:
            ok = np.array_equal(c, ozhpc.gemm(a, b, engine="numpy", slices=args.slices))
            if not ok:
                raise SystemExit("correctness check failed: SUMMA differs from ozhpc.gemm")

        n = args.n
        a, b = standard_matrix(n, n, 0.5, 3), standard_matrix(n, n, 0.5, 4)
        with Summa(grid, n, n, n, block=(args.block, args.block), engine="numpy", slices=args.slices) as summa:
            da, dbt, _ = summa.distribute(a, b)
            del a, b
            comm.Barrier()
            t0 = MPI.Wtime()
            dc = summa(da, dbt)
            wall = MPI.Wtime() - t0
            info = summa.info
        phases = ["scales", "split", "multiply", "comm_wait", "combine"]
        mine = np.array([info.seconds.get(p, 0.0) for p in phases] + [wall])
        slowest = np.empty_like(mine)
        comm.Allreduce(mine, slowest, op=MPI.MAX)
        sent = comm.gather(info.bytes_sent, root=0)
        whole = dc.gather(0)
        if rank == 0:
            p, q = grid.dims
            model = info.planes * n * (n * (q - 1) + n * (p - 1))
            print(json.dumps({
                "ranks": grid.size, "grid": f"{p}x{q}", "n": n, "block": args.block, "slices": info.slices,
                "pair_gemms": info.int8_gemms, "panels": info.panels,
                "seconds": dict(zip(phases + ["wall"], slowest.tolist())),
                "gflops": 2.0 * n**3 / slowest[-1] / 1e9,
                "bytes_sent_total": int(sum(sent)), "bytes_sent_max": int(max(sent)), "bytes_model": model,
                "sha256": sha256_of_matrix(whole),
            }), flush=True)


def driver(args) -> None:
    cores = os.cpu_count() or 1
    rows = []
    for r in args.ranks:
        threads = str(args.threads or max(1, cores // r))
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        cmd = mpiexec_cmd(r) + [sys.executable, __file__, "--worker", "--n", str(args.n),
               "--block", str(args.block), "--slices", str(args.slices)]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]) | {"threads_per_rank": int(threads)})
        print(json.dumps(rows[-1]), flush=True)
    same = len({row["sha256"] for row in rows}) == 1
    lines = [f"machine: {platform.node()}, {cores} cores, {platform.processor() or platform.machine()}; "
             f"n = {args.n}, block {args.block}, slices {args.slices}", "",
             "| ranks | grid | threads/rank | wall s | scales | split | multiply | comm wait | combine | "
             "GFLOP/s | bytes sent (total) | SUMMA model | max per rank |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        s = row["seconds"]
        lines.append(f"| {row['ranks']} | {row['grid']} | {row['threads_per_rank']} | {s['wall']:.2f} | "
                     f"{s['scales']:.3f} | {s['split']:.3f} | {s['multiply']:.2f} | {s['comm_wait']:.2f} | "
                     f"{s['combine']:.3f} | {row['gflops']:.2f} | {row['bytes_sent_total']:,} | "
                     f"{row['bytes_model']:,} | {row['bytes_sent_max']:,} |")
    lines += ["", f"C bitwise identical across rank counts: {same} (sha256 {rows[0]['sha256'][:16]}...)"]
    print("\n".join(lines))
    if not same:
        raise SystemExit("SHA-256 of C differs between rank counts")


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--slices", type=int, default=7)
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS threads per rank (default 1; 0 = cores / ranks)")
    p.add_argument("--worker", action="store_true", help="run one measurement (under mpiexec)")
    args = p.parse_args()
    worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    main()
