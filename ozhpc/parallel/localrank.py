"""Which GPU a rank uses: its node-local rank, modulo the devices it can see.

The local rank comes from the launcher's environment when it sets one, else from a
shared-memory split of the communicator (``MPI.COMM_TYPE_SHARED``, one collective).
Variables are read in this order:

=============================  =====================================================
``OMPI_COMM_WORLD_LOCAL_RANK``  Open MPI's ``mpirun``
``MPI_LOCALRANKID``             MPICH / Intel MPI (Hydra ``mpiexec``)
``PMI_LOCAL_RANK``              MPICH with some PMI servers
``MV2_COMM_WORLD_LOCAL_RANK``   MVAPICH2
``SLURM_LOCALID``               ``srun``
=============================  =====================================================

``SLURM_LOCALID`` comes last on purpose: the batch script itself runs as task 0 of its
allocation with ``SLURM_LOCALID=0``, and every rank of an ``mpiexec`` started from that
script inherits it, so read first it would put all ranks of a node on GPU 0. The MPI
launchers' own variables are set per process by whoever started this rank.

``CUDA_VISIBLE_DEVICES`` is respected: with ``srun --gpus-per-task=1`` (or a site's
binding) each rank sees exactly one device and uses index 0 of what it sees; with all
devices visible, rank ``r`` uses ``r % count``. Nothing here imports a GPU library:
:func:`select_device` takes the device count from the caller when CUDA_VISIBLE_DEVICES is
unset. No MPI communication happens unless no variable is set and a communicator is given.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Mapping

LOCAL_RANK_VARS = (
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
)


def local_rank_from_env(environ: Mapping[str, str] | None = None) -> tuple[int, str] | None:
    """``(local rank, variable name)`` from the first launcher variable set, or None.

    Raises
    ------
    ValueError
        A variable is set but is not a non-negative integer.
    """
    env = os.environ if environ is None else environ
    for name in LOCAL_RANK_VARS:
        text = env.get(name)
        if text is None or not text.strip():
            continue
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{name}={text!r} is not an integer local rank") from None
        if value < 0:
            raise ValueError(f"{name}={text!r} is negative")
        return value, name
    return None


def local_rank(comm=None, environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """This rank's index among the ranks on its node, and where that came from.

    Parameters
    ----------
    comm : mpi4py communicator, optional
        Used (``Split_type(COMM_TYPE_SHARED)``, collective over ``comm``) only when no
        launcher variable is set. Without it, and without variables, the answer is 0.
    environ : mapping, default ``os.environ``

    Returns
    -------
    (int, str)
        The local rank and its source: a variable name, ``"COMM_TYPE_SHARED"`` or ``"default"``.
    """
    found = local_rank_from_env(environ)
    if found is not None:
        return found
    if comm is None:
        return 0, "default"
    from .mpi import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    try:
        return node.Get_rank(), "COMM_TYPE_SHARED"
    finally:
        node.Free()


def visible_devices(environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The entries of CUDA_VISIBLE_DEVICES (indices, UUIDs or MIG ids), or None when unset.

    An empty or ``-1``-led list means no device is visible (CUDA stops at the first
    invalid entry).
    """
    env = os.environ if environ is None else environ
    text = env.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return None
    entries = []
    for item in text.split(","):
        item = item.strip()
        if not item or item.startswith("-"):
            break
        entries.append(item)
    return entries


@dataclass(frozen=True)
class DeviceChoice:
    """Where one rank runs: ``device`` is the CUDA ordinal to select in this process."""

    local_rank: int
    source: str            # which variable (or method) gave the local rank
    visible: int | None    # devices this process can see; None = unknown
    device: int | None     # index among the visible devices; None = no GPU
    physical: str | None   # the CUDA_VISIBLE_DEVICES entry of that device, if set

    def to_dict(self) -> dict:
        return asdict(self)


def select_device(comm=None, environ: Mapping[str, str] | None = None,
                  device_count: int | None = None) -> DeviceChoice:
    """The GPU this rank should use: ``local_rank % visible count``.

    Parameters
    ----------
    comm : mpi4py communicator, optional
        For the shared-memory split when no launcher variable is set (collective then).
    environ : mapping, default ``os.environ``
    device_count : int, optional
        Devices the CUDA runtime reports (e.g. ``cupy.cuda.runtime.getDeviceCount()``);
        needed only when CUDA_VISIBLE_DEVICES is unset.

    Returns
    -------
    DeviceChoice
        ``device`` is None when no device is visible or the count is unknown.
    """
    rank, source = local_rank(comm, environ)
    entries = visible_devices(environ)
    count = len(entries) if entries is not None else device_count
    if not count:
        return DeviceChoice(rank, source, count, None, None)
    index = rank % count
    return DeviceChoice(rank, source, count, index, entries[index] if entries is not None else None)


def hosts(comm) -> list[str]:
    """Every rank's host name, in rank order (collective over ``comm``): which ranks share a node."""
    import socket

    return comm.allgather(socket.gethostname())


def rank_layout(comm, environ: Mapping[str, str] | None = None,
                device_count: int | None = None) -> list[dict] | None:
    """Every rank's host, local rank and device, gathered on rank 0 (for ``ozhpc info``).

    Collective over ``comm``. Returns the list (ordered by rank) on rank 0, None elsewhere.
    """
    import socket

    choice = select_device(comm, environ, device_count)
    mine = {"rank": comm.Get_rank(), "host": socket.gethostname(), **choice.to_dict()}
    return comm.gather(mine, root=0)


def format_layout(layout: list[dict]) -> list[str]:
    """Lines like ``rank 3 on node7: local rank 1 (SLURM_LOCALID), GPU 1 of 4 (CUDA_VISIBLE_DEVICES entry 1)``;
    ranks of one host on the same device say so (more ranks than GPUs: NCCL refuses them)."""
    users: dict[tuple, list[int]] = {}
    for row in layout:
        if row["device"] is not None:
            users.setdefault((row["host"], row["physical"] or row["device"]), []).append(row["rank"])
    lines = []
    for row in layout:
        if row["device"] is None:
            gpu = "no GPU visible" if row["visible"] == 0 else "GPU count unknown"
        else:
            gpu = f"GPU {row['device']} of {row['visible']}"
            if row["physical"] is not None:
                gpu += f" (CUDA_VISIBLE_DEVICES entry {row['physical']})"
            others = [r for r in users[(row["host"], row["physical"] or row["device"])] if r != row["rank"]]
            if others:
                gpu += f", shared with rank{'s' * (len(others) > 1)} {', '.join(map(str, others))}"
        lines.append(f"rank {row['rank']} on {row['host']}: local rank {row['local_rank']} "
                     f"({row['source']}), {gpu}")
    return lines


def device_identity() -> dict | None:
    """This process's current GPU, ``{"host", "bus_id", "index"}`` (the PCI bus id names the
    physical device whatever CUDA_VISIBLE_DEVICES renumbers); None without CuPy or a device."""
    import socket

    try:
        import cupy

        device = cupy.cuda.Device()
        return {"host": socket.gethostname(), "bus_id": device.pci_bus_id, "index": int(device.id)}
    except Exception:  # noqa: BLE001 -- no CuPy, no driver, no device: no GPU to share
        return None


def shared_devices(devices: list[dict | None]) -> list[tuple[dict, list[int]]]:
    """``[(device, ranks)]`` for every GPU that more than one rank uses, from each rank's
    :func:`device_identity` (in rank order; None = no GPU). NCCL refuses such ranks."""
    users: dict[tuple, list[int]] = {}
    first: dict[tuple, dict] = {}
    for rank, device in enumerate(devices):
        if device is None:
            continue
        key = (device["host"], device["bus_id"])
        users.setdefault(key, []).append(rank)
        first.setdefault(key, device)
    return [(first[key], ranks) for key, ranks in users.items() if len(ranks) > 1]


def describe_sharing(shared: list[tuple[dict, list[int]]]) -> str:
    """``ranks 0, 1 share GPU 0 (PCI 0000:19:00.0) on node7`` (the first shared GPU, and how many more)."""
    device, ranks = shared[0]
    text = (f"ranks {', '.join(map(str, ranks))} share GPU {device['index']} (PCI {device['bus_id']}) "
            f"on {device['host']}")
    return text + (f" (and {len(shared) - 1} more shared GPUs)" if len(shared) > 1 else "")


def bind_device(comm=None, environ: Mapping[str, str] | None = None) -> DeviceChoice | None:
    """Make this rank's GPU (:func:`select_device`) CuPy's current device; None without CuPy.

    Call it on every rank before the GPU engine is created: it is collective over ``comm``
    when no launcher variable gives the local rank. Without this, ranks that all see every
    GPU of a node (``mpiexec -n 8`` on an 8-GPU node) would all use device 0. With
    ``srun --gpus-per-task=1`` each rank sees one device and this selects it.
    """
    try:
        import cupy
    except ImportError:
        cupy = None
    count = 0
    if cupy is not None:
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception:  # noqa: BLE001 -- no driver / no device: nothing to bind
            count = 0
    choice = select_device(comm, environ, count)  # every rank, even without CuPy (collective)
    if cupy is None or choice.device is None:
        return None
    cupy.cuda.Device(choice.device).use()
    return choice
