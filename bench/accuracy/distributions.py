"""Accuracy in fact of certified "auto" against NumPy on many kinds of data (benchmark, not a test).

For each distribution (standard matrices phi 0-4, sparse densities 0.01-0.2, triangular L U,
banded, integer, Hilbert-like) prints the max over EVERY entry of ``|C - AB| / (|A||B|)`` for NumPy's
``A @ B`` and for ``ozhpc.gemm`` (engine numpy, both schemes' "auto", guarantee "dgemm"), and their
ratio (at most 1: no worse than native). The residual ``C - AB`` is exact: each entry's dot product
with ``-C_ij`` appended, summed in the long accumulator (:func:`ozhpc.engines.superacc.exact_dots`),
rounded once; ``|A||B|`` is NumPy's ``|A| @ |B|`` (FP64, within k u of it).

What the in-fact check costs (``plan.IN_FACT_RATIO``, operands with a row or column at most half
full): scheme II's bits, int8 GEMMs and passes with the check and without it (the same call with
``DataSizes.few_products`` forced off), and ``--cost N``: the time of the default on N x N x N
sparse, banded, triangular and dense data with and without it (best of ``--repeat``).

    python3 bench/accuracy/distributions.py [--quick] [--cost N] [--out bench/results/distributions_cpu_DATE]
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import command_line, cpu_run_line, markdown_table, parser, write_result  # noqa: E402  (this checkout's ozhpc first)

import ozhpc  # noqa: E402
from ozhpc.engines import superacc  # noqa: E402
from ozhpc.ozaki import plan as ozaki_plan  # noqa: E402
from ozhpc.run.matrices import standard_matrix  # noqa: E402


def sparse(rng, shape, density):
    x = rng.standard_normal(shape) * np.exp(rng.standard_normal(shape))
    return np.where(rng.random(shape) < density, x, 0.0)


def banded(rng, n, width):
    i, j = np.indices((n, n))
    return np.where(np.abs(i - j) <= width, rng.standard_normal((n, n)), 0.0)


def distributions(quick: bool) -> dict:
    """name -> (A, B), built from fixed seeds."""
    rng = np.random.default_rng(7)
    n, k = (48, 256) if quick else (64, 1024)
    out = {}
    for phi in (0.0, 0.5, 1.0, 2.0, 4.0):
        out[f"phi {phi:g}, {n}x{k}x{n}"] = (standard_matrix(n, k, phi, 11), standard_matrix(k, n, phi, 12))
    for density in (0.01, 0.02, 0.05, 0.1, 0.2):
        out[f"density {density:g}, {n}x{k}x{n}"] = (sparse(rng, (n, k), density), sparse(rng, (k, n), density))
    out["density 0.02, 48x4096x48"] = (sparse(rng, (48, 4096), 0.02), sparse(rng, (4096, 48), 0.02))
    m = 128 if quick else 256
    lower = np.tril(rng.standard_normal((m, m))) + m * np.eye(m)
    upper = np.triu(rng.standard_normal((m, m)))
    out[f"triangular L U, {m}"] = (lower, upper)
    out[f"triangular U L, {m}"] = (upper, lower)
    out[f"banded (3), {m}"] = (banded(rng, m, 3), banded(rng, m, 3))
    out[f"banded (3) x dense, {m}"] = (banded(rng, m, 3), rng.standard_normal((m, m)))
    out[f"integer +-1000, {n}x{k}x{n}"] = (rng.integers(-1000, 1001, (n, k)).astype(float),
                                         rng.integers(-1000, 1001, (k, n)).astype(float))
    i = np.arange(m)
    hilbert = 1.0 / (i.reshape(-1, 1) + i.reshape(1, -1) + 1)
    out[f"Hilbert-like, {m}"] = (hilbert, hilbert[::-1].copy())
    return out


def worst_error(c, a, b) -> float:
    """max_ij |C_ij - (AB)_ij| / (|A||B|)_ij, the residual exact (rounded once)."""
    m, n = c.shape
    rows, cols = np.repeat(np.arange(m), n), np.tile(np.arange(n), m)
    a_ext = np.concatenate([a[rows], -c.reshape(-1, 1)], axis=1)
    b_ext = np.concatenate([b.T[cols], np.ones((m * n, 1))], axis=1)
    step = max(1, (1 << 24) // a_ext.shape[1])
    res = np.concatenate([superacc.exact_dots(np, a_ext[e:e + step], b_ext[e:e + step],
                                              np.arange(min(step, m * n - e)), np.arange(min(step, m * n - e)))
                          for e in range(0, m * n, step)]).reshape(m, n)
    den = np.abs(a) @ np.abs(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(den > 0, np.abs(res) / den, np.where(res == 0, 0.0, np.inf))
    return float(ratio.max())


@contextlib.contextmanager
def in_fact_check(on: bool):
    """The default as it is (``on``), or with the in-fact check off (no operands have few products)."""
    if on:
        yield
        return
    saved = ozaki_plan.DataSizes.few_products
    ozaki_plan.DataSizes.few_products = property(lambda self: False)
    try:
        yield
    finally:
        ozaki_plan.DataSizes.few_products = saved


def plan_cost(info) -> str:
    """``bits/int8 GEMMs/passes`` of a scheme II call (passes: every plan the policy ran)."""
    return f"{info.bits}/{info.int8_gemms}/{len(info.widths)}"


def accuracy_table(quick: bool):
    header = ["data", "NumPy", "ozaki2 auto", "ratio", "bits/GEMMs/passes", "without check", "ozaki1 auto",
              "ratio", "slices (without)"]
    rows, worst = [], 0.0
    for name, (a, b) in distributions(quick).items():
        native = worst_error(a @ b, a, b)
        row = [name, f"{native:.2g}"]
        for scheme in ("ozaki2", "ozaki1"):
            c, info = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, accuracy="strict", info=True)
            with in_fact_check(False):
                _, off = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, accuracy="strict", info=True)
            ours = worst_error(c, a, b)
            ratio = ours / native if native else (0.0 if ours == 0 else float("inf"))
            worst = max(worst, ratio)
            row += [f"{ours:.2g}", f"{ratio:.2f}"]
            row += ([plan_cost(info), plan_cost(off)] if scheme == "ozaki2"
                    else [f"{info.slices} ({off.slices})"])
        rows.append(row)
        print(" | ".join(row), flush=True)
    return markdown_table(header, rows) + ["", f"Worst ratio (ozhpc / NumPy): {worst:.2f}"]


def cost_table(n: int, repeat: int):
    """Seconds of the default (scheme II) on n x n x n data, with and without the in-fact check (the
    two calls alternate, so a change of the machine's load falls on both; best of ``repeat``)."""
    rng = np.random.default_rng(8)
    cases = {"phi 0.5 (dense)": (standard_matrix(n, n, 0.5, 21), standard_matrix(n, n, 0.5, 22)),
             "density 0.02": (sparse(rng, (n, n), 0.02), sparse(rng, (n, n), 0.02)),
             "density 0.2": (sparse(rng, (n, n), 0.2), sparse(rng, (n, n), 0.2)),
             "banded (3)": (banded(rng, n, 3), banded(rng, n, 3)),
             "triangular L U": (np.tril(rng.standard_normal((n, n))) + n * np.eye(n),
                                np.triu(rng.standard_normal((n, n))))}
    rows = []
    for name, (a, b) in cases.items():
        best, info = {False: float("inf"), True: float("inf")}, {}
        ozhpc.gemm(a, b, engine="numpy")   # warm-up (first-call costs: tables, caches)
        for _ in range(repeat):
            for on in (False, True):
                with in_fact_check(on):
                    t0 = time.perf_counter()
                    _, info[on] = ozhpc.gemm(a, b, engine="numpy", info=True)
                    best[on] = min(best[on], time.perf_counter() - t0)
        row = [f"{name}, {n}", f"{best[False]:.2f}", plan_cost(info[False]), f"{best[True]:.2f}", plan_cost(info[True]),
               f"{best[True] / best[False]:.2f}"]
        rows.append(row)
        print(" | ".join(row), flush=True)
    return markdown_table(["data", "s without check", "bits/GEMMs/passes", "s with check", "bits/GEMMs/passes",
                           "time ratio"], rows)


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--quick", action="store_true", help="smaller shapes (about a minute)")
    p.add_argument("--cost", type=int, default=0, metavar="N", help="also time the default at n = N with and "
                                                                      "without the in-fact check")
    p.add_argument("--repeat", type=int, default=2, help="timed calls per case (best counts; default 2)")
    p.add_argument("--out", help="also write the table as markdown here")
    args = p.parse_args(argv)
    lines = accuracy_table(args.quick)
    print(lines[-1])
    text = ("# Accuracy in fact on many distributions: certified \"auto\" vs NumPy\n\n"
            + cpu_run_line(command_line(argv))
            + "Max over every entry of |C - AB| / (|A||B|) (residual exact, rounded once); ratio = ozhpc / "
              "NumPy (0/0 counts 0). Guarantee \"dgemm\", accuracy \"strict\". \"bits/GEMMs/passes\": scheme II's "
              "last plan, its int8 GEMMs (moduli) and the passes run (products, bounds passes of the certificate's "
              "digits, wider plans); \"without check\": the same call with the in-fact check off "
              "(`plan.IN_FACT_RATIO`, operands with a row or column at most half full).\n\n" + "\n".join(lines))
    if args.cost:
        text += ("\n\n## Cost: time of the default (scheme II), with and without the in-fact check\n\n"
                 + f"Best of {args.repeat} calls, seconds, n x n x n.\n\n" + "\n".join(cost_table(args.cost, args.repeat)))
    write_result(args.out, text)

if __name__ == "__main__":
    main()
