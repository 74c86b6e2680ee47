"""CPU speed of ozhpc (NumPy engine) relative to one native dgemm (benchmark, not a test).

    python3 bench/speed/cpu_speed.py [--n 2048] [--phi 0.5] [--slices auto 7 8] [--bits auto 53] [--out FILE.md]

Prints, per setting (scheme I slices, scheme II bits), the time per phase, the int8 products' rate (2 n**3 pair ops
per int8 GEMM over the multiply phase: what ``ozhpc plan``'s CPU row assumes per BLAS thread) and ozhpc time /
native dgemm time on one process, after checking the result against native within the stated bound. Set
OPENBLAS_NUM_THREADS=1 for one rank per core's rates.
"""
from __future__ import annotations

import datetime
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import parser  # noqa: E402
import numpy as np  # noqa: E402

import ozhpc  # noqa: E402
from ozhpc.run.matrices import standard_matrix  # noqa: E402


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--phi", type=float, default=0.5)
    p.add_argument("--slices", nargs="*", default=["auto", "7", "8"], help="scheme I settings")
    p.add_argument("--bits", nargs="*", default=["auto", "53"], help="scheme II settings")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--out")
    args = p.parse_args(argv)
    n = args.n
    a = standard_matrix(n, n, args.phi, 1)
    b = standard_matrix(n, n, args.phi, 2)
    t_native, ref = best_of(lambda: a @ b, args.repeat + 1)
    lines = [f"native dgemm n={n}: {t_native:.3f} s ({2 * n**3 / t_native / 1e9:.1f} GFLOP/s)"]
    print(lines[0], flush=True)
    header = ("| scheme | setting (used) | int8 GEMMs | scales s | split s | multiply s | combine s | total s "
              "| pair ops/s | ozhpc / native |")
    table = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    scale = np.abs(a) @ np.abs(b)
    methods = ([("ozaki1", dict(slices=v if v == "auto" else int(v)), v) for v in args.slices]
               + [("ozaki2", dict(bits=v if v == "auto" else int(v)), v) for v in args.bits])
    for scheme, opts, label in methods:
        t, (c, info) = best_of(lambda: ozhpc.gemm(a, b, scheme=scheme, engine="numpy", info=True, **opts),
                               args.repeat)
        assert np.all(np.abs(c - ref) <= (2 * n * 2.0**-53 + info.truncation_bound * 4) * scale)
        sec = info.seconds
        used = info.slices if scheme == "ozaki1" else f"{info.bits} bits"
        row = (f"| {scheme} | {label} ({used}) | {info.int8_gemms} | {sec['scales']:.2f} | {sec['split']:.2f} | "
               f"{sec['multiply']:.2f} | {sec['combine']:.2f} | {t:.2f} | "
               f"{2.0 * n**3 * info.int8_gemms / sec['multiply'] / 1e9:.0f} G | {t / t_native:.1f} |")
        table.append(row)
        print(row, flush=True)
    text = "\n".join(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# ozhpc CPU speed vs native dgemm\n\nDate: {datetime.date.today()}, machine: "
                    f"{platform.node()}, {os.cpu_count()} cores, NumPy {np.__version__} "
                    f"(OpenBLAS, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
                    f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}).\n"
                    f"Command: `python3 bench/speed/cpu_speed.py {' '.join(sys.argv[1:] if argv is None else argv)}`, phi = {args.phi}, "
                    f"best of {args.repeat}.\n\n{lines[0]}\n\n{text}\n")


if __name__ == "__main__":
    main()
