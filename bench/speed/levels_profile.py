"""Where the time of levels of scales goes on a GPU: the data of ``levels_cost.py`` (1% of the rows
needing a second level) against the same data without, one warm call each, per step.

Prints, per n: the best time of each (``--repeat``), the product's phases (``GemmInfo.seconds``),
the inclusive time of each step of the refinement and of the product's methods (the device
synchronised before and after each step: the nested figures overlap, and the synchronisations add
a little), and, under PyTorch's profiler, the kernels launched and host synchronisations of one
call of each, with the kernels the "with" call adds.

    python3 bench/speed/levels_profile.py --n 4096 [--json OUT.json]    # on a GPU (cuTile engine)
"""
from __future__ import annotations

import collections
import functools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import parser  # noqa: E402  (this checkout's ozhpc first)
from levels_cost import operands  # noqa: E402

import ozhpc  # noqa: E402
from ozhpc.engines import superacc  # noqa: E402
from ozhpc.ozaki import levels, product, refine  # noqa: E402

STEPS = [(refine, "refine"), (refine, "failing_block"), (refine.Kept, "merge"),
         (levels.Staircase, "__init__"), (levels.Staircase, "deepen"), (levels.Staircase, "_add_pair"),
         (levels.Staircase, "verdicts"), (levels.Staircase, "bound"), (levels.OperandLevels, "_push"),
         (superacc, "deposit_values"), (superacc, "round_nearest"),
         (product.Product, "multiply"), (product.Product, "_combine"), (product.Product, "_certify"),
         (refine.Refinement, "keep"), (refine.Refinement, "run"), (product.Product, "_begin"),
         (product.Product, "_start")]


def timed_steps(cp, table: dict):
    """Wrap every step of :data:`STEPS` with a synchronised timer adding to ``table[name]``."""
    def wrap(owner, name):
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def inner(*args, **kw):
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                cp.cuda.Device().synchronize()
                slot = table[f"{getattr(owner, '__name__', owner)}.{name}".split(".", 1)[-1]]
                slot[0] += 1
                slot[1] += time.perf_counter() - t0
        setattr(owner, name, inner)
        return owner, name, fn
    return [wrap(owner, name) for owner, name in STEPS]


def kernels_of(cp, call) -> tuple[collections.Counter, dict]:
    """Kernel launches (by name) and runtime calls of one call under PyTorch's profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        cp.cuda.Device().synchronize()
    kernels, runtime, busy = collections.Counter(), collections.Counter(), 0.0
    for ev in prof.events():
        if "CUDA" in str(getattr(ev, "device_type", "")):
            kernels[ev.name[:70]] += 1
            busy += getattr(ev, "device_time_total", 0.0) / 1e6
        elif ev.name.startswith(("cuda", "cu")):
            runtime[ev.name] += 1
    syncs = {k: v for k, v in runtime.items() if "Synchronize" in k or "DtoH" in k or k in ("cudaMemcpy",)}
    return kernels, dict(busy=round(busy, 5), launches=sum(kernels.values()), syncs=syncs)


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--n", type=int, nargs="+", default=[4096])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    import cupy as cp

    out = []
    for n in args.n:
        row = {"n": n}
        for label, scaled in (("without", False), ("with", True)):
            da, db = (cp.asarray(x) for x in operands(n, scaled))
            call = functools.partial(ozhpc.gemm, da, db, engine="cutile", scheme="ozaki2", accuracy="strict",
                                     info=True)
            best = float("inf")
            for _ in range(args.repeat + 1):
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                _, info = call()
                cp.cuda.Device().synchronize()
                best = min(best, time.perf_counter() - t0)
            table = collections.defaultdict(lambda: [0, 0.0])
            saved = timed_steps(cp, table)
            try:
                call()
            finally:
                for owner, name, fn in saved:
                    setattr(owner, name, fn)
            kernels, summary = kernels_of(cp, call)
            row[label] = dict(best=round(best, 5), widths=info.widths, levels=info.levels,
                              refined=info.refined_entries, exact=info.exact_entries,
                              phases={k: round(v, 5) for k, v in info.seconds.items()},
                              steps={k: [c, round(t, 5)] for k, (c, t) in sorted(table.items(), key=lambda kv: -kv[1][1])},
                              kernels=kernels, **summary)
        extra = row["with"]["kernels"] - row["without"]["kernels"]
        row["added_kernels"] = extra.most_common(30)
        for label in ("without", "with"):
            row[label]["kernels"] = row[label]["kernels"].most_common(12)
        row["ratio"] = round(row["with"]["best"] / row["without"]["best"], 3)
        print(json.dumps(row, indent=1), flush=True)
        out.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    for row in out:
        print(f"n={row['n']}: without {row['without']['best']:.4f} s, with {row['with']['best']:.4f} s, "
              f"ratio {row['ratio']}, launches {row['without']['launches']} / {row['with']['launches']}")


if __name__ == "__main__":
    main()
