"""The per-rank memory model (ozhpc.run.resources.estimate_memory) next to the measured peak RSS.

    python3 bench/memory/memory_model.py [--sizes 1000 2000 3000]

Runs ``ozhpc gemm`` (one rank, NumPy engine) in a child that reports its own ``ru_maxrss``,
for both schemes, and prints a markdown table: n, scheme, plan, panel width, model, measured,
model / measured.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import parser  # noqa: E402
import h5py  # noqa: E402

from ozhpc.ozaki.settings import OzakiSettings  # noqa: E402
from ozhpc.run.matrices import standard_matrix  # noqa: E402
from ozhpc.run.resources import estimate_memory  # noqa: E402

CHILD = ("import resource, sys\nfrom ozhpc.cli import main\ncode = main(sys.argv[1:])\n"
         "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, code)\n")


def measure(d: str, n: int, scheme: str) -> tuple[int, dict]:
    report = os.path.join(d, f"run{n}{scheme}.json")
    proc = subprocess.run([sys.executable, "-c", CHILD, "gemm", f"{d}/in{n}.h5:/A", f"{d}/in{n}.h5:/B",
                           "-o", f"{d}/out.h5:/C{n}{scheme}", "--engine", "numpy", "--scheme", scheme,
                           "--progress", "off", "--report", report], capture_output=True, text=True, check=True)
    peak = int(next(line for line in proc.stdout.splitlines() if line.startswith("MAXRSS")).split()[1])
    with open(report) as f:
        return peak, json.load(f)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 3000])
    args = ap.parse_args()
    print("| n | scheme | plan | panel | model MiB | measured MiB | model / measured |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for n in args.sizes:
            with h5py.File(f"{d}/in{n}.h5", "w") as f:
                f["A"], f["B"] = standard_matrix(n, n, 0.5, 1), standard_matrix(n, n, 0.5, 2)
            for scheme in ("ozaki1", "ozaki2"):
                peak, run = measure(d, n, scheme)
                model = estimate_memory((n, n), (n, n), run["kb"], n, OzakiSettings(scheme))
                print(f"| {n} | {scheme} | {run['plan_summary']} | {run['kb']} | {model.host / 2**20:.0f} | "
                      f"{peak / 2**20:.0f} | {model.host / peak:.2f} |", flush=True)


if __name__ == "__main__":
    main()
