"""The run planner's predictions for B200 clusters and its error against the committed GPU runs.

    python3 bench/planner/planner_tables.py > bench/results/planner_b200_<date>.md

No device needed (a model). Prints markdown: weak scaling (a fixed 32768 x 32768 block of C per GPU)
on 1-512 B200s, strong scaling of n = 131072 on 8-512 B200s, each for both wire formats and both
schemes ("auto" settings, the plan they typically pick); the largest n one H200 / B200 holds with
the default options; and every committed multi-GPU run (bench/results/multi_gpu_h200x2_*.md) next
to its prediction.
"""
from __future__ import annotations

import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import REPO, parser  # noqa: E402
from ozhpc.commands.plan import DEVICES, IO_RATE, best, predict  # noqa: E402
from ozhpc.ozaki.settings import OzakiSettings  # noqa: E402
from ozhpc.run.resources import estimate_memory  # noqa: E402

SCHEMES = (("ozaki2", OzakiSettings("ozaki2")), ("ozaki1", OzakiSettings("ozaki1")))
HEAD = ("| GPUs | n | scheme | wire | grid | panel | time s | TFLOP/s per GPU | efficiency | NVLink GB/GPU | "
        "network GB/GPU | memory GB/GPU | hidden | with I/O and start-up s |")
RULE = "|" + "---|" * 14


def row(gpus, n, scheme, c, base):
    eff = "" if base is None else f"{100 * c.tflops_per_gpu / base:.0f}%"
    hidden = "n/a" if c.hidden is None else f"{100 * c.hidden:.0f}%"
    return (f"| {gpus} | {n} | {scheme} | {c.wire} | {c.grid[0]}x{c.grid[1]} | {c.kb} | {c.seconds:.3g} | "
            f"{c.tflops_per_gpu:.3g} | {eff} | {c.nvlink_bytes_max / 1e9:.3g} | {c.network_bytes_max / 1e9:.3g} | "
            f"{c.memory_bytes / 1e9:.3g}{'' if c.fits else ' (does not fit)'} | {hidden} | {c.total_seconds:.4g} |")


def scaling(device, runs, title, base_of):
    print(f"\n## {title}\n\n{HEAD}\n{RULE}")
    for scheme, settings in SCHEMES:
        for wire in ("fp64", "planes"):
            base = None
            for gpus, n in runs:
                chosen, _ = best(n, n, n, gpus, device, settings, wire=wire)
                if base is None and base_of(gpus) and chosen.fits:
                    base = chosen.tflops_per_gpu
                print(row(gpus, n, scheme, chosen, base))


def largest_n(device, settings, wire) -> int:
    lo, hi = 1024, 1 << 20
    while hi - lo > 256:
        mid = (lo + hi) // 2 // 256 * 256
        kb = min(4096, mid)
        fits = estimate_memory((mid, mid), (mid, mid), kb, mid, settings, on_device=True, wire=wire).device \
            <= device.memory
        lo, hi = (mid, hi) if fits else (lo, mid)
    return lo


def measured_h200():
    print("\n## The model against the committed 2 x H200 runs (scheme I, 7 slices, block 1024, planes)\n")
    print("| file | n | grid | panel | measured s | predicted s | error | measured overlap | predicted hidden | "
          "bytes sent = predicted |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    pattern = re.compile(r"^\| (\d+) \| (\dx\d) \| \d \| \S+ \| \d+ x (\d+) \| ([\d.]+) \|.*\| (n/a|\d+%) \| "
                         r"([\d,]+) \(=\) \|", re.M)
    for name in ("multi_gpu_h200x2_2026-11-30.md", "multi_gpu_h200x2_2026-12-01.md"):
        with open(os.path.join(REPO, "bench", "results", name)) as f:
            runs = pattern.findall(f.read())
        for n, grid, kb, wall, overlap, sent in runs:
            p, q = map(int, grid.split("x"))
            c = predict(int(n), int(n), int(n), (p, q), DEVICES["h200"], OzakiSettings("ozaki1", slices=7),
                        kb=int(kb), wire="planes", block=(1024, 1024))
            err = c.seconds / float(wall) - 1
            errors.append(abs(err))
            hidden = "n/a" if c.hidden is None else f"{100 * c.hidden:.0f}%"
            print(f"| {name} | {n} | {grid} | {kb} | {wall} | {c.seconds:.3f} | {100 * err:+.0f}% | {overlap} | "
                  f"{hidden} | {sum(c.bytes_sent) == int(sent.replace(',', ''))} |")
    print(f"\nMean absolute error {100 * sum(errors) / len(errors):.0f}% over {len(errors)} runs, "
          f"largest {100 * max(errors):.0f}%.")


ACCEPT = "accept_h200_2026-12-04.md"
ACCEPT_SECTION = "## Evening state"


def one_gpu_default():
    """The default (certified scheme II) on one GPU: the model against the last committed H200
    acceptance run (its "ozhpc default" and "fixed" rows), and what it predicts on one B200."""
    with open(os.path.join(REPO, "bench", "results", ACCEPT)) as f:
        text = f.read()
    section = text[text.index(ACCEPT_SECTION):]
    pattern = re.compile(r"^\| (\d+) \| (ozhpc default|ozhpc fixed (\d+) bits) \| (\d+) \((\d+)\) \| ([\d.]+) \|", re.M)
    print(f"\n## One GPU, scheme II: the model against the committed H200 calls ({ACCEPT}, "
          f"\"{ACCEPT_SECTION[3:]}\"), and one B200\n")
    print("| n | settings | measured moduli | model's plan | measured s | predicted s | error | of it certificate "
          "and set-up s | B200 predicted s | B200 x its DGEMM |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    for n, what, fixed_bits, _bits, moduli, wall in pattern.findall(section):
        n = int(n)
        settings = OzakiSettings("ozaki2", bits=int(fixed_bits)) if fixed_bits else OzakiSettings("ozaki2")
        c = predict(n, n, n, (1, 1), DEVICES["h200"], settings, kb=min(n, 8192), wire="fp64")
        b = predict(n, n, n, (1, 1), DEVICES["b200"], settings, kb=min(n, 8192), wire="fp64")
        err = c.seconds / float(wall) - 1
        errors.append(abs(err))
        dgemm = 2.0 * n**3 / DEVICES["b200"].dgemm
        print(f"| {n} | {'default' if not fixed_bits else what[6:]} | {moduli} | {c.plan.split(': ')[1]} | {wall} | "
              f"{c.seconds:.4g} | {100 * err:+.0f}% | {c.certificate_seconds:.3g} | {b.seconds:.4g} | {dgemm / b.seconds:.2f} |")
    print(f"\nMean absolute error {100 * sum(errors) / len(errors):.0f}% over {len(errors)} calls, "
          f"largest {100 * max(errors):.0f}%.")


def main():
    parser(__doc__).parse_args()
    b200 = DEVICES["b200"]
    print("# Run planner: B200 predictions and the model's error (python3 bench/planner/planner_tables.py)\n")
    print(f"Rates: {b200.name}: {b200.source}. H200: {DEVICES['h200'].source}. "
          "Grid, panel width (256-8192, at most k / max(P, Q)) chosen by the planner for each row; "
          f"{b200.per_node} GPUs per node; 'auto' settings with the plan assumed before the data is read; "
          "efficiency = TFLOP/s per GPU against the first row of the same scheme and wire; time = the product "
          f"(one pass); with I/O: plus reading A and B and writing C at {IO_RATE / 1e9:g} GB/s (ozhpc plan's "
          f"default --io-rate) and {b200.startup:g} s of start-up.")
    weak = [(g, int(32768 * math.sqrt(g)) // 256 * 256) for g in (1, 8, 64, 512)]
    scaling(b200, weak, "Weak scaling: a 32768 x 32768 block of C per GPU (n = 32768 sqrt(P))", lambda g: g == 1)
    strong = [(g, 131072) for g in (8, 16, 32, 64, 128, 256, 512)]
    scaling(b200, strong, "Strong scaling: n = 131072 (efficiency against the fewest GPUs it fits on)", lambda g: True)
    print("\n## Largest n on one GPU with the default options (memory model, FP64 vs planes on the wire)\n")
    print("| device | memory | scheme | wire fp64 | wire planes |\n|---|---|---|---|---|")
    for key in ("h200", "b200"):
        for scheme, settings in SCHEMES:
            print(f"| {key} | {DEVICES[key].memory / 1e9:.0f} GB | {scheme} | "
                  f"{largest_n(DEVICES[key], settings, 'fp64')} | {largest_n(DEVICES[key], settings, 'planes')} |")
    one_gpu_default()
    measured_h200()


if __name__ == "__main__":
    main()
