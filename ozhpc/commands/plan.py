"""``ozhpc plan``: the grid, panel width and wire for an m x n x k product on P GPUs, and its cost.

A model, so that a job for 64 or 512 GPUs can be sized before it is submitted; the same rules
the run follows, fed with rates instead of measured times:

* bytes: exactly what the transports count (:mod:`ozhpc.parallel.transport`: a root's panel
  times its receivers), from the block-cyclic layout (``numroc``) and the bytes per entry of
  the wire (:mod:`ozhpc.parallel.wire`), one pass of the plan assumed before the data is read
  (:func:`ozhpc.ozaki.plan.assumed_plan`, as the run's wire and memory check assume);
* memory: :func:`ozhpc.run.resources.estimate_memory` of the largest rank (the ``--dry-run`` figure);
* time: per pass, the up-front split (planes on the wire), then one panel loop in which panel
  t+1's broadcast hides behind panel t's products (and, FP64 on the wire, its split), then the
  combine. A broadcast takes its bytes over the slowest link it crosses: NVLink inside a node
  (``--gpus-per-node``), the network between nodes. Beside it: reading A and B and writing C at
  the file system's rate (``--io-rate``), and the start-up of the processes.

Rates come from the devices of :mod:`ozhpc.commands.plan_devices` (their table, and this node's
own rates where ``ozhpc plan --calibrate`` recorded them).
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..errors import InputError, digit_count, shown
from ..ozaki.domain import COMPLEX, REAL
from ..ozaki.passes import assumed_depth
from ..ozaki.plan import assumed_plan
from ..ozaki.settings import TYPICAL_BITS, TYPICAL_SLICES, OzakiSettings
from ..parallel.layout import numroc
from ..parallel.wire import Wire, choose_wire
from ..run.config import MAX_EXTENT, MAX_RANKS
from ..run.resources import estimate_memory
from .plan_devices import DEVICES, RATES_FILE, VERDICT_BYTES, Device, calibrate, device_for, load_calibration, rates_path

IO_RATE = 3e9
"""Bytes/s the file system reads and writes HDF5 for the whole job, by default (``--io-rate``): what
one H200 node's local disk gave (h5py read and write 3-4 GB/s, ``bench/results/end_to_end_h200_2026-12-01.md``).
A parallel file system is usually faster, a shared NFS slower: give yours."""
MAX_GPUS = 1 << 22
"""More ranks than this are refused: a plan for them would take long and mean little."""


@dataclass
class Prediction:
    """One candidate run: its layout, bytes (exact), memory (the estimate) and predicted times.

    ``seconds`` is the product (one pass); ``total_seconds`` adds start-up, reading A and B and
    writing C. The per-rank bytes are filled for the chosen layout only (:func:`best`)."""

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
    memory_bytes: int           # the largest rank's peak (device memory; host for the CPU)
    memory_room: float          # what one rank may use (a CPU node's RAM is shared by its ranks)
    fits: bool
    startup_seconds: float = 0.0
    certificate_seconds: float = 0.0   # "auto": the certificate's passes and the call's set-up (in seconds)
    read_bytes: int = 0         # A and B from HDF5
    read_seconds: float = 0.0
    write_bytes: int = 0        # C to HDF5
    write_seconds: float = 0.0
    io_rate: float = IO_RATE
    total_seconds: float = 0.0
    bytes_sent: list | None = None        # per rank, as the transports count them
    bytes_received: list | None = None
    nvlink_bytes_max: int | None = None   # per GPU: sent to ranks of its own node
    network_bytes_max: int | None = None  # per GPU: sent to ranks of other nodes

    def to_dict(self) -> dict:
        return asdict(self)


def predict(m: int, n: int, k: int, grid: tuple, device: Device, settings: OzakiSettings, *, kb: int,
            wire: str = "auto", block=(256, 256), per_node: int | None = None, io_rate: float = IO_RATE,
            requested: bool = True, per_rank: bool = True, complex_entries: bool = False) -> Prediction:
    """The model for one layout (see the module docstring). ``wire`` "fp64" / "planes" is
    ``--wire`` given (``requested``), or a wire :func:`best` tries for ``--wire auto``; ``per_rank``:
    also count every rank's bytes (:func:`traffic`); ``complex_entries``: complex128 A, B and C (16
    bytes an entry, the complex plan's products and planes, each entry's two parts split)."""
    p, q = grid
    ranks, per_node = p * q, per_node or device.per_node
    domain = COMPLEX if complex_entries else REAL
    item = 16 if complex_entries else 8
    plan, depth = assumed_plan(settings, k, domain.forms), assumed_depth(settings, k, domain)
    wire, why = _wire(wire, requested, depth, ranks, per_node, device, complex_entries)
    entry, on_arrival = Wire(wire).bytes_per_entry(depth, complex_entries), Wire(wire).split_on_arrival
    # the largest rank (rank 0 holds the most rows and k columns): its time and memory
    rows_a, rows_b = numroc(m, block[0], 0, 0, p), numroc(n, block[1], 0, 0, q)
    ka, kbt = numroc(k, kb, 0, 0, q), numroc(k, kb, 0, 0, p)
    share = max(1.0, min(ranks, per_node) / device.cores) if device.cores else 1.0  # CPU ranks beyond its cores
    pair_ops = device.pair_ops / share * kb / (kb + device.k_half)
    split_rate = device.split_rate / share / (2 if complex_entries else 1)   # a complex entry: two parts
    products = 2.0 * rows_a * rows_b * k * (plan.int8_gemms + depth - plan.planes) / pair_ops   # + the extra planes'
    split_each = (rows_a + rows_b) * k / split_rate if on_arrival else 0.0
    split_front = 0.0 if on_arrival else (rows_a * ka + rows_b * kbt) / split_rate
    link_row = device.network if q > per_node else device.nvlink     # rank 0's process row: ranks 0 .. q-1
    link_col = device.network if (p - 1) * q >= per_node else device.nvlink   # its column: 0, q, .., (p-1) q
    comm = (entry * rows_a * (k - ka) / link_row if q > 1 else 0.0) + \
        (entry * rows_b * (k - kbt) / link_col if p > 1 else 0.0)
    panels = max(1, math.ceil(k / kb))
    compute = products + split_each + panels * device.latency
    if device.overlap:   # panel 0's broadcast is exposed; then each panel costs the longer of its
        # products and the next panel's broadcast; the last panel's products stand alone
        loop = (comm + (panels - 1) * max(compute, comm) + compute) / panels
    else:
        loop = compute + comm
    scales_combine = (2 * item * (rows_a * ka + rows_b * kbt) + (item + 4 * plan.accumulators) * rows_a * rows_b) / device.hbm
    certificate = _certificate_seconds(settings, rows_a * ka + rows_b * kbt, rows_a * rows_b, item, device)
    seconds = split_front + loop + (scales_combine + certificate) * share   # ranks beyond the cores: slower
    exposed = max(0.0, loop - compute)
    estimate = estimate_memory((rows_a, ka), (rows_b, kbt), kb, k, settings, on_device=device.engine != "numpy",
                               wire=wire, complex_entries=complex_entries)
    memory = estimate.device if device.engine != "numpy" else estimate.host
    room = device.memory / (min(ranks, per_node) if device.engine == "numpy" else 1)
    read_bytes, write_bytes = item * (m * k + k * n), item * m * n
    io = (read_bytes + write_bytes) / io_rate
    out = Prediction(grid=(p, q), kb=kb, wire=wire, wire_reason=why, plan=plan.summary(), bytes_per_entry=entry,
                     seconds=seconds, compute_seconds=compute + split_front, comm_seconds=comm,
                     exposed_seconds=exposed, certificate_seconds=certificate * share, hidden=None if comm == 0 else max(0.0, 1 - exposed / comm),
                     tflops_per_gpu=2.0 * m * n * k / seconds / ranks / 1e12, memory_bytes=int(memory),
                     memory_room=room, fits=memory <= room, startup_seconds=device.startup,
                     read_bytes=read_bytes, read_seconds=read_bytes / io_rate, write_bytes=write_bytes,
                     write_seconds=write_bytes / io_rate, io_rate=io_rate,
                     total_seconds=device.startup + io + seconds)
    return traffic(out, m, n, k, block, per_node) if per_rank else out


def _certificate_seconds(settings: OzakiSettings, operand_entries: int, c_entries: int, item: int,
                         device: Device) -> float:
    """What certifying costs one rank beyond its extra int8 product (counted with the products),
    for "auto" settings: the representation errors (a read of the operands), the per-entry verdict
    over C (:data:`~ozhpc.commands.plan_devices.VERDICT_BYTES` per entry) and the call's fixed cost
    (:attr:`Device.call_cost`: the host's plan and round trips)."""
    if not settings.auto:
        return 0.0
    passes = (item * operand_entries + VERDICT_BYTES[item == 16] * c_entries) / device.hbm
    return passes + device.call_cost


def _wire(wire: str, requested: bool, depth: int, ranks: int, per_node: int, device: Device,
          complex_entries: bool = False) -> tuple[str, str]:
    """(wire, why): what ``--wire auto`` picks (:func:`choose_wire`, the run's rule), or ``wire``
    as requested, or ``wire`` as tried for ``--wire auto`` and what auto itself would pick."""
    auto = choose_wire("auto", depth, ranks=ranks, engine=device.engine, one_node=ranks <= per_node,
                       split_rate=device.split_rate, link_rate=device.network if ranks > per_node else device.nvlink,
                       complex=complex_entries)
    pick, why = auto.name, auto.reason[len("auto: "):]
    if wire == "auto" or (not requested and wire == pick):
        return pick, f"--wire auto picks it: {why}"
    if requested:
        return wire, f"--wire {wire} requested"
    return wire, (f"the product is faster with it in this model (split, panel loop and overlap) than with {pick}, "
                  f"which --wire auto picks ({why})")


def traffic(c: Prediction, m: int, n: int, k: int, block, per_node: int) -> Prediction:
    """``c`` with every rank's bytes sent and received (row-major ranks, nodes of ``per_node``
    consecutive ranks), vectorised over the P x Q ranks."""
    (p, q), kb, entry = c.grid, c.kb, c.bytes_per_entry
    i, j = np.arange(p)[:, None], np.arange(q)[None, :]
    rows_a, own_b = _numroc(m, block[0], i, p), _numroc(k, kb, i, p)
    rows_b, own_a = _numroc(n, block[1], j, q), _numroc(k, kb, j, q)
    rank = i * q + j
    lo = rank // per_node * per_node
    hi = lo + per_node
    near_row = np.minimum(hi, (i + 1) * q) - np.maximum(lo, i * q) - 1   # its row: ranks i q .. i q + q - 1
    near_col = (np.minimum(p, -((j - hi) // q)) - np.maximum(0, -((j - lo) // q))) - 1   # its column: i' q + j
    a_out, b_out = entry * rows_a * own_a, entry * rows_b * own_b
    sent = a_out * (q - 1) + b_out * (p - 1)
    received = entry * (rows_a * (k - own_a) + rows_b * (k - own_b))
    nvlink = a_out * near_row + b_out * near_col
    return replace(c, bytes_sent=[int(x) for x in sent.ravel()], bytes_received=[int(x) for x in received.ravel()],
                   nvlink_bytes_max=int(nvlink.max()), network_bytes_max=int((sent - nvlink).max()))


def _numroc(n: int, nb: int, iproc, nprocs: int):
    """:func:`numroc` for an array of process numbers (source process 0)."""
    nblocks = n // nb
    return (nblocks // nprocs) * nb + np.where(iproc < nblocks % nprocs, nb,
                                               np.where(iproc == nblocks % nprocs, n % nb, 0))


def grids(ranks: int) -> list[tuple[int, int]]:
    """Every P x Q = ranks (from the divisors up to the square root)."""
    small = [p for p in range(1, math.isqrt(ranks) + 1) if ranks % p == 0]
    return sorted({(p, ranks // p) for p in small} | {(ranks // p, p) for p in small})


PANELS = (256, 512, 1024, 2048, 4096, 8192)


def best(m: int, n: int, k: int, ranks: int, device: Device, settings: OzakiSettings, *, wire: str = "auto",
         per_node: int | None = None, block=(256, 256), io_rate: float = IO_RATE,
         complex_entries: bool = False) -> tuple[Prediction, list[Prediction]]:
    """The fastest layout that fits (else the one needing the least memory), with its per-rank
    bytes, and every candidate (each grid P x Q = ranks; panel widths of :data:`PANELS` up to
    k / max(P, Q); both wires for "auto"), fastest first."""
    out = []
    for grid in grids(ranks):
        cap = max(16, -(-k // max(grid)) // 16 * 16)
        for kb in sorted({min(w, cap) for w in PANELS}):
            for tried in (("fp64", "planes") if wire == "auto" else (wire,)):
                out.append(predict(m, n, k, grid, device, settings, kb=kb, wire=tried, per_node=per_node,
                                   block=block, io_rate=io_rate, requested=wire != "auto", per_rank=False,
                                   complex_entries=complex_entries))
    out.sort(key=lambda c: (not c.fits, c.seconds if c.fits else c.memory_bytes))
    out[0] = traffic(out[0], m, n, k, block, per_node or device.per_node)
    return out[0], out


def explain(chosen: Prediction, candidates: list[Prediction], unit: str = "GPU") -> list[str]:
    """Why: the runner-up of each kind (another grid, panel width or wire) and what it would cost."""
    lines = []
    for what, other in (("grid", lambda c: c.grid != chosen.grid),
                        ("panel width", lambda c: (c.grid, c.wire) == (chosen.grid, chosen.wire) and c.kb != chosen.kb),
                        ("wire", lambda c: c.grid == chosen.grid and c.kb == chosen.kb and c.wire != chosen.wire)):
        rival = next((c for c in candidates if other(c)), None)
        if rival is None:
            continue
        verdict = (f"would take {rival.seconds / chosen.seconds:.2f}x the time" if rival.fits
                   else f"would not fit ({_gb(rival.memory_bytes)} per {unit})")
        lines.append(f"{what}: {_layout(rival)} {verdict}")
    return lines


def _layout(c: Prediction) -> str:
    return f"grid {c.grid[0]}x{c.grid[1]}, panel {c.kb}, wire {c.wire}"


def _gb(nbytes: float) -> str:
    return f"{_figure(nbytes / 1e9)} GB"


def _s(seconds: float) -> str:
    return f"{_figure(seconds)} s"


def _figure(x: float) -> str:
    """Three significant digits, or the whole number from 1000 on (no exponent)."""
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def report_lines(m, n, k, ranks, device: Device, chosen: Prediction, candidates, rates_path: str = "") -> list[str]:
    """What ``ozhpc plan`` prints: the layout, then each time with what it assumes, the total, the
    bytes, the memory and why."""
    unit, c = device.unit, chosen
    where = (f"{ranks} x {device.name}" if device.engine != "numpy"
             else f"{ranks} rank{'s' if ranks > 1 else ''} ({device.name})")
    io = f"at {c.io_rate / 1e9:.3g} GB/s (--io-rate: the file system's rate for the whole job)"
    room = "" if device.engine != "numpy" else f" (the node's RAM shared by {min(ranks, device.per_node)} rank(s))"
    return [f"C = {m}x{n} (k = {k}) on {where}: {c.plan}",
            f"  best: {_layout(c)} ({c.bytes_per_entry} bytes per entry on the wire): "
            f"ozhpc gemm --grid {c.grid[0]}x{c.grid[1]} --panel {c.kb} --wire {c.wire}",
            f"  product: {_s(c.seconds)}, {c.tflops_per_gpu:.3g} TFLOP/s per {unit} (FP64-equivalent; DGEMM of one "
            f"{unit} {device.dgemm / 1e12:.3g}): one pass of this plan"
            f"{f' with its certificate and the set-up of the call ({_s(c.certificate_seconds)})' if c.certificate_seconds else ''}"
            f", wider passes not counted",
            f"  read A and B: {_s(c.read_seconds)}, {_gb(c.read_bytes)} of HDF5 {io}",
            f"  write C: {_s(c.write_seconds)}, {_gb(c.write_bytes)} of HDF5 at the same rate",
            f"  start-up: {_s(c.startup_seconds)} (one node, warm kernel cache; MPI's start-up on many nodes not counted)",
            f"  predicted time {_s(c.total_seconds)} in all (start-up + read + product + write)",
            f"  bytes sent per {unit}: {_gb(c.nvlink_bytes_max)} over {device.near_link}, "
            f"{_gb(c.network_bytes_max)} over the network (total {_gb(sum(c.bytes_sent))})",
            f"  memory per {unit} {_gb(c.memory_bytes)} of {_gb(c.memory_room)}{room}",
            "  communication hidden: " + ("n/a (nothing moves)" if c.hidden is None else f"{100 * c.hidden:.0f}%"),
            f"  why: wire {c.wire}: {c.wire_reason}"] + [f"  why: {line}" for line in explain(c, candidates, unit)] + \
        [f"  rates: {device.source}; " + (f"recorded in {rates_path}" if device.source.startswith("calibrated")
                                           else f"ozhpc plan --calibrate records this node's in {rates_path}")]


def add_arguments(p) -> None:
    """``ozhpc plan``'s options (argparse)."""
    from ..parallel.wire import WIRE_NAMES

    for name in ("m", "n", "k"):
        p.add_argument(f"--{name}", type=_positive(MAX_EXTENT), required=True, help=f"global {name} of C = op(A) op(B)")
    p.add_argument("--gpus", type=_positive(MAX_GPUS), required=True,
                   help=f"GPUs (MPI ranks, one per GPU; with --gpu cpu: ranks), at most {MAX_GPUS}")
    p.add_argument("--gpu", choices=sorted(DEVICES), default="h200",
                   help="device kind (cpu: the NumPy engine, one rank per core); default h200")
    p.add_argument("--gpus-per-node", type=_positive(MAX_RANKS), help="GPUs per node / NVLink domain (default: 8, "
                                                          "72 for gb200; cpu: all ranks on one node)")
    p.add_argument("--scheme", choices=("ozaki1", "ozaki2"), default=None,
                   help="Ozaki scheme (default ozaki2, as ozhpc gemm; ozaki1 when --slices is given)")
    p.add_argument("--slices", default="auto", help=f"scheme ozaki1: slices, or auto ({TYPICAL_SLICES} assumed)")
    p.add_argument("--bits", default="auto", help=f"scheme ozaki2: bits, or auto ({TYPICAL_BITS} assumed)")
    p.add_argument("--complex", action="store_true",
                   help="complex128 A and B (ZGEMM): 16 bytes an entry and the complex plan's products")
    p.add_argument("--wire", choices=WIRE_NAMES, default="auto", help="panels as fp64 or planes; auto: "
                                                                      "the faster by the model")
    p.add_argument("--io-rate", type=_rate, default=IO_RATE / 1e9, metavar="GB/s",
                   help=f"how fast the file system reads A and B and writes C for the whole job, GB/s (default "
                        f"{IO_RATE / 1e9:g}: one node's local disk; {IO_RATES[0]:g} to {IO_RATES[1]:g})")
    p.add_argument("--calibrate", action="store_true",
                   help="first measure the pair-product and split rates of the device --gpu names on this node "
                        "(a few seconds; --gpu cpu: this node's CPU) and record them for later plans "
                        f"({RATES_FILE} in $XDG_CONFIG_HOME/ozhpc, default ~/.config/ozhpc)")
    p.add_argument("--json", action="store_true", help="print the best layout as JSON")


def _positive(hi: int):
    """An argparse type: an integer from 1 to ``hi`` (the model computes in floats: a bound keeps it
    finite, and a number of thousands of digits is named by its length)."""
    import argparse

    def parse(text) -> int:
        try:
            value = None if digit_count(text) else int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a positive integer, got {shown(text)}") from None
        if value is None or not 1 <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer from 1 to {hi}, got {shown(text)}")
        return value
    parse.__name__ = "integer"
    return parse


IO_RATES = (1e-6, 1e6)
"""The --io-rate range in GB/s (1 kB/s to 1 PB/s): beyond it the times and the JSON are no longer finite."""


def _rate(text) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of GB/s, got {text!r}")
    if not IO_RATES[0] <= value <= IO_RATES[1]:
        raise argparse.ArgumentTypeError(f"must be from {IO_RATES[0]:g} to {IO_RATES[1]:g} GB/s, got {text!r}")
    return value


def main(args) -> int:
    """``ozhpc plan``: print the best layout and why (or JSON); 0, or InputError (exit 2) when no
    layout fits."""
    from ..errors import OptionError, cli_spelling

    try:
        settings = OzakiSettings(args.scheme, args.slices, "auto", args.bits)
    except OptionError as exc:
        raise InputError(str(exc.spelled(cli_spelling))) from None
    path = rates_path()
    if args.calibrate:
        rates, path = calibrate(args.gpu, path=path)
        print(f"calibrated {args.gpu} on {rates['host']}: {rates['pair_ops'] / 1e12:.3g} T pair ops/s, "
              f"{rates['split_rate'] / 1e9:.3g} G entries/s split; recorded in {path}",
              file=sys.stderr if args.json else sys.stdout)   # --json: stdout is the JSON alone
    device = device_for(args.gpu, load_calibration(path, _warn), settings.scheme)
    chosen, candidates = best(args.m, args.n, args.k, args.gpus, device, settings, wire=args.wire,
                              per_node=args.gpus_per_node, io_rate=args.io_rate * 1e9,
                              complex_entries=args.complex)
    if not chosen.fits:
        unit = device.unit
        raise InputError(f"no layout of {'complex ' if args.complex else ''}C = {args.m}x{args.n} (k = {args.k}) fits {args.gpus} {unit}(s) "
                         f"({device.name}): the smallest needs {_gb(chosen.memory_bytes)} per {unit}, "
                         f"{_gb(chosen.memory_room)} available; " + (
                             "the ranks share one node's RAM: spread them over nodes (--gpus-per-node), or plan "
                             "a smaller product" if device.engine == "numpy" and args.gpus_per_node is None
                             else f"use more {unit}s"))
    if args.json:
        out = chosen.to_dict()
        out.update(device=device.name, rates=device.source, rates_file=path, why=explain(chosen, candidates),
                   bytes_sent_total=sum(chosen.bytes_sent))
        print(json.dumps(out, indent=1, allow_nan=False))
    else:
        print("\n".join(report_lines(args.m, args.n, args.k, args.gpus, device, chosen, candidates, path)))
    return 0


def _warn(message: str) -> None:
    print(f"ozhpc plan: warning: {message}", file=sys.stderr)
