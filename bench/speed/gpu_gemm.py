"""GPU benchmark of the cuTile Ozaki engine against cuBLAS DGEMM (not a test).

    python3 bench/speed/gpu_gemm.py --sizes 4096 8192 16384 --out bench/results/run

For each n (phi = 0.5 inputs, ``(rand - 0.5) * exp(0.5 * randn)``): cuBLAS DGEMM
TFLOP/s (CuPy), ozhpc TFLOP/s for scheme I with slices 6, 7, 8 and "auto" and scheme II
(``--bits``, default "auto"), the time per phase,
the int8 rate of the pair kernel, and the error of ozhpc and cuBLAS against an exact
reference on sampled entries (exact integer sums). Correctness is checked before any
timing; times are medians. ``--emulation`` adds cuBLAS's own FP64 emulation
(CUBLAS_EMULATE_DOUBLE_PRECISION=1, eager) as a peer, run in a subprocess.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from common import make_inputs, parser, reference, sample_indices, sampled_error, time_events, write_result  # noqa: E402


def emulation_child(n: int, phi: float, seed: int, reps: int, samples: int) -> None:
    import cupy as cp
    a, b = make_inputs(cp, n, phi, seed)
    idx = sample_indices(n, samples, seed)
    ref = reference(cp, a, b, idx)
    c = a @ b
    t = time_events(cp, lambda: cp.matmul(a, b, out=c), reps)
    print(json.dumps({"n": n, "seconds": t, "tflops": 2 * n**3 / t / 1e12,
                      "error": sampled_error(cp, c, idx, ref)}))


def run_emulation(n, phi, seed, reps, samples):
    env = dict(os.environ, CUBLAS_EMULATE_DOUBLE_PRECISION="1", CUBLAS_EMULATION_STRATEGY="eager")
    cmd = [sys.executable, __file__, "--child-emulation", str(n), "--phi", str(phi),
           "--seed", str(seed), "--reps", str(reps), "--samples", str(samples)]
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        return json.loads(res.stdout.strip().splitlines()[-1])
    except Exception as exc:  # report, do not fail the benchmark
        return {"n": n, "error_message": f"{type(exc).__name__}: {exc}"}


def tune(cp, n, reps, configs, diagonal=False):
    """int32 pair-kernel TOP/s per tile config at one size: scheme I with 7 slices (28 pair
    GEMMs), or with ``diagonal`` scheme II's products for 56 bits (17 moduli, whole k)."""
    from dataclasses import replace
    from ozhpc.engines.cutile_engine import CutileEngine
    from ozhpc.ozaki.plan import ModularPlan
    from ozhpc.ozaki.scales import exponents, row_abs_max
    a, b = make_inputs(cp, n, 0.5, 7)
    plan = ModularPlan.for_k(56, n)
    depth, gemms = (plan.moduli, plan.moduli) if diagonal else (7, 28)
    rows = []
    for cfg in configs:
        base = CutileEngine()
        panel = "diagonal_k_panel" if diagonal else "pair_k_panel"
        per_launch = "diagonal_launch_groups" if diagonal else "pair_launch_groups"
        tc = replace(base.config, pair_m=cfg["m"], pair_n=cfg["n"], pair_k=cfg["k"],
                     diagonal_pair_k=cfg["k"] if diagonal else base.config.diagonal_pair_k,
                     group_m=cfg.get("group", base.config.group_m),
                     **{panel: cfg.get("panel", getattr(base.config, panel)),
                        per_launch: cfg.get("per_launch", getattr(base.config, per_launch))})
        eng = CutileEngine(config=tc, occupancy=cfg.get("occ"), num_ctas=cfg.get("ctas"),
                           pair_index=cfg.get("index", "auto"))
        bt = b.T
        e, f = exponents(cp, row_abs_max(cp, a)), exponents(cp, row_abs_max(cp, bt))
        if diagonal:
            da, eb = plan.split(eng, a, e), plan.split(eng, bt, f)
        else:
            da, eb = eng.split(a, e, 7), eng.split(bt, f, 7)
        t0 = time.perf_counter()
        try:
            pa, pb = eng._as_padded(da), eng._as_padded(eb)
            # scheme II: int8 residues (modulus table), scheme I: int32 group sums
            mods = eng._device_tables(plan.tables).mods if diagonal else None
            sums = cp.empty((depth, n, n), dtype=cp.int8 if diagonal else cp.int32)
            eng._pair_sums(pa, pb, 0, n, sums, mods)
            eng.synchronize()
            compile_s = time.perf_counter() - t0
            t = time_events(cp, lambda: eng._pair_sums(pa, pb, 0, n, sums, mods), reps)
            rows.append(dict(cfg, seconds=t, tops=2 * n**3 * gemms / t / 1e12, compile_s=compile_s,
                             ran=eng.launcher.last_pair_index))
            rows[-1]["_engine_args"] = dict(config=tc, occupancy=cfg.get("occ"), num_ctas=cfg.get("ctas"),
                                            pair_index=cfg.get("index", "auto"))
        except Exception as exc:
            rows.append(dict(cfg, error_message=f"{type(exc).__name__}: {exc}"[:300]))
        print("tune", rows[-1], flush=True)
        del da, eb, sums
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def copy_rate(cp, n, reps):
    """The device's copy rate in the same run (the split's yardstick): GB/s of an n x n float64
    device-to-device copy, bytes read plus bytes written."""
    src = cp.ones((n, n), dtype=cp.float64)
    dst = cp.empty_like(src)
    t = time_events(cp, lambda: cp.copyto(dst, src), reps)
    row = {"kernel": "copy (float64, cp.copyto)", "copy_gbps": 16 * n * n / t / 1e9}
    print("tune split", row, flush=True)
    return row


def tune_split(cp, n, reps, tiles, slices=8, residues=False):
    """Split-kernel GB/s per (rows, cols) tile at one size, C-ordered rows and transposed rows
    ((8 + slices) bytes per element: one FP64 read, the int8 slices written). ``residues``:
    scheme II's residue kernel instead (56 bits, 17 moduli: 8 + 17 bytes). Report only."""
    from dataclasses import replace
    from ozhpc.engines.cutile_engine import CutileEngine
    from ozhpc.ozaki.plan import ModularPlan
    from ozhpc.ozaki.scales import exponents, row_abs_max
    a, _ = make_inputs(cp, n, 0.5, 7)
    e, et = exponents(cp, row_abs_max(cp, a)), exponents(cp, row_abs_max(cp, a.T))
    plan = ModularPlan.for_k(56, n)
    depth = plan.moduli if residues else slices
    rows = []
    for r, c in tiles:
        base = CutileEngine()
        fields = dict(residue_rows=r, residue_cols=c) if residues else dict(split_rows=r, split_cols=c)
        eng = CutileEngine(config=replace(base.config, **fields))
        row = {"rows": r, "cols": c, "kernel": "residues" if residues else "split"}
        for label, x, ex in (("c_order", a, e), ("transposed", a.T, et)):
            try:
                run = (lambda: plan.split(eng, x, ex)) if residues else (lambda: eng.split(x, ex, slices))
                t = time_events(cp, run, reps)
                row[label + "_gbps"] = (8 + depth) * n * n / t / 1e9
            except Exception as exc:
                row[label + "_error"] = f"{type(exc).__name__}: {exc}"[:200]
        rows.append(row)
        print("tune split", row, flush=True)
    return rows


def tune_ozaki2(cp, n, reps, panels, crt_tiles, bits=56):
    """Scheme II at one size: diagonal-product TOP/s per k panel (0 = whole k) and CRT-kernel
    time per tile. Returns (rows, best config)."""
    from dataclasses import replace
    from ozhpc.engines.cutile_engine import CutileEngine
    from ozhpc.ozaki.plan import ModularPlan
    from ozhpc.ozaki.scales import exponents, row_abs_max
    a, b = make_inputs(cp, n, 0.5, 7)
    bt = b.T
    e, f = exponents(cp, row_abs_max(cp, a)), exponents(cp, row_abs_max(cp, bt))
    plan = ModularPlan.for_k(bits, n)
    base = CutileEngine()
    da, eb = plan.split(base, a, e), plan.split(base, bt, f)
    pa, pb = base._as_padded(da), base._as_padded(eb)
    sums = cp.empty((plan.moduli, pa.shape[1], pb.shape[1]), dtype=cp.int8)
    mods = base._device_tables(plan.tables).mods
    rows, best = [], base.config
    best_pair = best_crt = float("inf")
    for panel in panels:
        for groups in (0, 1):
            eng = CutileEngine(config=replace(base.config, diagonal_k_panel=panel, diagonal_launch_groups=groups))
            t = time_events(cp, lambda: eng._pair_sums(pa, pb, 0, n, sums, mods), reps)
            rows.append({"what": f"int8 residues, k panel {panel or 'whole k'}, "
                                 f"{groups or 'all'} product(s) per launch", "seconds": t,
                         "tops": 2 * n**3 * plan.moduli / t / 1e12})
            print("tune ozaki2", rows[-1], flush=True)
            if t < best_pair:
                best_pair, best = t, replace(best, diagonal_k_panel=panel, diagonal_launch_groups=groups)
    # The same products with the int32 epilogue (scheme I's kernel, one pair per launch): what
    # the int8 residue epilogue costs or saves.
    one = cp.empty((1, pa.shape[1], pb.shape[1]), dtype=cp.int32)
    for panel in panels[:2]:
        eng = CutileEngine(config=replace(base.config, pair_k_panel=panel))

        def int32_products():
            for l in range(plan.moduli):
                eng._pair_sums(pa[l:l + 1], pb[l:l + 1], 0, n, one)
        t = time_events(cp, int32_products, reps)
        rows.append({"what": f"int32 sums, k panel {panel or 'whole k'}, one product per launch (scheme I kernel)",
                     "seconds": t, "tops": 2 * n**3 * plan.moduli / t / 1e12})
        print("tune ozaki2", rows[-1], flush=True)
    del one
    crt_best = (best.crt_rows, best.crt_cols, best.crt_occupancy)
    for tr, tc, occ in crt_tiles:
        eng = CutileEngine(config=replace(base.config, crt_rows=tr, crt_cols=tc, crt_occupancy=occ))
        t = time_events(cp, lambda: plan.combine(eng, sums, e, f), reps)
        rows.append({"what": f"CRT tile {tr} x {tc}, occupancy {occ}", "seconds": t, "tops": float("nan")})
        print("tune ozaki2", rows[-1], flush=True)
        if t < best_crt:
            best_crt, crt_best = t, (tr, tc, occ)
    del da, eb, pa, pb, sums, a, b
    cp.get_default_memory_pool().free_all_blocks()
    return rows, replace(best, crt_rows=crt_best[0], crt_cols=crt_best[1], crt_occupancy=crt_best[2])


def set_count_tile(ck, count_tile) -> None:
    """The count kernel's tile, in its op module (its launch reads it) and in the package (the
    engine's column parts read it)."""
    ck.COUNT_TILE = ck.count.COUNT_TILE = count_tile


def tune_stats(cp, eng, n, reps, count_tiles, ctas_per_sm):
    """Times of the "auto" statistic's counting kernel over A's gaps per count tile and blocks per
    SM, with the row summary of A (C order) and B^T (transposed rows) beside it; leaves the fastest
    set in the engine (module tile and ``launcher.stat_ctas_per_sm``). Checks each variant against
    the first."""
    from ozhpc.engines import cutile as ck
    from ozhpc.ozaki.scales import exponents, row_abs_max, spread_bits
    a, b = make_inputs(cp, n, 0.5, 11)
    bt = b.T
    e = exponents(cp, row_abs_max(cp, a))
    gaps = eng.entry_gaps(a, e)
    want = spread_bits(cp, gaps, count_le=eng.count_gaps_le)
    rows, best = [], None
    summary = {"summary_s": time_events(cp, lambda: eng.row_summaries([a]), reps),
               "summary_t_s": time_events(cp, lambda: eng.row_summaries([bt]), reps)}
    for count_tile in count_tiles:
        for per_sm in ctas_per_sm:
            set_count_tile(ck, count_tile)
            eng.launcher.stat_ctas_per_sm = per_sm
            ok = spread_bits(cp, gaps, count_le=eng.count_gaps_le) == want
            t = {"count_tile": count_tile, "ctas_per_sm": per_sm, "same": ok, **summary,
                 "count_pass_s": time_events(cp, lambda: eng.count_gaps_le(
                     gaps, cp.broadcast_to(cp.arange(7, 64, 8, dtype=cp.int32), (n, 8))), reps)}
            rows.append(t)
            print("stats", t, flush=True)
            if ok and (best is None or t["count_pass_s"] < best["count_pass_s"]):
                best = t
    words = gaps.view(cp.int32)
    lim = cp.ascontiguousarray(cp.broadcast_to(cp.arange(7, 64, 8, dtype=cp.int32), (n, 8)))
    out = cp.empty((eng.launcher.column_parts(n, words.shape[1], ck.COUNT_TILE, ck.COUNT_MAX_TILES), n, 8),
                   dtype=cp.int32)
    t = {"what": "gap codes", "gaps_s": time_events(cp, lambda: eng.entry_gaps(a, e), reps),
         "gaps_t_s": time_events(cp, lambda: eng.entry_gaps(bt, e), reps),
         "count_kernel_s": time_events(cp, lambda: ck.count.launch(
             cp.cuda.get_current_stream(), words, lim, out), reps)}
    rows.append(t)
    print("stats", t, flush=True)
    set_count_tile(ck, best["count_tile"])
    eng.launcher.stat_ctas_per_sm = best["ctas_per_sm"]
    del a, b, bt, gaps
    cp.get_default_memory_pool().free_all_blocks()
    return rows


def bench_size(cp, ozhpc, eng, n, methods, reps, samples, phases, seed=7):
    """``methods``: (scheme, slices-or-bits) pairs."""
    from ozhpc.ozaki.plan import make_plan
    from ozhpc.ozaki.scales import exponents, row_abs_max, spread_bits
    a, b = make_inputs(cp, n, 0.5, seed)
    idx = sample_indices(n, samples, seed)
    ref = reference(cp, a, b, idx)
    flops = 2.0 * n**3
    c = a @ b
    row = {"n": n, "dgemm_error": sampled_error(cp, c, idx, ref)}
    row["dgemm_seconds"] = time_events(cp, lambda: cp.matmul(a, b, out=c), reps)
    row["dgemm_tflops"] = flops / row["dgemm_seconds"] / 1e12
    del c
    row["ozaki"] = []
    for scheme, s in methods:
        opts = dict(slices=s) if scheme == "ozaki1" else dict(scheme="ozaki2", bits=s)
        out, info = ozhpc.gemm(a, b, engine=eng, info=True, **opts)   # correctness first
        err = sampled_error(cp, out, idx, ref)
        if not err < 1e-10:
            raise SystemExit(f"n={n} {scheme} {s}: error {err:.3g} -- wrong result, not timing")
        del out
        walls, phase_runs = [], []
        for _ in range(reps):
            cp.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            out, info = ozhpc.gemm(a, b, engine=eng, info=True, **opts)
            cp.cuda.runtime.deviceSynchronize()
            walls.append(time.perf_counter() - t0)
            phase_runs.append(info.seconds)
            del out
        t = statistics.median(walls)
        ph = {k: statistics.median(r[k] for r in phase_runs) for k in phase_runs[0]}
        entry = {"scheme": scheme, "slices": s, "used_slices": info.planes, "bits": info.bits,
                 "pair_gemms": info.int8_gemms,
                 "seconds": t, "tflops": flops / t / 1e12, "vs_dgemm": row["dgemm_seconds"] / t,
                 "error": err, "phases": ph, "path": eng.last_path, "blocks": eng.last_blocks,
                 "pair_index": eng.launcher.last_pair_index,
                 "workspace_gb": eng.workspace_bytes / 1e9}
        if phases:
            # Kernel-level times with CUDA events: split of A, fused pair+combine, and
            # (when the accumulators fit) the unfused pair kernel and combine kernel.
            plan = (make_plan(info.slices, "auto", 0) if scheme == "ozaki1"
                    else make_plan("auto", "auto", 0, scheme="ozaki2", bits=info.bits, k=n))
            bt = b.T
            e, f = exponents(cp, row_abs_max(cp, a)), exponents(cp, row_abs_max(cp, bt))
            ts = time_events(cp, lambda: plan.split(eng, a, e), reps)
            da, eb = plan.split(eng, a, e), plan.split(eng, bt, f)
            tf = time_events(cp, lambda: plan.multiply_combine(eng, da, eb, e, f), reps)
            entry.update(split_a_seconds=ts,
                         split_gbps=(8 + plan.planes) * n * n / ts / 1e9,
                         multiply_seconds=tf,
                         pair_tops=2.0 * n**3 * plan.int8_gemms / tf / 1e12)
            if s == "auto":
                # The scales lap of operand A kernel by kernel: the row summary, gap codes, the
                # two counting passes of the median search (each synchronises on its result).
                gaps = eng.entry_gaps(a, e)
                entry.update(
                    row_summary_a_seconds=time_events(cp, lambda: eng.row_summaries([a]), reps),
                    gaps_a_seconds=time_events(cp, lambda: eng.entry_gaps(a, e), reps),
                    counts_a_seconds=time_events(
                        cp, lambda: spread_bits(cp, gaps, count_le=eng.count_gaps_le), reps))
                del gaps
            if eng.last_path in ("int32-sums", "int8-residues") and eng.last_blocks == (1, 1):
                # The two kernels of that path alone: int32 pair sums (scheme II: int8
                # residues), then combine (CRT).
                pa, pb = eng._as_padded(da), eng._as_padded(eb)
                diagonal = scheme == "ozaki2"
                mods = eng._device_tables(plan.tables).mods if diagonal else None
                sums = cp.empty((plan.groups, pa.shape[1], pb.shape[1]),
                                dtype=cp.int8 if diagonal else cp.int32)
                tp = time_events(cp, lambda: eng._pair_sums(pa, pb, 0, n, sums, mods), reps)
                tc = time_events(cp, lambda: plan.combine(eng, sums, e, f), reps)
                entry.update(pair_kernel_seconds=tp,
                             pair_kernel_tops=2.0 * n**3 * plan.int8_gemms / tp / 1e12,
                             combine_seconds=tc)
                del sums, pa, pb
            del da, eb
        row["ozaki"].append(entry)
        print(json.dumps({"n": n, **entry}), flush=True)
    del a, b
    cp.get_default_memory_pool().free_all_blocks()
    return row


def markdown(result) -> str:
    lines = [f"# GPU GEMM benchmark ({result['date']})", "",
             f"- GPU: {result['device']['device']} (cc {result['device']['compute_capability']}, "
             f"{result['device']['multiprocessors']} SMs)",
             f"- command: `{result['command']}`",
             f"- tile config: {result['device']['tile_config']}",
             "- inputs: phi = 0.5, `(rand - 0.5) * exp(0.5 * randn)`; errors: max over "
             f"{result['samples']} sampled entries of |C - exact| / (|A||B|)", "",
             "| n | method | slices (pairs) / bits (moduli) | time s | TFLOP/s | x DGEMM | error | scales s | split s | multiply s | combine s | pair TOP/s | split GB/s | pair kernel, blocks |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        n = row["n"]
        lines.append(f"| {n} | cuBLAS DGEMM | - | {row['dgemm_seconds']:.4f} | {row['dgemm_tflops']:.1f} "
                     f"| 1.00 | {row['dgemm_error']:.2e} | | | | | | | |")
        emu = row.get("emulation")
        if emu and "tflops" in emu:
            lines.append(f"| {n} | cuBLAS FP64 emulation (eager) | - | {emu['seconds']:.4f} | "
                         f"{emu['tflops']:.1f} | {row['dgemm_seconds'] / emu['seconds']:.2f} | "
                         f"{emu['error']:.2e} | | | | | | | |")
        for o in row["ozaki"]:
            ph = o["phases"]
            what = (f"{o['slices']}={o['used_slices']} ({o['pair_gemms']})" if o.get("scheme", "ozaki1") == "ozaki1"
                    else f"{o['slices']}={o['bits']} bits ({o['pair_gemms']} moduli)")
            lines.append(
                f"| {n} | ozhpc cutile {o.get('scheme', 'ozaki1')} | {what} | "
                f"{o['seconds']:.4f} | {o['tflops']:.1f} | {o['vs_dgemm']:.2f} | {o['error']:.2e} | "
                f"{ph.get('scales', 0):.4f} | {ph.get('split', 0):.4f} | {ph.get('multiply', 0):.4f} | {ph.get('combine', 0):.4f} | "
                f"{o.get('pair_tops', float('nan')):.0f} | {o.get('split_gbps', float('nan')):.0f} | "
                f"{o.get('pair_index')}, {o.get('blocks')} |")
    lines += ["", "Phases from GemmInfo.seconds (wall, synchronised): scales = row maxima, exponents "
              "and the \"auto\" statistic; split = both splits (slices or residues); multiply = fused pair GEMMs + combine kernel; combine = special "
              "values + alpha/beta. pair TOP/s = 2 n^3 pairs / (multiply_combine: pair kernel + combine "
              "kernel, CUDA events); "
              "split GB/s = (8 + s) n^2 bytes / (split of A, CUDA events)."]
    extra = [(row["n"], o) for row in result["rows"] for o in row["ozaki"] if "pair_kernel_seconds" in o]
    if extra:
        lines += ["", "Kernels alone (CUDA events): pair kernel (scheme I: int32 group sums; scheme II: int8 "
                  "residues), combine kernel (scheme II: CRT):", "",
                  "| n | scheme | slices | pair kernel s | pair kernel TOP/s | combine kernel s |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {n} | {o.get('scheme', 'ozaki1')} | {o['used_slices']} | {o['pair_kernel_seconds']:.4f} | "
                  f"{o['pair_kernel_tops']:.0f} | {o['combine_seconds']:.4f} |" for n, o in extra]
    stats = [(row["n"], o) for row in result["rows"] for o in row["ozaki"] if "gaps_a_seconds" in o]
    if stats:
        lines += ["", "Scales of operand A alone (CUDA events; \"auto\" only): the row summary (two reads of A), "
                  "gap codes (a read of A, int8 out), the median search (two counting passes over the gaps):", "",
                  "| n | scheme | row summary s | gap codes s | median search s |", "|---|---|---|---|---|"]
        lines += [f"| {n} | {o.get('scheme', 'ozaki1')} | {o['row_summary_a_seconds']:.4f} | "
                  f"{o['gaps_a_seconds']:.4f} | {o['counts_a_seconds']:.4f} |" for n, o in stats]
    if result.get("tune"):
        lines += ["", f"Pair-kernel config sweep (pair kernel alone, int32 sums, n = {result.get('tune_size')}, "
                  "7 slices; the fastest is used for the table above):", "", "| config | TOP/s | compile s |",
                  "|---|---|---|"]
        for t in result["tune"]:
            cfg = {k: v for k, v in t.items()
                   if k not in ("seconds", "tops", "compile_s", "error_message", "ran")}
            cfg["ran"] = t.get("ran")
            lines.append(f"| {cfg} | {t.get('tops', float('nan')):.0f} | "
                         f"{t.get('compile_s', float('nan')):.1f} |" if "tops" in t
                         else f"| {cfg} | failed: {t['error_message'][:80]} | |")
    if result.get("tune_diagonal"):
        lines += ["", f"Diagonal-product tile sweep (scheme II, 56 bits, n = {result.get('tune_size')}; the fastest "
                  "is used above):", "", "| config | TOP/s | compile s |", "|---|---|---|"]
        for t in result["tune_diagonal"]:
            cfg = {k: v for k, v in t.items() if k not in ("seconds", "tops", "compile_s", "error_message", "ran")}
            lines.append(f"| {cfg} | {t['tops']:.0f} | {t['compile_s']:.1f} |" if "tops" in t
                         else f"| {cfg} | failed: {t['error_message'][:80]} | |")
    if result.get("tune_ozaki2"):
        lines += ["", f"Scheme II sweep (n = {result.get('tune_size')}, 56 bits; the fastest is used above):", "",
                  "| variant | time s | TOP/s |", "|---|---|---|"]
        lines += [f"| {t['what']} | {t['seconds']:.4f} | {t['tops']:.0f} |" for t in result["tune_ozaki2"]]
    if result.get("tune_stats"):
        lines += ["", f"\"auto\"-statistic sweep (n = {result.get('tune_size')}; CUDA events; count pass = one "
                  "8-limit pass over A's gaps, \"auto\" runs 4; the fastest is used above):", "",
                  "| count tile | blocks per SM | same result | row summary A s | row summary B^T s | "
                  "count pass s |", "|---|---|---|---|---|---|"]
        for t in result["tune_stats"]:
            if "gaps_s" in t:
                lines.append(f"| gap codes (split tile) | | | A {t['gaps_s']:.4f} | B^T {t['gaps_t_s']:.4f} | "
                             f"count kernel alone {t['count_kernel_s']:.4f} |")
            else:
                lines.append(f"| {t['count_tile']} | {t['ctas_per_sm']} | {t['same']} | "
                             f"{t['summary_s']:.4f} | {t['summary_t_s']:.4f} | {t['count_pass_s']:.4f} |")
    if result.get("tune_split"):
        lines += ["", f"Split / residue kernel tile sweep (n = {result.get('tune_size')}; split: 8 slices, GB/s = "
                  "16 n^2 bytes / time; residues: 56 bits, 17 moduli, 25 n^2 bytes; the table above uses "
                  "the config's tiles):", "",
                  "| kernel | tile | C-ordered rows GB/s | transposed rows GB/s |", "|---|---|---|---|"]
        for t in result["tune_split"]:
            if "copy_gbps" in t:
                lines.append(f"| {t['kernel']} | | {t['copy_gbps']:.0f} (read + write) | |")
                continue
            lines.append(f"| {t.get('kernel', 'split')} | {t['rows']} x {t['cols']} | "
                         f"{t.get('c_order_gbps', float('nan')):.0f} | {t.get('transposed_gbps', float('nan')):.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 16384])
    p.add_argument("--slices", nargs="*", default=["6", "7", "8", "auto"], help="scheme I slice counts")
    p.add_argument("--bits", nargs="*", default=["auto"], help="scheme II bits (ozaki2)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--phi", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-phases", action="store_true")
    p.add_argument("--emulation", action="store_true", help="add cuBLAS FP64 emulation as a peer")
    p.add_argument("--tune", action="store_true",
                   help="sweep pair-kernel configs at --tune-size first and use the fastest")
    p.add_argument("--tune-size", type=int, default=16384)
    p.add_argument("--tune-diagonal", action="store_true",
                   help="sweep pair-kernel tiles for scheme II's diagonal products at --tune-size first "
                        "and use the best")
    p.add_argument("--tune-ozaki2", action="store_true",
                   help="sweep scheme II's diagonal k panel and CRT tile at --tune-size first and use the best")
    p.add_argument("--tune-split", action="store_true",
                   help="sweep the split and residue kernel tiles at --tune-size (report only)")
    p.add_argument("--tune-stats", action="store_true",
                   help="sweep the \"auto\" statistic's kernel tiles and grid at --tune-size first and use the best")
    p.add_argument("--out", help="write OUT.json and OUT.md")
    p.add_argument("--child-emulation", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_emulation:
        emulation_child(args.child_emulation, args.phi, args.seed, args.reps, args.samples)
        return 0

    import cupy as cp
    import ozhpc
    from ozhpc.engines import get_engine

    eng = get_engine("cutile")
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
              "device": eng.describe(), "samples": args.samples, "rows": []}
    if args.tune:
        from ozhpc.engines.cutile_engine import CutileEngine
        rows = tune(cp, args.tune_size, args.reps, [
            dict(m=256, n=128, k=128),                      # sm_90 table default (2-CTA cluster, one group per launch)
            dict(m=256, n=128, k=128, per_launch=0),        # all groups per launch
            dict(m=256, n=128, k=64),
            dict(m=256, n=128, k=128, panel=8192),
            dict(m=128, n=128, k=128, occ=2, ctas=1),
        ])
        best = max((r for r in rows if "tops" in r), key=lambda r: r["tops"])
        eng = CutileEngine(**best["_engine_args"])       # the rest of the run uses the winner
        result["tune"] = [{k: v for k, v in r.items() if k != "_engine_args"} for r in rows]
        result["tune_size"] = args.tune_size
        print("tuned:", eng.describe(), flush=True)
    if args.tune_diagonal:
        from ozhpc.engines.cutile_engine import CutileEngine
        rows = tune(cp, args.tune_size, args.reps, [
            dict(m=256, n=128, k=128),                      # the table default (k panel 8192, one per launch)
            dict(m=256, n=128, k=64),
            dict(m=256, n=128, k=128, group=4),
            dict(m=256, n=128, k=128, group=16),
            dict(m=128, n=256, k=64),
            dict(m=256, n=128, k=64, panel=12288),
            dict(m=128, n=128, k=128, occ=2, ctas=1),
        ], diagonal=True)
        best = max((r for r in rows if "tops" in r), key=lambda r: r["tops"])
        eng = CutileEngine(**best["_engine_args"])
        result["tune_diagonal"] = [{k: v for k, v in r.items() if k != "_engine_args"} for r in rows]
        result["tune_size"] = args.tune_size
        print("tuned (diagonal):", eng.describe(), flush=True)
    if args.tune_ozaki2:
        from ozhpc.engines.cutile_engine import CutileEngine
        rows, cfg = tune_ozaki2(cp, args.tune_size, args.reps, [8192, 0, 4096],
                                [(16, 64, 4), (32, 64, 2), (8, 64, 4), (16, 128, 2)])
        eng = CutileEngine(config=cfg, occupancy=eng.launcher.occupancy, num_ctas=eng.launcher.num_ctas,
                           pair_index=eng.launcher.pair_index)
        result["tune_ozaki2"] = rows
        result["tune_size"] = args.tune_size
        print("tuned (scheme II):", cfg, flush=True)
    if args.tune_split:
        result["tune_split"] = (
            [copy_rate(cp, args.tune_size, args.reps)]
            + tune_split(cp, args.tune_size, args.reps, [(16, 128), (8, 128), (32, 128), (16, 64), (8, 256), (32, 64)])
            + tune_split(cp, args.tune_size, args.reps, [(16, 128), (8, 128), (8, 256)], residues=True))
        result["tune_size"] = args.tune_size
    if args.tune_stats:
        result["tune_stats"] = tune_stats(cp, eng, args.tune_size, args.reps, [(16, 32), (8, 64), (32, 32)], [8, 32])
        result["tune_size"] = args.tune_size
    methods = ([("ozaki1", s if s == "auto" else int(s)) for s in args.slices]
               + [("ozaki2", b if b == "auto" else int(b)) for b in args.bits])
    for n in args.sizes:
        row = bench_size(cp, ozhpc, eng, n, methods, args.reps, args.samples, not args.no_phases,
                         args.seed)
        if args.emulation:
            row["emulation"] = run_emulation(n, args.phi, args.seed, args.reps, args.samples)
            print("emulation", row["emulation"], flush=True)
        result["rows"].append(row)
    result["device"] = eng.describe()
    md = markdown(result)
    print(md)
    write_result(args.out, md, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
