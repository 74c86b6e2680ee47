"""Certified "auto" on the GPU against cuBLAS DGEMM (the guarantee levels' speed tables; not a test).

    python3 bench/speed/certified_gpu.py --sizes 16384 32768 --out $OUT/certified
    python3 bench/speed/certified_gpu.py --table --table-sizes 4096 8192 16384 32768 --out $OUT/phi_table

For each n (phi = 0.5 inputs, as ``bench/common.py``): cuBLAS DGEMM (CuPy), ozhpc's default
(scheme II, "auto", guarantee "dgemm": the plan for accuracy in fact, the certificate of
``k u |A||B|``), the same plan with fixed ``bits`` (no certificate: the certificate's cost is the
difference), "auto" under guarantee "tight" and its fixed plan, and fixed 53 bits. Prints bits,
moduli, passes, the certificate's own phase, the worst bound ratio and the sampled error against an
exact reference. Times are medians of CUDA-event timings of the whole ``ozhpc.gemm`` call.

``--table``: the default product against cuBLAS over phi in {0, 0.5, 1, 2, 4} and the sizes given:
bits chosen, moduli, the speed ratio and both sampled errors (where emulation pays on this GPU).
"""
from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from common import make_inputs, parser, reference, sample_indices, sampled_error, time_events, write_result  # noqa: E402


def _row(n, label, info, seconds, dgemm_s, error, **extra):
    return dict(n=n, method=f"ozhpc {label}", bits=info.bits, moduli=info.moduli, seconds=seconds,
                tflops=2 * n**3 / seconds / 1e12, x_dgemm=dgemm_s / seconds, error=error,
                certified=info.certified, guarantee=info.guarantee, worst_ratio=info.worst_ratio,
                widths=info.widths, phases={k: round(v, 4) for k, v in info.seconds.items()}, **extra)


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
    rows.append(dict(n=n, method="cuBLAS DGEMM", bits="-", seconds=t, tflops=2 * n**3 / t / 1e12, x_dgemm=1.0,
                     error=sampled_error(cp, a @ b, idx, ref)))
    dgemm = t
    for guarantee in ("dgemm", "tight"):
        _, info = ozhpc.gemm(a, b, engine=eng, guarantee=guarantee, info=True)
        variants = [(f"auto, guarantee {guarantee}", dict(guarantee=guarantee)),
                    (f"fixed {info.bits} bits", dict(scheme="ozaki2", bits=info.bits))]
        if guarantee == "tight":
            variants.append(("fixed 53 bits", dict(scheme="ozaki2", bits=53)))
        for label, kw in variants:
            def call(kw=kw):
                return ozhpc.gemm(a, b, engine=eng, info=True, **kw)
            t = time_events(cp, call, reps)
            c, info = call()
            rows.append(_row(n, label, info, t, dgemm, sampled_error(cp, c, idx, ref)))
            del c
            cp.get_default_memory_pool().free_all_blocks()
    return rows


def phi_table(sizes, phis, reps: int, samples: int, seed: int = 0) -> list[dict]:
    """The default product (dgemm, scheme II auto) against cuBLAS over phi x n."""
    import cupy as cp

    import ozhpc
    from ozhpc.engines import get_engine

    eng = get_engine("cutile")
    rows = []
    for n in sizes:
        for phi in phis:
            a, b = make_inputs(cp, n, phi, seed)
            idx = sample_indices(n, samples, seed)
            ref = reference(cp, a, b, idx)
            t_d = time_events(cp, lambda: a @ b, reps)
            e_d = sampled_error(cp, a @ b, idx, ref)
            t = time_events(cp, lambda: ozhpc.gemm(a, b, engine=eng), reps)
            c, info = ozhpc.gemm(a, b, engine=eng, info=True)
            rows.append(dict(n=n, phi=phi, bits=info.bits, moduli=info.moduli, passes=len(info.widths),
                             certified=info.certified, seconds=t, dgemm_seconds=t_d, x_dgemm=t_d / t,
                             error=sampled_error(cp, c, idx, ref), dgemm_error=e_d, worst_ratio=info.worst_ratio))
            print(json.dumps(rows[-1]), flush=True)
            del a, b, c
            cp.get_default_memory_pool().free_all_blocks()
    return rows


def profile(n: int, phi: float, reps: int, seed: int = 0) -> dict:
    """CUDA-event seconds of each step the certificate adds, at n."""
    import cupy as cp

    from ozhpc.engines import get_engine
    from ozhpc.ozaki import certificate as cf
    from ozhpc.ozaki.plan import ModularPlan
    from ozhpc.ozaki.scales import exponents, row_abs_max

    eng = get_engine("cutile")
    a, b = make_inputs(cp, n, phi, seed)
    bt = b.T
    e = exponents(cp, row_abs_max(cp, a))
    f = exponents(cp, row_abs_max(cp, bt))
    plan = ModularPlan.for_k(54, n)
    c = a @ b
    stats = [cf.operand_stats(eng, x, ex, plan) for x, ex in ((a, e), (bt, f))]
    lower = cp.ones((n, n), dtype=cp.int32)
    cols = cp.arange(0, n, 64)
    steps = {
        "row summaries: scales, norms, counts, squares (both, one copy)": lambda: eng.row_summaries((a, bt)),
        "operand_stats delta (both)": lambda: [cf.operand_stats(eng, x, ex, plan, mags=(0, 0))
                                               for x, ex in ((a, e), (bt, f))],
        "sampled magnitude digits (both)": lambda: (eng.magnitudes(cp.take(a, cols, axis=1), e),
                                                    eng.magnitudes(cp.take(bt, cols, axis=1), f)),
        "certify_entries (dgemm)": lambda: cf.certify_entries(eng, c, lower, stats, e, f, plan, factor=n),
        "sampled magnitude GEMM": lambda: eng.accumulate_groups(
            eng.zeros_groups(1, n, n, slices=1, k=n), eng.magnitudes(cp.take(a, cols, axis=1), e),
            eng.magnitudes(cp.take(bt, cols, axis=1), f)),
        "full magnitude GEMM": lambda: eng.accumulate_groups(eng.zeros_groups(1, n, n, slices=1, k=n),
                                                             eng.magnitudes(a, e), eng.magnitudes(bt, f)),
    }
    return {name: time_events(cp, fn, reps) for name, fn in steps.items()}


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
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[16384])
    p.add_argument("--phi", type=float, default=0.5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--out", default=None, help="write OUT.md and OUT.json")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="first time each step of the certificate at N")
    p.add_argument("--table", action="store_true", help="the phi x n table of the default product")
    p.add_argument("--table-sizes", type=int, nargs="+", default=[4096, 8192, 16384])
    p.add_argument("--table-phis", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0, 4.0])
    args = p.parse_args()
    if args.profile:
        print(json.dumps(profile(args.profile, args.phi, args.reps), indent=1), flush=True)
    rows = []
    for n in args.sizes:
        rows += run(n, args.phi, args.reps, args.samples)
        print(table(rows), flush=True)
    if args.table:
        rows += phi_table(args.table_sizes, args.table_phis, max(1, args.reps - 1), args.samples)
    write_result(args.out, table([r for r in rows if "method" in r]), rows)


if __name__ == "__main__":
    main()
