"""Memory and disk a run needs, checked before any allocation or compute.

:func:`estimate_memory` models one rank's peak from its local shapes and the plan, so a job
that cannot fit (or a dataset that declares a huge shape) fails before any rank allocates, and
``ozhpc gemm --dry-run`` can state the figure before a job is submitted.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import InputError

BASE_BYTES = 80 << 20
"""Python, NumPy, h5py and mpi4py loaded, before any matrix (measured 60-95 MiB)."""
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
                    on_device: bool = False, with_c: bool = False, wire: str = "planes") -> MemoryEstimate:
    """Peak memory of one rank's product, from its local shapes (op(A): m x kA, op(B)^T: n x kB).

    Host, NumPy engine: the FP64 operands, their int8 planes, two panels in flight per operand,
    the FP64 accumulators (one m x n plane per group or modulus) and the temporaries of the
    panel products (each panel's planes as FP64 and a few m x n products) or of the combine,
    whichever is larger. With ``wire="fp64"`` (panels travel as FP64, split on arrival) there are
    no whole-operand planes: two FP64 panels in flight per operand and the planes of the panel
    being multiplied (with the split's own output). A GPU engine keeps the planes, panels and (narrower) accumulators on
    the device and only the operands and C on the host. ``bench/results/memory_cpu_2026-12-01.md``
    compares it with the measured peak.
    """
    from .ozaki.plan import resolve_plan

    (m, ka), (n, kbt) = local_a, local_bt
    plan = resolve_plan(settings.typical(), 0, k)
    planes, acc_planes = plan.planes, plan.accumulators
    note = plan.summary() + (", assumed for auto" if settings.auto else "")
    a, b, c = m * ka, n * kbt, m * n
    w = max(1, min(kb, k))
    operands = 8 * (a + b) + (8 * c if with_c else 0)
    if wire == "fp64":
        split, a_planes, b_planes = 2 * 8 * (m + n) * w + 2 * planes * (m + n) * w, 0, 0
    else:
        split, a_planes, b_planes = planes * (a + b) + 2 * planes * (m + n) * w, a, b
    certified = _certificate_bytes(a_planes, b_planes, c, m + n, w) if settings.auto else 0
    if on_device:
        device = operands + split + acc_planes * 4 * c + 3 * 8 * c + certified
        return MemoryEstimate(BASE_BYTES + operands + 2 * 8 * c, device, planes, note)
    accumulate = split + 8 * acc_planes * c + plan.host_work_bytes(m, n, min(w, PACK_K))
    combine = 8 * acc_planes * c + 5 * 8 * c
    return MemoryEstimate(BASE_BYTES + operands + max(accumulate, combine) + certified, 0, planes, note)


def _certificate_bytes(a: int, b: int, c: int, rows: int, w: int) -> int:
    """What certified "auto" adds: the FP64 sums of the magnitude digits' products, with the digits
    (one int8 plane per operand and per panel) while the products run, or the verdict (one byte per
    entry of C) and the row chunks of the check (``certificate.CERTIFY_CHUNK`` entries, about
    six FP64 temporaries live at once) after. Not counted: the equilibrated copy of both
    operands that a pass made after a failed one holds (8 bytes per operand entry; rare inputs,
    e.g. compensated column scalings)."""
    from .ozaki.certificate import CERTIFY_CHUNK

    return 8 * c + max((a + b) + 2 * rows * w, c + 6 * 8 * min(c, CERTIFY_CHUNK))


def available_memory() -> int | None:
    """Bytes the kernel says can be allocated now (MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def check_memory(estimate: MemoryEstimate, ranks_here: int, device_free: int | None = None) -> None:
    """Refuse a product whose per-rank estimate times the ranks on this node exceeds free host
    memory, or whose device estimate exceeds the GPU's free memory."""
    free = available_memory()
    if free is not None and estimate.host * ranks_here > free:
        raise InputError(f"not enough memory: {estimate.describe()} x {ranks_here} rank(s) on this node, "
                         f"{_gib(free)} available; use more ranks or nodes, or a smaller problem")
    if device_free is not None and estimate.device > device_free:
        raise InputError(f"not enough GPU memory: {estimate.describe()}, {_gib(device_free)} free on the "
                         "GPU; use more ranks (GPUs), or a smaller problem")


def check_matrix_fits(m: int, n: int) -> None:
    """A rank of ``ozhpc gen`` builds its m x n float64 rows: about three copies at peak."""
    free, need = available_memory(), 3 * 8 * m * n
    if free is not None and need > free:
        raise InputError(f"not enough memory for a {m}x{n} matrix: about {_gib(need)} needed, "
                         f"{_gib(free)} available")


def check_disk(path: str, m: int, n: int) -> None:
    """Refuse an output file whose file system cannot hold an m x n float64 dataset more."""
    directory = os.path.dirname(os.path.realpath(path))
    try:
        st = os.statvfs(directory)
    except OSError:
        return  # the output checks say what is wrong with the directory
    free, need = st.f_bavail * st.f_frsize, 8 * m * n + DISK_SLACK
    if need > free:
        raise InputError(f"not enough disk space for output file {path!r}: C needs {_gib(need)}, "
                         f"{directory!r} has {_gib(free)} free")
