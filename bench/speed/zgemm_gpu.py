"""GPU benchmark of ozhpc's complex product (ZGEMM) against cuBLAS ZGEMM (not a test).

    python3 bench/speed/zgemm_gpu.py --sizes 8192 16384 32768 --out bench/results/zgemm_h200_DATE
    MODE=complex bash bench/gpu.sh        # the same from the suite, then bench/end_to_end/complex_e2e.py

For each n (phi = 0.5 real and imaginary parts, ``(rand - 0.5) * exp(0.5 * randn)`` each):
cuBLAS ZGEMM (CuPy ``matmul`` of complex128) and certified default ``ozhpc.gemm`` (scheme II,
guarantee "dgemm") on the same CuPy arrays, medians of CUDA-event times after one warm-up; the
speed-up; the sampled error ``max |C_ij - (AB)_ij| / (|A||B|)_ij`` (complex moduli) of both against
the exact product (integer sums of the parts' products); the int8 products' rate of the complex
product next to the real product's of the same n (``int8_gemms * 2 n^3`` over the engine's
product time); the GPU memory the calls held (CuPy's pool) and how many operands' planes were
made a block at a time (n = 32768: they do not fit at once). A size that runs out of memory is
recorded as such and the next one runs. ``--kernels N``: one warm certified call at N under PyTorch's
profiler, its kernels grouped by name (launches, device ms) with the GPU's idle time, and the same
for the real product of the same n: where the time outside the products goes.
"""
from __future__ import annotations

import json
import pathlib
import sys
import time
from fractions import Fraction

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import parser, sample_indices, time_events  # noqa: E402

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
    from ozhpc.ozaki import complex_plan
    made = complex_plan.DeferredPlanes.__init__
    blocks = []

    def recording(self, *args, **kwargs):   # operands whose planes were made a block at a time
        made(self, *args, **kwargs)
        blocks.append(self.shape[1])
    complex_plan.DeferredPlanes.__init__ = recording

    def run():
        out.clear()   # the last call's C is not held through the next
        out["c"], out["info"] = ozhpc.gemm(a, b, engine="cutile", info=True)
    pool = cp.get_default_memory_pool()
    try:
        row["ozhpc_seconds"] = time_events(cp, run, reps)
    finally:
        complex_plan.DeferredPlanes.__init__ = made
    row["pool_peak_gb"] = pool.total_bytes() / 1e9
    row["deferred"] = len(blocks) // (reps + 1)   # per call
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


def kernel_table(cp, ozhpc, n: int, phi: float, seed: int = 7) -> str:
    """One warm call's kernels at ``n`` grouped by name, complex then real (see the module docstring)."""
    from fixed_costs import profile_call
    a, b = complex_inputs(cp, n, phi, seed)
    lines = []
    for label, x, y in (("complex", a, b), ("real", cp.ascontiguousarray(a.real), cp.ascontiguousarray(b.real))):
        ozhpc.gemm(x, y, engine="cutile")   # warm-up: compiled kernels, the pool's blocks
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        kernels, _ = profile_call(lambda: ozhpc.gemm(x, y, engine="cutile"))
        wall = (time.perf_counter() - t0) * 1e3
        groups: dict[str, list] = {}
        for name, ms in kernels:
            g = groups.setdefault(name[:60], [0, 0.0])
            g[0] += 1
            g[1] += ms
        busy = sum(ms for _, ms in kernels)
        lines += [f"### {label}, n = {n}: {len(kernels)} kernels, {busy:.1f} ms on the device, "
                  f"{wall:.1f} ms wall under the profiler (idle {wall - busy:.1f} ms)", "",
                  "| kernel | launches | ms | share |", "|---|---|---|---|"]
        for name, (count, ms) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"| `{name}` | {count} | {ms:.2f} | {ms / busy:.1%} |")
        lines.append("")
    return "\n".join(lines)


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
    lines += ["", "GPU memory (CuPy's pool after the calls, GB) and the operands whose residue planes were made "
                  "a block at a time (they did not fit at once): " +
              "; ".join(f"n={r['n']}: {r['pool_peak_gb']:.1f} GB, {r['deferred']} deferred" for r in result["sizes"])]
    for r in result.get("failed", []):
        lines += ["", f"n={r['n']}: {r['error']}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[8192, 16384, 32768])
    p.add_argument("--phi", type=float, default=0.5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--kernels", type=int, default=None, metavar="N",
                   help="also one call at N under the profiler, kernels grouped by name (complex and real)")
    p.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = p.parse_args(argv)
    import cupy as cp

    import ozhpc
    props = cp.cuda.runtime.getDeviceProperties(0)
    result = {"device": props["name"].decode(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": " ".join(["python3", "bench/speed/zgemm_gpu.py"] + (argv if argv is not None else sys.argv[1:])),
              "sizes": [], "failed": []}
    for n in args.sizes:
        try:
            result["sizes"].append(bench_size(cp, ozhpc, n, args.phi, args.reps, args.samples))
            print(json.dumps(result["sizes"][-1]), flush=True)
        except cp.cuda.memory.OutOfMemoryError as exc:
            result["failed"].append({"n": n, "error": f"out of GPU memory: {exc}"})
            print(json.dumps(result["failed"][-1]), flush=True)
        cp.get_default_memory_pool().free_all_blocks()
    text = markdown(result)
    if args.kernels:
        text += "\n" + kernel_table(cp, ozhpc, args.kernels, args.phi)
    print(text)
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump(result, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
