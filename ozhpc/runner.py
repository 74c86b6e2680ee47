"""Run one configured product: read HDF5 inputs, multiply, write C atomically, report."""
from __future__ import annotations

import time

from .config import RunConfig
from .io import h5io
from .ozaki.gemm import gemm
from .report import base_report, gflops, sha256_of_matrix, write_report


def validate_inputs(cfg: RunConfig) -> tuple[int, int, int]:
    """Check every input and the output before any work; returns (m, n, k)."""
    (ra, ca), _ = h5io.dataset_info(cfg.a, "input A")
    (rb, cb), _ = h5io.dataset_info(cfg.b, "input B")
    m, k = (ca, ra) if cfg.transa else (ra, ca)
    kb, n = (cb, rb) if cfg.transb else (rb, cb)
    if k != kb:
        raise h5io.InputError(
            f"shape mismatch: op(A) from {cfg.a} is {m}x{k} but op(B) from {cfg.b} is {kb}x{n}")
    if cfg.c is not None and cfg.beta != 0.0:
        shape_c, _ = h5io.dataset_info(cfg.c, "input C")
        if shape_c != (m, n):
            raise h5io.InputError(f"input C {cfg.c} has shape {shape_c}, expected {(m, n)}")
    h5io.check_output(cfg.out, cfg.force)
    return m, n, k


def execute(cfg: RunConfig) -> dict:
    """The whole run on one process; returns the report (also written when cfg.report is set)."""
    m, n, k = validate_inputs(cfg)
    t0 = time.perf_counter()
    a = h5io.read_matrix(cfg.a, "input A")
    b = h5io.read_matrix(cfg.b, "input B")
    c0 = h5io.read_matrix(cfg.c, "input C") if cfg.beta != 0.0 else None
    seconds = {"read": time.perf_counter() - t0}
    c, info = gemm(a, b, c0, alpha=cfg.alpha, beta=cfg.beta, transa=cfg.transa, transb=cfg.transb,
                   slices=cfg.slices, groups=cfg.groups, engine=cfg.engine, info=True)
    seconds.update(info.seconds)
    t1 = time.perf_counter()
    digest = sha256_of_matrix(c)
    h5io.write_matrix(cfg.out, c, force=cfg.force,
                      attrs={"slices": info.slices, "groups": info.groups, "sha256": digest})
    seconds["write"] = time.perf_counter() - t1
    seconds["total"] = time.perf_counter() - t0
    report = base_report()
    report.update({
        "config": cfg.describe(),
        "m": m, "n": n, "k": k,
        "ranks": 1,
        "engine": info.engine,
        "slices": info.slices, "groups": info.groups, "pair_gemms": info.pair_gemms,
        "spread_bits": info.spread_bits,
        "error_bound": {"truncation": info.truncation_bound, "rounding": info.rounding_bound},
        "seconds": seconds,
        "gflops": gflops(m, n, k, seconds["split"] + seconds["multiply"] + seconds["combine"]),
        "sha256": digest,
    })
    if cfg.report:
        write_report(cfg.report, report)
    return report
