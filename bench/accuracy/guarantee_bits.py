"""How many more bits guarantee "tight" takes than "dgemm" (benchmark, not a test).

For the standard matrices (rand - 0.5) * exp(phi * randn) (A m x k from seed 10 S, B k x m from
seed 10 S + 1), runs the default ``ozhpc.gemm`` (scheme II, "auto") with each guarantee and
prints the bits and moduli each certified with, and their difference. This is the number the
``--guarantee`` help and the docs quote.

    python3 bench/accuracy/guarantee_bits.py [--m 128] [--k 256 1024 4096] [--seeds 1 2] [--out bench/results/x.md]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import markdown_table, parser, write_cpu_markdown  # noqa: E402
import ozhpc  # noqa: E402
from ozhpc.run.matrices import standard_matrix  # noqa: E402


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--m", type=int, default=128, help="rows of A and columns of B (default 128)")
    p.add_argument("--k", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--phi", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0, 4.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--out", help="also write the table (Markdown) here")
    args = p.parse_args(argv)

    header = ["phi", "k", "seed", "dgemm bits (moduli)", "tight bits (moduli)", "more bits", "more moduli"]
    rows, extra = [], []
    for seed in args.seeds:
        for phi in args.phi:
            for k in args.k:
                a = standard_matrix(args.m, k, phi, seed=10 * seed)
                b = standard_matrix(k, args.m, phi, seed=10 * seed + 1)
                got = {g: ozhpc.gemm(a, b, guarantee=g, info=True)[1] for g in ("dgemm", "tight")}
                d, t = got["dgemm"], got["tight"]
                assert d.certified and t.certified, (phi, k, seed)
                extra.append((t.bits - d.bits, t.moduli - d.moduli))
                rows.append([f"{phi:g}", str(k), str(seed), f"{d.bits} ({d.moduli})", f"{t.bits} ({t.moduli})",
                             str(t.bits - d.bits), str(t.moduli - d.moduli)])
                print(" | ".join(rows[-1]), flush=True)
    bits = sorted(e[0] for e in extra)
    moduli = sorted(e[1] for e in extra)
    summary = (f"\n\"tight\" took {bits[0]}-{bits[-1]} more bits than \"dgemm\" (median {bits[len(bits) // 2]}), "
               f"{moduli[0]}-{moduli[-1]} more moduli (median {moduli[len(moduli) // 2]}), over {len(bits)} products.\n")
    print(summary)
    write_cpu_markdown(args.out, "Bits and moduli of guarantee \"tight\" over \"dgemm\" (scheme II, \"auto\")",
                       markdown_table(header, rows), trailer=summary, argv=argv)


if __name__ == "__main__":
    main()
