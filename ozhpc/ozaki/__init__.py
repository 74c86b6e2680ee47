"""The Ozaki scheme I with int8 slices (see design notes in README and docs/numerics.md)."""
from .gemm import GemmInfo, gemm
from .plan import SlicePlan, make_plan

__all__ = ["gemm", "GemmInfo", "SlicePlan", "make_plan"]
