"""Multi-GPU SUMMA benchmark (issues 6 and 7): one rank per GPU, GPU-resident slice panels.

    python bench/scaling/multi_gpu.py --out bench/results/multi_gpu_h200x2   # driver: spawns mpiexec per run
    python bench/scaling/multi_gpu.py --runs 16384:1x1 16384:1x2 32768:2x1     # pick runs (n:PxQ)
    mpiexec -n 2 python bench/scaling/multi_gpu.py --check                    # correctness smoke test
    mpiexec -n 2 python bench/scaling/multi_gpu.py --worker --n 16384 --grid 1x2

Inputs are the standard test matrices' recipe, ``(rand - 0.5) * exp(phi * randn)``, drawn on the
GPU with CuPy's seeded generator: every rank draws the same global A and B (so any grid sees the
same matrices), keeps its block-cyclic pieces and frees the rest; no HDF5 file is involved.
Each worker first runs a small warm-up product (kernel compiles; ``CUDA_TILE_CACHE_DIR`` shares
them between ranks), then times one product: a barrier, ``Summa.__call__``, and per phase the
slowest rank (MPI MAX). TFLOP/s = 2 n^3 / wall (FP64-equivalent). C is gathered to rank 0 and
its SHA-256 (C-ordered little-endian float64, as ``ozhpc gemm`` reports) printed, which must be
the same for every grid at one n.

``--check`` compares, for ragged small sizes, 2-rank SUMMA with every usable transport against
1-GPU ``ozhpc.gemm`` and the CPU NumPy engine, bit for bit (also used by tests/test_multi_gpu.py).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import mpiexec_cmd, parser, phi_matrix, useful, write_result  # noqa: E402



DEFAULT_RUNS = ["16384:1x1", "16384:1x2", "16384:2x1", "20736:1x2", "32768:1x1", "32768:1x2", "32768:2x1"]


def local_piece(cp, grid, layout, global_array, transposed_grid):
    from ozhpc.parallel import DistMatrix

    probe = DistMatrix.__new__(DistMatrix)
    probe.grid, probe.layout, probe.transposed_grid = grid, layout, transposed_grid
    rows, cols = probe.global_rows(), probe.global_cols()
    if len(rows) == global_array.shape[0] and len(cols) == global_array.shape[1]:
        local = global_array  # the whole matrix (1x1 grid, or the full extent on this axis)
    else:
        local = global_array[cp.asarray(rows)][:, cp.asarray(cols)]
    return DistMatrix(grid, layout, cp.ascontiguousarray(local), transposed_grid=transposed_grid)


def gather_sha(grid, c, chunk_rows=4096):
    """SHA-256 of the global C on rank 0 (host assembly; point-to-point in row chunks)."""
    import numpy as np
    from mpi4py import MPI

    from ozhpc.run.report import sha256_of_matrix

    comm = grid.comm
    local = c.local if isinstance(c.local, np.ndarray) else c.local.get()
    if grid.rank != 0:
        for r0 in range(0, max(local.shape[0], 1), chunk_rows):
            comm.Send(np.ascontiguousarray(local[r0:r0 + chunk_rows]), dest=0, tag=7)
        return None
    m, n = c.layout.shape
    out = np.empty((m, n), dtype=np.float64)
    for rank in range(grid.size):
        pr, pc = divmod(rank, grid.q)
        rows = c.layout.rows.global_indices(pr)
        cols = c.layout.cols.global_indices(pc)
        if rank == 0:
            piece = local
        else:
            piece = np.empty((len(rows), len(cols)), dtype=np.float64)
            for r0 in range(0, max(len(rows), 1), chunk_rows):
                comm.Recv(piece[r0:r0 + chunk_rows], source=rank, tag=7)
        out[np.ix_(rows, cols)] = piece
    del local
    return sha256_of_matrix(out)


def worker(args) -> None:
    import numpy as np
    from mpi4py import MPI

    from ozhpc.parallel import ProcessGrid, Summa
    from ozhpc.parallel.localrank import bind_device

    comm = MPI.COMM_WORLD
    choice = bind_device(comm)  # before CuPy touches a device: this rank's GPU
    import cupy as cp

    p, q = (int(x) for x in args.grid.split("x"))
    with ProcessGrid(comm, (p, q)) as grid:
        n = args.n

        def make_plan():
            return Summa(grid, n, n, n, block=(args.block, args.block), kb=args.panel, engine="cutile",
                         transport=args.transport, wire=args.wire, **method(args))

        # Warm-up: one untimed product with a plan of the same shapes, so that the timed one
        # does not include compiling or loading the kernel variants of this rank's local
        # shapes (measured 50-90 ms inside "combine" on the second rank when the warm-up was
        # a small 1024^3 problem) -- the steady state of a job that runs many products.
        with make_plan() as plan:
            ga = phi_matrix(cp, cp.random.RandomState(11), (n, n), args.phi)
            a = local_piece(cp, grid, plan.a_layout, ga, False)
            del ga
            gb = phi_matrix(cp, cp.random.RandomState(12), (n, n), args.phi)  # B; op(B)^T = B.T as the (n x k) operand
            bt = local_piece(cp, grid, plan.bt_layout, cp.ascontiguousarray(gb.T), True)
            del gb
            plan(a, bt)                                 # result dropped
        with make_plan() as plan:                       # same layouts: a and bt still fit
            cp.get_default_memory_pool().free_all_blocks()
            cp.cuda.Device().synchronize()
            comm.Barrier()
            t0 = MPI.Wtime()
            c = plan(a, bt)
            cp.cuda.Device().synchronize()
            wall = MPI.Wtime() - t0
            info = plan.info
            del a, bt
        phases = ["scales", "split", "multiply", "compute", "comm", "comm_exposed", "comm_wait", "combine"]
        mine = np.array([info.seconds.get(ph, 0.0) for ph in phases] + [wall])
        slowest = np.empty_like(mine)
        comm.Allreduce(mine, slowest, op=MPI.MAX)
        sent = comm.gather(info.bytes_sent, root=0)
        devices = comm.gather(f"{MPI.Get_processor_name()}:{cp.cuda.runtime.getDevice()}"
                              f"({'-' if choice is None else choice.source})", root=0)
        mem = comm.gather(int(cp.get_default_memory_pool().total_bytes()), root=0)
        t_sha = MPI.Wtime()
        digest = gather_sha(grid, c)
        sha_s = MPI.Wtime() - t_sha
        if grid.rank == 0:
            sec = dict(zip(phases + ["wall"], slowest.tolist()))
            comm_s = sec["comm"]
            print(json.dumps({
                "n": n, "grid": f"{p}x{q}", "gpus": grid.size, "slices": info.slices, "groups": info.groups, "moduli": info.moduli,
                "pair_gemms": info.int8_gemms, "kb": info.kb, "panels": info.panels,
                "transport": info.transport, "transport_reason": info.transport_reason,
                "seconds": sec, "tflops": 2.0 * n**3 / sec["wall"] / 1e12,
                "tflops_per_gpu": 2.0 * n**3 / sec["wall"] / 1e12 / grid.size,
                "overlap": None if comm_s <= 0 else max(0.0, min(1.0, 1 - sec["comm_exposed"] / comm_s)),
                "bytes_sent_total": int(sum(sent)),
                "bytes_model": sum(info.pass_bytes) * n * (n * (q - 1) + n * (p - 1)), "wire": info.wire,
                "devices": devices, "pool_bytes_max": max(mem), "sha256": digest, "sha_seconds": sha_s,
            }), flush=True)


def check(args) -> None:
    """Bitwise: 2-rank SUMMA with each transport == 1-GPU ozhpc.gemm == CPU NumPy engine."""
    import numpy as np
    from mpi4py import MPI

    import ozhpc
    from ozhpc.parallel import ProcessGrid, Summa
    from ozhpc.parallel.localrank import bind_device
    from ozhpc.parallel.transport_choice import mpi_cuda_support, nccl_available
    from ozhpc.run.matrices import standard_matrix
    from ozhpc.run.report import sha256_of_matrix

    comm = MPI.COMM_WORLD
    bind_device(comm)
    import cupy as cp

    transports = ["mpi-host"] + (["nccl"] if nccl_available() is None else []) \
        + (["cuda-mpi"] if mpi_cuda_support() else [])
    cases = [(997, 1203, 1100, 0.5, dict(slices=7), (64, 96), 256),
             (1024, 2048, 4096, 1.0, dict(slices="auto"), (256, 256), None),
             (300, 200, 5000, 0.5, dict(slices=8), (32, 32), 1000),
             (997, 1203, 1100, 0.5, dict(scheme="ozaki2", bits="auto"), (64, 96), 256),
             (1024, 2048, 4096, 2.0, dict(scheme="ozaki2", bits=60), (256, 256), None)]
    failures, results = [], []
    size = comm.Get_size()
    grids = [(1, size), (size, 1)] if size > 1 else [(1, 1)]
    for m, n, k, phi, opts, block, kb in cases:
        a, b = standard_matrix(m, k, phi, 5), standard_matrix(k, n, phi, 6)
        ref = sha256_of_matrix(ozhpc.gemm(a, b, engine="numpy", **opts)) if comm.Get_rank() == 0 else None
        one = sha256_of_matrix(ozhpc.gemm(cp.asarray(a), cp.asarray(b), engine="cutile", **opts).get()) \
            if comm.Get_rank() == 0 else None
        for dims in grids:
            for tname in transports:
                with ProcessGrid(comm, dims) as grid, \
                        Summa(grid, m, n, k, block=block, kb=kb, engine="cutile", transport=tname,
                              **opts) as plan:
                    da, dbt, _ = plan.distribute(a, b)
                    da.local, dbt.local = cp.asarray(da.local), cp.asarray(dbt.local)
                    c = plan(da, dbt)
                    digest = gather_sha(grid, c)
                    if grid.rank == 0:
                        row = {"m": m, "n": n, "k": k, "scheme": plan.info.scheme, "grid": f"{dims[0]}x{dims[1]}",
                               "transport": plan.info.transport,
                               "kb": plan.kb, "sha256": digest, "same_as_cpu": digest == ref,
                               "same_as_1gpu": digest == one, "bytes_sent": plan.info.bytes_sent}
                        results.append(row)
                        if not (row["same_as_cpu"] and row["same_as_1gpu"]):
                            failures.append(row)
    if comm.Get_rank() == 0:
        print(json.dumps({"ranks": size, "transports": transports, "cases": len(results),
                          "failures": failures, "results": results}), flush=True)
        if failures:
            raise SystemExit("multi-GPU check FAILED: SUMMA differs from the CPU / 1-GPU result")


def median_runs(rows) -> dict:
    """(n, grid) -> the run with the median wall time (a spec listed several times in --runs)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["n"], r["grid"]), []).append(r)
    return {key: sorted(rs, key=lambda r: r["seconds"]["wall"])[(len(rs) - 1) // 2]
            for key, rs in groups.items()}


def markdown(rows, meta) -> str:
    by = median_runs(rows)
    lines = [f"# Multi-GPU SUMMA (issue 6), {meta['date']}", "",
             f"- machine: {meta['machine']}", f"- command: `{meta['command']}`",
             f"- inputs: `(rand - 0.5) * exp(phi * randn)`, phi = {meta['phi']}, drawn on the GPU (CuPy, seeds 11/12); "
             f"slices {meta['slices']}, block {meta['block']}, panel width "
             f"{meta['panel'] or 'auto (min(4096, k / max(P, Q)))'}, transport {meta['transport']}",
             "- wall = barrier + one product (split, panel loop, combine), slowest rank; TFLOP/s = 2 n^3 / wall "
             "(FP64-equivalent); compute = GPU time of the panel products (CUDA events); comm = GPU time of the "
             "broadcasts (NCCL, events on the communication stream); exposed = panel-loop time - compute; "
             "overlap = 1 - exposed / comm.", "",
             "| n | grid | GPUs | transport/wire | panels x kb | wall s | TFLOP/s | TFLOP/s per GPU | split s | multiply s | "
             "compute s | comm s | exposed s | overlap | bytes sent (= model) | SHA-256 of C |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["seconds"]
        ov = "n/a" if r["overlap"] is None else f"{100 * r['overlap']:.0f}%"
        same = "=" if r["bytes_sent_total"] == r["bytes_model"] else f"model {r['bytes_model']:,}"
        lines.append(f"| {r['n']} | {r['grid']} | {r['gpus']} | {r['transport']}/{r.get('wire', 'planes')} | "
                     f"{r['panels']} x {r['kb']} | "
                     f"{s['wall']:.3f} | {r['tflops']:.2f} | {r['tflops_per_gpu']:.2f} | {s['split']:.3f} | "
                     f"{s['multiply']:.3f} | {s['compute']:.3f} | {s['comm']:.4f} | {s['comm_exposed']:.3f} | {ov} | "
                     f"{r['bytes_sent_total']:,} ({same}) | `{r['sha256']}` |")
    lines += ["", "## Scaling", "", "| what | runs | figure | target |", "|---|---|---|---|"]
    for n in sorted({r["n"] for r in rows}):
        one = by.get((n, "1x1"))
        for g in ("1x2", "2x1"):
            two = by.get((n, g))
            if one and two:
                sp = one["seconds"]["wall"] / two["seconds"]["wall"]
                lines.append(f"| strong, n = {n} | 1x1 -> {g} | speedup {sp:.2f}x (efficiency {100 * sp / 2:.0f}%) | "
                             f">= 1.7x at n = 32768 |")
    base = by.get((16384, "1x1"))
    for (n, grid), r in sorted(by.items()):
        if base and r["gpus"] == 2 and n not in {x["n"] for x in rows if x["gpus"] == 1}:
            eff = r["tflops_per_gpu"] / base["tflops_per_gpu"]
            lines.append(f"| weak, n = 16384 on 1 GPU -> n = {n} on 2 ({grid}; 2 n^3 per GPU "
                         f"x{(n / 16384) ** 3 / 2:.2f}) | per-GPU TFLOP/s | {100 * eff:.0f}% | >= 90% |")
    repeated = {key: len([r for r in rows if (r["n"], r["grid"]) == key]) for key in by}
    if any(v > 1 for v in repeated.values()):
        lines += ["", "Scaling figures use the run with the median wall time of each (n, grid) "
                  "listed more than once: " + ", ".join(f"{n}:{g} x{v}" for (n, g), v in sorted(repeated.items())
                                                         if v > 1) + "."]
    shas = {}
    for r in rows:
        shas.setdefault(r["n"], set()).add(r["sha256"])
    lines += ["", "## Bits", ""] + [f"- n = {n}: {len(v)} distinct SHA-256 over {sum(1 for r in rows if r['n'] == n)} "
                                    f"runs -> {'EQUAL across grids' if len(v) == 1 else 'DIFFERENT'}"
                                    for n, v in sorted(shas.items())]
    return "\n".join(lines) + "\n"


def method(args) -> dict:
    """Summa/gemm keywords of the scheme under test."""
    return dict(slices=args.slices) if args.scheme == "ozaki1" else dict(scheme="ozaki2", bits=args.bits)


def driver(args) -> None:
    rows = []
    t_start = time.time()
    for spec in args.runs:
        n, grid = spec.split(":")
        p, q = (int(x) for x in grid.split("x"))
        cmd = mpiexec_cmd(p * q) + [sys.executable, os.path.abspath(__file__), "--worker", "--n", n, "--grid", grid,
                                    "--slices", str(args.slices), "--scheme", args.scheme, "--bits", str(args.bits),
                                    "--phi", str(args.phi), "--block", str(args.block),
                                    "--transport", args.transport, "--wire", args.wire] + \
            (["--panel", str(args.panel)] if args.panel else [])
        if args.budget and time.time() - t_start > args.budget:
            print(f"# skipped {spec}: over the time budget", flush=True)
            continue
        t0 = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
        if (proc.returncode or not lines) and args.fallback and args.fallback != args.transport:
            print(f"# {spec} failed with transport {args.transport}:\n{useful(proc.stderr)}\n# retrying with "
                  f"{args.fallback}", flush=True)
            cmd[cmd.index("--transport") + 1] = args.fallback
            proc = subprocess.run(cmd, capture_output=True, text=True)
            lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
        if proc.returncode or not lines:
            print(f"# {spec} failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{useful(proc.stderr)}", flush=True)
            continue
        row = json.loads(lines[-1])
        row["job_seconds"] = time.time() - t0
        rows.append(row)
        print(json.dumps(row), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "machine": args.machine or platform.node(),
            "command": " ".join(["python3", "bench/scaling/multi_gpu.py"] + sys.argv[1:]), "phi": args.phi,
            "slices": args.slices if args.scheme == "ozaki1" else f"ozaki2, {args.bits} bits",
            "block": args.block, "panel": args.panel, "transport": args.transport}
    text = markdown(rows, meta)
    print(text)
    write_result(args.out, text, {"meta": meta, "rows": rows})


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--worker", action="store_true", help="one timed run (under mpiexec)")
    ap.add_argument("--check", action="store_true", help="bitwise smoke test (under mpiexec)")
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--grid", default="1x1", help="PxQ (worker)")
    ap.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="n:PxQ specs (driver)")
    ap.add_argument("--slices", default=7, type=lambda x: x if x == "auto" else int(x))
    ap.add_argument("--scheme", default="ozaki1", choices=["ozaki1", "ozaki2"])
    ap.add_argument("--bits", default="auto", type=lambda x: x if x == "auto" else int(x),
                    help="scheme II bits (with --scheme ozaki2; --slices is then ignored)")
    ap.add_argument("--phi", type=float, default=0.5)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--panel", type=int, default=None, help="k-panel width (default: auto)")
    ap.add_argument("--transport", default="auto")
    ap.add_argument("--wire", default="auto", choices=["auto", "fp64", "planes"], help="SUMMA panels as FP64 or planes")
    ap.add_argument("--fallback", default="", help="driver: retry a failed run with this transport")
    ap.add_argument("--machine", default="", help="machine description for the table")
    ap.add_argument("--budget", type=float, default=0, help="driver: skip runs after this many seconds")
    ap.add_argument("--out", default="", help="driver: write OUT.md and OUT.json")
    args = ap.parse_args()
    if args.worker:
        worker(args)
    elif args.check:
        check(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
