"""The run planner (ozhpc.planner) against measured CPU SUMMA runs on 1-16 ranks, both wires.

    python3 bench/scaling_cpu.py [--n 512] [--ranks 1 2 4 8 16]

First ``ozhpc plan --calibrate`` (one rank, one BLAS thread, into a temporary cache directory),
then one ``mpiexec -n R`` job per rank count (one BLAS thread per rank; oversubscribed past the
cores): for each scheme (fixed plans: 7 slices / 40 bits, one pass) and wire, a warm-up and a timed
n x n x n product; the slowest rank's wall time and every rank's bytes sent. Prints a markdown table:
measured against predicted time (error), and bytes sent per rank (must equal the prediction exactly).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = (("ozaki1", {"slices": 7}), ("ozaki2", {"bits": 40}))
BLOCK = 64


def worker(n: int) -> None:
    from mpi4py import MPI

    from ozhpc.matrices import standard_matrix
    from ozhpc.parallel import ProcessGrid, Summa

    comm = MPI.COMM_WORLD
    a, b = standard_matrix(n, n, 0.5, 1), standard_matrix(n, n, 0.5, 2)
    with ProcessGrid(comm) as grid:
        for scheme, fixed in CASES:
            for wire in ("fp64", "planes"):
                with Summa(grid, n, n, n, block=BLOCK, engine="numpy", scheme=scheme, wire=wire, **fixed) as plan:
                    da, dbt, _ = plan.distribute(a, b)
                    plan(da, dbt)   # warm-up (the transport's counters run on: subtract it)
                    before = plan.info.bytes_sent
                    comm.Barrier()
                    t0 = MPI.Wtime()
                    plan(da, dbt)
                    wall = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
                    sent = comm.gather(plan.info.bytes_sent - before, root=0)
                    if comm.Get_rank() == 0:
                        print(json.dumps({"scheme": scheme, "wire": wire, "grid": list(grid.dims), "kb": plan.kb,
                                          "wall": wall, "bytes_sent": sent}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return worker(args.n)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    sys.path.insert(0, REPO)
    from ozhpc.ozaki.settings import OzakiSettings
    from ozhpc.planner import device_for, load_calibration, predict

    with tempfile.TemporaryDirectory() as cache:
        env["OZHPC_CACHE_DIR"] = cache
        subprocess.run([sys.executable, "-m", "ozhpc", "plan", "--m", "1", "--n", "1", "--k", "1", "--gpus", "1",
                        "--gpu", "cpu", "--calibrate"], env=env, check=True, capture_output=True)
        calibration = load_calibration(cache)
    print(f"Machine: {platform.node()} ({os.cpu_count()} cores), n = {args.n}, block {BLOCK}, NumPy engine, "
          f"one BLAS thread per rank; calibrated: "
          + ", ".join(f"{s} {r['pair_ops'] / 1e9:.3g} G pair ops/s, {r['split_rate'] / 1e6:.3g} M entries/s split"
                      for s, r in calibration["cpu"]["by_scheme"].items()))
    print("\n| ranks | grid | scheme | wire | panel | measured s | predicted s | error | bytes sent (all ranks) | "
          "= predicted per rank |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for ranks in args.ranks:
        proc = subprocess.run([shutil.which("mpiexec"), "-n", str(ranks), sys.executable, __file__, "--worker",
                               "--n", str(args.n)], env=env, capture_output=True, text=True, check=True)
        for line in proc.stdout.splitlines():
            run = json.loads(line)
            fixed = dict(CASES)[run["scheme"]]
            device = device_for("cpu", calibration, run["scheme"])
            model = predict(args.n, args.n, args.n, tuple(run["grid"]), device,
                            OzakiSettings(run["scheme"], **fixed), kb=run["kb"], wire=run["wire"],
                            block=(BLOCK, BLOCK))
            print(f"| {ranks} | {run['grid'][0]}x{run['grid'][1]} | {run['scheme']} | {run['wire']} | {run['kb']} | "
                  f"{run['wall']:.3f} | {model.seconds:.3f} | {100 * (model.seconds / run['wall'] - 1):+.0f}% | "
                  f"{sum(run['bytes_sent']):,} | {run['bytes_sent'] == model.bytes_sent} |", flush=True)


if __name__ == "__main__":
    main()
