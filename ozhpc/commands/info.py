"""``ozhpc info``: versions, engines, the MPI library, ranks per node, GPUs and transports usable here.

Collective under MPI (an allgather of host names and GPU counts): every rank runs it."""
from __future__ import annotations

import platform
import socket
import warnings

import numpy as np

from .. import __version__
from . import world


def info_lines(comm=None) -> list[str]:
    """What ``ozhpc info`` prints (collective over ``comm``)."""
    import h5py

    from ..engines import available_engines
    from ..engines.toolchain import configure_cache, describe
    from ..io import h5io

    configure_cache()  # before available_engines() imports cuda.tile
    from ..parallel import mpi

    lines = [f"ozhpc {__version__}", f"python {platform.python_version()}", f"numpy {np.__version__}",
             f"h5py {h5py.__version__} (HDF5 {h5py.version.hdf5_version}, parallel: {h5io.PARALLEL_HDF5})",
             mpi.describe()]
    comm = world(comm)
    lines.extend(mpi_layout_lines(comm))
    with warnings.catch_warnings(record=True) as caught:   # CuPy's and cuda-tile's, as one line each
        warnings.simplefilter("always")
        lines.extend(gpu_layout_lines(comm))
        for name, status in available_engines().items():
            lines.append(f"engine {name}: {status}")
    lines.append(describe())
    return lines + [f"warning ({w.category.__name__} from {w.filename}): {_first_line(w.message)}" for w in caught]


def _first_line(message) -> str:
    return next((line.strip() for line in str(message).splitlines() if line.strip()), "")


def mpi_layout_lines(comm) -> list[str]:
    """Ranks, nodes and ranks per node (collective over ``comm``)."""
    hosts = comm.allgather(socket.gethostname())
    per_node: dict[str, list[int]] = {}
    for rank, host in enumerate(hosts):
        per_node.setdefault(host, []).append(rank)
    lines = [f"MPI ranks: {comm.Get_size()} on {len(per_node)} node(s)"]
    lines += [f"  {host}: {len(ranks)} rank(s) {_ranges(ranks)}" for host, ranks in per_node.items()]
    return lines


def gpu_count() -> int:
    """GPUs CuPy sees here; 0 without CuPy, a driver or a device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 -- no CuPy / driver / device
        return 0


def gpu_layout_lines(comm) -> list[str]:
    """Rank -> host / local rank / GPU, and the transports usable here (collective over ``comm``)."""
    from ..parallel.localrank import format_layout, rank_layout
    from ..parallel.transport_choice import mpi_cuda_support, nccl_available

    layout = rank_layout(comm, device_count=gpu_count())
    nccl = nccl_available()
    lines = [f"transports: nccl {'available' if nccl is None else 'unavailable (' + nccl + ')'}, "
             f"cuda-mpi {'available' if mpi_cuda_support() else 'unavailable (MPI reports no CUDA support)'}, "
             "mpi-host available"]
    if layout is not None:
        lines += ["rank -> GPU:"] + ["  " + line for line in format_layout(layout)]
    return lines


def _ranges(ranks: list[int]) -> str:
    parts, start = [], ranks[0]
    for prev, cur in zip(ranks, ranks[1:] + [None]):
        if cur != prev + 1:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = cur
    return "[" + ",".join(parts) + "]"
