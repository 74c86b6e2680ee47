"""Where one call's time goes outside the products, on one GPU (a benchmark, not a test).

    python3 bench/speed/fixed_costs.py --sizes 2048 4096 --out $OUT/fixed

For each n (phi = 0.5 inputs): the default (certified) call and the same plan at fixed bits, each
timed by CUDA events (median of ``--reps``) with its phases (``GemmInfo.seconds``); then one default
call under PyTorch's profiler: the kernels in launch order with their device times, the products
(pair kernels), the CUDA runtime/driver calls that wait for the device or copy to the host (``D2H``:
device-to-host copies; ``sync``: stream, event and device synchronisations), and the GPU's idle
time (the call's wall time minus the kernels'). ``--host-profile N``: cProfile of one warm default
call at N, functions by their own time and by cumulative time. ``--kernels N``: the certificate's
representation-error pass and its verdict pass, real and complex, at N (:func:`kernel_probes`). ``--graph N``:
whether the engine's launches capture into a CUDA graph, and what a replay saves (:func:`graph_probe`).
"""
from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from common import make_inputs, parser, time_events, write_result  # noqa: E402

PAIR_KERNEL = "_pair_kernel"
WAITS = ("Synchronize", "DtoH", "cudaMemcpy", "cuMemcpy", "cudaStreamIsCapturing")


def profile_call(call):
    """(kernels in launch order [(name, ms)], runtime call counts) of one ``call()`` under PyTorch's profiler."""
    import cupy as cp
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        cp.cuda.Device().synchronize()
    kernels, runtime = [], {}
    for ev in prof.events():
        dev = getattr(ev, "device_type", None)
        if dev is not None and "CUDA" in str(dev):
            t = ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            kernels.append((getattr(ev, "time_range", None).start if hasattr(ev, "time_range") else 0,
                            ev.name, t / 1e3))
        elif ev.name.startswith(("cuda", "cu")):
            runtime[ev.name] = runtime.get(ev.name, 0) + 1
    kernels.sort(key=lambda x: x[0])
    return [(name, ms) for _, name, ms in kernels], runtime


def measure(n: int, reps: int, bits: int | None) -> dict:
    import cupy as cp

    import ozhpc
    from ozhpc.engines import get_engine

    eng = get_engine("cutile")
    a, b = make_inputs(cp, n, 0.5, 0)
    default = (lambda: ozhpc.gemm(a, b, engine=eng, info=True))
    t_def = time_events(cp, default, reps)
    _, info = default()
    fixed_bits = bits or info.bits
    fixed = (lambda: ozhpc.gemm(a, b, engine=eng, scheme="ozaki2", bits=fixed_bits, info=True))
    t_fix = time_events(cp, fixed, reps)
    _, finfo = fixed()
    plain = (lambda: ozhpc.gemm(a, b, engine=eng))   # no info: what a caller that does not ask pays
    t_plain = time_events(cp, plain, reps)
    kernels, runtime = profile_call(plain)
    products = sum(ms for name, ms in kernels if PAIR_KERNEL in name)
    busy = sum(ms for _, ms in kernels)
    waits = {k: v for k, v in runtime.items() if any(w in k for w in WAITS)}
    row = dict(n=n, bits=info.bits, moduli=info.moduli, default_ms=t_def * 1e3, fixed_ms=t_fix * 1e3,
               plain_ms=t_plain * 1e3, products_ms=products, fixed_cost_ms=t_plain * 1e3 - products,
               gpu_busy_ms=busy, idle_ms=t_plain * 1e3 - busy, kernels=len(kernels), waits=waits,
               phases_default={k: round(v * 1e3, 3) for k, v in info.seconds.items()},
               phases_fixed={k: round(v * 1e3, 3) for k, v in finfo.seconds.items()},
               kernel_list=[(name[:70], round(ms, 4)) for name, ms in kernels],
               runtime=dict(sorted(runtime.items(), key=lambda kv: -kv[1])[:25]))
    print(json.dumps(row), flush=True)
    return row


def host_profile(n: int) -> str:
    import cProfile
    import pstats

    import cupy as cp

    import ozhpc
    from ozhpc.engines import get_engine
    eng = get_engine("cutile")
    a, b = make_inputs(cp, n, 0.5, 0)
    for _ in range(2):
        ozhpc.gemm(a, b, engine=eng)
    cp.cuda.Device().synchronize()
    pr = cProfile.Profile()
    pr.enable()
    ozhpc.gemm(a, b, engine=eng)
    cp.cuda.Device().synchronize()
    pr.disable()
    stats = pstats.Stats(pr).stats   # {(file, line, name): (calls, ncalls, own s, cumulative s, callers)}
    rows = [(tt, ct, nc, f"{pathlib.Path(f).parent.name}/{pathlib.Path(f).name}:{line}({name})")
            for (f, line, name), (_, nc, tt, ct, _c) in stats.items()]
    total = max(ct for _, ct, _, _ in rows)
    out = [f"cProfile of one warm default call at n = {n}: {total * 1e6:.0f} us in all (with the profiler's own cost)",
           "", "| own us | cumulative us | calls | function |", "|---|---|---|---|"]
    out += [f"| {tt * 1e6:.0f} | {ct * 1e6:.0f} | {nc} | {name} |"
            for tt, ct, nc, name in sorted(rows, reverse=True)[:30]]
    out += ["", "| cumulative us | own us | calls | function |", "|---|---|---|---|"]
    out += [f"| {ct * 1e6:.0f} | {tt * 1e6:.0f} | {nc} | {name} |"
            for tt, ct, nc, name in sorted(rows, key=lambda r: -r[1])[:45]]
    return "\n".join(out)


def graph_probe(n: int, reps: int = 20) -> dict:
    """Whether the engine's cuTile launches capture into a CUDA graph (CuPy stream capture): the
    residues of both operands, the products and the CRT of a 15-modulus plan at n, captured once and
    replayed; the same bits as the eager launches, and each one's time per call (CUDA events)."""
    import cupy as cp

    from ozhpc.engines import get_engine
    from ozhpc.engines.crt import crt_tables
    from ozhpc.engines.digits import exponents, row_abs_max

    eng = get_engine("cutile")
    a, b = make_inputs(cp, n, 0.5, 0)
    bt = cp.ascontiguousarray(b.T)
    tables = crt_tables(55, 15)
    ea = exponents(cp, row_abs_max(cp, a)).astype(cp.int32)
    eb = exponents(cp, row_abs_max(cp, bt)).astype(cp.int32)

    def steps():
        ra, rb = eng.residues(a, ea, tables), eng.residues(bt, eb, tables)
        return eng.multiply_combine_moduli(ra, rb, ea, eb, tables)

    eager = steps()
    t_eager = time_events(cp, steps, reps)
    out = dict(n=n, captured=False, same_bits=None, eager_ms=t_eager * 1e3)
    stream = cp.cuda.Stream(non_blocking=True)
    try:
        with stream:
            steps()   # the pool holds the blocks the capture takes
            stream.synchronize()
            stream.begin_capture()
            try:
                c = steps()
            finally:
                graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
            out["captured"] = True
            out["same_bits"] = bool((c.view(cp.int64) == eager.view(cp.int64)).all())
            out["graph_ms"] = time_events(cp, lambda: graph.launch(stream), reps) * 1e3
    except Exception as exc:  # what stops a capture is the finding
        out["error"] = f"{type(exc).__name__}: {exc}"[:400]
    print(json.dumps(out), flush=True)
    return out


def kernel_probes(n: int, reps: int = 5) -> dict:
    """At n (phi = 0.5, 55 bits): the certificate's representation-error pass over one operand (rows
    contiguous, and transposed: op(B)^T of a row-major B), and its verdict pass (one launch, the
    answer copied to the host) over a real C with int32 magnitude sums and over a complex C with its
    three digit groups (both components in one launch), its row loop unrolled or not."""
    import cupy as cp

    from ozhpc.engines import certificate_kernels as ckern
    from ozhpc.engines import get_engine
    from ozhpc.engines.digits import exponents, row_abs_max
    from ozhpc.ozaki import certificate as cf
    from ozhpc.ozaki.plan import ModularPlan

    eng = get_engine("cutile")
    a, _ = make_inputs(cp, n, 0.5, 0)
    e = exponents(cp, row_abs_max(cp, a)).astype(cp.int32)
    out = dict(n=n, error_pass_ms=time_events(cp, lambda: ckern.representation_error_max(
        cp, a, e, 55, 0, 2.0**-800), reps) * 1e3,
        error_pass_transposed_ms=time_events(cp, lambda: ckern.representation_error_max(
            cp, a.T, e, 55, 0, 2.0**-800), reps) * 1e3)
    plan = ModularPlan.for_k(55, n)
    stats = cf.OperandStats(ckern.representation_error_max(cp, a, e, 55, 0, 2.0**-800), *eng.magnitude_stats(a, e)[:2])
    row = (stats.delta, stats.norm, stats.nnz)
    c = a @ a.T
    lower = cp.zeros(c.shape, dtype=cp.int32)
    constants = cf.verdict_constants(plan, n)
    z = c + 1j * c[::-1]
    groups = cp.zeros((3, n, n), dtype=cp.int32)
    default = ckern.VERDICT_UNROLL
    for unroll in sorted({default, 1, ckern.VERDICT_ROWS}):   # the rows a thread's loop unrolls
        ckern.VERDICT_UNROLL = unroll
        out[f"verdicts_unroll{unroll}_ms"] = time_events(
            cp, lambda: eng.entry_verdicts(c, e, e, row, row, lower, None, constants), reps) * 1e3
        out[f"complex_verdicts_unroll{unroll}_ms"] = time_events(
            cp, lambda: eng.complex_entry_verdicts(z, e, e, row, row, groups, None, cf.verdict_constants(plan, n + 1)),
            reps) * 1e3
    ckern.VERDICT_UNROLL = default
    print(json.dumps(out), flush=True)
    return out


def table(rows: list[dict]) -> str:
    out = ["| n | bits (moduli) | default (ms) | fixed bits (ms) | default, no info (ms) | products (ms) | "
           "call - products (ms) | GPU idle (ms) | kernels | waits |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['n']} | {r['bits']} ({r['moduli']}) | {r['default_ms']:.3f} | {r['fixed_ms']:.3f} | "
                   f"{r['plain_ms']:.3f} | {r['products_ms']:.3f} | {r['fixed_cost_ms']:.3f} | {r['idle_ms']:.3f} | "
                   f"{r['kernels']} | {r['waits']} |")
    return "\n".join(out)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[2048, 4096])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--bits", type=int, default=None, help="fixed bits (default: the default's)")
    p.add_argument("--host-profile", type=int, default=0)
    p.add_argument("--graph", type=int, nargs="*", default=[], help="sizes of the CUDA graph probe")
    p.add_argument("--kernels", type=int, nargs="*", default=[], help="sizes of the kernel probes")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    rows = [measure(n, args.reps, args.bits) for n in args.sizes]
    text = table(rows)
    for r in rows:
        text += (f"\n\nn = {r['n']}: phases default {r['phases_default']}, fixed {r['phases_fixed']}\n"
                 + "\n".join(f"    {ms:8.4f} ms  {name}" for name, ms in r["kernel_list"])
                 + f"\n  runtime calls: {r['runtime']}")
    kernels = [kernel_probes(n) for n in args.kernels]
    if kernels:
        text += "\n\nKernel probes: " + "\n".join(json.dumps(k) for k in kernels)
    probes = [graph_probe(n) for n in args.graph]
    if probes:
        text += "\n\nCUDA graph probe: " + "\n".join(json.dumps(g) for g in probes)
    if args.host_profile:
        text += "\n\n" + host_profile(args.host_profile)
    print(text)
    if args.out:
        write_result(args.out, text, dict(rows=rows, graph=probes, kernels=kernels, command=" ".join(sys.argv)))


if __name__ == "__main__":
    main()
