"""Draw the README / docs figures from the committed benchmark results (never by hand).

    pip install ".[bench]"            # matplotlib
    python3 bench/plots.py            # bench/results/*.json -> docs/figures/*.png

* ``docs/figures/speed_h200.png``: speed against cuBLAS DGEMM over n on one H200, one line
  per mode (``bench/results/speed_h200_2026-12-01.json``);
* ``docs/figures/accuracy_phi.png``: the max error over the exponent spread phi next to
  native FP64 GEMM's (``bench/results/accuracy_cpu_2026-12-01.json``).

Both JSON files were transcribed from the Markdown tables of those runs (each row names its
source line); a new run's JSON in the same shape redraws the figures.
"""
from __future__ import annotations

import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SPEED = "speed_h200_2026-12-01.json"
ACCURACY = "accuracy_cpu_2026-12-01.json"
# Mode -> (colour, line style); scheme I blues, scheme II oranges/reds, cuBLAS greys.
STYLE = {
    "cuBLAS DGEMM": ("black", "-"),
    "cuBLAS FP64 emulation": ("grey", ":"),
    "ozaki1 6 slices": ("#9ecae1", "--"),
    "ozaki1 7 slices": ("#4292c6", "--"),
    "ozaki1 8 slices": ("#08519c", "--"),
    "ozaki1 auto (8 slices, before the certificate)": ("#08306b", "-"),
    "ozaki2 53 bits": ("#fd8d3c", "--"),
    "ozaki2 auto (56 bits, before the certificate)": ("#d94801", "-"),
    "ozaki2 certified auto (60 bits)": ("#a50f15", "-"),
}
LABELS = {   # the results' names of a mode -> what the legend says it is
    "ozaki1 auto (8 slices, before the certificate)": "ozaki1 8 slices (auto's plan, not certified)",
    "ozaki2 auto (56 bits, before the certificate)": "ozaki2 56 bits (auto's plan, not certified)",
    "ozaki2 certified auto (60 bits)": "ozaki2 60 bits, certified to u |A||B|",
}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def speed_figure(data: dict, path: str) -> None:
    """x DGEMM over n, one line per method (cuBLAS DGEMM is the line at 1)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.0, 4.0))
    for method, (colour, style) in STYLE.items():
        rows = sorted((r["n"], r["x_dgemm"]) for r in data["rows"] if r["method"] == method)
        if rows:
            ax.plot([n for n, _ in rows], [x for _, x in rows], style, color=colour, marker="o", markersize=4,
                    label=LABELS.get(method, method), linewidth=2 if style == "-" else 1.3)
    ax.set_xscale("log", base=2)
    ns = sorted({r["n"] for r in data["rows"]})
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("n (n x n x n product)")
    ax.set_ylabel("speed / cuBLAS DGEMM (higher is faster)")
    ax.set_title("One H200: FP64 products against cuBLAS DGEMM (2026-12-01)", loc="left")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


ERROR_LINES = {   # key in the accuracy rows -> (label, colour, style)
    "native": ("native FP64 GEMM", "black", "-"),
    "ozaki1 7 slices": ("ozaki1 7 slices", "#4292c6", "--"),
    "ozaki1 auto": ("ozaki1 auto's plan (not certified)", "#08306b", "-"),
    "ozaki2 52 bits": ("ozaki2 52 bits", "#fd8d3c", "--"),
    "ozaki2 auto": ("ozaki2 auto's plan (not certified)", "#d94801", "-"),
}


def accuracy_figure(data: dict, path: str) -> None:
    """Max error over phi, one panel per k, next to native FP64 GEMM's."""
    plt = _plt()
    ks = sorted({r["k"] for r in data["rows"]})
    fig, axes = plt.subplots(1, len(ks), figsize=(7.0, 3.4), sharey=True)
    for ax, k in zip(axes, ks):
        rows = sorted((r for r in data["rows"] if r["k"] == k), key=lambda r: r["phi"])
        phis = [r["phi"] for r in rows]
        for key, (label, colour, style) in ERROR_LINES.items():
            ax.plot(phis, [r[key] for r in rows], style, color=colour, marker="o", markersize=3.5, label=label,
                    linewidth=2 if style == "-" else 1.3)
        ax.set_yscale("log")
        ax.set_xlabel("phi (exponent spread of the inputs)")
        ax.set_title(f"k = {k}, m = n = 64")
    axes[0].set_ylabel("max |C - exact| / (|A||B|)")
    axes[0].legend(fontsize=7, loc="upper left", frameon=False)
    fig.suptitle("Error against the exact product, CPU (lower is more accurate)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=os.path.join(HERE, "results"), help="where the JSON results are")
    parser.add_argument("--out", default=os.path.join(HERE, "..", "docs", "figures"), help="where the PNGs go")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.results, SPEED)) as f:
        speed_figure(json.load(f), os.path.join(args.out, "speed_h200.png"))
    with open(os.path.join(args.results, ACCURACY)) as f:
        accuracy_figure(json.load(f), os.path.join(args.out, "accuracy_phi.png"))
    for name in ("speed_h200.png", "accuracy_phi.png"):
        path = os.path.join(args.out, name)
        print(f"{os.path.normpath(path)}: {os.path.getsize(path) // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
