"""Complex scheme II's routes compared on the CPU: products per certified bit (not a test).

    python3 bench/accuracy/complex_routes.py --n 192 --ks 256 1024 4096 --out bench/results/complex_routes_cpu_DATE.md

For each k and guarantee, certified ``ozhpc.gemm`` (NumPy engine) on phi = 0.5 complex data says
how many bits per entry it needed; the moduli must then hold ``log2 M`` bits (the worst case of
that width, :func:`ozhpc.engines.gaussian.product_bound`). Each route reaches that M with its own
moduli: two products per split modulus (p = 1 mod 4: ``w^2 = -1``), three per Karatsuba modulus;
every product is the same int8 GEMM, so products per certified bit is the cost. The NumPy time per
product is measured on the run itself (the engine's product phase over its product count).
"""
from __future__ import annotations

import math
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from common import parser  # noqa: E402

import ozhpc  # noqa: E402
from ozhpc.engines import gaussian  # noqa: E402


def main(argv=None) -> int:
    p = parser(__doc__)
    p.add_argument("--n", type=int, default=192)
    p.add_argument("--ks", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    lines = [f"# Complex routes on the CPU, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"command `python3 bench/accuracy/complex_routes.py --n {args.n} --ks {' '.join(map(str, args.ks))}`", "",
             "| k | guarantee | certified bits | log2 M | split only: products (per bit) | Karatsuba only | "
             "ozhpc (split first, then Karatsuba) | ms per int8 product (NumPy) |", "|" + "---|" * 8]
    for k in args.ks:
        def part(shape):
            return (rng.random(shape) - 0.5) * np.exp(0.5 * rng.standard_normal(shape))
        a = part((args.n, k)) + 1j * part((args.n, k))
        b = part((k, args.n)) + 1j * part((k, args.n))
        for guarantee in ("dgemm", "tight"):
            _, info = ozhpc.gemm(a, b, guarantee=guarantee, engine="numpy", info=True)
            log_m = math.log2(gaussian.need(gaussian.product_bound(info.bits, k)))
            costs = gaussian.route_costs(log_m)
            per = {name: ("-" if c is None else f"{c[1]} ({c[1] / info.bits:.3f})") for name, c in costs.items()}
            ms = 1e3 * info.seconds["multiply"] / info.int8_gemms
            lines.append(f"| {k} | {guarantee} | {info.bits} | {log_m:.1f} | {per['split']} | {per['karatsuba']} | "
                         f"{per['mixed']} | {ms:.2f} |")
    lines += ["", "Beyond 152 bits of M the split moduli <= 256 run out; Karatsuba moduli then complete M "
                  "(ozhpc's order: most bits of M per product first)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
