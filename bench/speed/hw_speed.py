"""The product against the hardware on one GPU: the acceptance table (a benchmark, not a test).

    python3 bench/speed/hw_speed.py --sizes 4096 8192 16384 32768 --gemmul8 /tmp/libgm8.so --out $OUT/accept
    python3 bench/speed/hw_speed.py --sizes --timeline 2048 4096 16384    # where one default call's time goes

For each n (phi = 0.5 inputs, ``bench/common.py``): cuBLAS DGEMM (CuPy), ozhpc's default
(scheme II "auto", certified, guarantee "dgemm"), the same plan with fixed bits (uncertified: the
certificate's share is the difference), GEMMul8's accurate mode at 15 moduli through a small ctypes
entry point over its public source (``--gemmul8 LIB``; built on the GPU machine, not part of this
repository), and "tight" at ``--tight`` sizes. Times are medians of CUDA-event timings of whole
calls; errors are the max over sampled entries of ``|C - exact| / (|A||B|)`` (exact integers).

``--timeline N``: one default call at N under PyTorch's profiler (CUPTI sees every kernel of the
process, CuPy's and cuTile's too): its wall time, the pair kernels' time (the products), kernels and
host synchronisations (device-to-host copies, stream/device synchronise calls) per call, and the
kernels by total time. The fixed cost is the call's time minus the products.
"""
from __future__ import annotations

import ctypes
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from common import make_inputs, parser, reference, sample_indices, sampled_error, time_events, write_result  # noqa: E402

PAIR_KERNEL = "_pair_kernel"
"""Substring of the pair kernels' names in the profiler's kernel list (the products)."""


def gemmul8(lib_path: str):
    """``f(a, b, moduli, fast) -> c`` over ``gm8_dgemm`` (row-major CuPy float64 operands)."""
    import cupy as cp
    cp.cuda.device.get_cublas_handle()   # cuBLAS loaded first: the library links libcublas by its soname
    lib = ctypes.CDLL(lib_path)
    lib.gm8_worksize.restype = ctypes.c_size_t
    lib.gm8_worksize.argtypes = [ctypes.c_size_t] * 3 + [ctypes.c_uint]
    lib.gm8_dgemm.restype = ctypes.c_int
    lib.gm8_dgemm.argtypes = [ctypes.c_size_t] * 3 + [ctypes.c_void_p] * 3 + [ctypes.c_uint, ctypes.c_int,
                                                                              ctypes.c_void_p, ctypes.c_void_p]
    work = {}
    phases = (ctypes.c_double * 8)()

    def call(a, b, moduli: int, fast: bool = False, out=None):
        m, k = a.shape
        n = b.shape[1]
        key = (m, n, k, moduli)
        if key not in work:
            work.clear()
            cp.get_default_memory_pool().free_all_blocks()
            work[key] = cp.empty(lib.gm8_worksize(m, n, k, moduli), dtype=cp.uint8)
        c = out if out is not None else cp.empty((m, n), dtype=cp.float64)
        rc = lib.gm8_dgemm(m, n, k, a.data.ptr, b.data.ptr, c.data.ptr, moduli, int(fast),
                           work[key].data.ptr, phases)
        if rc:
            raise RuntimeError(f"gm8_dgemm returned CUDA error {rc}")
        return c
    return call


def acceptance(n: int, reps: int, samples: int, gm8, tight: bool, seed: int = 0) -> list[dict]:
    import cupy as cp

    import ozhpc
    from ozhpc.engines import get_engine

    eng = get_engine("cutile")
    a, b = make_inputs(cp, n, 0.5, seed)
    idx = sample_indices(n, samples, seed)
    ref = reference(cp, a, b, idx)
    rows = []

    def add(method, fn, **extra):
        t = time_events(cp, fn, reps)
        out = fn()
        c, info = out if isinstance(out, tuple) else (out, None)
        row = dict(n=n, method=method, seconds=t, tflops=2 * n**3 / t / 1e12, error=sampled_error(cp, c, idx, ref), **extra)
        if info is not None:
            row.update(bits=info.bits, moduli=info.moduli, certified=info.certified, passes=len(info.widths),
                       phases={key: round(v, 5) for key, v in info.seconds.items()})
        rows.append(row)
        print(json.dumps(row), flush=True)
        del c
        cp.get_default_memory_pool().free_all_blocks()
        return row

    d = add("cuBLAS DGEMM", lambda: a @ b)
    default = add("ozhpc default (certified)", lambda: ozhpc.gemm(a, b, engine=eng, info=True))
    add(f"ozhpc fixed {default['bits']} bits", lambda: ozhpc.gemm(a, b, engine=eng, scheme="ozaki2",
                                                                   bits=default["bits"], info=True))
    if tight:
        add("ozhpc tight (certified)", lambda: ozhpc.gemm(a, b, engine=eng, guarantee="tight", info=True))
    if gm8 is not None:
        for moduli in (15,):
            add(f"GEMMul8 accurate, {moduli} moduli", lambda m=moduli: gm8(a, b, m))
    for r in rows:
        r["x_dgemm"] = d["seconds"] / r["seconds"]
        r["dgemm_error"] = d["error"]
    return rows


def timeline(n: int, reps: int = 3, seed: int = 0) -> dict:
    """One default call at n under PyTorch's profiler: kernels, synchronisations, the products' time."""
    import cupy as cp
    import torch
    from torch.profiler import ProfilerActivity, profile

    import ozhpc
    from ozhpc.engines import get_engine

    eng = get_engine("cutile")
    a, b = make_inputs(cp, n, 0.5, seed)
    call = (lambda: ozhpc.gemm(a, b, engine=eng, info=True))
    wall = time_events(cp, call, reps)
    _, info = call()
    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        cp.cuda.Device().synchronize()
    kernels, runtime = {}, {}
    for ev in prof.events():
        dev = getattr(ev, "device_type", None)
        name = ev.name
        if dev is not None and "CUDA" in str(dev):
            k = kernels.setdefault(name, [0, 0.0])
            k[0] += 1
            k[1] += ev.device_time_total / 1e6 if hasattr(ev, "device_time_total") else ev.cuda_time_total / 1e6
        elif name.startswith(("cuda", "cu")):
            r = runtime.setdefault(name, 0)
            runtime[name] = r + 1
    pair = sum(t for name, (_, t) in kernels.items() if PAIR_KERNEL in name)
    busy = sum(t for _, t in kernels.values())
    syncs = {name: c for name, c in runtime.items()
             if "Synchronize" in name or "DtoH" in name or name in ("cudaMemcpy", "cuMemcpyDtoH_v2", "cuMemcpy")}
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:25]
    return dict(n=n, wall=wall, products=pair, fixed=wall - pair, gpu_busy=busy, idle=wall - busy,
                kernels=sum(c for c, _ in kernels.values()), moduli=info.moduli, bits=info.bits,
                pop_s=info.moduli * 2 * n**3 / pair / 1e15 if pair else None,
                phases={key: round(v, 5) for key, v in info.seconds.items()},
                syncs=syncs, runtime_calls=dict(sorted(runtime.items(), key=lambda kv: -kv[1])[:20]),
                top_kernels=[(name[:90], c, round(t * 1e3, 3)) for name, (c, t) in top])


def host_profile(n: int, seed: int = 0) -> str:
    """cProfile of one warm default call at n: the host functions by their own time."""
    import cProfile
    import io
    import pstats

    import cupy as cp

    import ozhpc
    from ozhpc.engines import get_engine
    eng = get_engine("cutile")
    a, b = make_inputs(cp, n, 0.5, seed)
    ozhpc.gemm(a, b, engine=eng)
    cp.cuda.Device().synchronize()
    pr = cProfile.Profile()
    pr.enable()
    ozhpc.gemm(a, b, engine=eng)
    cp.cuda.Device().synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumtime").print_stats(45)
    return s.getvalue()


def table(rows: list[dict]) -> str:
    out = ["| n | method | bits (moduli) | s | TFLOP/s | x DGEMM | sampled error | DGEMM error | certified | phases |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['n']} | {r['method']} | {r.get('bits', '-')} ({r.get('moduli', '-')}) | {r['seconds']:.5f} | "
                   f"{r['tflops']:.1f} | {r['x_dgemm']:.2f} | {r['error']:.2e} | {r['dgemm_error']:.2e} | "
                   f"{r.get('certified', '-')} | {r.get('phases', '')} |")
    return "\n".join(out)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192, 16384, 32768])
    p.add_argument("--tight", type=int, nargs="*", default=[16384], help="sizes that also run guarantee 'tight'")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--gemmul8", default=None, metavar="LIB", help="the ctypes entry point over GEMMul8 (gm8_dgemm)")
    p.add_argument("--timeline", type=int, nargs="*", default=[], metavar="N")
    p.add_argument("--host-profile", type=int, default=0, metavar="N")
    p.add_argument("--out", default=None, help="write OUT.md and OUT.json")
    args = p.parse_args()
    gm8 = gemmul8(args.gemmul8) if args.gemmul8 else None
    result = {"timeline": [], "rows": []}
    for n in args.timeline:
        try:
            result["timeline"].append(timeline(n))
        except Exception as exc:  # report, do not lose the rest of the call
            result["timeline"].append(dict(n=n, failed=f"{type(exc).__name__}: {exc}"))
        print(json.dumps(result["timeline"][-1]), flush=True)
    if args.host_profile:
        print(host_profile(args.host_profile), flush=True)
    for n in args.sizes:
        result["rows"] += acceptance(n, args.reps, args.samples, gm8, n in args.tight)
        print(table(result["rows"]), flush=True)
    for n in args.sizes:
        rows = {r["method"].split(" (")[0].split(",")[0]: r for r in result["rows"] if r["n"] == n}
        d, fixed = rows.get("ozhpc default"), next((r for r in result["rows"] if r["n"] == n
                                                   and r["method"].startswith("ozhpc fixed")), None)
        if d is None:
            continue
        share = (f", {100 * (d['seconds'] - fixed['seconds']) / d['seconds']:.1f}% over the same plan uncertified"
                 if fixed and fixed.get("moduli") == d.get("moduli") else "")
        peers = "".join(f", {name} {r['x_dgemm']:.2f}x ({r['error']:.1e})" for name, r in rows.items()
                        if name not in ("ozhpc default", "cuBLAS DGEMM") and not name.startswith("ozhpc fixed"))
        print(f"n={n}: default {d['x_dgemm']:.2f}x cuBLAS ({d['error']:.1e} vs {d['dgemm_error']:.1e}){peers}; "
              f"certificate phase {100 * d['phases'].get('certificate', 0) / d['seconds']:.1f}% of the call{share}",
              flush=True)
    for t in result["timeline"]:
        if "failed" not in t:
            print(f"n={t['n']}: call {t['wall']*1e3:.2f} ms, products {t['products']*1e3:.2f} ms "
                  f"({t['pop_s'] or 0:.2f} POP/s), fixed {t['fixed']*1e3:.2f} ms, GPU idle {t['idle']*1e3:.2f} ms, "
                  f"{t['kernels']} kernels, syncs {sum(t['syncs'].values())}", flush=True)
    write_result(args.out, table(result["rows"]) if result["rows"] else None, result)

if __name__ == "__main__":
    main()
