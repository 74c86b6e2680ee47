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

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from end_to_end import baseline, ozhpc, run_ozhpc  # noqa: E402
from end_to_end import main as e2e_main  # noqa: E402


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
    e2e_main(__doc__, measure, default_n=(8192,), dir_name="ozhpc-ze2e", what="complex128 inputs and outputs",
             baseline_line="Baseline: h5py read, `cupy.matmul` of complex128 (cuBLAS ZGEMM), h5py write, in this process.")


if __name__ == "__main__":
    main()
