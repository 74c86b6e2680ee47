"""ozhpc: bitwise-reproducible FP64 matrix products by the Ozaki scheme, from one CPU to many GPUs.

``gemm``, ``GemmInfo`` and ``pdgemm`` (ScaLAPACK's PDGEMM interface, MPI) are imported on first
use, so that ``ozhpc`` (the command) can install its signal handlers before NumPy is loaded."""
from .errors import AccuracyError, AccuracyWarning

__version__ = "0.1.0"
__all__ = ["gemm", "GemmInfo", "pdgemm", "AccuracyWarning", "AccuracyError", "__version__"]


def __getattr__(name):
    if name in ("gemm", "GemmInfo"):
        from . import ozaki

        return getattr(ozaki, name)
    if name == "pdgemm":
        from .parallel.scalapack import pdgemm

        return pdgemm
    raise AttributeError(f"module 'ozhpc' has no attribute {name!r}")
