"""The run planner (ozhpc.commands.plan) against measured multi-rank SUMMA runs, both wires.

    python3 bench/scaling/scaling.py [--n 512] [--ranks 1 2 4 8 16]             # CPU, NumPy engine
    python3 bench/scaling/scaling.py --engine cutile --n 8192 --ranks 1 2 4      # ranks sharing ONE GPU

First ``ozhpc plan --calibrate`` (one rank, one BLAS thread, into a temporary cache directory;
the GPU runs use the table's H200 rates unless ``--calibrate``), then one ``mpiexec -n R`` job per
rank count (one BLAS thread per rank; oversubscribed past the cores; with ``cutile`` every rank on
the same GPU, transport "auto"): for each scheme (fixed plans: 7 slices / 40 bits, one pass; then
certified "auto") and wire, a warm-up and a timed n x n x n product; the slowest rank's wall time,
every rank's bytes sent and the SHA-256 of C. Prints a markdown table: measured against predicted
time (error), and bytes sent per rank (must equal the prediction exactly). Ranks sharing one GPU
are modelled as sharing its rates, their panels staged through the host (HOST_STAGED bytes/s, no
overlap: MPI without a progress thread).
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import REPO, mpiexec_cmd, parser  # noqa: E402


CASES = (("ozaki1", {"slices": 7}), ("ozaki2", {"bits": 40}), ("ozaki1", {}), ("ozaki2", {}))
BLOCK = 64
HOST_STAGED = 10e9
"""Bytes/s of a panel broadcast between ranks on one GPU through the host (device -> host, MPI
shared memory, host -> device): an assumption, to be replaced by the measured figure."""


def worker(n: int, engine: str) -> None:
    from mpi4py import MPI

    from ozhpc.parallel import ProcessGrid, Summa
    from ozhpc.run.matrices import standard_matrix
    from ozhpc.run.report import sha256_of_matrix

    comm = MPI.COMM_WORLD
    a, b = standard_matrix(n, n, 0.5, 1), standard_matrix(n, n, 0.5, 2)
    with ProcessGrid(comm) as grid:
        for scheme, fixed in CASES:
            for wire in ("fp64", "planes"):
                with Summa(grid, n, n, n, block=BLOCK if engine == "numpy" else 1024, engine=engine,
                           scheme=scheme, wire=wire, **fixed) as summa:
                    da, dbt, _ = summa.distribute(a, b)
                    summa(da, dbt)   # warm-up (the transport's counters run on: subtract it)
                    before = summa.info.bytes_sent
                    comm.Barrier()
                    t0 = MPI.Wtime()
                    c = summa(da, dbt)
                    wall = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
                    sent = comm.gather(summa.info.bytes_sent - before, root=0)
                    whole = c.gather(0)
                    if comm.Get_rank() == 0:
                        print(json.dumps({"scheme": scheme, "fixed": fixed, "wire": wire, "grid": list(grid.dims),
                                          "kb": summa.kb, "block": summa.mb, "wall": wall, "bytes_sent": sent,
                                          "transport": summa.info.transport, "passes": len(summa.info.pass_planes),
                                          "plan": summa.info.plan_summary,
                                          "sha256": sha256_of_matrix(whole)[:16]}), flush=True)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--engine", choices=("numpy", "cutile"), default="numpy")
    ap.add_argument("--calibrate", action="store_true", help="GPU: calibrate instead of the table's H200 rates")
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return worker(args.n, args.engine)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    from dataclasses import replace

    from ozhpc.commands.plan import RATES_FILE, device_for, load_calibration, predict
    from ozhpc.ozaki.settings import OzakiSettings

    gpu = args.engine != "numpy"
    key = "h200" if gpu else "cpu"
    calibration = {}
    if args.calibrate or not gpu:
        with tempfile.TemporaryDirectory() as config:
            subprocess.run([sys.executable, "-m", "ozhpc", "plan", "--m", "1", "--n", "1", "--k", "1", "--gpus", "1",
                            "--gpu", key, "--calibrate"], env=dict(env, XDG_CONFIG_HOME=config), check=True,
                           capture_output=True)
            calibration = load_calibration(os.path.join(config, "ozhpc", RATES_FILE))
    rates = "; ".join(f"{s} {r['pair_ops'] / 1e9:.3g} G pair ops/s, {r['split_rate'] / 1e6:.3g} M entries/s split"
                      for s, r in calibration.get(key, {}).get("by_scheme", {}).items()) or "the table's H200 rates"
    print(f"Machine: {platform.node()} ({os.cpu_count()} cores), n = {args.n}, engine {args.engine}, one BLAS "
          f"thread per rank{', every rank on one GPU' if gpu else ''}; rates: {rates}")
    print("\n| ranks | grid | scheme | wire | transport | passes | panel | measured s | predicted s | error | "
          "bytes sent (all ranks) | = predicted per rank | SHA-256 of C |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for ranks in args.ranks:
        proc = subprocess.run(mpiexec_cmd(ranks) + [sys.executable, __file__, "--worker",
                               "--n", str(args.n), "--engine", args.engine], env=env, capture_output=True,
                              text=True, check=True)
        for line in proc.stdout.splitlines():
            run = json.loads(line)
            device = device_for(key, calibration, run["scheme"])
            if gpu:   # ranks sharing one GPU share its rates; panels through the host, no overlap
                device = replace(device, pair_ops=device.pair_ops / ranks, split_rate=device.split_rate / ranks,
                                 nvlink=HOST_STAGED, overlap=False)
            settings = OzakiSettings(run["scheme"], **run["fixed"])
            model = predict(args.n, args.n, args.n, tuple(run["grid"]), device, settings, kb=run["kb"],
                            wire=run["wire"], block=(run["block"], run["block"]))
            exact = (run["bytes_sent"] == model.bytes_sent if run["passes"] == 1 and run["plan"] == model.plan
                     else f"n/a: auto ran {run['plan']} in {run['passes']} pass(es), {model.plan} assumed")
            label = run["scheme"] + (" " + ", ".join(f"{k} {v}" for k, v in run["fixed"].items()) if run["fixed"]
                                     else " auto")
            print(f"| {ranks} | {run['grid'][0]}x{run['grid'][1]} | {label} | {run['wire']} | {run['transport']} | "
                  f"{run['passes']} | {run['kb']} | {run['wall']:.3f} | {model.seconds:.3f} | "
                  f"{100 * (model.seconds / run['wall'] - 1):+.0f}% | {sum(run['bytes_sent']):,} | {exact} | "
                  f"`{run['sha256']}` |", flush=True)


if __name__ == "__main__":
    main()
