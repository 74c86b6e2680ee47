"""Run one configured product: check everything, read HDF5 inputs, multiply, write C safely, report.

One code path for any number of MPI ranks, 1 included: a process grid over the
communicator, block-cyclic reads of op(A) / op(B)^T, SUMMA with the Ozaki engine,
block-cyclic write into a temporary dataset renamed when complete (ozhpc.io.h5out), and a
report written by rank 0. Everything that can be checked before the compute is (outputs,
report, memory, disk), collectively, so a bad run fails in seconds with one line.
"""
from __future__ import annotations

import logging

import numpy as np

from ..errors import InputError, OptionError, literal
from ..io import h5io
from ..ozaki.product import enforce_accuracy
from .config import RunConfig, op_value
from .fingerprint import fingerprint_distributed
from .progress import make_progress, step
from .report import base_report, check_report, gflops, write_report

log = logging.getLogger(__name__)


def validate_inputs(cfg: RunConfig) -> tuple[int, int, int]:
    """Check every input and the output before any work; returns (m, n, k)."""
    (ra, ca), _ = h5io.dataset_info(cfg.a, "input A")
    (rb, cb), _ = h5io.dataset_info(cfg.b, "input B")
    m, k = (ca, ra) if cfg.transa != "N" else (ra, ca)
    kb, n = (cb, rb) if cfg.transb != "N" else (rb, cb)
    if k != kb:
        raise h5io.InputError(
            f"shape mismatch: op(A) from {cfg.a} is {m}x{k} but op(B) from {cfg.b} is {kb}x{n}")
    if cfg.c is not None and cfg.beta != 0.0:
        shape_c, _ = h5io.dataset_info(cfg.c, "input C")
        if shape_c != (m, n):
            raise h5io.InputError(f"input C {cfg.c} has shape {shape_c}, expected {(m, n)}")
    check_outputs(cfg)
    return m, n, k


PATHS = {"a": "input A", "b": "input B", "c": "input C", "out": "the output"}
"""The datasets of a run, as :func:`agree_on_config` names them (by their absolute paths)."""


def same_run(cfg: RunConfig) -> dict:
    """What every rank of one run must agree on: the datasets (absolute paths: a rank started in
    another directory reads other files) and every option that shapes C, the layout or the
    writes. Only the progress display and the report (written by rank 0 alone) may differ."""
    described = cfg.describe()
    values = {name: described[name] for name in PATHS if name != "c" or cfg.beta != 0.0}
    values.update((field, getattr(cfg, field)) for field in (
        "transa", "transb", "alpha", "beta", "grid", "block", "scheme", "slices", "groups", "bits", "accuracy",
        "guarantee", "engine", "transport", "wire", "panel", "force", "dry_run"))
    return values


def agree_on_config(cfg: RunConfig, comm) -> None:
    """Every rank was started with the same run (collective, before anything else): ranks given
    other options or paths would compute a wrong C, or wait forever for each other. Raises the
    same OptionError on every rank, naming the first option that differs and the first rank whose
    value is not rank 0's."""
    if comm.Get_size() == 1:
        return
    everyone = comm.allgather(same_run(cfg))
    for rank, theirs in enumerate(everyone):
        name = next((key for key in everyone[0] if theirs.get(key) != everyone[0][key]), None)
        if name is None:
            continue
        what = PATHS.get(name, f"{{{name}}}")
        raise OptionError(f"the ranks were started with different runs: {what} is {_value(everyone[0][name])} on "
                          f"rank 0 but {_value(theirs.get(name))} on rank {rank}; start every rank with the "
                          f"same options, in the same directory")


def _value(value) -> str:
    if isinstance(value, tuple):
        return "x".join(map(str, value))
    return literal(value if isinstance(value, str) and value.startswith("/") else repr(value)
                   if isinstance(value, str) else value)


def complex_inputs(cfg: RunConfig) -> bool:
    """Whether the product is complex: A or B is (C0 alone makes only alpha*AB + beta*C0 complex,
    which the product learns from C0's blocks)."""
    return h5io.any_complex(cfg.a, cfg.b)


def check_outputs(cfg: RunConfig) -> None:
    """The output dataset and the report may be written (before any work)."""
    inputs = [ref for ref in (cfg.a, cfg.b, cfg.c if cfg.beta != 0.0 else None) if ref is not None]
    h5io.check_output(cfg.out, cfg.force, inputs=inputs)
    if cfg.report:
        check_report(cfg.report, cfg.force, files=[ref.file for ref in inputs] + [cfg.out.file])


def check_resources(cfg: RunConfig, summa, ranks_here: int):
    """Memory per rank (the model of :mod:`ozhpc.run.resources` on this rank's layouts) and disk space
    for C (on rank 0, after it removed the temporaries of dead jobs, which hold space: a dry run
    only counts them), so a run that cannot fit fails before allocating; returns the memory
    estimate."""
    from ..io.h5out import check_size_limit, clear_stale
    from .resources import check_disk, check_memory

    estimate = rank_estimate(summa, with_c=cfg.beta != 0.0)
    check_memory(estimate, ranks_here, _device_free(summa.engine))
    if summa.grid.rank == 0:  # one file system; the others would race with the removal
        check_disk(cfg.out.file, summa.m, summa.n, clear_stale(cfg.out.file, remove=not cfg.dry_run),
                   itemsize=16 if summa.complex else 8)
    check_size_limit(cfg.out.file, (16 if summa.complex else 8) * summa.m * summa.n)
    return estimate


def rank_estimate(summa, with_c: bool = False):
    """:func:`ozhpc.run.resources.estimate_memory` of this rank of ``summa`` (its local shapes, panel
    width, settings, engine and wire)."""
    from .resources import estimate_memory

    me = summa.grid.coords
    return estimate_memory(summa.a_layout.local_shape(*me), summa.bt_layout.local_shape(me[1], me[0]),
                           summa.kb, summa.k, summa.settings, on_device=summa.engine.on_device,
                           with_c=with_c, wire=summa.wire, complex_entries=summa.complex)


def _largest(comm, estimate):
    """The estimate of the rank that needs the most host memory (collective)."""
    return max(comm.allgather(estimate), key=lambda e: (e.host, e.device))


def dry_run_report(cfg: RunConfig, summa, estimate) -> dict:
    """What ``--dry-run`` reports: the sizes, the layout, the engine and the largest rank's memory."""
    report = base_report()
    report.update({"dry_run": True, "config": cfg.describe(), "m": summa.m, "n": summa.n, "k": summa.k,
                   "ranks": summa.grid.size, "grid": list(summa.grid.dims), "block": [summa.mb, summa.nb],
                   "kb": summa.kb, "engine": summa.engine.name, "wire": summa.wire.name,
                   "memory": {"host_bytes_per_rank": estimate.host, "device_bytes_per_rank": estimate.device,
                              "assumed": estimate.note, "summary": estimate.describe()}})
    return report


def _device_free(engine) -> int | None:
    if not engine.on_device:
        return None
    free, _ = engine.xp.cuda.runtime.memGetInfo()
    return int(free)


def ranks_on_this_node(comm) -> int:
    """How many ranks of ``comm`` share this host (collective)."""
    import socket

    hosts = comm.allgather(socket.gethostname())
    return hosts.count(hosts[comm.Get_rank()])


def _engine(name):
    from ..engines import EngineUnavailable, get_engine

    try:
        return get_engine(name)
    except (EngineUnavailable, ValueError) as exc:
        raise InputError(str(exc)) from None


SHA256_MAX_BYTES = 256 << 20
"""C up to this size also gets a SHA-256 (rank 0 reads it back, serially); larger outputs have
only the fingerprint, which every rank computes over its own blocks."""


def write_output(cfg: RunConfig, c, info, engine) -> tuple[str, str | None, dict]:
    """Fingerprint C (each rank its own blocks) and write it with its attributes (collective).

    Returns (fingerprint, SHA-256 or None for a C over SHA256_MAX_BYTES, {"fingerprint": s, "write": s}).
    """
    from ..parallel.mpi import MPI

    from ..io import distio
    from ..parallel.distmatrix import DistMatrix

    t0 = MPI.Wtime()
    fingerprint = fingerprint_distributed(c)   # where C's blocks are (on the GPU: before the copy back)
    if engine.on_device:   # the copy back (page-locked: engines/host_copy.py)
        c = DistMatrix(c.grid, c.layout, engine.to_host(c.local))
    t1 = MPI.Wtime()
    modes = [op_value(mode if info.complex or mode != "C" else "T") for mode in (cfg.transa, cfg.transb)]  # real: C is T
    attrs = dict(info.plan_attrs(), alpha=cfg.alpha, beta=cfg.beta, transa=modes[0],
                 transb=modes[1], fingerprint=fingerprint)  # what ozhpc check compares against
    small = c.local.itemsize * c.layout.shape[0] * c.layout.shape[1] <= SHA256_MAX_BYTES
    digest = distio.write_distributed(cfg.out, c, attrs=attrs, force=cfg.force, sha256=small)
    return fingerprint, digest, {"fingerprint": t1 - t0, "write": MPI.Wtime() - t1}


PHASES = ("startup", "read", "scales", "split", "multiply", "comm_wait", "certificate", "combine", "fingerprint", "write",
          "total", "compute", "comm", "comm_exposed")


def execute(cfg: RunConfig, comm=None, on_panel=None) -> dict:
    """The whole run over ``comm`` (default ``MPI.COMM_WORLD``; 1 rank works the same way).

    Collective. ``on_panel(done, total)`` is the progress hook (pass it on rank 0 only;
    by default rank 0 shows ``cfg.progress`` through :mod:`ozhpc.run.progress`).
    Returns the report on every rank; only rank 0 writes it to ``cfg.report``.

    Raises
    ------
    InputError
        On every rank alike, when any rank finds a bad input, option or grid.
    AccuracyError
        On every rank alike, with ``cfg.accuracy`` "strict" when "auto" could not certify C;
        nothing was written (no output dataset, no report). With "warn" an AccuracyWarning.
    """
    from ..parallel.mpi import MPI

    from ..parallel import ProcessGrid, Summa, collective_errors

    comm = MPI.COMM_WORLD if comm is None else comm
    t_start = MPI.Wtime()
    agree_on_config(cfg, comm)
    with ProcessGrid(comm, cfg.grid) as grid:
        ranks_here = ranks_on_this_node(grid.comm)
        m, n, k, engine = _setup(cfg, grid)
        complex_ = complex_inputs(cfg)
        if on_panel is None:  # cfg.progress on rank 0; None (no hook at all) on the others
            on_panel = make_progress(cfg.progress, grid.rank)
        with Summa(grid, m, n, k, block=cfg.block, kb=cfg.panel, engine=engine, transport=cfg.transport,
                   settings=cfg.ozaki, on_panel=on_panel, wire=cfg.wire, complex=complex_) as summa:
            with collective_errors(grid.comm, catch=InputError):
                estimate = check_resources(cfg, summa, ranks_here)
            if cfg.dry_run:
                return dry_run_report(cfg, summa, _largest(grid.comm, estimate))
            info, outputs, mine = _multiply(cfg, summa, startup=MPI.Wtime() - t_start)
        mine["total"] = MPI.Wtime() - t_start
        if hasattr(on_panel, "close"):  # the bar's last state stays on the terminal
            on_panel.close()
        gathered = _gather_figures(grid, mine, info, engine)
        layout = {"ranks": grid.size, "grid": list(grid.dims), "block": [summa.mb, summa.nb], "kb": summa.kb}
        is_root = grid.rank == 0
    report = run_report(cfg, info, layout, *gathered, outputs)
    if cfg.report and is_root:
        try:
            write_report(cfg.report, report)
        except OSError as exc:  # checked before the compute; this is e.g. a disk that filled up since
            raise InputError(f"C was written, but the report {cfg.report!r} could not be: {exc.strerror}") from None
    return report


def _setup(cfg: RunConfig, grid):
    """Inputs and outputs checked, this rank's GPU bound, the engine made (collective)."""
    from ..engines.toolchain import configure_cache
    from ..parallel import collective_errors
    from ..parallel.localrank import bind_device

    with collective_errors(grid.comm, catch=InputError):
        m, n, k = validate_inputs(cfg)
    notes: list[str] = []  # what is wrong with the kernel cache: said only if the GPU engine runs
    if cfg.engine != "numpy":  # this rank's GPU: node-local rank % visible devices
        configure_cache(quiet=grid.rank != 0, notes=notes)  # before cuda.tile is imported
        bind_device(grid.comm)
    with collective_errors(grid.comm, catch=InputError):
        engine = _engine(cfg.engine)
    for line in notes if engine.on_device else ():
        log.warning(line)
    return m, n, k, engine


def _multiply(cfg: RunConfig, summa, startup: float):
    """Read op(A), op(B)^T (and C), multiply, enforce ``cfg.accuracy``, write C; returns (info,
    (fingerprint, sha256), this rank's seconds per phase)."""
    from ..parallel.mpi import MPI

    from ..io import distio

    step(summa.on_panel, "reading A and B")
    t0 = MPI.Wtime()
    a, bt, c0 = distio.read_operands(summa, cfg.a, cfg.b, cfg.c if cfg.beta != 0.0 else None,
                                     transa=cfg.transa, transb=cfg.transb)
    read_s = MPI.Wtime() - t0
    step(summa.on_panel, "scales and split")
    c = summa(a, bt, c0, alpha=cfg.alpha, beta=cfg.beta, on_device=summa.engine.on_device)
    del a, bt, c0
    enforce_accuracy(summa.info, cfg.accuracy)  # "strict": every rank raises here, before anything is written
    step(summa.on_panel, "writing C")
    fingerprint, digest, out_seconds = write_output(cfg, c, summa.info, summa.engine)
    return summa.info, (fingerprint, digest), dict(summa.info.seconds, startup=startup, read=read_s, **out_seconds)


def _gather_figures(grid, mine: dict, info, engine):
    """The slowest rank's seconds per phase, every rank's bytes moved and the kernel counts
    summed over the ranks (collective)."""
    from ..parallel.mpi import MPI

    slowest = np.array([mine.get(p, 0.0) for p in PHASES], dtype=np.float64)
    grid.comm.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)
    moved = np.array(grid.comm.allgather((info.bytes_sent, info.bytes_received)), dtype=np.int64)
    counts = grid.comm.allgather(_kernel_counts(engine))
    kernels = None if None in counts else {
        "from_store": sum(c[0] for c in counts), "compiled": sum(c[1] for c in counts),
        "compiled_variants": sorted({name for c in counts for name in c[2]})}
    return dict(zip(PHASES, (float(x) for x in slowest))), moved, kernels


def _kernel_counts(engine) -> tuple[int, int, list[str]] | None:
    """(kernel variants this process loaded from ozhpc's kernel store, variants it compiled,
    their descriptions); None for an engine without GPU kernels or with the kernel cache off."""
    if not engine.on_device:
        return None
    from ..engines.kernel_store import active_store

    store = active_store()
    return None if store is None else (store.hits, store.misses, list(store.compiled))


def run_report(cfg: RunConfig, info, layout: dict, seconds: dict, moved, kernels, outputs) -> dict:
    """The JSON report of a finished run (every rank builds it; rank 0 writes it)."""
    from ..parallel.summa import overlap_fraction

    m, n, k, (p, q) = info.m, info.n, info.k, layout["grid"]
    compute = sum(seconds[p] for p in ("scales", "split", "multiply", "certificate", "combine"))
    rate = gflops(m, n, k, compute)
    report = base_report()
    item = 16 if info.complex else 8   # bytes per entry (real operands of a complex product count as complex)
    report.update({
        "config": cfg.describe(), "m": m, "n": n, "k": k, **layout, "panels": info.panels,
        "engine": info.engine, "transport": info.transport, "transport_reason": info.transport_reason,
        "wire": info.wire, "wire_reason": info.wire_reason,
        # compute = the panel products alone (GPU events); comm = transport time (NCCL: GPU time
        # of the broadcasts); comm_exposed = multiply - compute, the part not hidden by overlap.
        "overlap": overlap_fraction(seconds),
        # slices/groups: scheme ozaki1 (None with ozaki2); moduli: scheme ozaki2 (None with ozaki1).
        "scheme": info.scheme, "bits": info.bits, "moduli": info.moduli,
        "slices": info.slices, "groups": info.groups, "int8_gemms": info.int8_gemms,
        "plan_summary": info.plan_summary, "spread_bits": info.spread_bits,
        "nonfinite_inputs": info.nonfinite_inputs,
        "error_bound": {"truncation": info.truncation_bound, "combine": info.combine_bound,
                        "rounding": info.rounding_bound},
        "seconds": seconds, "seconds_note": "per phase, the slowest rank's time (MPI MAX)",
        "complex": info.complex,   # complex128 operands: a ZGEMM, guarantee per component
        "io_gbps": {"read": _gbps(item * (m * k + k * n), seconds["read"]), "write": _gbps(item * m * n, seconds["write"])},
        "bytes_sent": {"per_rank_max": int(moved[:, 0].max()), "total": int(moved[:, 0].sum()),
                       "per_rank": [int(x) for x in moved[:, 0]]},
        "bytes_received": {"per_rank_max": int(moved[:, 1].max()), "total": int(moved[:, 1].sum())},
        # SUMMA model: every k-panel of op(A) reaches Q-1 other ranks per process row, of op(B) P-1,
        # in every pass, at pass_bytes per entry (8 for FP64 on the wire).
        "bytes_model_total": sum(info.pass_bytes) * k * (m * (q - 1) + n * (p - 1)),
        "gflops": rate, "tflops": rate / 1e3,
        "fingerprint": outputs[0], "sha256": outputs[1],
        # cuTile kernel variants over all ranks: loaded from the kernel store (no compile step at
        # all) / compiled (cuTile's front end, and tileiras unless its own cache had the cubin)
        "kernels": kernels,
        **certificate_fields(info),
    })
    return report


def certificate_fields(info) -> dict:
    """The certificate of "auto" in the report: ``guarantee`` (the bound certified) and ``certified``
    true / false, or null for fixed slices / bits (not checked; ``uncertified`` and ``worst_ratio``
    null too); ``widths`` the plans tried; ``refined_entries``, ``levels``, ``exact_entries``: the
    entries a pass left that were recomputed by levels of scales, how deep, and how many of them by
    their exact dot products (null when not checked)."""
    if info.certified is None:
        return {"guarantee": None, "certified": None, "uncertified": None, "worst_ratio": None, "widths": [],
                "refined_entries": None, "levels": None, "exact_entries": None}
    return {"guarantee": info.guarantee, "certified": bool(info.certified), "uncertified": int(info.uncertified),
            "worst_ratio": float(info.worst_ratio), "refined_entries": int(info.refined_entries),
            "levels": int(info.levels), "exact_entries": int(info.exact_entries),
            "widths": [[int(bits), int(count), float(ratio)] for bits, count, ratio in info.widths]}


def _gbps(nbytes: int, seconds: float) -> float | None:
    return nbytes / seconds / 1e9 if seconds > 0 else None
