"""The Ozaki schemes: I (int8 digit slices) and II (int8 residues modulo coprimes); see docs/numerics.md."""
from .gemm import GemmInfo, gemm
from .plan import ModularPlan, SlicePlan, make_plan

__all__ = ["gemm", "GemmInfo", "ModularPlan", "SlicePlan", "make_plan"]
