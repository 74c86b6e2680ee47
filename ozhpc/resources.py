"""Memory and disk a run needs, checked before any allocation or compute.

The memory model is deliberately small (one function, :func:`rank_bytes`) so that a fuller
one (slices, panels, GPU memory) can replace it; it only has to catch the runs that cannot
possibly fit, e.g. a dataset that declares a huge shape, before every rank tries to allocate.
"""
from __future__ import annotations

import math
import os

from .errors import InputError

WORK_FACTOR = 4
"""Working memory per rank as a multiple of its FP64 blocks of op(A), op(B)^T and C (int8
slices or residues of both operands, panels in flight, the FP64 accumulator)."""
DISK_SLACK = 1 << 20  # HDF5 metadata and rounding, bytes


def rank_bytes(m: int, n: int, k: int, dims: tuple[int, int]) -> int:
    """Rough peak bytes of one rank of a P x Q grid (its share of op(A), op(B)^T and C)."""
    p, q = dims
    local = (math.ceil(m / p) * math.ceil(k / q) + math.ceil(n / q) * math.ceil(k / p)
             + math.ceil(m / p) * math.ceil(n / q))
    return WORK_FACTOR * 8 * local


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


def check_memory(m: int, n: int, k: int, dims: tuple[int, int], ranks_here: int) -> None:
    """Refuse a product whose per-rank estimate times the ranks on this node exceeds free memory."""
    free = available_memory()
    need = rank_bytes(m, n, k, dims)
    if free is not None and need * ranks_here > free:
        raise InputError(f"not enough memory for a {m}x{k} by {k}x{n} product on a {dims[0]}x{dims[1]} grid: "
                         f"about {_gib(need)} per rank x {ranks_here} rank(s) on this node, {_gib(free)} "
                         "available; use more nodes or a smaller problem")


def check_matrix_fits(m: int, n: int) -> None:
    """One process builds a whole m x n float64 matrix (``ozhpc gen``): about three copies at peak."""
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
