"""Certified "auto" on the CPU (NumPy engine): what ``ozhpc.gemm`` picks and what the certificate
costs in the real pipeline (benchmark, not a test).

    python3 bench/accuracy/certificate_cpu.py [--n 256 512 1024] [--phi 0.5 1 2] [--out FILE.md]

Per (scheme, phi, n), one ``ozhpc.gemm(A, B, engine="numpy", scheme=..., info=True)`` with
"auto" (certified): the plans it ran (``GemmInfo.widths``: bits and uncertified entries per pass;
a repeated width is the support-digit pass), whether C is certified, the seconds of the
``certificate`` phase of ``info.seconds`` (every pass) against the whole call and against the
phases of the products, and, for comparison, the same call with the final plan fixed
(``slices=`` / ``bits=``: no equilibration, no magnitude plane, no certificate).
"""
from __future__ import annotations

import datetime
import os
import platform
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import parser  # noqa: E402
import numpy as np  # noqa: E402

import ozhpc  # noqa: E402
from ozhpc.run.matrices import standard_matrix  # noqa: E402


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def measure(scheme: str, phi: float, n: int) -> dict:
    a, b = standard_matrix(n, n, phi, 1), standard_matrix(n, n, phi, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ozhpc.AccuracyWarning)   # reported in the table instead
        (_, info), total_s = timed(lambda: ozhpc.gemm(a, b, engine="numpy", scheme=scheme, info=True))
    fixed = {"bits": info.bits} if scheme == "ozaki2" else {"slices": info.slices}
    _, fixed_s = timed(lambda: ozhpc.gemm(a, b, engine="numpy", scheme=scheme, **fixed))
    sec = info.seconds
    cert_s = sec.get("certificate", 0.0)
    width = info.bits if scheme == "ozaki2" else info.slices
    return {"scheme": scheme, "phi": phi, "n": n, "width": width,
            "passes": " -> ".join(f"{w if scheme == 'ozaki2' else w // 7} ({u})" for w, u, _ in info.widths),
            "certified": info.certified, "worst": info.worst_ratio, "cert_s": cert_s,
            "products_s": sum(v for k, v in sec.items() if k != "certificate"), "total_s": total_s,
            "share": cert_s / total_s if total_s else 0.0, "fixed_s": fixed_s}


def table(rows) -> list[str]:
    out = ["| scheme | phi | n | final plan | passes: plan (uncertified) | certified | certificate s | "
           "other phases s | whole call s | certificate / call | fixed plan call s | call / fixed |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        unit = "bits" if r["scheme"] == "ozaki2" else "slices"
        out.append(f"| {r['scheme']} | {r['phi']} | {r['n']} | {r['width']} {unit} | {r['passes']} | "
                   f"{r['certified']} | {r['cert_s']:.3f} | {r['products_s']:.2f} | {r['total_s']:.2f} | "
                   f"{100 * r['share']:.1f}% | {r['fixed_s']:.2f} | {r['total_s'] / r['fixed_s']:.2f} |")
    return out


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--n", type=int, nargs="*", default=[256, 512, 1024])
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
