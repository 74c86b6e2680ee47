"""Certified "auto" on the GPU against cuBLAS DGEMM (issue 15's speed table; not a test).

    python3 bench/certified_gpu.py --sizes 16384 32768 --out $OUT/certified

For each n (phi = 0.5 inputs, as ``bench/gpu_gemm.py``): cuBLAS DGEMM (CuPy), ozhpc scheme II
"auto" (certified: equilibration, the magnitude plane, the per-entry certificate, wider passes
when needed), and the same plan with fixed ``--bits`` (no certificate), so the certificate's cost
is ``auto - fixed at the bits auto chose``; fixed 53 bits for reference. Prints the bits chosen,
the passes, the certificate's own phase, the worst bound ratio, and the sampled error against an
exact reference. Times are medians of CUDA-event timings of the whole ``ozhpc.gemm`` call.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_gemm import make_inputs, reference, sample_indices, sampled_error, time_events  # noqa: E402


def run(n: int, phi: float, reps: int, samples: int, seed: int = 0) -> list[dict]:
    import cupy as cp

    import ozhpc
    from ozhpc.engines import get_engine

    eng = get_engine("cutile")   # one engine (its kernels and tables) for every call
    a, b = make_inputs(cp, n, phi, seed)
    idx = sample_indices(n, samples, seed)
    ref = reference(cp, a, b, idx)
    rows = []
    t = time_events(cp, lambda: a @ b, reps)
    rows.append(dict(n=n, method="cuBLAS DGEMM", bits="-", seconds=t, tflops=2 * n**3 / t / 1e12,
                     error=sampled_error(cp, a @ b, idx, ref)))
    dgemm = t
    c, info = ozhpc.gemm(a, b, engine=eng, scheme="ozaki2", info=True)
    auto_bits = info.bits
    variants = [("auto (certified)", "auto"), (f"fixed {auto_bits} bits", auto_bits), ("fixed 53 bits", 53)]
    for label, bits in variants:
        def call(bits=bits):
            return ozhpc.gemm(a, b, engine=eng, scheme="ozaki2", bits=bits, info=True)
        t = time_events(cp, call, reps)
        c, info = call()
        rows.append(dict(n=n, method=f"ozhpc ozaki2 {label}", bits=info.bits, moduli=info.moduli,
                         seconds=t, tflops=2 * n**3 / t / 1e12, x_dgemm=dgemm / t,
                         error=sampled_error(cp, c, idx, ref), certified=info.certified,
                         worst_ratio=info.worst_ratio, widths=info.widths,
                         phases={k: round(v, 4) for k, v in info.seconds.items()}))
        del c
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def profile(n: int, phi: float, reps: int, seed: int = 0) -> dict:
    """CUDA-event seconds of each step the certificate adds, at n, and the fewest bits whose first
    pass certifies (the "auto" start forced to each width in turn)."""
    import cupy as cp

    import ozhpc
    import ozhpc.ozaki.plan as plan_module
    from ozhpc.engines import get_engine
    from ozhpc.ozaki import certificate as cf
    from ozhpc.ozaki.plan import ModularPlan
    from ozhpc.ozaki.scales import exponents

    eng = get_engine("cutile")
    a, b = make_inputs(cp, n, phi, seed)
    bt = b.T
    e = exponents(cp, eng.row_stats(a)[0])
    f = exponents(cp, eng.row_stats(bt)[0])
    plan = ModularPlan.for_k(58, n)
    c = a @ b
    stats = [cf.operand_stats(cp, x, ex, plan) for x, ex in ((a, e), (bt, f))]
    lower = cp.ones((n, n), dtype=cp.int32)
    steps = {
        "inner_stats (both)": lambda: (cf.inner_stats(cp, a), cf.inner_stats(cp, bt)),
        "magnitude_stats (both)": lambda: (cf.magnitude_stats(cp, a, e), cf.magnitude_stats(cp, bt, f)),
        "operand_stats delta (both)": lambda: [cf.operand_stats(cp, x, ex, plan, mags=(0, 0))
                                               for x, ex in ((a, e), (bt, f))],
        "magnitude digits (both)": lambda: (eng.magnitudes(a, e), eng.magnitudes(bt, f)),
        "certify_entries": lambda: cf.certify_entries(cp, c, lower, stats, e, f, plan),
        "magnitude GEMM": lambda: eng.accumulate_groups(eng.zeros_groups(1, n, n, slices=1, k=n),
                                                        eng.magnitudes(a, e), eng.magnitudes(bt, f)),
    }
    out = {name: time_events(cp, fn, reps) for name, fn in steps.items()}
    original = plan_module.auto_bits
    try:
        for width in range(55, 63):
            plan_module.auto_bits = lambda spread, width=width: width
            _, info = ozhpc.gemm(a, b, engine=eng, scheme="ozaki2", info=True)
            out[f"first pass at {width} bits: uncertified"] = info.widths[0][1]
            if info.widths[0][1] == 0:
                break
    finally:
        plan_module.auto_bits = original
    return out


def table(rows: list[dict]) -> str:
    out = ["| n | method | bits (moduli) | s | TFLOP/s | x DGEMM | sampled error | certified (worst ratio) | passes | certificate s | phases |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ph = r.get("phases", {})
        out.append(f"| {r['n']} | {r['method']} | {r['bits']} ({r.get('moduli', '-')}) | {r['seconds']:.4f} | "
                   f"{r['tflops']:.1f} | {r.get('x_dgemm', 1.0):.2f} | {r['error']:.2e} | "
                   f"{r.get('certified', '-')} ({r.get('worst_ratio', 0):.3g}) | {len(r.get('widths') or [])} | "
                   f"{ph.get('certificate', 0):.4f} | {ph} |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[16384])
    p.add_argument("--phi", type=float, default=0.5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--out", default=None, help="write OUT.md and OUT.json")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="first time each step of the certificate at N and find the fewest bits that certify")
    args = p.parse_args()
    if args.profile:
        print(json.dumps(profile(args.profile, args.phi, args.reps), indent=1), flush=True)
    rows = []
    for n in args.sizes:
        rows += run(n, args.phi, args.reps, args.samples)
        print(table(rows), flush=True)
    if args.out:
        with open(args.out + ".md", "w") as fh:
            fh.write(table(rows) + "\n")
        with open(args.out + ".json", "w") as fh:
            json.dump(rows, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
