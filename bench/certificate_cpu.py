"""Certified "auto" on the CPU (NumPy engine): the width it needs vs today's "auto", the share of
entries the free test certifies, and the certificate's time relative to the product (benchmark,
not a test).

    python3 bench/certificate_cpu.py [--n 512 1024] [--phi 0.5 1 2] [--out FILE.md]

Per (scheme, phi, n): today's "auto" width and time (ozhpc.gemm), the certified widths tried
(``certified_gemm_prototype``: equilibrate, start at today's auto, widen while entries fail),
entries certified by the free test |C| - E - F at the final width, the seconds of the products
(split + pair products + combine), of their certificates and of the width prediction (exact norms
and the fixed-point GEMM, reused by the certificate), and of the whole certified call.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np

import ozhpc
from ozhpc.matrices import standard_matrix
from ozhpc.ozaki.certificate import certified_gemm_prototype


def measure(scheme: str, phi: float, n: int) -> dict:
    a, b = standard_matrix(n, n, phi, 1), standard_matrix(n, n, phi, 2)
    t = time.perf_counter()
    _, today = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, info=True)
    today_s = time.perf_counter() - t
    t = time.perf_counter()
    _, info = certified_gemm_prototype(a, b, scheme=scheme)
    total_s = time.perf_counter() - t
    overhead = info.seconds["certificate"] + info.seconds["prediction"]
    return {"scheme": scheme, "phi": phi, "n": n,
            "today": today.bits if scheme == "ozaki2" else today.slices, "today_s": today_s,
            "tried": " -> ".join(f"{w} ({u})" for w, u, _ in info.tried), "width": info.width,
            "certified": info.certified, "free": info.free / (n * n),
            "product_s": info.seconds["product"], "cert_s": info.seconds["certificate"],
            "predict_s": info.seconds["prediction"], "cert_ratio": overhead / info.seconds["product"],
            "total_s": total_s}


def table(rows) -> list[str]:
    out = ["| scheme | phi | n | today's auto | certified: widths tried (uncertified) | certified | "
           "free test | products s | certificate s | prediction s | (certificate + prediction) / products | "
           "today's auto s | certified call s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['scheme']} | {r['phi']} | {r['n']} | {r['today']} | {r['tried']} | {r['certified']} | "
                   f"{100 * r['free']:.1f}% | {r['product_s']:.2f} | {r['cert_s']:.2f} | {r['predict_s']:.2f} | "
                   f"{r['cert_ratio']:.2f} | "
                   f"{r['today_s']:.2f} | {r['total_s']:.2f} |")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="*", default=[512, 1024])
    p.add_argument("--phi", type=float, nargs="*", default=[0.5, 1.0, 2.0])
    p.add_argument("--schemes", nargs="*", default=["ozaki1", "ozaki2"])
    p.add_argument("--out")
    args = p.parse_args(argv)
    rows = []
    for scheme in args.schemes:
        for phi in args.phi:
            for n in args.n:
                rows.append(measure(scheme, phi, n))
                print(table(rows[-1:])[-1], flush=True)
    head = [f"Date: {datetime.date.today()}, machine: {platform.node() or 'vm'}, {os.cpu_count()} cores, "
            f"NumPy {np.__version__}, Python {platform.python_version()}.", ""]
    text = "\n".join(head + table(rows)) + "\n"
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
