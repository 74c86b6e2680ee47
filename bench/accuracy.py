"""Accuracy of ozhpc against native FP64 GEMM, per phi and slice count (benchmark, not a test).

For the standard test matrices (rand - 0.5) * exp(phi * randn), prints the max over sampled
entries of |C - exact| / (|A||B|) (exact reference: rational arithmetic) for NumPy's own A @ B
and, as a ratio to it, for ozhpc with fixed slice counts and with "auto" (below 1 = better than
native).

    python3 bench/accuracy.py [--m 64] [--k 256 4096] [--samples 40] [--out bench/results/x.md]
"""
from __future__ import annotations

import argparse
import datetime
import platform
import sys

import numpy as np

import ozhpc
from ozhpc.matrices import standard_matrix
from ozhpc.reference import relative_errors, sample_indices


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, default=64, help="rows of A and columns of B (default 64)")
    p.add_argument("--k", type=int, nargs="+", default=[256, 4096])
    p.add_argument("--phi", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0, 4.0])
    p.add_argument("--slices", type=int, nargs="+", default=list(range(6, 14)))
    p.add_argument("--groups", default="auto", help="auto (triangle) or all")
    p.add_argument("--samples", type=int, default=40)
    p.add_argument("--out", help="also write the table as markdown here")
    args = p.parse_args(argv)

    header = ["phi", "k", "native max err", "auto s", "auto/native"] + [f"s={s}" for s in args.slices]
    rows = []
    for phi in args.phi:
        for k in args.k:
            a = standard_matrix(args.m, k, phi, seed=1)
            b = standard_matrix(k, args.m, phi, seed=2)
            idx = sample_indices(args.m, args.m, args.samples, seed=3)
            native = relative_errors(a @ b, a, b, idx).max()

            def ratio(c):
                return relative_errors(c, a, b, idx).max() / native

            c, info = ozhpc.gemm(a, b, groups=args.groups, engine="numpy", info=True)
            row = [f"{phi:g}", str(k), f"{native:.2e}", str(info.slices), f"{ratio(c):.2g}"]
            row += [f"{ratio(ozhpc.gemm(a, b, slices=s, groups=args.groups, engine='numpy')):.2g}"
                    for s in args.slices]
            rows.append(row)
            print(" | ".join(row), flush=True)

    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    table += ["| " + " | ".join(r) + " |" for r in rows]
    print("\n".join(table))
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# ozhpc accuracy vs native FP64 GEMM\n\n"
                    f"Date: {datetime.date.today()}, machine: {platform.node()} ({platform.processor() or 'cpu'}), "
                    f"NumPy {np.__version__}.\n"
                    f"Command: `python3 bench/accuracy.py {' '.join(sys.argv[1:] if argv is None else argv)}`\n\n"
                    f"Max over {args.samples} sampled entries of |C - exact| / (|A||B|), m = n = {args.m}; "
                    f"ozhpc columns are ratios to native (below 1 = more accurate than native); "
                    f"groups = {args.groups}; round-to-nearest int8 digits, 7 bits per slice.\n\n")
            f.write("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
