"""The row-summary kernel alone (a benchmark, not a test): its tile and occupancy variants on one GPU.

    python3 bench/speed/row_summary_kernel.py --n 16384 --variants 16:64:4 16:64:2 16:32:4 8:64:4 --out $OUT/rows

Each variant is ``ROWS:COLS:OCCUPANCY`` (rows per block, columns per load, CTAs per SM). Inputs,
phi = 0.5 data: an n x n operand read along its rows (C order), the same read as the transpose of a
C-ordered array (op(B)^T of a row-major B), and an n x n complex operand as real rows of 2n (the
complex certificate's and scales' view). Every variant's sums and exponents are checked against
the engine's launch (bit for bit) before it is timed; times are medians of CUDA-event timings;
``GB/s`` counts one read of the operand.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import parser, phi_matrix, time_events  # noqa: E402


def main(argv=None) -> int:
    p = parser(__doc__)
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--variants", nargs="+", default=["16:64:4", "16:64:2", "16:32:4", "8:64:4", "8:128:2"])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", default=None, help="write OUT.json")
    args = p.parse_args(argv)

    import cupy as cp
    import cuda.tile as ct

    from ozhpc.engines.cutile import row_summary
    from ozhpc.engines.statistics import FIELDS

    n = args.n
    rs = cp.random.RandomState(3)
    real = phi_matrix(cp, rs, (n, n), 0.5)
    cplx = phi_matrix(cp, rs, (n, 2 * n), 0.5)   # the float64 view of an n x n complex operand
    cases = {"rows": (real, False), "transposed": (real, True), "complex rows": (cplx, False)}
    stream = cp.cuda.get_current_stream()
    kernels, rows = {}, []
    for name, (x, trans) in cases.items():
        want_out = cp.empty((len(FIELDS), n), dtype=cp.int64)
        want_e = cp.empty(n, dtype=cp.int32)
        row_summary.launch(stream, x, trans, want_out, want_e)
        for spec in args.variants:
            tr, tc, occ = (int(v) for v in spec.split(":"))
            if occ not in kernels:
                kernels[occ] = row_summary._row_summary_kernel.replace_hints(occupancy=occ)
            out = cp.zeros_like(want_out)
            e = cp.zeros_like(want_e)

            def launch():
                ct.launch(stream, (-(-n // tr), 1, 1), kernels[occ], (x, out, e, tr, tc, bool(trans)))
            launch()
            same = bool((out == want_out).all() and (e == want_e).all())
            t = time_events(cp, launch, args.reps)
            row = dict(case=name, n=n, rows=tr, cols=tc, occupancy=occ, same_bits=same, ms=round(t * 1e3, 3),
                       gb_s=round(x.nbytes / t / 1e9, 1))
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| case | variant | ms | GB/s | same bits |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['rows']}:{r['cols']}:{r['occupancy']} | {r['ms']} | {r['gb_s']} | {r['same_bits']} |")
    if args.out:
        with open(args.out + ".json", "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
