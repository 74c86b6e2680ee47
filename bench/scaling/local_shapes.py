"""Pair-product rate of one SUMMA panel step per local shape, one device, no communication (not a test).

    python3 bench/scaling/local_shapes.py --shapes 16384x16384 16384x8192 8192x16384 20736x10368 10368x20736

Why: on 2 x H200 the panel products of 2-rank runs ran at 0.55-0.93 POP/s per GPU against 1.07 on
one rank (`bench/results/multi_gpu_h200x2_2026-12-01.md`), and a tall local C (grid 1x2) was slower
than a wide one (2x1). This separates the local shape from the NCCL kernels that share the GPU in
those runs: the same ``engine.accumulate`` call as ``Summa`` makes per panel (int8 slice panels of
``kb`` columns into the int32 group accumulators), with nothing else running.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import parser  # noqa: E402


def parse_shape(text: str) -> tuple[int, int]:
    try:
        m, n = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be MxN (local C rows x columns), got {text!r}") from None
    if m < 1 or n < 1:
        raise argparse.ArgumentTypeError(f"shape must be positive, got {text!r}")
    return m, n


def main(argv=None) -> int:
    p = parser(__doc__)
    p.add_argument("--shapes", type=parse_shape, nargs="+", default=[parse_shape(s) for s in (
        "16384x16384", "16384x8192", "8192x16384", "20736x10368", "10368x20736")],
                   help="local C shapes MxN (default: the 1-GPU and 2-GPU local shapes of the 2 x H200 table)")
    p.add_argument("--kb", type=int, default=4096, help="panel width (Summa's kb)")
    p.add_argument("--slices", type=int, default=7)
    p.add_argument("--k-total", type=int, default=32768,
                   help="global k, which decides int32 vs float64 accumulators as in Summa")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--engine", default="cutile", help="cutile (default) or numpy (a smoke run)")
    args = p.parse_args(argv)

    from ozhpc.engines import get_engine
    from ozhpc.ozaki.plan import make_plan

    eng = get_engine(args.engine)
    xp = eng.xp
    plan = make_plan(args.slices, "auto", 0)
    s, d = plan.slices, plan.groups
    print(f"# engine {eng.name}, {s} slices, {d} groups, {plan.int8_gemms} pair products per panel, "
          f"kb {args.kb}; {eng.describe().get('device', 'CPU')}", flush=True)
    print("| local C (m x n) | accumulator | seconds per panel | TOP/s |")
    print("|---|---|---|---|")
    rng = xp.random.RandomState(5)
    for m, n in args.shapes:
        # digits within the bounds of the scheme (|d| <= 64 below slice 0): the int32 sums stay exact
        da = rng.randint(-64, 65, size=(s, m, args.kb)).astype(xp.int8)
        eb = rng.randint(-64, 65, size=(s, n, args.kb)).astype(xp.int8)
        acc = eng.zeros_groups(d, m, n, slices=s, k=args.k_total)
        eng.accumulate_groups(acc, da, eb)              # warm-up: compile / load the kernels for this shape
        eng.synchronize()
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            eng.accumulate_groups(acc, da, eb)
            eng.synchronize()
            times.append(time.perf_counter() - t0)
        t = statistics.median(times)
        ops = 2.0 * m * n * args.kb * plan.int8_gemms
        print(f"| {m} x {n} | {acc.dtype} | {t:.4f} | {ops / t / 1e12:.1f} |", flush=True)
        del da, eb, acc
    return 0


if __name__ == "__main__":
    sys.exit(main())
