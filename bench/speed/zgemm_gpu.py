"""GPU benchmark of ozhpc's complex product (ZGEMM) against cuBLAS ZGEMM (not a test).

    python3 bench/speed/zgemm_gpu.py --sizes 8192 16384 32768 --out bench/results/zgemm_h200_DATE
    python3 bench/speed/zgemm_gpu.py --sizes 8192 --e2e 8192 --out ...   # plus the HDF5 job
    MODE=complex bash bench/gpu.sh                                      # the same from the suite

For each n (phi = 0.5 real and imaginary parts, ``(rand - 0.5) * exp(0.5 * randn)`` each):
cuBLAS ZGEMM (CuPy ``matmul`` of complex128) and certified default ``ozhpc.gemm`` (scheme II,
guarantee "dgemm") on the same CuPy arrays, medians of CUDA-event times after one warm-up; the
speed-up; the sampled error ``max |C_ij - (AB)_ij| / (|A||B|)_ij`` (complex moduli) of both against
the exact product (integer sums of the parts' products); the int8 products' rate of the complex
product next to the real product's of the same n (``int8_gemms * 2 n^3`` over the engine's
product time). ``--e2e N``: ``ozhpc gemm`` on complex HDF5 datasets (``ozhpc gen --complex``)
beside a hand-written h5py + CuPy ZGEMM of the same files, wall seconds each.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
from fractions import Fraction

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from common import REPO, parser, sample_indices, time_events  # noqa: E402

from ozhpc.run.reference import exact_dot  # noqa: E402


def complex_inputs(cp, n: int, phi: float, seed: int):
    rs = cp.random.RandomState(seed)

    def part():
        return (rs.random_sample((n, n)) - 0.5) * cp.exp(phi * rs.standard_normal((n, n)))
    a = part() + 1j * part()
    b = part() + 1j * part()
    return a, b


def complex_reference(cp, a, b, idx):
    """Exact (re, im) of the sampled entries and (|A||B|)_ij of the complex moduli."""
    import numpy as np
    out = []
    for i, j in idx:
        row, col = cp.asnumpy(a[i, :]), cp.asnumpy(b[:, j])
        re = exact_dot(row.real, col.real) - exact_dot(row.imag, col.imag)
        im = exact_dot(row.real, col.imag) + exact_dot(row.imag, col.real)
        out.append((re, im, float(np.abs(row) @ np.abs(col))))
    return out


def complex_error(cp, c, idx, ref) -> float:
    vals = cp.asnumpy(c[tuple(zip(*idx))])
    worst = 0.0
    for v, (re, im, scale) in zip(vals, ref):
        dr, di = float(Fraction(float(v.real)) - re), float(Fraction(float(v.imag)) - im)
        worst = max(worst, (dr * dr + di * di) ** 0.5 / scale)
    return worst


def product_rate(info, n: int) -> float | None:
    """int8 TOPS of the products: int8_gemms * 2 n^3 over the engine's product seconds."""
    t = info.seconds.get("multiply")
    return info.int8_gemms * 2.0 * n**3 / t / 1e12 if t else None


def bench_size(cp, ozhpc, n: int, phi: float, reps: int, samples: int, seed: int = 7) -> dict:
    a, b = complex_inputs(cp, n, phi, seed)
    row = {"n": n, "phi": phi}
    c = cp.empty((n, n), dtype=cp.complex128)
    row["zgemm_seconds"] = time_events(cp, lambda: cp.matmul(a, b, out=c), reps)
    idx = sample_indices(n, samples, seed)
    ref = complex_reference(cp, a, b, idx)
    row["zgemm_error"] = complex_error(cp, c, idx, ref)
    del c
    out = {}

    def run():
        out["c"], out["info"] = ozhpc.gemm(a, b, engine="cutile", info=True)
    row["ozhpc_seconds"] = time_events(cp, run, reps)
    info = out["info"]
    row["ozhpc_error"] = complex_error(cp, out["c"], idx, ref)
    row.update(plan=info.plan_summary, int8_gemms=info.int8_gemms, certified=info.certified,
               worst_ratio=info.worst_ratio, phases=dict(info.seconds), complex_tops=product_rate(info, n))
    row["speedup"] = row["zgemm_seconds"] / row["ozhpc_seconds"]
    row["zgemm_tflops"] = 8.0 * n**3 / row["zgemm_seconds"] / 1e12
    row["ozhpc_tflops"] = 8.0 * n**3 / row["ozhpc_seconds"] / 1e12
    del out["c"]
    ar, br = cp.ascontiguousarray(a.real), cp.ascontiguousarray(b.real)
    del a, b
    _, real_info = ozhpc.gemm(ar, br, engine="cutile", info=True)   # warm-up
    _, real_info = ozhpc.gemm(ar, br, engine="cutile", info=True)
    row.update(real_plan=real_info.plan_summary, real_int8_gemms=real_info.int8_gemms,
               real_tops=product_rate(real_info, n))
    return row


def end_to_end(n: int, directory: str, phi: float) -> dict:
    """``ozhpc gemm`` on complex HDF5 inputs beside h5py + CuPy on the same files (wall seconds)."""
    os.makedirs(directory, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    src = os.path.join(directory, "zin.h5")
    for name, seed in (("A", 1), ("B", 2)):
        subprocess.run([sys.executable, "-m", "ozhpc", "gen", "--shape", f"{n}x{n}", "--complex", "--phi", str(phi),
                        "--seed", str(seed), "--force", f"{src}:/{name}"], check=True, capture_output=True, env=env)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ozhpc", "gemm", f"{src}:/A", f"{src}:/B", "-o",
                           os.path.join(directory, "zout.h5") + ":/C", "--force", "--progress", "off",
                           "--report", os.path.join(directory, "zrun.json"), "--engine", "cutile"],
                          capture_output=True, text=True, env=env)
    ozhpc_s = time.perf_counter() - t0
    hand = ("import h5py, cupy as cp, sys\n"
            "f = h5py.File(sys.argv[1], 'r'); a = cp.asarray(f['A'][...]); b = cp.asarray(f['B'][...])\n"
            "c = cp.asnumpy(a @ b)\n"
            "with h5py.File(sys.argv[2], 'w') as g: g['C'] = c\n")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", hand, src, os.path.join(directory, "hand.h5")], check=True)
    hand_s = time.perf_counter() - t0
    report = {}
    if proc.returncode == 0:
        with open(os.path.join(directory, "zrun.json")) as f:
            report = json.load(f)
    return {"n": n, "ozhpc_gemm_seconds": ozhpc_s, "h5py_cupy_seconds": hand_s, "rc": proc.returncode,
            "stderr": proc.stderr[-2000:], "report_seconds": report.get("seconds"), "certified": report.get("certified"),
            "plan": report.get("plan_summary")}


def markdown(result) -> str:
    lines = [f"# ZGEMM: ozhpc (certified default, scheme II) vs cuBLAS ZGEMM, {result['device']}", "",
             f"date {result['date']}, command `{result['command']}`", "",
             "| n | cuBLAS ZGEMM s | TFLOP/s | ozhpc s | TFLOP/s | speed-up | int8 GEMMs | err cuBLAS | err ozhpc "
             "| certified | complex int8 TOPS | real int8 TOPS (GEMMs) |", "|" + "---|" * 12]
    for r in result["sizes"]:
        lines.append(f"| {r['n']} | {r['zgemm_seconds']:.3f} | {r['zgemm_tflops']:.1f} | {r['ozhpc_seconds']:.3f} | "
                     f"{r['ozhpc_tflops']:.1f} | {r['speedup']:.2f} | {r['int8_gemms']} | {r['zgemm_error']:.2e} | "
                     f"{r['ozhpc_error']:.2e} | {r['certified']} | {r['complex_tops'] or 0:.0f} | "
                     f"{r['real_tops'] or 0:.0f} ({r['real_int8_gemms']}) |")
    lines += ["", "Plans: " + "; ".join(f"n={r['n']}: {r['plan']}" for r in result["sizes"]), "",
              "Phases (s): " + "; ".join(f"n={r['n']}: " + ", ".join(f"{k} {v:.3f}" for k, v in r["phases"].items())
                                         for r in result["sizes"])]
    for e in result.get("e2e", []):
        lines += ["", f"End to end, complex HDF5 n={e['n']}: ozhpc gemm {e['ozhpc_gemm_seconds']:.1f} s (rc {e['rc']}, "
                      f"certified {e['certified']}), h5py + CuPy ZGEMM {e['h5py_cupy_seconds']:.1f} s"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[8192, 16384, 32768])
    p.add_argument("--phi", type=float, default=0.5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--e2e", type=int, nargs="*", default=[])
    p.add_argument("--e2e-dir", default="/tmp/ozhpc-zgemm-e2e")
    p.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = p.parse_args(argv)
    import cupy as cp

    import ozhpc
    props = cp.cuda.runtime.getDeviceProperties(0)
    result = {"device": props["name"].decode(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": " ".join(["python3", "bench/speed/zgemm_gpu.py"] + (argv if argv is not None else sys.argv[1:])),
              "sizes": [], "e2e": []}
    for n in args.sizes:
        result["sizes"].append(bench_size(cp, ozhpc, n, args.phi, args.reps, args.samples))
        print(json.dumps(result["sizes"][-1]), flush=True)
        cp.get_default_memory_pool().free_all_blocks()
    for n in args.e2e:
        result["e2e"].append(end_to_end(n, args.e2e_dir, args.phi))
        print(json.dumps(result["e2e"][-1]), flush=True)
    text = markdown(result)
    print(text)
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump(result, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
