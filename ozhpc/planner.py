"""``ozhpc plan``: the grid, panel width and wire for an m x n x k product on P GPUs, and its cost.

A model, so that a job for 64 or 512 GPUs can be sized before it is submitted; the same rules
the run follows, fed with rates instead of measured times:

* bytes: exactly what the transports count (:mod:`ozhpc.parallel.transport`: a root's panel
  times its receivers), from the block-cyclic layout (``numroc``) and the bytes per entry of
  the wire (:mod:`ozhpc.parallel.wire`), one pass of the plan "auto" assumes
  (``OzakiSettings.typical``, plus the certificate's magnitude plane);
* memory: :func:`ozhpc.resources.estimate_memory` of the largest rank (the ``--dry-run`` figure);
* time: per pass, the up-front split (planes on the wire), then one panel loop in which panel
  t+1's broadcast hides behind panel t's products (and, FP64 on the wire, its split), then the
  combine. A broadcast takes its bytes over the slowest link it crosses: NVLink inside a node
  (``--gpus-per-node``), the network between nodes.

Rates come from :data:`DEVICES` (sources in ``docs/planning.md``), replaced by this node's own
where ``ozhpc plan --calibrate`` recorded them (:data:`RATES_FILE` in the kernel cache directory).
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, replace

from .config import MAX_EXTENT, MAX_RANKS
from .engines.toolchain import cache_dir, make_private_dir
from .errors import digit_count, shown
from .ozaki.plan import DataSizes, resolve_plan
from .ozaki.settings import TYPICAL_BITS, TYPICAL_SLICES, OzakiSettings
from .parallel.layout import numroc
from .parallel.wire import LINK_RATE, SPLIT_RATE, choose_wire
from .resources import estimate_memory

RATES_FILE = "planner_rates.json"


@dataclass(frozen=True)
class Device:
    """What one GPU (or this repo's CPU reference) does per second, and what it holds."""

    name: str
    engine: str          # the ozhpc engine it runs ("cutile" or "numpy")
    pair_ops: float      # int8 pair-product ops/s the engine reaches (2 m n k per int8 GEMM)
    dgemm: float         # FP64 flop/s of cuBLAS DGEMM, for comparison
    split_rate: float    # operand entries/s split into planes
    hbm: float           # memory bytes/s (the combine, the scales)
    memory: float        # bytes a rank may use (device memory; host memory for the CPU)
    nvlink: float        # bytes/s one GPU sends into a broadcast inside its node
    network: float       # bytes/s one GPU sends into a broadcast between nodes
    per_node: int        # GPUs per node (NVLink domain) by default
    overlap: bool        # broadcasts progress while products run (NCCL); False: MPI without a progress thread
    k_half: int          # panel width at which the products run at half their rate (long k: full rate)
    latency: float       # seconds per panel beyond its bytes (a broadcast's start, kernel launches)
    cores: int = 0       # CPU only: the rates are one rank's; ranks beyond this many share the cores
    source: str = ""


H200_INT8_PEAK, H200_FP64_PEAK = 1.979e15, 67e12
PAIR_EFFICIENCY, DGEMM_EFFICIENCY = 1.2e15 / H200_INT8_PEAK, 56e12 / H200_FP64_PEAK
"""What the pair kernel and cuBLAS reach of the H200's dense peaks (measured); Blackwell is assumed
to reach the same fractions of its datasheet peaks."""

DEVICES = {
    "h200": Device("NVIDIA H200 SXM", "cutile", 1.2e15, 56e12, SPLIT_RATE["cutile"], 4.19e12, 140e9,
                   LINK_RATE[("cutile", True)], LINK_RATE[("cutile", False)], 8, True, 256, 50e-6,
                   source="measured here: bench/results/gpu_gemm_h200_2026-12-01_*.md, multi_gpu_h200x2_*.md"),
    "b200": Device("NVIDIA B200 (HGX, 1000 W)", "cutile", PAIR_EFFICIENCY * 4.5e15, DGEMM_EFFICIENCY * 40e12,
                   SPLIT_RATE["cutile"] * 8.0 / 4.19, 8.0e12, 180e9, 900e9, 50e9, 8, True, 256, 50e-6,
                   source="NVIDIA HGX B200 datasheet (dense INT8 4.5 POPS, FP64 40 TFLOPS, 180 GB, 8 TB/s, "
                          "NVLink 5 1.8 TB/s) at the H200's measured efficiencies"),
    "gb200": Device("NVIDIA GB200 NVL72 (per GPU, 1200 W)", "cutile", PAIR_EFFICIENCY * 5.0e15,
                    DGEMM_EFFICIENCY * 45e12, SPLIT_RATE["cutile"] * 8.0 / 4.19, 8.0e12, 186e9, 900e9, 50e9,
                    72, True, 256, 50e-6,
                    source="NVIDIA GB200 NVL72 datasheet (dense INT8 5 POPS, FP64 45 TFLOPS, 186 GB, 8 TB/s, "
                           "one NVLink domain of 72 GPUs) at the H200's measured efficiencies"),
    "cpu": Device("this repo's CPU, NumPy engine", "numpy", 2.9e10, 6.3e10, SPLIT_RATE["numpy"], 1.0e10,
                  float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) if hasattr(os, "sysconf") else 8e9,
                  LINK_RATE[("numpy", True)], LINK_RATE[("numpy", False)], 1 << 20, False, 64, 1e-3,
                  cores=os.cpu_count() or 1,
                  source="one BLAS thread of the development VM (bench/results/planner_cpu_2026-12-02.md, "
                         "bench/results/dist_cpu_2026-11-30.md); ozhpc plan --calibrate for this node's"),
}


@dataclass
class Prediction:
    """One candidate run: its layout, bytes (exact), memory (the estimate) and predicted times."""

    grid: tuple
    kb: int
    wire: str
    wire_reason: str
    plan: str
    bytes_per_entry: int
    seconds: float
    compute_seconds: float
    comm_seconds: float
    exposed_seconds: float
    hidden: float | None
    tflops_per_gpu: float
    bytes_sent: list            # per rank, as the transports count them
    bytes_received: list
    nvlink_bytes_max: int       # per GPU: sent to ranks of its own node
    network_bytes_max: int      # per GPU: sent to ranks of other nodes
    memory_bytes: int           # the largest rank's peak (device memory; host for the CPU)
    fits: bool

    def to_dict(self) -> dict:
        return asdict(self)


def device_for(name: str, calibration: dict | None = None, scheme: str = "ozaki2") -> Device:
    """The table's device, with this node's measured rates (for ``scheme``) where a calibration
    recorded them."""
    device = DEVICES[name]
    mine = (calibration or {}).get(name)
    if mine:
        mine = dict(mine, **mine.get("by_scheme", {}).get(scheme, {}))
        device = replace(device, pair_ops=mine.get("pair_ops", device.pair_ops),
                         split_rate=mine.get("split_rate", device.split_rate),
                         source=f"calibrated on {mine.get('host', '?')} {mine.get('date', '')} ({device.source})")
    return device


def predict(m: int, n: int, k: int, grid: tuple, device: Device, settings: OzakiSettings, *, kb: int,
            wire: str = "auto", block=(256, 256), per_node: int | None = None) -> Prediction:
    """The model for one layout (see the module docstring)."""
    p, q = grid
    ranks, per_node = p * q, per_node or device.per_node
    mb, nb = block
    plan = resolve_plan(settings.typical(), 0, max(k, 1), sizes=DataSizes.typical(k))
    depth = plan.planes + (1 if settings.auto else 0)
    wire, why = choose_wire(wire, depth, ranks=ranks, engine=device.engine, one_node=ranks <= per_node,
                            split_rate=device.split_rate,
                            link_rate=device.network if ranks > per_node else device.nvlink)
    why = "--wire auto would pick it: " + why[len("auto: "):] if why.startswith("auto") else why
    entry = 8 if wire == "fp64" else depth
    sent, received, nvlink, network = [], [], [], []
    for r in range(ranks):
        i, j = divmod(r, q)
        rows_a, rows_b = numroc(m, mb, i, 0, p), numroc(n, nb, j, 0, q)
        own_a, own_b = numroc(k, kb, j, 0, q), numroc(k, kb, i, 0, p)
        row, col = [i * q + jj for jj in range(q)], [ii * q + j for ii in range(p)]
        near_row = sum(1 for x in row if x != r and x // per_node == r // per_node)
        near_col = sum(1 for x in col if x != r and x // per_node == r // per_node)
        a_out, b_out = entry * rows_a * own_a, entry * rows_b * own_b
        sent.append(a_out * (q - 1) + b_out * (p - 1))
        received.append(entry * (rows_a * (k - own_a) + rows_b * (k - own_b)))
        nvlink.append(a_out * near_row + b_out * near_col)
        network.append(sent[-1] - nvlink[-1])
    # the largest rank (rank 0 holds the most rows and k columns): its time and memory
    rows_a, rows_b = numroc(m, mb, 0, 0, p), numroc(n, nb, 0, 0, q)
    ka, kbt = numroc(k, kb, 0, 0, q), numroc(k, kb, 0, 0, p)
    share = max(1.0, min(ranks, per_node) / device.cores) if device.cores else 1.0  # CPU ranks beyond its cores
    pair_ops = device.pair_ops / share * kb / (kb + device.k_half)
    split_rate = device.split_rate / share
    products = 2.0 * rows_a * rows_b * k * (plan.int8_gemms + (1 if settings.auto else 0)) / pair_ops
    split_each = (rows_a + rows_b) * k / split_rate if wire == "fp64" else 0.0
    split_front = 0.0 if wire == "fp64" else (rows_a * ka + rows_b * kbt) / split_rate
    link_row = device.network if _spans_nodes(range(0, q), per_node) else device.nvlink
    link_col = device.network if _spans_nodes(range(0, ranks, q), per_node) else device.nvlink
    comm = (entry * rows_a * (k - ka) / link_row if q > 1 else 0.0) + \
        (entry * rows_b * (k - kbt) / link_col if p > 1 else 0.0)
    panels = max(1, math.ceil(k / kb))
    compute = products + split_each + panels * device.latency
    if device.overlap:   # panel 0's broadcast is exposed; then each panel costs the longer of its
        # products and the next panel's broadcast; the last panel's products stand alone
        loop = (comm + (panels - 1) * max(compute, comm) + compute) / panels
    else:
        loop = compute + comm
    scales_combine = (2 * 8 * (rows_a * ka + rows_b * kbt) + (8 + 4 * plan.accumulators) * rows_a * rows_b) / device.hbm
    total = split_front + loop + scales_combine / share
    exposed = max(0.0, loop - compute)
    estimate = estimate_memory((rows_a, ka), (rows_b, kbt), kb, k, settings, on_device=device.engine != "numpy",
                               wire=wire)
    memory = estimate.device if device.engine != "numpy" else estimate.host
    return Prediction(grid=(p, q), kb=kb, wire=wire, wire_reason=why, plan=plan.summary(), bytes_per_entry=entry,
                      seconds=total, compute_seconds=compute + split_front, comm_seconds=comm,
                      exposed_seconds=exposed, hidden=None if comm == 0 else max(0.0, 1 - exposed / comm),
                      tflops_per_gpu=2.0 * m * n * k / total / ranks / 1e12, bytes_sent=sent, bytes_received=received,
                      nvlink_bytes_max=max(nvlink), network_bytes_max=max(network), memory_bytes=int(memory),
                      fits=memory <= device.memory)


def _spans_nodes(ranks, per_node: int) -> bool:
    """Whether these ranks (filling nodes of ``per_node`` in order) sit on more than one node."""
    return len({r // per_node for r in ranks}) > 1


def grids(ranks: int) -> list[tuple[int, int]]:
    return [(p, ranks // p) for p in range(1, ranks + 1) if ranks % p == 0]


PANELS = (256, 512, 1024, 2048, 4096, 8192)


def best(m: int, n: int, k: int, ranks: int, device: Device, settings: OzakiSettings, *, wire: str = "auto",
         per_node: int | None = None, block=(256, 256)) -> tuple[Prediction, list[Prediction]]:
    """The fastest layout that fits (else the one needing the least memory), and every candidate
    (each grid P x Q = ranks; panel widths of :data:`PANELS` up to k / max(P, Q); both wires for
    "auto"), fastest first."""
    out = []
    for grid in grids(ranks):
        cap = max(16, -(-k // max(grid)) // 16 * 16)
        for kb in sorted({min(w, cap) for w in PANELS}):
            picked = predict(m, n, k, grid, device, settings, kb=kb, wire=wire, per_node=per_node, block=block)
            out.append(picked)
            if wire == "auto":   # the other wire too, as an explicit --wire
                other = "planes" if picked.wire == "fp64" else "fp64"
                out.append(predict(m, n, k, grid, device, settings, kb=kb, wire=other, per_node=per_node,
                                   block=block))
    out.sort(key=lambda c: (not c.fits, c.seconds if c.fits else c.memory_bytes))
    return out[0], out


def explain(chosen: Prediction, candidates: list[Prediction]) -> list[str]:
    """Why: the runner-up of each kind (another grid, panel width or wire) and what it would cost."""
    lines = []
    for what, other in (("grid", lambda c: c.grid != chosen.grid),
                        ("panel width", lambda c: (c.grid, c.wire) == (chosen.grid, chosen.wire) and c.kb != chosen.kb),
                        ("wire", lambda c: c.grid == chosen.grid and c.kb == chosen.kb and c.wire != chosen.wire)):
        rival = next((c for c in candidates if other(c)), None)
        if rival is None:
            continue
        detail = (f"{rival.seconds / chosen.seconds:.2f}x the time" if rival.fits
                  else f"does not fit ({_gb(rival.memory_bytes)} per GPU)")
        lines.append(f"{what}: {_layout(rival)} would take {detail}")
    if not chosen.fits:
        lines.append("no layout fits the device memory: use more GPUs")
    return lines


def _layout(c: Prediction) -> str:
    return f"grid {c.grid[0]}x{c.grid[1]}, panel {c.kb}, wire {c.wire}"


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g} GB"


def report_lines(m, n, k, ranks, device: Device, chosen: Prediction, candidates) -> list[str]:
    """What ``ozhpc plan`` prints."""
    return [f"C = {m}x{n} (k = {k}) on {ranks} x {device.name}: {chosen.plan}",
            f"  best: {_layout(chosen)} ({chosen.bytes_per_entry} bytes per entry on the wire): "
            f"ozhpc gemm --grid {chosen.grid[0]}x{chosen.grid[1]} --panel {chosen.kb} --wire {chosen.wire}",
            f"  predicted time {chosen.seconds:.3g} s, {chosen.tflops_per_gpu:.3g} TFLOP/s per GPU "
            f"(FP64-equivalent; DGEMM peak of this device {device.dgemm / 1e12:.3g})",
            f"  bytes sent per GPU: {_gb(chosen.nvlink_bytes_max)} over NVLink, {_gb(chosen.network_bytes_max)} "
            f"over the network (total {_gb(sum(chosen.bytes_sent))})",
            f"  memory per GPU {_gb(chosen.memory_bytes)} of {_gb(device.memory)}"
            + ("" if chosen.fits else " -- does NOT fit"),
            "  communication hidden: " + ("n/a (nothing moves)" if chosen.hidden is None
                                          else f"{100 * chosen.hidden:.0f}%"),
            f"  why: {chosen.wire_reason}"] + [f"  why: {line}" for line in explain(chosen, candidates)] + \
        [f"  rates: {device.source}"]


def load_calibration(directory: str | None = None) -> dict:
    """The rates ``ozhpc plan --calibrate`` recorded on this node ({} when none)."""
    path = os.path.join(directory or cache_dir(), RATES_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def calibrate(n: int | None = None, directory: str | None = None) -> tuple[str, dict]:
    """Measure this node's pair-product and split rates (one short product per scheme on the
    engine "auto" picks) and record them; returns (device key, rates)."""
    import socket

    import numpy as np
    from .parallel.mpi import MPI

    from .engines import get_engine
    from .matrices import standard_matrix
    from .parallel import ProcessGrid, Summa

    engine = get_engine("auto")
    key = "cpu" if not engine.on_device else _gpu_key(engine)
    n = n or (8192 if engine.on_device else 768)
    a, b = standard_matrix(n, n, 0.5, 1), standard_matrix(n, n, 0.5, 2)
    rates = {}
    for scheme in ("ozaki1", "ozaki2"):
        settings = OzakiSettings(scheme).typical()
        with ProcessGrid(MPI.COMM_SELF) as grid, Summa(grid, n, n, n, block=256, kb=n, engine=engine,
                                                       settings=settings, wire="planes") as plan:
            da, dbt, _ = plan.distribute(a, b)
            plan(da, dbt)     # warm-up (kernels, allocations)
            plan(da, dbt)
            s, pairs = plan.info.seconds, plan.info.pair_gemms
        rates[scheme] = {"pair_ops": 2.0 * n**3 * pairs / s["compute"], "split_rate": 2.0 * n * n / s["split"]}
    entry = {"pair_ops": float(np.mean([r["pair_ops"] for r in rates.values()])),
             "split_rate": float(np.mean([r["split_rate"] for r in rates.values()])), "by_scheme": rates,
             "n": n, "engine": engine.name, "host": socket.gethostname(),
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    directory = directory or cache_dir()
    make_private_dir(directory)   # as the kernel cache: 0700, whatever the umask
    saved = load_calibration(directory)
    saved[key] = entry
    with open(os.path.join(directory, RATES_FILE), "w") as f:
        json.dump(saved, f, indent=1)
    return key, entry


def _gpu_key(engine) -> str:
    name = engine.describe().get("device", "").lower()
    return next((key for key in ("gb200", "b200", "h200") if key in name), "h200")


def add_arguments(p) -> None:
    """``ozhpc plan``'s options (argparse)."""
    from .parallel.wire import WIRE_NAMES

    for name in ("m", "n", "k"):
        p.add_argument(f"--{name}", type=_positive(MAX_EXTENT), required=True, help=f"global {name} of C = op(A) op(B)")
    p.add_argument("--gpus", type=_positive(MAX_RANKS), required=True, help="GPUs (MPI ranks, one per GPU)")
    p.add_argument("--gpu", choices=sorted(DEVICES), default="h200",
                   help="device kind (cpu: the NumPy engine on this node's cores); default h200")
    p.add_argument("--gpus-per-node", type=_positive(MAX_RANKS), help="GPUs per node / NVLink domain (default: 8, "
                                                          "72 for gb200)")
    p.add_argument("--scheme", choices=("ozaki1", "ozaki2"), default=None,
                   help="Ozaki scheme (default ozaki2, as ozhpc gemm; ozaki1 when --slices is given)")
    p.add_argument("--slices", default="auto", help=f"scheme ozaki1: slices, or auto ({TYPICAL_SLICES} assumed)")
    p.add_argument("--bits", default="auto", help=f"scheme ozaki2: bits, or auto ({TYPICAL_BITS} assumed)")
    p.add_argument("--wire", choices=WIRE_NAMES, default="auto", help="panels as fp64 or planes; auto: "
                                                                      "the faster by the model")
    p.add_argument("--calibrate", action="store_true",
                   help="first measure this node's pair-product and split rates (a few seconds) and record "
                        f"them ({RATES_FILE} in the kernel cache directory) for later plans")
    p.add_argument("--json", action="store_true", help="print the best layout as JSON")


def _positive(hi: int):
    """An argparse type: an integer from 1 to ``hi`` (the model computes in floats: a bound keeps it finite)."""
    import argparse

    def parse(text) -> int:
        if digit_count(text) or text.strip().isdigit() and int(text) > hi:
            raise argparse.ArgumentTypeError(f"must be a positive integer up to {hi}, got {shown(text)}")
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a positive integer, got {shown(text)}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be a positive integer, got {shown(text)}")
        return value
    return parse


def main(args) -> int:
    """``ozhpc plan``: print the best layout and why (or JSON); 0."""
    from .errors import InputError, OptionError, cli_spelling

    try:
        settings = OzakiSettings(args.scheme, args.slices, "auto", args.bits)
    except OptionError as exc:
        raise InputError(str(exc.spelled(cli_spelling))) from None
    if args.calibrate:
        key, rates = calibrate()
        print(f"calibrated {key} on {rates['host']}: {rates['pair_ops'] / 1e12:.3g} T pair ops/s, "
              f"{rates['split_rate'] / 1e9:.3g} G entries/s split")
    device = device_for(args.gpu, load_calibration(), settings.scheme)
    chosen, candidates = best(args.m, args.n, args.k, args.gpus, device, settings, wire=args.wire,
                              per_node=args.gpus_per_node)
    if args.json:
        out = chosen.to_dict()
        out.update(device=device.name, rates=device.source, why=explain(chosen, candidates),
                   bytes_sent_total=sum(chosen.bytes_sent))
        print(json.dumps(out, indent=1))
    else:
        print("\n".join(report_lines(args.m, args.n, args.k, args.gpus, device, chosen, candidates)))
    return 0
