"""End-to-end benchmark for complex data: complex128 HDF5 in -> ZGEMM -> HDF5 out, ``ozhpc gemm``
next to the job written by hand (h5py + CuPy).

    python bench/end_to_end/complex_e2e.py --dir /local/disk/ze2e --n 8192 16384   # H200, engine cutile
    python bench/end_to_end/complex_e2e.py --cpu-smoke --dir /tmp/ze2e             # CPU check: n = 256, 512

As :mod:`end_to_end` (its baseline, its fresh-process ``ozhpc gemm`` run, its table and targets),
on complex inputs: A and B (phi 0.5 real and imaginary parts) from ``ozhpc gen --complex``; the
I/O yardstick is h5py's own read of A and B and write of an n x n complex128 C; the baseline reads
them with h5py, multiplies with ``cupy.matmul`` (cuBLAS ZGEMM; NumPy with --cpu-smoke) and writes C;
ozhpc runs its certified default (``ozhpc gemm A B -o C``) after ``ozhpc warmup``.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import parser  # noqa: E402
from end_to_end import baseline, ozhpc, run_ozhpc, table, targets  # noqa: E402


def complex_inputs(directory: str, n: int) -> str:
    """Complex A and B of size n in one file, generated once (kept for later runs)."""
    path = os.path.join(directory, f"zin_{n}.h5")
    if not os.path.exists(path):
        for name, seed in (("A", 1), ("B", 2)):
            ozhpc("gen", "--complex", "--phi", "0.5", "--shape", f"{n}x{n}", "--seed", seed, f"{path}:/{name}")
    return path


def complex_io(path: str, directory: str, n: int) -> dict:
    """h5py's own read of A and B and write of an n x n complex128 C (seconds)."""
    import h5py

    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        a, b = f["A"][...], f["B"][...]
    read_s = time.perf_counter() - t0
    assert a.dtype.kind == "c" and b.dtype.kind == "c", (a.dtype, b.dtype)
    out = os.path.join(directory, f"zh5py_{n}.h5")
    t0 = time.perf_counter()
    with h5py.File(out, "w") as f:
        f.create_dataset("C", data=a)
    write_s = time.perf_counter() - t0
    os.remove(out)
    return {"read": read_s, "write": write_s, "bytes_read": 2 * 16 * n * n, "bytes_written": 16 * n * n}


def measure(args) -> list[dict]:
    os.makedirs(args.dir, exist_ok=True)
    warm_s, proc = ozhpc("warmup", check=False)
    print(f"warmup: {warm_s:.1f} s", file=sys.stderr, flush=True)
    rows = []
    for n in args.n:
        path = complex_inputs(args.dir, n)
        io = complex_io(path, args.dir, n)
        base = baseline(path, args.dir, n, gpu=not args.cpu_smoke)
        run = run_ozhpc(path, args.dir, n, args.engine, [])
        rows.append({"n": n, "scheme": "complex default (ozaki2 auto, guarantee dgemm)", "io": io, "baseline": base,
                     **run})
        print(f"n={n}: h5py read {io['read']:.2f} s write {io['write']:.2f} s; baseline {base['wall']:.2f} s "
              f"(ZGEMM {base['multiply']:.2f} s); ozhpc gemm {run['wall']:.2f} s", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--n", type=int, nargs="+", help="sizes (default 8192; 256 512 with --cpu-smoke)")
    p.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "ozhpc-ze2e"),
                   help="working directory on local disk (inputs are kept there)")
    p.add_argument("--engine", help="ozhpc engine (default cutile; numpy with --cpu-smoke)")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, NumPy engine and NumPy baseline")
    p.add_argument("--json", help="also write the measurements here")
    p.add_argument("--out", help="also write the Markdown here")
    args = p.parse_args()
    args.n = args.n or ([256, 512] if args.cpu_smoke else [8192])
    args.engine = args.engine or ("numpy" if args.cpu_smoke else "cutile")
    rows = measure(args)
    text = [f"# bench/end_to_end/complex_e2e.py, {time.strftime('%Y-%m-%d', time.gmtime())}", "",
            f"Command: `python {' '.join(sys.argv)}`", f"Machine: {platform.node()}, {os.cpu_count()} cores, "
            f"engine {rows[0]['engine'] if rows else args.engine}; complex128 inputs and outputs in {args.dir}", "",
            "Baseline: h5py read, `cupy.matmul` of complex128 (cuBLAS ZGEMM), h5py write, in this process.", ""]
    text += table(rows) + ["", "Targets of the real job, for comparison (largest n):"] + targets(rows)
    print("\n".join(text))
    for path, body in ((args.out, "\n".join(text) + "\n"), (args.json, json.dumps(rows, indent=1))):
        if path:
            with open(path, "w") as f:
                f.write(body)


if __name__ == "__main__":
    main()
