"""Scheme II's products per kernel variant on one GPU (a benchmark, not a test).

    python3 bench/speed/pair_sweep.py --sizes 16384 32768 --moduli 15 --out $OUT/pairs
    python3 bench/speed/pair_sweep.py --warm NAME ...     # compile variants on small shapes (parallel processes)

All moduli's int8 products ``R_l Q_l^T`` of random int8 residues, stored as int8 balanced residues,
as the engine's multiply phase does them; POP/s = 2 m n k x moduli / time of the whole phase (CUDA
events: every launch and k panel). Each variant's residues must equal the production path's bit
for bit (checked at every size before it is timed). ``engine`` variants run the production path
(``CutileEngine._pair_sums``) with a changed tile config; the others the kernels of
``bench/speed/pair_variants.py`` with the moduli of a launch in one grid.
"""
from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import parser, time_events, write_result  # noqa: E402
from pair_variants import VARIANTS  # noqa: E402


def group_step(arrays, limit=2**31) -> int:
    """Most leading-axis entries per launch whose views keep every offset below ``limit``."""
    step = arrays[0].shape[0]
    for x in arrays:
        plane = abs(x.strides[0]) // x.itemsize
        inner = sum((d - 1) * abs(st) for d, st in zip(x.shape[1:], x.strides[1:])) // x.itemsize
        if plane:
            step = min(step, (limit - 1 - inner) // plane + 1)
    return max(1, step)


def runner(cp, name: str, v: dict, ra, rb, out, mods, num_sms: int):
    """``f()``: every product of ``ra``, ``rb`` into ``out`` by variant ``v``."""
    from dataclasses import replace

    import pair_variants
    from ozhpc.engines.cutile_engine import CutileEngine

    k = ra.shape[2]
    if "engine" in v:
        base = CutileEngine()
        eng = CutileEngine(config=replace(base.config, **v["engine"]))
        return lambda: eng._pair_sums(ra, rb, 0, k, out, mods)
    panel = v.get("panel", 8192) or k
    stream = cp.cuda.get_current_stream()

    def run():
        for k0 in range(0, k, panel):
            a, b = ra[:, :, k0:k0 + panel], rb[:, :, k0:k0 + panel]
            step = out.shape[0] if v.get("big") else group_step([a, b, out])
            for g0 in range(0, out.shape[0], step):
                g = slice(g0, g0 + step)
                pair_variants.launch(stream, v, a[g], b[g], out[g], mods[g], k0 > 0, num_sms)
    return run


def sweep(cp, sizes, moduli: int, names, reps: int) -> list[dict]:
    from ozhpc.engines import crt as crt_tables
    from ozhpc.engines.kernel_tables import modulus_table

    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    num_sms = int(props["multiProcessorCount"])
    mods = cp.asarray(modulus_table(crt_tables.MODULI[:moduli]))
    rows = []
    for n in sizes:
        rs = cp.random.RandomState(n)
        ra = cp.empty((moduli, n, n), dtype=cp.int8)
        rb = cp.empty_like(ra)
        for x in (ra, rb):
            for plane in x:   # one plane at a time: the generator's temporaries stay small
                plane[...] = rs.randint(-128, 128, size=(n, n), dtype=cp.int8)
        want = cp.empty((moduli, n, n), dtype=cp.int8)
        out = cp.empty_like(want)
        runner(cp, "base", VARIANTS["base"], ra, rb, want, mods, num_sms)()
        for name in names:
            v = VARIANTS[name]
            row = dict(n=n, moduli=moduli, variant=name,
                       config={**{k: val for k, val in v.items() if k != "engine"}, **v.get("engine", {})})
            try:
                f = runner(cp, name, v, ra, rb, out, mods, num_sms)
                out.fill(0)
                t0 = time.perf_counter()
                f()   # compile (or load) and warm up
                cp.cuda.Device().synchronize()
                row["first_s"] = time.perf_counter() - t0
                t = time_events(cp, f, reps if n < 32768 else max(1, reps - 1))
                row["same_bits"] = bool(cp.array_equal(out, want))   # every run writes all of out
                row.update(seconds=t, pops=2 * n**3 * moduli / t / 1e15)
            except Exception as exc:  # report, keep sweeping
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            print(json.dumps(row), flush=True)
        del ra, rb, want, out
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def warm(cp, names, moduli: int) -> None:
    """Compile each variant's launches on small shapes with the same specialisation facts
    (16-aligned extents; one modulus per launch and several) into the shared kernel cache."""
    from ozhpc.engines import crt as crt_tables
    from ozhpc.engines.kernel_tables import modulus_table

    mods = cp.asarray(modulus_table(crt_tables.MODULI[:moduli]))
    num_sms = int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"])
    for name in names:
        v = VARIANTS[name]
        t0 = time.perf_counter()
        for g in (1, 2):
            ra = cp.ones((g, 512, 16384), dtype=cp.int8)
            out = cp.empty((g, 512, 512), dtype=cp.int8)
            runner(cp, name, v, ra, ra.copy(), out, mods[:g], num_sms)()
        cp.cuda.Device().synchronize()
        print(f"warm {name}: {time.perf_counter() - t0:.1f} s", flush=True)


def table(rows) -> str:
    out = ["| n | variant | config | same bits | s | POP/s |", "|---|---|---|---|---|---|"]
    for r in rows:
        cfg = r["config"]
        out.append(f"| {r['n']} | {r['variant']} | {cfg} | {r.get('same_bits', '-')} | "
                   f"{r.get('seconds', float('nan')):.4f} | "
                   f"{r['pops']:.3f} |" if "pops" in r else f"| {r['n']} | {r['variant']} | {cfg} | - | "
                   f"{r.get('error', '')[:120]} | |")
    return "\n".join(out)


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[16384, 32768])
    p.add_argument("--moduli", type=int, default=15)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--variants", nargs="*", default=list(VARIANTS))
    p.add_argument("--warm", nargs="*", metavar="NAME")
    p.add_argument("--out")
    args = p.parse_args()
    import cupy as cp
    if args.warm is not None:
        warm(cp, args.warm, args.moduli)
        return 0
    rows = sweep(cp, args.sizes, args.moduli, args.variants, args.reps)
    print(table(rows))
    write_result(args.out, table(rows), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
