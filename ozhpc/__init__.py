"""ozhpc: bitwise-reproducible FP64 matrix products by the Ozaki scheme, from one CPU to many GPUs.

``gemm`` and ``GemmInfo`` are imported on first use, so that ``ozhpc`` (the command) can install
its signal handlers before NumPy is loaded."""
from .errors import AccuracyError, AccuracyWarning

__version__ = "0.1.0"
__all__ = ["gemm", "GemmInfo", "AccuracyWarning", "AccuracyError", "__version__"]


def __getattr__(name):
    if name in ("gemm", "GemmInfo"):
        from . import ozaki

        return getattr(ozaki, name)
    raise AttributeError(f"module 'ozhpc' has no attribute {name!r}")
