"""Distributed products: process grid, block-cyclic layout, DistMatrix, SUMMA, transports.

Layering: ``layout`` (pure maths), ``mpi`` (mpi4py's MPI, or ``serial_comm``'s one process)
-> ``collective``, ``grid`` -> ``distmatrix`` ->
``transport``, ``gpu_transport`` -> ``transport_choice`` -> ``summa`` -> ``scalapack`` (PDGEMM's
interface). This package imports
:mod:`ozhpc.ozaki` and :mod:`ozhpc.engines`, never the reverse. See ``docs/distributed.md``.

Names are imported on first use (PEP 562), so ``ozhpc.parallel.transport_names`` and
``ozhpc.parallel.layout`` load without starting MPI.
"""
from importlib import import_module

_WHERE = {
    "BlockCyclic": "layout", "Cyclic1D": "layout", "numroc": "layout",
    "agree": "collective", "collective_errors": "collective",
    "ProcessGrid": "grid", "near_square": "grid",
    "DistMatrix": "distmatrix",
    "Summa": "summa", "SummaInfo": "summa", "dist_gemm": "summa",
    "Transport": "transport", "Pending": "transport", "HostMPITransport": "transport",
    "get_transport": "transport_choice",
    "pdgemm": "scalapack", "redistribute": "scalapack",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
