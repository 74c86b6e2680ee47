"""Accuracy of ozhpc against native FP64 GEMM, per phi and slice count (benchmark, not a test).

For the standard test matrices (rand - 0.5) * exp(phi * randn), prints the max over sampled
entries of |C - exact| / (|A||B|) (exact reference: rational arithmetic) for NumPy's own A @ B
and, as a ratio to it, for ozhpc with fixed slice counts and with "auto" (below 1 = better than
native).

    python3 bench/accuracy/accuracy.py [--m 64] [--k 256 4096] [--samples 40] [--out bench/results/x.md]

``--scheme ozaki2`` measures Ozaki scheme II instead: fixed integer widths (``--bits``) in
place of the slice columns, "auto" with its bits and moduli, and ``--margins``: the bits
"auto" picked with the rule it used until 2026-12-02, ``53 + spread + M``, which is how that
rule's margin was chosen (``bench/accuracy/auto_rule.py`` measures today's rule).

    python3 bench/accuracy/accuracy.py --scheme ozaki2 [--bits 48 50 ...] [--margins -8 -7 ...] [--seed 1]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import markdown_table, parser, write_cpu_markdown  # noqa: E402
import ozhpc  # noqa: E402
from ozhpc.engines import crt  # noqa: E402
from ozhpc.ozaki.plan import FP64_BITS  # noqa: E402
from ozhpc.run.matrices import standard_matrix  # noqa: E402
from ozhpc.run.reference import exact_entry, relative_errors, sample_indices  # noqa: E402


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--m", type=int, default=64, help="rows of A and columns of B (default 64)")
    p.add_argument("--k", type=int, nargs="+", default=[256, 4096])
    p.add_argument("--phi", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0, 4.0])
    p.add_argument("--scheme", choices=["ozaki1", "ozaki2"], default="ozaki1")
    p.add_argument("--slices", type=int, nargs="+", default=list(range(6, 14)), help="ozaki1 columns")
    p.add_argument("--groups", default="auto", help="ozaki1: auto (triangle) or all")
    p.add_argument("--bits", type=int, nargs="*", default=list(range(48, 61, 2)),
                   help="ozaki2 columns: fixed integer bits per entry (default 48 50 .. 60)")
    p.add_argument("--margins", type=int, nargs="*", default=list(range(-8, 1)),
                   help="ozaki2 columns: bits = 53 + spread + M, the former auto rule with margin M "
                        "(default -8 .. 0)")
    p.add_argument("--samples", type=int, default=40)
    p.add_argument("--seed", type=int, default=1,
                   help="A from seed S, B from S + 1, the sampled entries from S + 2 (default 1)")
    p.add_argument("--out", help="also write the table as markdown here")
    args = p.parse_args(argv)
    scheme2 = args.scheme == "ozaki2"

    if scheme2:
        header = (["phi", "k", "native max err", "spread", "auto bits", "moduli", "auto/native"]
                  + [f"b={b}" for b in args.bits] + [f"M={mg:+d}" for mg in args.margins])
    else:
        header = ["phi", "k", "native max err", "auto s", "auto/native"] + [f"s={s}" for s in args.slices]
    rows = []
    for phi in args.phi:
        for k in args.k:
            a = standard_matrix(args.m, k, phi, seed=args.seed)
            b = standard_matrix(k, args.m, phi, seed=args.seed + 1)
            idx = sample_indices(args.m, args.m, args.samples, seed=args.seed + 2)
            exact = [exact_entry(a[i], b[:, j]) for i, j in idx]
            native = relative_errors(a @ b, a, b, idx, exact).max()

            def ratio(c):
                return relative_errors(c, a, b, idx, exact).max() / native

            if scheme2:
                c, info = ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2", info=True)
                row = [f"{phi:g}", str(k), f"{native:.2e}", str(info.spread_bits), str(info.bits),
                       str(info.int8_gemms), f"{ratio(c):.2g}"]
                fixed = list(args.bits) + [max(crt.MIN_BITS, min(crt.MAX_BITS, FP64_BITS + info.spread_bits + mg))
                                           for mg in args.margins]
                row += [f"{ratio(ozhpc.gemm(a, b, engine='numpy', scheme='ozaki2', bits=bt)):.2g}"
                        for bt in fixed]
            else:
                c, info = ozhpc.gemm(a, b, groups=args.groups, engine="numpy", info=True)
                row = [f"{phi:g}", str(k), f"{native:.2e}", str(info.slices), f"{ratio(c):.2g}"]
                row += [f"{ratio(ozhpc.gemm(a, b, slices=s, groups=args.groups, engine='numpy')):.2g}"
                        for s in args.slices]
            rows.append(row)
            print(" | ".join(row), flush=True)

    table = markdown_table(header, rows)
    print("\n".join(table))
    intro = (f"Max over {args.samples} sampled entries of |C - exact| / (|A||B|), m = n = {args.m}; "
             f"ozhpc columns are ratios to native (below 1 = more accurate than native)")
    if scheme2:
        title = "ozhpc accuracy vs native FP64 GEMM: Ozaki scheme II"
        intro += (". spread: the exponent-spread statistic (bits); auto bits: what today's \"auto\" rule took "
                  "(bench/accuracy/auto_rule.py measures that rule); moduli = int8 GEMMs; b=N: N bits per entry; "
                  "M=m: bits = 53 + spread + m (the former auto rule with margin m)")
    else:
        title = "ozhpc accuracy vs native FP64 GEMM"
        intro += f"; groups = {args.groups}; round-to-nearest int8 digits, 7 bits per slice"
    write_cpu_markdown(args.out, title, table, intro=intro + ".\n\n", argv=argv)

if __name__ == "__main__":
    main()
