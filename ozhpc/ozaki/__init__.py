"""The Ozaki schemes: I (int8 digit slices) and II (int8 residues modulo coprimes); see docs/numerics.md.

Layers inside: ``settings`` (what the user asked) -> ``certificate`` (the bounds' arithmetic, for
any plan) -> ``plan`` (what a product runs, per scheme: the one module that names them) ->
``operands`` (the operands measured: scales, sizes, over ``reductions``), ``passes`` (one pass as
a value: its planes and what it sums), ``policy`` (which pass follows a failed certificate, as a
value) -> ``product`` (runs one pass after another: panels, combine, certificate) -> ``gemm``
(whole arrays on one process); ``info`` says what a product did.
"""
from .gemm import gemm
from .plan import ModularPlan, SlicePlan, make_plan, resolve_plan
from .product import GemmInfo, Product
from .reductions import Reductions
from .settings import OzakiSettings

__all__ = ["gemm", "GemmInfo", "ModularPlan", "SlicePlan", "make_plan", "resolve_plan", "Product",
           "Reductions", "OzakiSettings"]
