"""Scheme II "auto" against native DGEMM on the CPU: the bits it picks and its error in fact
(benchmark, not a test; the evidence behind ``plan.IN_FACT_*``).

    python3 bench/accuracy/auto_rule.py [--phi 0 0.5 1 2 4] [--k 256 1024 4096 16384 32768] [--scan] [--out FILE.md]

For the standard matrices ``(rand - 0.5) * exp(phi * randn)`` (m = n = 64; A from seed 10 S, B
from 10 S + 1), the default product (scheme II, guarantee "dgemm"): the statistic it reads (the
largest mean gap of a row), the bits and moduli it takes, the passes, and the max over 48 sampled
entries of |C - exact| / (|A||B|) next to NumPy's own ``A @ B`` on the same entries (exact
rational reference). ``--scan`` adds the fewest fixed bits whose error is no larger than NumPy's
(what the rule is fitted to; it varies by a few bits from one matrix to the next, hence the
margin).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import markdown_table, parser, write_cpu_markdown  # noqa: E402
import numpy as np  # noqa: E402

import ozhpc  # noqa: E402
from ozhpc.engines import get_engine  # noqa: E402
from ozhpc.ozaki.product import Product  # noqa: E402
from ozhpc.ozaki.settings import OzakiSettings  # noqa: E402
from ozhpc.run.matrices import standard_matrix  # noqa: E402
from ozhpc.run.reference import exact_dot, relative_errors, sample_indices  # noqa: E402


def fewest_bits(a, b, idx, exact, native, start: int) -> int:
    """Fewest fixed bits (scheme II) whose sampled error is at most ``native``, searched from ``start``."""
    def err(bits):
        return relative_errors(ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2", bits=bits), a, b, idx, exact).max()
    bits = start
    while bits > 30 and err(bits - 1) <= native:
        bits -= 1
    while bits < 100 and err(bits) > native:
        bits += 1
    return bits


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--phi", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0, 4.0])
    p.add_argument("--k", type=int, nargs="+", default=[256, 1024, 4096, 16384, 32768])
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--scan", action="store_true", help="also find the fewest bits that match native")
    p.add_argument("--out", help="write the table as markdown here")
    args = p.parse_args(argv)
    m = 64
    header = ["phi", "k", "seed", "mean gap", "bits", "moduli", "passes", "auto err", "native err", "auto/native"]
    header += ["fewest bits <= native"] if args.scan else []
    rows = []
    for seed in args.seeds:
        for phi in args.phi:
            for k in args.k:
                a = standard_matrix(m, k, phi, seed=10 * seed)
                b = standard_matrix(k, m, phi, seed=10 * seed + 1)
                idx = sample_indices(m, m, 48, seed=seed + 2)
                exact = [exact_dot(a[i], b[:, j]) for i, j in idx]
                native = relative_errors(a @ b, a, b, idx, exact).max()
                c, info = ozhpc.gemm(a, b, engine="numpy", info=True)
                ours = relative_errors(c, a, b, idx, exact).max()
                gap = Product(OzakiSettings(), get_engine("numpy"), a, np.ascontiguousarray(b.T)).ops.sizes.mean_gap
                row = [f"{phi:g}", str(k), str(seed), f"{gap:.2f}", str(info.bits), str(info.moduli),
                       str(len(info.widths)), f"{ours:.2e}", f"{native:.2e}", f"{ours / native:.2f}"]
                if args.scan:
                    row.append(str(fewest_bits(a, b, idx, exact, native, info.bits)))
                rows.append(row)
                print(" | ".join(row), flush=True)
    table = markdown_table(header, rows)
    print("\n".join(table))
    write_cpu_markdown(args.out, "Scheme II \"auto\" (guarantee \"dgemm\") against native DGEMM on the CPU", table,
                       argv=argv, intro=(
                    f"m = n = 64; errors are the max over 48 sampled entries of |C - exact| / (|A||B|) "
                    f"(exact rational reference); auto/native below 1 means the default product is the "
                    f"more accurate. 'bits' is what \"auto\" took: its rule's bits, raised to the most its "
                    f"moduli hold.\n\n"))


if __name__ == "__main__":
    main()
