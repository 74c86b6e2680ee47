"""Which transport moves SUMMA's panels: by name, or "auto" from the engine and the software.

``"mpi-host"`` (:class:`~ozhpc.parallel.transport.HostMPITransport`), ``"cuda-mpi"`` and
``"nccl"`` (:mod:`ozhpc.parallel.gpu_transport`); ``"auto"``: with a GPU engine
(``engine.on_device``) and a grid of more than one rank, NCCL when ``cupy.cuda.nccl`` is
usable, else CUDA-aware MPI when ``MPI.Query_cuda_support()`` says so, else host-staged MPI;
with the NumPy engine (or one rank) always ``"mpi-host"``. Ranks sharing a GPU (more ranks than
GPUs on a node, a common launch mistake) are known from every rank's
:func:`~ozhpc.parallel.localrank.device_identity`: NCCL refuses them (``ncclInvalidUsage``), so
"auto" takes host-staged MPI there (the path tried on one H200) and an explicit ``"nccl"`` is an
error that names the ranks and the device.
"""
from __future__ import annotations

from ..errors import OptionError, literal
from .mpi import MPI

from .gpu_transport import CudaMPITransport, NcclTransport
from .localrank import describe_sharing, shared_devices
from .transport import HostMPITransport, Transport
from .transport_names import TRANSPORT_NAMES


TRANSPORTS = {"mpi-host": HostMPITransport, "cuda-mpi": CudaMPITransport, "nccl": NcclTransport}


class TransportUnavailable(OptionError):
    """A requested transport cannot run here (no CuPy/NCCL, MPI without CUDA support, CPU engine);
    worded with placeholders for the options, as a front end spells them."""


def nccl_available() -> str | None:
    """None when ``cupy.cuda.nccl`` can be used, else the reason it cannot, in one line.

    CuPy warns, over several lines, when it cannot load libnccl; that warning is caught here and
    its reason kept, so ``ozhpc info`` and "auto" print one line of their own."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            from cupy.cuda import nccl
        except Exception as exc:  # noqa: BLE001 -- ImportError, or CuPy built without NCCL
            return f"cupy.cuda.nccl cannot be imported ({exc})"
    if not getattr(nccl, "available", True):
        reasons = [line.strip()[len("Reason:"):].strip() for w in caught for line in str(w.message).splitlines()
                   if line.strip().startswith("Reason:")]
        return (f"CuPy cannot load NCCL{' (' + reasons[0] + ')' if reasons else ''}; "
                "pip install nvidia-nccl-cu13, or ozhpc[gpu]")
    return None


def mpi_cuda_support() -> bool:
    """Whether the MPI library says it is CUDA-aware (``MPI.Query_cuda_support``, MPI-4.1 / Open MPI ext)."""
    query = getattr(MPI, "Query_cuda_support", None)
    if query is None:
        return False
    try:
        return bool(query())
    except Exception:  # noqa: BLE001 -- not implemented by this library
        return False


def is_gpu_engine(engine) -> bool:
    return bool(getattr(engine, "on_device", False))


def choose_transport(name, grid, engine=None, devices=None) -> tuple[str, str]:
    """``(transport name, why)`` for ``name`` in TRANSPORT_NAMES; raises TransportUnavailable / ValueError.

    ``devices``: every rank's GPU (:func:`~ozhpc.parallel.localrank.device_identity`, in rank
    order), or None when unknown. Rank-independent as long as every rank has the same software
    (the usual case): every rank must pick the same transport, since NCCL and MPI broadcasts do
    not mix.
    """
    name = "auto" if name is None else name
    if name not in TRANSPORT_NAMES:
        raise ValueError(f"unknown transport {name!r}; choose one of: {', '.join(TRANSPORT_NAMES)}")
    gpu = is_gpu_engine(engine)
    if name == "mpi-host":
        return name, "requested"
    if name in ("nccl", "cuda-mpi") and not gpu:
        raise TransportUnavailable(f"{{transport={name}}} moves GPU panels: it needs the cutile engine "
                                   f"(got {literal(repr(getattr(engine, 'name', engine)))}); use "
                                   "{transport=mpi-host} or auto")
    shared = shared_devices(devices or [])
    if name == "nccl":
        why = nccl_available()
        if why:
            raise TransportUnavailable(f"{{transport=nccl}} is not available: {literal(why)}")
        if shared:
            raise TransportUnavailable(f"{{transport=nccl}} needs one GPU per rank, but "
                                       f"{literal(describe_sharing(shared))}; launch at most one rank per GPU, "
                                       "or use {transport=mpi-host} or auto")
        return name, "requested"
    if name == "cuda-mpi":
        if not mpi_cuda_support():
            raise TransportUnavailable("{transport=cuda-mpi} is not available: the MPI library does not report "
                                       "CUDA support (MPI.Query_cuda_support()); use nccl or mpi-host")
        return name, "requested"
    # auto
    if not gpu:
        return "mpi-host", "auto: CPU engine"
    if grid is not None and grid.size == 1:
        return "mpi-host", "auto: one rank, nothing to move"
    if shared:   # host staging is the path tried on one H200 (CUDA-aware MPI there: not yet)
        return "mpi-host", (f"auto: GPU engine, {describe_sharing(shared)}: NCCL needs one GPU per rank, "
                            "so host-staged MPI")
    why = nccl_available()
    if why is None:
        return "nccl", "auto: GPU engine, cupy.cuda.nccl available, one GPU per rank"
    if mpi_cuda_support():
        return "cuda-mpi", f"auto: GPU engine, CUDA-aware MPI ({why})"
    return "mpi-host", f"auto: GPU engine, no NCCL ({why}) and MPI without CUDA support"


def get_transport(name, grid, engine=None, devices=None, **options) -> Transport:
    """A transport by name (see the module docstring for ``"auto"``) or a ready instance."""
    if isinstance(name, Transport):
        return name
    return open_transport(*choose_transport(name, grid, engine, devices), grid, engine, **options)


def open_transport(chosen: str, why: str, grid, engine=None, **options) -> Transport:
    """The transport :func:`choose_transport` chose (``chosen``, for the reason ``why``), set up."""
    transport = TRANSPORTS[chosen](grid, engine, **options)
    transport.reason = why
    return transport
