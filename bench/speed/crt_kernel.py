"""The CRT kernel alone (a benchmark, not a test): its variants' times on one GPU.

    python3 bench/speed/crt_kernel.py --n 16384 --moduli 15 --variants 1:4 2:4 4:2 8:2 --out $OUT/crt
    python3 bench/speed/crt_kernel.py --warm --variants 1:4 4:2     # compile only (a small shape, same facts)

Each variant is ``GROUP:OCCUPANCY`` (moduli per load, CTAs per SM). Inputs: random balanced int8
residues of the default plan at n (54 bits, ``--moduli``), the scales of phi = 0.5 data. Every
variant's C is checked against the engine's own launch (bit for bit) before it is timed; times
are medians of CUDA-event timings. Reads ``moduli * n**2`` bytes of residues and writes
``8 n**2`` of C (``GB/s`` counts those).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _inputs(cp, n: int, moduli: int, bits: int, seed: int = 0):
    from ozhpc.engines import crt

    tables = crt.crt_tables(bits, moduli)
    rng = cp.random.default_rng(seed)
    acc = cp.empty((moduli, n, n), dtype=cp.int8)
    for plane, p in zip(acc, tables.primes):   # one plane at a time: int64 temporaries of n**2
        r = rng.integers(0, p, size=(n, n), dtype=cp.int64)
        plane[...] = cp.where(r > crt.balanced_range(p)[1], r - p, r).astype(cp.int8)
    e = rng.integers(-3, 4, n).astype(cp.int32)
    f = rng.integers(-3, 4, n).astype(cp.int32)
    return tables, acc, e, f


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--moduli", type=int, default=15)
    p.add_argument("--bits", type=int, default=54)
    p.add_argument("--variants", nargs="*", default=["1:4", "2:4", "4:2", "8:2"])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warm", action="store_true", help="compile the variants on a 256 x 256 problem, no timing")
    p.add_argument("--out", default=None)
    args = p.parse_args()

    import cupy as cp
    import cuda.tile as ct

    from ozhpc.engines import get_engine
    from ozhpc.engines.cutile import crt as crt_kernel
    from common import time_events

    eng = get_engine("cutile")
    n = 256 if args.warm else args.n
    tables, acc, e, f = _inputs(cp, n, args.moduli, args.bits)
    dev = eng._device_tables(tables)
    stream = cp.cuda.get_current_stream()

    kernels, c = {}, cp.empty((n, n), dtype=cp.float64)   # one kernel object per occupancy: compiled once

    def launch(group, occupancy):
        if occupancy not in kernels:
            kernels[occupancy] = crt_kernel._crt_kernel.replace_hints(occupancy=occupancy)
        grid = (n // eng.config.crt_rows, n // eng.config.crt_cols, 1)
        ct.launch(stream, grid, kernels[occupancy], (acc, e, f, *dev.crt_args, c, int(tables.shift),
                                                     eng.config.crt_rows, eng.config.crt_cols, int(tables.pieces),
                                                     True, int(group)))
        return c

    want_c = eng.combine_moduli(acc, e, f, tables)
    rows = []
    for spec in args.variants:
        group, occupancy = (int(v) for v in spec.split(":"))
        c.fill(0)
        same = bool(cp.array_equal(launch(group, occupancy).view(cp.int64), want_c.view(cp.int64)))
        row_out = dict(n=n, moduli=args.moduli, group=group, occupancy=occupancy, same_bits=same)
        if not args.warm:
            t = time_events(cp, lambda: launch(group, occupancy), args.reps)
            moved = args.moduli * n * n + 8 * n * n
            row_out.update(ms=round(t * 1e3, 3), gb_s=round(moved / t / 1e9, 1))
        rows.append(row_out)
        print(json.dumps(row_out), flush=True)
    if args.out:
        with open(args.out + ".json", "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
