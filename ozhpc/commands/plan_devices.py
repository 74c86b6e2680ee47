"""The devices ``ozhpc plan`` knows: what each does per second (:data:`DEVICES`, sources in
``docs/planning.md``), replaced by this node's own rates where ``ozhpc plan --calibrate``
measured them (:func:`calibrate`) and recorded them in :data:`RATES_FILE` in the config directory
(:func:`ozhpc.run.private_files.config_dir`, written and read only where no other user could have
changed it). The model that turns rates into times is :mod:`ozhpc.commands.plan`."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError
from ..ozaki.settings import OzakiSettings
from ..parallel.wire import LINK_RATE, SPLIT_RATE
from ..run.private_files import config_dir, read_private, write_private

RATES_FILE = "planner_rates.json"
GPU_STARTUP, CPU_STARTUP = 2.5, 0.5
"""Seconds from the launch of one node's processes to the first read, with a warm kernel cache: on
one H200, 1.2-1.5 s in the report's ``startup`` plus about 1 s of Python before its clock
(``bench/results/end_to_end_h200_2026-12-01.md``); on a CPU, 0.5 s wall for a small product (NumPy
engine, one rank). MPI's own start-up on many nodes is not included."""
GPU_CALL_COST, CPU_CALL_COST = 2.0e-3, 1.4e-3
"""Seconds one certified product costs beyond the work the model counts (the host's plan, the
statistics' copy to the host, the launches of its few dozen small kernels): on one H200 a default
call at n = 2048 took 2.11-3.06 ms, 1.5-2.5 ms more than the model's kernels
(``bench/results/accept_h200_2026-12-04.md``, "Evening state"); Blackwell is assumed the same
(host work). On a CPU, 1.4 ms per call at n = 16 (NumPy engine, one rank, the 2-core VM)."""
VERDICT_BYTES = {False: 48, True: 117}
"""The certificate's per-entry pass over C, as bytes of C at the memory's rate (real, complex): on
one H200 it takes 3.07 ms (real) and 7.5 ms (both components of a complex C) at n = 16384, about
48 and 117 bytes per entry at 4.19 TB/s: instruction-bound, so counted as that many bytes
(``bench/results/certificate_kernels_h200_2026-12-04.md``)."""


@dataclass(frozen=True)
class Device:
    """What one GPU (or one CPU rank of the NumPy engine) does per second, and what it holds."""

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
    startup: float = GPU_STARTUP   # seconds from the launch to the first read (one node)
    call_cost: float = GPU_CALL_COST   # seconds a certified product costs beyond its kernels' work
    source: str = ""

    @property
    def unit(self) -> str:
        """What one rank runs on, in the output: "GPU", or "rank" for the CPU."""
        return "rank" if self.engine == "numpy" else "GPU"

    @property
    def near_link(self) -> str:
        """The link inside a node."""
        return "shared memory" if self.engine == "numpy" else "NVLink"


H200_INT8_PEAK, H200_FP64_PEAK = 1.979e15, 67e12
H200_PAIR_OPS = 1.25e15
"""Scheme II's products on the H200 (15 moduli, whole k, every modulus of a launch in one grid):
1.27 / 1.24 POP/s at n = 16384 / 32768 (bench/results/hw_speed_h200_2026-12-04.md)."""
PAIR_EFFICIENCY, DGEMM_EFFICIENCY = H200_PAIR_OPS / H200_INT8_PEAK, 56e12 / H200_FP64_PEAK
"""What the pair kernel and cuBLAS reach of the H200's dense peaks (measured); Blackwell is assumed
to reach the same fractions of its datasheet peaks."""

DEVICES = {
    "h200": Device("NVIDIA H200 SXM", "cutile", H200_PAIR_OPS, 56e12, SPLIT_RATE["cutile"], 4.19e12, 140e9,
                   LINK_RATE[("cutile", True)], LINK_RATE[("cutile", False)], 8, True, 256, 50e-6,
                   source="measured here: bench/results/hw_speed_h200_2026-12-04.md, gpu_gemm_h200_2026-12-01_*.md, "
                          "multi_gpu_h200x2_*.md"),
    "b200": Device("NVIDIA B200 (HGX, 1000 W)", "cutile", PAIR_EFFICIENCY * 4.5e15, DGEMM_EFFICIENCY * 40e12,
                   SPLIT_RATE["cutile"] * 8.0 / 4.19, 8.0e12, 180e9, 900e9, 50e9, 8, True, 256, 50e-6,
                   source="NVIDIA HGX B200 datasheet (dense INT8 4.5 POPS, FP64 40 TFLOPS, 180 GB, 8 TB/s, "
                          "NVLink 5 1.8 TB/s) at the H200's measured efficiencies"),
    "gb200": Device("NVIDIA GB200 NVL72 (per GPU, 1200 W)", "cutile", PAIR_EFFICIENCY * 5.0e15,
                    DGEMM_EFFICIENCY * 45e12, SPLIT_RATE["cutile"] * 8.0 / 4.19, 8.0e12, 186e9, 900e9, 50e9,
                    72, True, 256, 50e-6,
                    source="NVIDIA GB200 NVL72 datasheet (dense INT8 5 POPS, FP64 45 TFLOPS, 186 GB, 8 TB/s, "
                           "one NVLink domain of 72 GPUs) at the H200's measured efficiencies"),
    "cpu": Device("CPU, NumPy engine", "numpy", 1.1e11, 6.3e10, SPLIT_RATE["numpy"], 1.0e10,
                  float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) if hasattr(os, "sysconf") else 8e9,
                  LINK_RATE[("numpy", True)], LINK_RATE[("numpy", False)], 1 << 20, False, 64, 1e-3,
                  cores=os.cpu_count() or 1, startup=CPU_STARTUP, call_cost=CPU_CALL_COST,
                  source="one BLAS thread of a 2-core VM (AMD EPYC) (bench/results/cpu_speed_2026-12-05.md, "
                         "bench/results/dist_cpu_2026-11-30.md)"),
}


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


def rates_path(environ=os.environ) -> str:
    """Where ``--calibrate`` records its rates: :data:`RATES_FILE` in the config directory."""
    return os.path.join(config_dir(environ), RATES_FILE)


def read_rates(path: str) -> dict:
    """The rates recorded in ``path`` ({} when there is no such file); raises :class:`InputError`
    with one line for a file another user could have written or that is not a rates file."""
    data = read_private(path)
    if data is None:
        return {}
    try:
        rates = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"{path} is not a rates file (not JSON: {str(exc).splitlines()[0][:80]})") from None
    bad = _rates_problem(rates)
    if bad:
        raise InputError(f"{path} is not a rates file ({bad})")
    return rates


RATE_KEYS = ("pair_ops", "split_rate")
RATE_RANGE = (1.0, 1e30)
"""The per-second rates a rates file may hold: beyond them no device, and the times the model
derives would no longer be finite."""


def _rates_problem(rates) -> str | None:
    """What is wrong with a rates file's content, or None: {device: {pair_ops, split_rate: numbers
    in RATE_RANGE, by_scheme: {scheme: the same}, and text fields}}."""
    if not isinstance(rates, dict):
        return "not a JSON object"
    for key, entry in rates.items():
        if key not in DEVICES or not isinstance(entry, dict):
            return f"entry {str(key)[:40]!r} is not a device of --gpu"
        parts = [("", entry)] + [(f".by_scheme.{s}", e) for s, e in (entry.get("by_scheme") or {}).items()]
        if not isinstance(entry.get("by_scheme", {}), dict):
            return f"{key}.by_scheme is not an object"
        for where, part in parts:
            for name in RATE_KEYS:
                value = part.get(name) if isinstance(part, dict) else None
                if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                        not RATE_RANGE[0] <= value <= RATE_RANGE[1]:
                    return f"{key}{where}.{name} is not a rate from {RATE_RANGE[0]:g} to {RATE_RANGE[1]:g} per second"
        if not all(isinstance(entry.get(name, ""), str) for name in ("host", "date", "engine")):
            return f"{key}: host, date and engine must be text"
    return None


def load_calibration(path: str, warn=None) -> dict:
    """The rates ``ozhpc plan --calibrate`` recorded ({} when none); a file that cannot be believed
    is ignored with one line through ``warn``."""
    try:
        return read_rates(path)
    except InputError as exc:
        if warn:
            warn(f"ignoring the rates file: {exc}; the table's rates are used")
        return {}


def calibrate(gpu: str, n: int | None = None, path: str | None = None) -> tuple[dict, str]:
    """Measure the pair-product and split rates of the device ``gpu`` names on this node (one
    short product per scheme) and record them; returns (rates, the file). Refuses, before any
    compute, a ``gpu`` this node does not have, and a rates file it cannot trust."""
    import socket

    from ..parallel.mpi import MPI

    from ..parallel import ProcessGrid, Summa
    from ..run.matrices import standard_matrix

    path = path or rates_path()
    try:
        saved = read_rates(path)   # an untrusted directory or a foreign file: refused, not overwritten
    except InputError as exc:
        raise InputError(f"--calibrate records nothing: {exc}; use a directory and file only you can write "
                         "(move the file away)") from None
    engine = _engine_of(gpu)
    n = n or (8192 if engine.on_device else 768)
    a, b = standard_matrix(n, n, 0.5, 1), standard_matrix(n, n, 0.5, 2)
    rates = {}
    for scheme in ("ozaki1", "ozaki2"):
        settings = OzakiSettings(scheme).typical()
        with ProcessGrid(MPI.COMM_SELF) as grid, Summa(grid, n, n, n, block=256, kb=n, engine=engine,
                                                       settings=settings, wire="planes") as summa:
            da, dbt, _ = summa.distribute(a, b)
            summa(da, dbt)     # warm-up (kernels, allocations)
            summa(da, dbt)
            s, pairs = summa.info.seconds, summa.info.int8_gemms
        rates[scheme] = {"pair_ops": 2.0 * n**3 * pairs / s["compute"], "split_rate": 2.0 * n * n / s["split"]}
    entry = {"pair_ops": float(np.mean([r["pair_ops"] for r in rates.values()])),
             "split_rate": float(np.mean([r["split_rate"] for r in rates.values()])), "by_scheme": rates,
             "n": n, "engine": engine.name, "host": socket.gethostname(),
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    saved[gpu] = entry
    write_private(path, json.dumps(saved, indent=1).encode())
    return entry, path


def _engine_of(gpu: str):
    """The engine that runs ``gpu`` here: NumPy for "cpu", else the cuTile engine on that GPU."""
    from ..engines import EngineUnavailable, get_engine

    if gpu == "cpu":
        return get_engine("numpy")
    try:
        engine = get_engine("cutile")
    except EngineUnavailable as exc:
        reason = str(exc).split(" available: ", 1)[-1].split(". ")[0]
        raise InputError(f"--calibrate --gpu {gpu} measures an {DEVICES[gpu].name} on this node, and this node "
                         f"has none the cuTile engine can run ({reason}); calibrate on such a node, or give "
                         "--gpu cpu to calibrate this node's CPU") from None
    name = engine.describe().get("device", "")
    if gpu not in name.lower().replace("-", "").split():
        raise InputError(f"--calibrate --gpu {gpu} measures an {DEVICES[gpu].name}, but this node's GPU is "
                         f"{name or 'unknown'}; give the --gpu it has, or calibrate on such a node")
    return engine
