"""ozhpc: bitwise-reproducible FP64 matrix products by the Ozaki scheme, from one CPU to many GPUs."""
from .errors import AccuracyError, AccuracyWarning
from .ozaki import GemmInfo, gemm

__version__ = "0.1.0"
__all__ = ["gemm", "GemmInfo", "AccuracyWarning", "AccuracyError", "__version__"]
