"""Scheme II's moduli under two bounds of every ``|C'_ij|`` (CPU, NumPy; a measurement, not a test).

    python3 bench/accuracy/moduli_bound.py --phi 0.5 1 2 --k 8192 16384 32768 --rows 1024

ozhpc's CRT range is a Cauchy-Schwarz bound from the operands' row sizes (``max_i ||X_i||_2 max_j
||Y_j||_2``, :func:`ozhpc.engines.crt.data_product_bound`). GEMMul8's accurate mode bounds ``|A||B|``
by one extra int8 GEMM of rounded-up magnitudes instead; here ``U = ceil(|x| 2**(6 - e))`` (the
engine's support digits, at most 64) gives the true bound ``|X_i|.|Y_j| <= (2**(bits-6) + 1/2)**2
(U V^T)_ij``. For each phi and k this prints the plan "auto" takes (bits, moduli) with the shipped
bound and with ``min(CS, UV)`` at the same first bits (then widened to what the moduli hold), on
``rows`` x ``rows`` blocks of C of the standard matrices (the max over more rows only grows a little).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import parser  # noqa: E402
import numpy as np  # noqa: E402


def plans(phi: float, k: int, rows: int, guarantee: str, seed: int = 0) -> dict:
    from ozhpc.engines import crt
    from ozhpc.engines.numpy_engine import NumpyEngine
    from ozhpc.ozaki.plan import ModularPlan, auto_bits
    from ozhpc.ozaki.product import Product
    from ozhpc.ozaki.settings import OzakiSettings

    rng = np.random.default_rng(seed)
    a = (rng.random((rows, k)) - 0.5) * np.exp(phi * rng.standard_normal((rows, k)))
    bt = (rng.random((rows, k)) - 0.5) * np.exp(phi * rng.standard_normal((rows, k)))
    settings = OzakiSettings("ozaki2", bits="auto", guarantee=guarantee)
    saved = Product._split
    Product._split = lambda self, a_rows, b_rows: None   # only the plan
    try:
        p = Product(settings, NumpyEngine(), a, bt)
    finally:
        Product._split = saved
    eng = p.engine
    u = eng.magnitudes(p._fin_a, p.row_exps, upper=True)[0].astype(np.float64)
    v = eng.magnitudes(p._fin_b, p.col_exps, upper=True)[0].astype(np.float64)
    uv = int((u @ v.T).max())
    first = auto_bits(p.sizes, guarantee)
    shipped = ModularPlan.widest_for(first, k, p.sizes)

    def moduli(bits):
        cs = p.sizes.product_bound(bits)
        tight = (2 ** (bits - 6) * 2 + 1) ** 2 * uv // 4 + 1   # (2**(bits-6) + 1/2)**2 uv, rounded up
        return crt.moduli_needed(bits, k, min(cs, tight)), cs, tight

    bits = first
    count, cs, tight = moduli(bits)
    while bits < crt.MAX_BITS and moduli(bits + 1)[0] == count:
        bits += 1
    return dict(phi=phi, k=k, guarantee=guarantee, first_bits=first, shipped=(shipped.bits, shipped.moduli),
                with_uv=(bits, count), cs_over_uv_bits=float(np.log2(cs / tight)))


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--phi", type=float, nargs="*", default=[0.5, 1.0, 2.0])
    p.add_argument("--k", type=int, nargs="*", default=[8192, 16384, 32768])
    p.add_argument("--rows", type=int, default=1024)
    p.add_argument("--guarantee", nargs="*", default=["dgemm"])
    args = p.parse_args()
    print("| phi | k | guarantee | first bits | shipped: bits (moduli) | with the UV bound: bits (moduli) | CS / UV (bits) |")
    print("|---|---|---|---|---|---|---|")
    for g in args.guarantee:
        for phi in args.phi:
            for k in args.k:
                r = plans(phi, k, args.rows, g)
                print(f"| {phi} | {k} | {g} | {r['first_bits']} | {r['shipped'][0]} ({r['shipped'][1]}) | "
                      f"{r['with_uv'][0]} ({r['with_uv'][1]}) | {r['cs_over_uv_bits']:+.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
