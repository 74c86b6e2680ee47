"""Memory and disk a run needs, checked before any allocation or compute.

:func:`estimate_memory` models one rank's peak from its local shapes and the plan, so a job
that cannot fit (or a dataset that declares a huge shape) fails before any rank allocates, and
``ozhpc gemm --dry-run`` can state the figure before a job is submitted.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import InputError

BASE_BYTES = 64 << 20
"""Python, NumPy, h5py and mpi4py loaded, before any matrix (measured 63 MiB on 2026-12-02, the
package importing its modules as it needs them; 60-95 MiB before)."""
DISK_SLACK = 1 << 20  # HDF5 metadata and rounding, bytes
PACK_K = 4096  # the NumPy engine's k chunk of its BLAS products


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes of one rank: on the host and (GPU engines) on the device, and the plan assumed."""

    host: int
    device: int
    planes: int
    note: str

    def describe(self) -> str:
        device = f", device {_gib(self.device)}" if self.device else ""
        return f"peak per rank: host {_gib(self.host)}{device} ({self.note})"


def estimate_memory(local_a: tuple[int, int], local_bt: tuple[int, int], kb: int, k: int, settings, *,
                    on_device: bool = False, with_c: bool = False, wire="planes",
                    complex_entries: bool = False) -> MemoryEstimate:
    """Peak memory of one rank's product, from its local shapes (op(A): m x kA, op(B)^T: n x kB).

    Host, NumPy engine: the FP64 operands, their int8 planes, two panels in flight per operand,
    the FP64 accumulators (one m x n plane per group or modulus) and the temporaries of the
    panel products (each panel's planes as FP64 and a few m x n products) or of the combine,
    whichever is larger. With ``wire="fp64"`` (a :class:`~ozhpc.parallel.wire.Wire` or its name:
    panels travel as FP64, split on arrival) there are
    no whole-operand planes: two FP64 panels in flight per operand and the planes of the panel
    being multiplied (with the split's own output). A GPU engine keeps the planes, panels and (narrower) accumulators on
    the device and only the operands and C on the host. ``complex_entries``: complex128 operands and C
    (16 bytes an entry), the complex plan's planes (two or three per modulus), two certificate digit
    planes per operand (one per part) and three groups of their sums; on a device the largest of its
    phases (:func:`_complex_device_bytes`). ``bench/results/memory_cpu_2026-12-01.md`` compares it with the measured peak.
    """
    from ..ozaki.domain import COMPLEX, REAL
    from ..ozaki.plan import assumed_plan
    from ..parallel.wire import as_wire

    domain = COMPLEX if complex_entries else REAL
    item = 16 if domain.complex else 8
    (m, ka), (n, kbt) = local_a, local_bt
    plan = assumed_plan(settings, k, domain.forms)
    planes, acc_planes = plan.planes, plan.accumulators
    note = plan.summary() + (", assumed for auto" if settings.auto else "")
    a, b, c = m * ka, n * kbt, m * n
    w = max(1, min(kb, k))
    operands = item * (a + b) + (item * c if with_c else 0)
    if as_wire(wire).split_on_arrival:
        split, a_planes, b_planes = 2 * item * (m + n) * w + 2 * planes * (m + n) * w, 0, 0
    else:
        split, a_planes, b_planes = planes * (a + b) + 2 * planes * (m + n) * w, a, b
    certified = _certificate_bytes(a_planes, b_planes, c, m + n, w, domain.digit_planes) if settings.auto else 0
    if on_device and domain.complex:
        device = _complex_device_bytes(operands, split, acc_planes, c, a_planes + b_planes, settings.auto)
        return MemoryEstimate(BASE_BYTES + operands + 2 * item * c, device, planes, note)
    if on_device:
        device = operands + split + acc_planes * 4 * c + 3 * item * c + certified
        return MemoryEstimate(BASE_BYTES + operands + 2 * item * c, device, planes, note)
    accumulate = split + 8 * acc_planes * c + plan.host_work_bytes(m, n, min(w, PACK_K))
    combine = 8 * acc_planes * c + 5 * item * c
    return MemoryEstimate(BASE_BYTES + operands + max(accumulate, combine) + certified, 0, planes, note)


def _complex_device_bytes(operands: int, split: int, residues: int, c: int, digit_entries: int, auto: bool) -> int:
    """A complex product's device peak: the largest of its three phases, each counted from the arrays it
    holds (operands: complex128 rows; ``split``: planes and panels; one int8 residue plane per product;
    C as float64 pairs; under "auto" the parts' two magnitude digit planes per entry and their
    products' three int32 groups, then each component's float64 sums for the verdicts):
    the panel loop (planes, panels, residues, digit sums), the combine (residues and C), the
    certificate (C, digit sums, component sums)."""
    groups, digits, components = (12 * c, 2 * digit_entries, 16 * c) if auto else (0, 0, 0)
    loop = operands + split + residues * c + groups + digits
    combine = operands + residues * c + 16 * c + groups
    certificate = operands + 16 * c + groups + components
    return max(loop, combine, certificate)


def _certificate_bytes(a: int, b: int, c: int, rows: int, w: int, parts: int = 1) -> int:
    """What certified "auto" adds: the FP64 sums of the magnitude digits' products, with the digits
    (one int8 plane per operand and per panel; ``parts`` 2, complex: one per part, their products
    in three groups, each component's sums FP64) while the products run, or the verdict (one byte per
    entry of C) and the row chunks of the check (``certificate.CERTIFY_CHUNK`` entries, about
    six FP64 temporaries live at once) after. Not counted: the equilibrated copy of both
    operands that a pass made after a failed one holds (8 bytes per operand entry; rare inputs,
    e.g. compensated column scalings)."""
    from ..ozaki.certificate import CERTIFY_CHUNK

    sums = 8 * c * (2 * parts - 1) + (2 * 8 * c if parts > 1 else 0)
    return sums + max(parts * ((a + b) + 2 * rows * w), c + 6 * 8 * min(c, CERTIFY_CHUNK))


UNLIMITED = 1 << 60
"""Limits at or above this (cgroup v1's "no limit" is 2^63 rounded to pages) are none."""


@dataclass(frozen=True)
class MemoryLimit:
    """Bytes that can still be allocated under one limit, and whether the ranks of a node share it."""

    name: str
    free: int
    per_node: bool


@dataclass(frozen=True)
class MemorySources:
    """Where the limits are read: ``root`` holds ``proc`` and ``sys/fs/cgroup`` (tests fake them),
    ``environ`` the Slurm variables, ``getrlimit`` this process's rlimits."""

    root: str = "/"
    environ: dict | None = None
    getrlimit: object = None

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *(p.lstrip("/") for p in parts))

    def read(self, *parts: str) -> str | None:
        try:
            with open(self.path(*parts)) as f:
                return f.read()
        except OSError:
            return None


def memory_limits(sources: MemorySources | None = None) -> list[MemoryLimit]:
    """Every limit on this rank's host memory that applies here: the node's MemAvailable, the
    rank's ``ulimit -v`` / ``-d`` (RLIMIT_AS / RLIMIT_DATA) less what it maps now, the
    ``memory.max`` (cgroup v2) or ``memory.limit_in_bytes`` (v1) of its cgroup and every
    ancestor less their use (without reclaimable page cache), and Slurm's ``--mem`` /
    ``--mem-per-cpu`` of the job on this node."""
    src = sources or MemorySources()
    environ = os.environ if src.environ is None else src.environ
    return [*_meminfo(src), *_rlimits(src), *_cgroups(src), *_slurm(environ)]


def _meminfo(src: MemorySources) -> list[MemoryLimit]:
    for line in (src.read("proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return [MemoryLimit("the node's available memory (MemAvailable)", int(line.split()[1]) * 1024, True)]
            except (ValueError, IndexError):
                break
    return []


def _status(src: MemorySources, key: str) -> int:
    for line in (src.read("proc/self/status") or "").splitlines():
        if line.startswith(key + ":"):
            try:
                return int(line.split()[1]) * 1024
            except (ValueError, IndexError):
                break
    return 0


def _rlimits(src: MemorySources) -> list[MemoryLimit]:
    import resource

    getrlimit = src.getrlimit or resource.getrlimit
    out = []
    for which, option, used in ((resource.RLIMIT_AS, "ulimit -v (RLIMIT_AS)", "VmSize"),
                                (resource.RLIMIT_DATA, "ulimit -d (RLIMIT_DATA)", "VmData")):
        soft, _ = getrlimit(which)
        if soft != resource.RLIM_INFINITY and 0 <= soft < UNLIMITED:
            out.append(MemoryLimit(f"{option} of {_gib(soft)}", max(0, soft - _status(src, used)), False))
    return out


def _number(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None  # "max"


def _stat(text: str | None, key: str) -> int:
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _number(value) or 0
    return 0


def _cgroups(src: MemorySources) -> list[MemoryLimit]:
    """cgroup v2 (``0::/path``) and v1 (``N:...memory...:/path``) limits of this process's cgroup
    and its ancestors, each less the cgroup's use without its inactive page cache."""
    out = []
    for line in (src.read("proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and not parts[1]:
            mount, files = "sys/fs/cgroup", ("memory.max", "memory.current", "inactive_file")
        elif "memory" in parts[1].split(","):
            mount, files = "sys/fs/cgroup/memory", ("memory.limit_in_bytes", "memory.usage_in_bytes",
                                                    "total_inactive_file")
        else:
            continue
        out += _cgroup_chain(src, mount, parts[2], files)
    return out


def _cgroup_chain(src: MemorySources, mount: str, path: str, files) -> list[MemoryLimit]:
    limit_file, usage_file, inactive = files
    components = [c for c in path.split("/") if c]
    # In a container the mount shows only the container's own subtree: drop leading components
    # until the directory exists (what the JVM and cgroup-aware runtimes do).
    while components and not os.path.isdir(src.path(mount, *components)):
        components.pop(0)
    out = []
    for depth in range(len(components), -1, -1):
        rel = os.path.join(mount, *components[:depth])
        limit = _number(src.read(rel, limit_file))
        if limit is None or limit >= UNLIMITED:
            continue
        used = (_number(src.read(rel, usage_file)) or 0) - _stat(src.read(rel, "memory.stat"), inactive)
        out.append(MemoryLimit(f"the cgroup limit {limit_file} of {_gib(limit)} "
                               f"({'/' + '/'.join(components[:depth])})", max(0, limit - max(0, used)), True))
    return out


def _slurm(environ) -> list[MemoryLimit]:
    """``--mem`` (per node) or ``--mem-per-cpu`` times the job's CPUs on this node, in MiB."""
    mib = 1 << 20
    per_node = _number(environ.get("SLURM_MEM_PER_NODE"))
    if per_node:
        return [MemoryLimit(f"Slurm's --mem={per_node}M (SLURM_MEM_PER_NODE)", per_node * mib, True)]
    per_cpu = _number(environ.get("SLURM_MEM_PER_CPU"))
    if not per_cpu:
        return []
    cpus = _number(environ.get("SLURM_CPUS_ON_NODE"))
    if cpus:
        return [MemoryLimit(f"Slurm's --mem-per-cpu={per_cpu}M x {cpus} CPUs on this node "
                            "(SLURM_MEM_PER_CPU, SLURM_CPUS_ON_NODE)", per_cpu * cpus * mib, True)]
    per_task = _number(environ.get("SLURM_CPUS_PER_TASK")) or 1
    return [MemoryLimit(f"Slurm's --mem-per-cpu={per_cpu}M x {per_task} CPU(s) per task (SLURM_MEM_PER_CPU)",
                        per_cpu * per_task * mib, False)]


def binding_limit(need_per_rank: int, ranks_here: int, sources: MemorySources | None = None):
    """The limit with the least room per rank (a node's limit is shared by ``ranks_here`` ranks)
    when ``need_per_rank`` bytes exceed it, else None."""
    def room(limit):
        return limit.free // (ranks_here if limit.per_node else 1)
    limits = memory_limits(sources)
    if not limits:
        return None
    tightest = min(limits, key=room)
    return tightest if need_per_rank > room(tightest) else None


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def _under(limit: MemoryLimit, ranks_here: int) -> str:
    ranks = f" x {ranks_here} rank(s) on this node" if limit.per_node else ""
    return f"{ranks}, {_gib(limit.free)} available under {limit.name}"


def check_memory(estimate: MemoryEstimate, ranks_here: int, device_free: int | None = None,
                 sources: MemorySources | None = None) -> None:
    """Refuse a product whose per-rank host estimate exceeds the tightest memory limit here
    (:func:`memory_limits`; a node's limit holds ``ranks_here`` such ranks), or whose device
    estimate exceeds the GPU's free memory."""
    limit = binding_limit(estimate.host, ranks_here, sources)
    if limit is not None:
        raise InputError(f"not enough memory: {estimate.describe()}{_under(limit, ranks_here)}; "
                         "use more ranks or nodes, or a smaller problem")
    if device_free is not None and estimate.device > device_free:
        raise InputError(f"not enough GPU memory: {estimate.describe()}, {_gib(device_free)} free on the "
                         "GPU; use more ranks (GPUs), or a smaller problem")


def check_matrix_fits(m: int, n: int, ranks_here: int = 1, sources: MemorySources | None = None,
                      itemsize: int = 8) -> None:
    """A rank of ``ozhpc gen`` builds its m x n float64 (``itemsize`` 16: complex128) rows: about
    three copies at peak."""
    need = BASE_BYTES + 3 * itemsize * m * n
    limit = binding_limit(need, ranks_here, sources)
    if limit is not None:
        raise InputError(f"not enough memory for a {m}x{n} matrix: about {_gib(need)} needed"
                         f"{_under(limit, ranks_here)}")


def check_disk(path: str, m: int, n: int, reclaim: int = 0, itemsize: int = 8) -> None:
    """Refuse an output file whose file system cannot hold an m x n float64 (``itemsize`` 16:
    complex128) dataset more (``reclaim``: bytes that will be free by then, on top of what the file
    system says)."""
    directory = os.path.dirname(os.path.realpath(path))
    try:
        st = os.statvfs(directory)
    except OSError:
        return  # the output checks say what is wrong with the directory
    free, need = st.f_bavail * st.f_frsize + reclaim, itemsize * m * n + DISK_SLACK
    if need > free:
        raise InputError(f"not enough disk space for output file {path!r}: C needs {_gib(need)}, "
                         f"{directory!r} has {_gib(free)} free")


MPI_SHM_BYTES = 8 << 20
MPI_SHM_BYTES_PER_RANK = 2 << 20
"""What MPI writes into its shared-memory files in /dev/shm at MPI_Init, which ``ulimit -f`` limits
like any file: at least MPI_SHM_BYTES per process, and MPI_SHM_BYTES_PER_RANK per rank of the node
for the node's segment (about twice what MPICH 5 with UCX was measured to need: 4.1 MiB per process,
1.01 MiB per rank of the node). Below it MPI_Init aborts the job with a page of its own errors."""
LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")
"""The number of ranks on this node, as the launchers (Hydra, Open MPI, srun) give it."""


def check_mpi_file_size(environ=None) -> None:
    """Refuse, before MPI starts, a file size limit (``ulimit -f``, RLIMIT_FSIZE) too low for it."""
    import resource

    env = os.environ if environ is None else environ
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    ranks = next((int(env[name]) for name in LOCAL_SIZE_VARS if env.get(name, "").isdigit()), 1)
    need = max(MPI_SHM_BYTES, MPI_SHM_BYTES_PER_RANK * ranks)
    if soft != resource.RLIM_INFINITY and soft < need:
        raise InputError(f"the file size limit (ulimit -f) of {soft} bytes is too low for MPI's shared memory, "
                         f"files in /dev/shm ({ranks} {'rank' if ranks == 1 else 'ranks'} on this node): allow at "
                         f"least {need >> 20} MiB (ulimit -f {need >> 10}) or no limit")
