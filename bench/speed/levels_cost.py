"""What levels of scales cost: certified "auto" on data a few rows of which need a second level,
against the same data without (benchmark, not a test; target: at most 1.25x).

The data: A and B standard matrices (phi = 0.5, n x n); 1% of the rows of A are unit rows
``e_t`` (so row t of B becomes a row of C). "with": those rows t of B are scaled by ``2**-300``:
every column of B then holds entries 300 bits below its scale, which one scale per column drops,
and those rows of C are made of them alone (the first pass fails there; the failing block is 1%
of the rows). "without": the same data, nothing scaled (one pass, nothing refined). Prints the
best of ``--repeat`` times of each, their ratio, the passes, the refined entries, the levels and
the exact dots, and checks every C is certified.

    python3 bench/speed/levels_cost.py --n 1024 2048 [--engine numpy] [--out bench/results/levels_cost_cpu_DATE]
    python3 bench/speed/levels_cost.py --n 4096 16384 --engine cutile      # on a GPU: MODE=levels bash bench/gpu.sh
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import command_line, cpu_run_line, markdown_table, parser, write_result  # noqa: E402  (this checkout's ozhpc first)

import ozhpc  # noqa: E402
from ozhpc.run.matrices import standard_matrix  # noqa: E402

SCALE = 2.0**-300
FRACTION = 0.01


def operands(n: int, scaled: bool):
    """(A, B) as described above (fixed seeds; the unit rows every 100th)."""
    a, b = standard_matrix(n, n, 0.5, 21), standard_matrix(n, n, 0.5, 22)
    rows = np.arange(0, n, int(round(1 / FRACTION)))
    a[rows] = 0.0
    a[rows, rows] = 1.0
    if scaled:
        b[rows] *= SCALE
    return a, b


def timed(a, b, engine: str, repeat: int, scheme: str):
    """(best seconds, C on the host, GemmInfo): device arrays in, the product synchronised."""
    xp = np
    if engine != "numpy":
        import cupy as xp
    da, db = xp.asarray(a), xp.asarray(b)
    best, c, info = float("inf"), None, None
    for _ in range(repeat + 1):   # the first call warms up (kernels, memory pools)
        t0 = time.perf_counter()
        c, info = ozhpc.gemm(da, db, engine=engine, scheme=scheme, accuracy="strict", info=True)
        if engine != "numpy":
            xp.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, (c if engine == "numpy" else xp.asnumpy(c)), info


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--n", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--engine", default="numpy")
    p.add_argument("--scheme", default="ozaki2")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--out", help="also write the table as markdown here")
    args = p.parse_args(argv)
    header = ["n", "without (s)", "with (s)", "with / without", "passes with", "refined", "levels", "exact dots",
              "without: refined"]
    rows = []
    for n in args.n:
        t0, c0, i0 = timed(*operands(n, False), args.engine, args.repeat, args.scheme)
        a, b = operands(n, True)
        t1, c1, i1 = timed(a, b, args.engine, args.repeat, args.scheme)
        assert i0.certified and i1.certified, (i0.widths, i1.widths)
        ones = np.arange(0, n, int(round(1 / FRACTION)))
        assert c1[ones].tobytes() == b[ones].tobytes(), "the unit rows of C are B's rows, exactly"
        rows.append([str(n), f"{t0:.3f}", f"{t1:.3f}", f"{t1 / t0:.2f}", str(len(i1.widths)),
                     str(i1.refined_entries), str(i1.levels), str(i1.exact_entries), str(i0.refined_entries)])
        print(" | ".join(rows[-1]), flush=True)
    lines = markdown_table(header, rows)
    print("\n".join(lines))
    run = (cpu_run_line(command_line(argv)) if args.engine == "numpy"
           else f"Engine {args.engine}, best of {args.repeat} after a warm-up.\nCommand: `{command_line(argv)}`\n\n")
    write_result(args.out, "# Cost of levels of scales: 1% of rows needing a second level\n\n" + run + "\n".join(lines))

if __name__ == "__main__":
    main()
