"""End-to-end benchmark: HDF5 in -> product -> HDF5 out, ozhpc's CLI next to a hand-written job.

    python bench/end_to_end/end_to_end.py --dir /local/disk/e2e                 # H200: n = 8192, 16384, engine cutile
    python bench/end_to_end/end_to_end.py --cpu-smoke --dir /tmp/e2e            # CPU check: n = 256, 512, engine numpy

For each n: the inputs A and B (standard matrices, phi 0.5) are generated once with
``ozhpc gen``; h5py's own contiguous read of A and B and write of an n x n C are timed (the
I/O yardstick); the baseline is the job written by hand (h5py read of A and B, ``cupy.matmul``
-- NumPy's ``@`` with --cpu-smoke --, h5py write of C); then ``ozhpc warmup`` fills the
kernel cache and ``ozhpc gemm A B -o C --engine E --report r.json`` runs as a user would
(a fresh process each) with the default options, with --scheme ozaki2 --bits 53, and with
--scheme ozaki1 --guarantee tight (the default before 2026-12-02). It prints a
Markdown table with the report's phases, wall times and ratios, and checks the targets:
end-to-end <= 1.5x the baseline at the largest n, warm start-up <= 2 s, read and write
within 1.5x of h5py's. The baseline and h5py's I/O are timed inside this process (no
interpreter, CuPy or MPI start-up); ozhpc's wall time is a fresh process's, start-up included,
as a user sees it. "start-up" = wall - the report's total (process start, imports, MPI)
+ its "scales" phase (engine start-up and kernel loading are timed there); an upper bound.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import REPO, parser  # noqa: E402

SCHEMES = (("default (ozaki2 auto, guarantee dgemm)", []), ("ozaki2 --bits 53", ["--scheme", "ozaki2", "--bits", "53"]),
           ("ozaki1 auto, guarantee tight", ["--scheme", "ozaki1", "--guarantee", "tight"]))
PHASES = ("read", "scales", "split", "multiply", "combine", "fingerprint", "write", "total")


def ozhpc(*args, check=True) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``python -m ozhpc ARGS`` as a user would; returns (wall seconds, process)."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ozhpc", *map(str, args)], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if check and proc.returncode != 0:
        raise SystemExit(f"ozhpc {' '.join(map(str, args))} failed:\n{proc.stdout}\n{proc.stderr}")
    return wall, proc


def inputs(directory: str, n: int) -> str:
    """A and B of size n in one file, generated once (kept for later runs)."""
    path = os.path.join(directory, f"in_{n}.h5")
    if not os.path.exists(path):
        for name, seed in (("A", 1), ("B", 2)):
            ozhpc("gen", "--phi", "0.5", "--shape", f"{n}x{n}", "--seed", seed, f"{path}:/{name}")
    return path


def h5py_io(path: str, directory: str, n: int) -> dict:
    """h5py's own contiguous read of A and B and write of an n x n float64 C (seconds)."""
    import h5py

    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        a, b = f["A"][...], f["B"][...]
    read_s = time.perf_counter() - t0
    out = os.path.join(directory, f"h5py_{n}.h5")
    t0 = time.perf_counter()
    with h5py.File(out, "w") as f:
        f.create_dataset("C", data=a)
    write_s = time.perf_counter() - t0
    os.remove(out)
    del a, b
    return {"read": read_s, "write": write_s, "bytes_read": 2 * 8 * n * n, "bytes_written": 8 * n * n}


def baseline(path: str, directory: str, n: int, gpu: bool) -> dict:
    """The job written by hand: h5py read, cupy.matmul (numpy on CPU), h5py write."""
    import h5py

    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        a, b = f["A"][...], f["B"][...]
    t1 = time.perf_counter()
    if gpu:
        import cupy

        c = cupy.asnumpy(cupy.matmul(cupy.asarray(a), cupy.asarray(b)))
    else:
        c = a @ b
    t2 = time.perf_counter()
    out = os.path.join(directory, f"base_{n}.h5")
    with h5py.File(out, "w") as f:
        f.create_dataset("C", data=c)
    t3 = time.perf_counter()
    os.remove(out)
    return {"read": t1 - t0, "multiply": t2 - t1, "write": t3 - t2, "wall": t3 - t0}


def run_ozhpc(path: str, directory: str, n: int, engine: str, extra: list) -> dict:
    """One ``ozhpc gemm`` run in a fresh process; the report's phases plus wall and start-up."""
    out, report = os.path.join(directory, f"oz_{n}.h5"), os.path.join(directory, f"oz_{n}.json")
    wall, _ = ozhpc("gemm", f"{path}:/A", f"{path}:/B", "-o", f"{out}:/C", "--engine", engine, "--force",
                    "--progress", "off", "--report", report, *extra)
    with open(report) as f:
        rep = json.load(f)
    os.remove(out)
    s = rep["seconds"]
    return {"wall": wall, "seconds": {p: s.get(p, 0.0) for p in PHASES},
            "startup": wall - s["total"] + s.get("scales", 0.0), "fingerprint": rep.get("fingerprint"),
            "engine": rep["engine"], "pair_gemms": rep["int8_gemms"], "tflops": rep["tflops"],
            "kernels": rep.get("kernels")}


def measure(args) -> list[dict]:
    os.makedirs(args.dir, exist_ok=True)
    warm_s, proc = ozhpc("warmup", check=False)
    print(f"warmup: {warm_s:.1f} s: {proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr}",
          file=sys.stderr, flush=True)
    rows = []
    for n in args.n:
        path = inputs(args.dir, n)
        io = h5py_io(path, args.dir, n)
        base = baseline(path, args.dir, n, gpu=not args.cpu_smoke)
        print(f"n={n}: h5py read {io['read']:.2f} s write {io['write']:.2f} s; baseline {base['wall']:.2f} s",
              file=sys.stderr, flush=True)
        for name, extra in SCHEMES:
            run = run_ozhpc(path, args.dir, n, args.engine, extra)
            rows.append({"n": n, "scheme": name, "io": io, "baseline": base, **run})
            print(f"  {name}: {run['wall']:.2f} s", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> list[str]:
    """The Markdown table: phases, wall, baseline and the ratios the targets are about."""
    head = ["n", "scheme", "wall s", "baseline s", "x baseline", "start-up s"] + [f"{p} s" for p in PHASES] + \
           ["read GB/s (h5py)", "write GB/s (h5py)", "read x h5py", "write x h5py", "kernels stored / compiled"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s, io, base = r["seconds"], r["io"], r["baseline"]
        cells = [r["n"], r["scheme"], f"{r['wall']:.2f}", f"{base['wall']:.2f}", f"{r['wall'] / base['wall']:.2f}",
                 f"{r['startup']:.2f}"] + [f"{s[p]:.3f}" for p in PHASES]
        cells += [f"{io['bytes_read'] / s['read'] / 1e9:.2f} ({io['bytes_read'] / io['read'] / 1e9:.2f})",
                  f"{io['bytes_written'] / s['write'] / 1e9:.2f} ({io['bytes_written'] / io['write'] / 1e9:.2f})",
                  f"{s['read'] / io['read']:.2f}", f"{s['write'] / io['write']:.2f}"]
        kn = r.get("kernels")
        cells.append(f"{kn['from_store']} / {kn['compiled']}" if kn else "-")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return lines


def targets(rows: list[dict]) -> list[str]:
    """The issue's targets, met or not, at the largest n."""
    top = [r for r in rows if r["n"] == max(r["n"] for r in rows)]
    out = []
    for r in top:
        checks = {"end-to-end <= 1.5x baseline": r["wall"] / r["baseline"]["wall"] <= 1.5,
                  "warm start-up <= 2 s": r["startup"] <= 2.0,
                  "read <= 1.5x h5py": r["seconds"]["read"] <= 1.5 * r["io"]["read"],
                  "write <= 1.5x h5py": r["seconds"]["write"] <= 1.5 * r["io"]["write"]}
        out.append(f"- n = {r['n']}, {r['scheme']}: " + ", ".join(f"{k}: {'met' if v else 'NOT met'}"
                                                                  for k, v in checks.items()))
    return out


def main(doc: str = __doc__, measure=measure, default_n=(8192, 16384), dir_name: str = "ozhpc-e2e",
         what: str = "inputs and outputs", baseline_line: str = "") -> None:
    """The command line of an end-to-end benchmark (this one's, or a variant's such as complex_e2e.py)."""
    p = parser(doc)
    p.add_argument("--n", type=int, nargs="+",
                   help=f"sizes (default {' '.join(map(str, default_n))}; 256 512 with --cpu-smoke)")
    p.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), dir_name),
                   help="working directory on local disk (inputs are kept there)")
    p.add_argument("--engine", help="ozhpc engine (default cutile; numpy with --cpu-smoke)")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, NumPy engine and NumPy baseline")
    p.add_argument("--json", help="also write the measurements here")
    p.add_argument("--out", help="also write the Markdown here")
    args = p.parse_args()
    args.n = args.n or ([256, 512] if args.cpu_smoke else list(default_n))
    args.engine = args.engine or ("numpy" if args.cpu_smoke else "cutile")
    rows = measure(args)
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO)
    text = [f"# {script}, {time.strftime('%Y-%m-%d', time.gmtime())}", "",
            f"Command: `python {' '.join(sys.argv)}`", f"Machine: {platform.node()}, {os.cpu_count()} cores, "
            f"engine {rows[0]['engine'] if rows else args.engine}; {what} in {args.dir}", ""]
    text += ([baseline_line, ""] if baseline_line else []) + table(rows)
    text += ["", "Targets" + (" of the real job, for comparison" if baseline_line else "") + " (largest n):"]
    text += targets(rows)
    print("\n".join(text))
    for path, body in ((args.out, "\n".join(text) + "\n"), (args.json, json.dumps(rows, indent=1))):
        if path:
            with open(path, "w") as f:
                f.write(body)


if __name__ == "__main__":
    main()
