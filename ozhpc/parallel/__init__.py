"""Distributed products: process grid, block-cyclic layout, DistMatrix, SUMMA, transports.

Layering: ``layout`` (pure maths) -> ``grid`` (MPI) -> ``distmatrix`` -> ``transport``
-> ``summa``. This package imports :mod:`ozhpc.ozaki` and :mod:`ozhpc.engines`, never
the reverse. See ``docs/distributed.md``.
"""
from .distmatrix import DistMatrix
from .collective import agree, collective_errors
from .grid import ProcessGrid, near_square
from .layout import BlockCyclic, Cyclic1D, numroc
from .summa import FAIL_ENV, Summa, SummaInfo, dist_gemm
from .transport import HostMPITransport, Pending, Transport, get_transport

__all__ = ["BlockCyclic", "Cyclic1D", "numroc", "ProcessGrid", "near_square", "agree", "collective_errors", "DistMatrix",
           "Summa", "SummaInfo", "dist_gemm", "FAIL_ENV", "Transport", "Pending", "HostMPITransport",
           "get_transport"]
