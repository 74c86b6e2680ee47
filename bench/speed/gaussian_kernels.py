"""Complex scheme II's residue and CRT kernels alone (a benchmark, not a test): their variants'
times on one GPU.

    python3 bench/speed/gaussian_kernels.py --n 16384 --residue 16x64:0:narrow 16x64:0:wide \\
        --crt 16x32:4:1 16x32:4:2 16x64:2:2 --out $OUT/gaussian_kernels
    python3 bench/speed/gaussian_kernels.py --warm --residue 16x32:4:narrow --crt 16x64:2:2   # compile only

A residue variant is ``ROWSxCOLS:OCCUPANCY:PATH`` (occupancy 0: the kernel's own hint; PATH ``narrow``: two float32
reductions per split modulus, ``wide``: the parts' residues first, the path above
``gaussian_residues.NARROW_BITS``); a CRT variant ``ROWSxCOLS:OCCUPANCY:GROUP`` (split moduli per
load). Input: one n x n complex operand of phi = 0.5 parts, the default plan's bits and moduli
(``--bits``, ``--moduli``); the CRT kernel reads that operand's residue planes. Every variant's
output is checked against the engine's own launch (bit for bit) before it is timed; times are
medians of CUDA-event timings. GB/s counts the bytes read and written once (residues: 16 n**2 in,
``planes`` n**2 out; CRT: the reverse).
"""
from __future__ import annotations

import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common
from common import REPO, command_line, markdown_table, parser, time_events, write_result  # noqa: E402

sys.path.insert(0, REPO)


def _spec(text: str) -> tuple:
    shape, occupancy, last = text.split(":")
    rows, cols = (int(v) for v in shape.split("x"))
    return rows, cols, int(occupancy), last


def _kernel(base, occupancy: int, cache: dict):
    """One kernel object per (kernel, occupancy), so each variant compiles once (0: ``base`` as it is)."""
    key = (id(base), occupancy)
    if key not in cache:
        cache[key] = base.replace_hints(occupancy=occupancy) if occupancy else base
    return cache[key]


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--n", type=int, default=16384)
    p.add_argument("--bits", type=int, default=54)
    p.add_argument("--moduli", type=int, default=16)
    p.add_argument("--residue", nargs="*", default=["16x64:0:narrow", "16x64:0:wide"])
    p.add_argument("--crt", nargs="*", default=["16x32:4:1", "16x32:4:2"])
    p.add_argument("--layouts", nargs="*", default=["C"], help="residue kernels' operand layouts: C (rows), T "
                   "(the transpose's rows, as op(B)^T of a C-ordered B)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warm", action="store_true", help="compile the variants on a 256 x 256 problem, no timing")
    p.add_argument("--out", default=None)
    args = p.parse_args()

    import cupy as cp

    from ozhpc.engines import gaussian, get_engine
    from ozhpc.engines.cutile import gaussian_crt, gaussian_residues

    eng = get_engine("cutile")
    n = 256 if args.warm else args.n
    tables = gaussian.gaussian_tables(args.bits, args.moduli, gaussian.reference_pieces(args.bits, n))
    dev = eng._gaussian_tables(tables)
    stream = eng._stream()
    rs = cp.random.default_rng(0)
    z = cp.empty((n, n, 2), dtype=cp.float64)
    for c in range(2):   # phi = 0.5 parts
        z[:, :, c] = (rs.random((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n)))
    exps = cp.frexp(cp.abs(z).max(axis=(1, 2)))[1].astype(cp.int32)
    zc = z.view(cp.complex128).reshape(n, n)
    zt = cp.ascontiguousarray(zc.T) if "T" in args.layouts else None   # layout T: the rows of zt.T
    sources = {"C": z, "T": None if zt is None else zt.view(cp.float64).reshape(n, n, 2)}
    wants = {layout: eng.gaussian_residues(zc if layout == "C" else zt.T, exps, tables) for layout in args.layouts}
    want = wants[args.layouts[0]] if "C" not in wants else wants["C"]
    got = cp.empty((tables.planes, n, n), dtype=cp.int8)
    kernels: dict = {}
    rows_out = []
    for spec in args.residue:
        tr, tc, occ, path = _spec(spec)
        kernel = _kernel(gaussian_residues._gaussian_residue_kernel, occ, kernels)
        for layout in args.layouts:
            src = sources[layout]

            def run_residues():
                gaussian_residues.launch(stream, src, layout == "T", exps, dev.residue, got, tables.bits, tables.splits,
                                         False, kernel=kernel, tile=(tr, tc), narrow=path == "narrow")
            got.fill(0)
            run_residues()
            row = dict(kernel="residues", variant=spec, layout=layout, n=n, planes=tables.planes,
                       same_bits=bool(cp.array_equal(got, wants[layout])))
            if not args.warm:
                t = time_events(cp, run_residues, args.reps)
                row.update(ms=round(t * 1e3, 3), gb_s=round((16 + tables.planes) * n * n / t / 1e9, 1))
            rows_out.append(row)
            print(json.dumps(row), flush=True)
    got = None   # the planes of the variants: freed before the CRT's C
    acc = want
    c_want = eng.combine_gaussian(acc, exps, exps, tables).view(cp.float64).reshape(n, n, 2)
    c = cp.empty_like(c_want)
    re_e = cp.ascontiguousarray(exps)
    for spec in args.crt:
        tm, tn, occ, group = _spec(spec)
        kernel = _kernel(gaussian_crt._gaussian_crt_kernel, occ, kernels)

        def run_crt():
            gaussian_crt.launch(stream, acc, re_e, re_e, dev.crt, c, tables.shift, tables.splits, tables.pieces,
                                kernel=kernel, tile=(tm, tn), group=int(group))
        c.fill(0)
        run_crt()
        row = dict(kernel="crt", variant=spec, layout="", n=n, planes=tables.planes,
                   same_bits=bool(cp.array_equal(c.view(cp.int64), c_want.view(cp.int64))))
        if not args.warm:
            t = time_events(cp, run_crt, args.reps)
            row.update(ms=round(t * 1e3, 3), gb_s=round((16 + tables.planes) * n * n / t / 1e9, 1))
        rows_out.append(row)
        print(json.dumps(row), flush=True)
    if args.out and not args.warm:
        name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        table = markdown_table(["kernel", "variant", "layout", "n", "planes", "same bits", "ms", "GB/s"],
                               [[r["kernel"], r["variant"], r["layout"], r["n"], r["planes"], r["same_bits"], r.get("ms"),
                                 r.get("gb_s")] for r in rows_out])
        md = "\n".join([f"# Complex scheme II kernels alone, {name}", "", f"date {when}, command `{command_line()}`", "",
                        f"bits {tables.bits}, {tables.count} moduli ({tables.splits} split), {tables.pieces} pieces", "",
                        *table, ""])
        write_result(args.out, md, rows_out)


if __name__ == "__main__":
    main()
