"""Run one configured product: read HDF5 inputs, multiply, write C atomically, report.

One code path for any number of MPI ranks, 1 included: a process grid over the
communicator, block-cyclic reads of op(A) / op(B)^T, SUMMA with the Ozaki engine,
block-cyclic write with an atomic rename, and a report written by rank 0.
"""
from __future__ import annotations

import numpy as np

from .config import RunConfig
from .errors import InputError
from .fingerprint import fingerprint_distributed
from .io import h5io
from .progress import make_progress
from .report import base_report, gflops, write_report


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


def _engine(name):
    from .engines import EngineUnavailable, get_engine

    try:
        return get_engine(name)
    except (EngineUnavailable, ValueError) as exc:
        raise InputError(str(exc)) from None


def plan_attrs(info) -> dict:
    """HDF5 attributes of C that say how it was computed (the scheme decides its bits)."""
    if info.scheme == "ozaki2":
        return {"scheme": info.scheme, "bits": info.bits, "moduli": info.slices}
    return {"scheme": info.scheme, "bits": info.bits, "slices": info.slices, "groups": info.groups}


def write_output(cfg: RunConfig, c, info) -> tuple[str, str, dict]:
    """Fingerprint C (each rank its own blocks) and write it with its attributes (collective).

    Returns (fingerprint, SHA-256, {"fingerprint": s, "write": s}).
    """
    from mpi4py import MPI

    from .io import distio

    t0 = MPI.Wtime()
    fingerprint = fingerprint_distributed(c)
    t1 = MPI.Wtime()
    attrs = dict(plan_attrs(info), alpha=cfg.alpha, beta=cfg.beta, transa=cfg.transa,
                 transb=cfg.transb, fingerprint=fingerprint)  # what ozhpc check compares against
    digest = distio.write_distributed(cfg.out, c, attrs=attrs, force=cfg.force)
    return fingerprint, digest, {"fingerprint": t1 - t0, "write": MPI.Wtime() - t1}


PHASES = ("read", "scales", "split", "multiply", "comm_wait", "combine", "fingerprint", "write", "total",
          "compute", "comm", "comm_exposed")


def execute(cfg: RunConfig, comm=None, on_panel=None) -> dict:
    """The whole run over ``comm`` (default ``MPI.COMM_WORLD``; 1 rank works the same way).

    Collective. ``on_panel(done, total)`` is the progress hook (pass it on rank 0 only;
    by default rank 0 shows ``cfg.progress`` through :mod:`ozhpc.progress`).
    Returns the report on every rank; only rank 0 writes it to ``cfg.report``.

    Raises
    ------
    InputError
        On every rank alike, when any rank finds a bad input, option or grid.
    """
    from mpi4py import MPI

    from .parallel import ProcessGrid, Summa, collective_errors
    from .parallel.localrank import bind_device
    from .engines.toolchain import configure_cache
    from .io import distio

    comm = MPI.COMM_WORLD if comm is None else comm
    t_start = MPI.Wtime()
    with ProcessGrid(comm, cfg.grid) as grid:
        with collective_errors(grid.comm, catch=InputError):
            m, n, k = validate_inputs(cfg)
        if cfg.engine != "numpy":  # this rank's GPU: node-local rank % visible devices
            configure_cache()      # the node's kernel cache, before cuda.tile is imported
            bind_device(grid.comm)
        with collective_errors(grid.comm, catch=InputError):
            engine = _engine(cfg.engine)
        if on_panel is None:  # cfg.progress on rank 0; None (no hook at all) on the others
            on_panel = make_progress(cfg.progress, grid.rank)
        with Summa(grid, m, n, k, block=cfg.block, kb=cfg.kb, engine=engine, transport=cfg.transport,
                   scheme=cfg.scheme, slices=cfg.slices, groups=cfg.groups, bits=cfg.bits,
                   on_panel=on_panel) as plan:
            t0 = MPI.Wtime()
            a, bt, c0 = distio.read_operands(plan, cfg.a, cfg.b, cfg.c if cfg.beta != 0.0 else None,
                                             transa=cfg.transa, transb=cfg.transb)
            read_s = MPI.Wtime() - t0
            c = plan(a, bt, c0, alpha=cfg.alpha, beta=cfg.beta)
            del a, bt, c0
            info = plan.info
            fingerprint, digest, out_seconds = write_output(cfg, c, info)
        mine = dict(info.seconds, read=read_s, **out_seconds, total=MPI.Wtime() - t_start)
        slowest = np.array([mine.get(p, 0.0) for p in PHASES], dtype=np.float64)
        grid.comm.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)
        moved = np.array(grid.comm.allgather((info.bytes_sent, info.bytes_received)), dtype=np.int64)
        ranks, dims = grid.size, grid.dims
        is_root = grid.rank == 0
    seconds = dict(zip(PHASES, (float(x) for x in slowest)))
    from .parallel.summa import overlap_fraction
    overlap = overlap_fraction(seconds)
    compute = seconds["scales"] + seconds["split"] + seconds["multiply"] + seconds["combine"]
    rate = gflops(m, n, k, compute)
    depth = info.slices + (1 if info.nonfinite_inputs else 0)
    report = base_report()
    report.update({
        "config": cfg.describe(),
        "m": m, "n": n, "k": k,
        "ranks": ranks,
        "grid": list(dims),
        "block": [plan.mb, plan.nb],
        "kb": plan.kb,
        "panels": info.panels,
        "engine": info.engine,
        "transport": info.transport,
        "transport_reason": info.transport_reason,
        # compute = the panel products alone (GPU events); comm = transport time (NCCL: GPU time
        # of the broadcasts); comm_exposed = multiply - compute, the part not hidden by overlap.
        "overlap": overlap,
        # scheme ozaki2: slices = groups = moduli (one int8 residue plane per modulus).
        "scheme": info.scheme, "bits": info.bits, "moduli": info.slices if info.scheme == "ozaki2" else None,
        "slices": info.slices, "groups": info.groups, "pair_gemms": info.pair_gemms,
        "spread_bits": info.spread_bits,
        "nonfinite_inputs": info.nonfinite_inputs,
        "error_bound": {"truncation": info.truncation_bound, "rounding": info.rounding_bound},
        "seconds": seconds,
        "seconds_note": "per phase, the slowest rank's time (MPI MAX)",
        "bytes_sent": {"per_rank_max": int(moved[:, 0].max()), "total": int(moved[:, 0].sum()),
                       "per_rank": [int(x) for x in moved[:, 0]]},
        "bytes_received": {"per_rank_max": int(moved[:, 1].max()), "total": int(moved[:, 1].sum())},
        # SUMMA model: every k-panel of op(A) reaches Q-1 other ranks per process row, of op(B) P-1.
        "bytes_model_total": depth * k * (m * (dims[1] - 1) + n * (dims[0] - 1)),
        "gflops": rate,
        "tflops": rate / 1e3,
        "sha256": digest,
        "fingerprint": fingerprint,
    })
    if cfg.report and is_root:
        write_report(cfg.report, report)
    return report
