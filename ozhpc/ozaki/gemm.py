"""The Ozaki product (scheme I or II) on one process: ``C = alpha * op(A) @ op(B) + beta * C``.

The steps here (scales -> plan -> split -> pair products -> combine -> special
values -> alpha/beta) are the same ones the distributed driver runs, with the
reductions and the panel loop spread over ranks; see :mod:`ozhpc.parallel.summa`.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..engines import Engine, get_engine
from ..errors import InputError
from . import special
from .plan import ModularPlan, SlicePlan, make_plan
from .scales import exponents, spread_bits


@dataclass
class GemmInfo:
    """What one call did: sizes, plan, engine, error bound and time per phase.

    ``truncation_bound`` (tau*k) and ``rounding_bound`` bound the error of every entry:
    ``|C_ij - (op(A) op(B))_ij| <= 2**(e_i+f_j) * truncation_bound + rounding_bound * |C_ij|``
    (for alpha = 1, beta = 0 and finite results).
    """

    m: int
    n: int
    k: int
    engine: str
    slices: int
    groups: int
    pair_gemms: int
    spread_bits: int
    truncation_bound: float
    rounding_bound: float
    nonfinite_inputs: bool
    seconds: dict = field(default_factory=dict)
    scheme: str = "ozaki1"
    bits: int = 0
    """Bits per operand entry: 7 x slices (scheme I), the integer width (scheme II)."""

    def to_dict(self) -> dict:
        return asdict(self)


def check_real_matrix(x, name: str):
    """Raise a clear error unless ``x`` is a 2-D array of real numbers."""
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(shape)}")
    if dtype.kind not in "fiub":
        raise TypeError(f"{name} must hold real numbers, got dtype {dtype}")


def op_rows(x, trans: bool, is_left: bool):
    """The operand as rows along k: op(A) for the left side, op(B)^T for the right."""
    return (x.T if trans else x) if is_left else (x if trans else x.T)


def epilogue(xp, ab, alpha: float, beta: float, c):
    """``alpha * ab + beta * c``, each operation rounded separately, as BLAS defines it:
    ``c`` is not read when beta == 0, and ``ab`` is not used when alpha == 0 (so inf/NaN in
    op(A) op(B) do not reach the result)."""
    if alpha == 0.0:
        if beta == 0.0:
            return xp.zeros_like(ab)
        return c.copy() if beta == 1.0 else beta * c
    out = ab if alpha == 1.0 else alpha * ab
    if beta != 0.0:
        out = out + (c if beta == 1.0 else beta * c)
    return out


class Stopwatch:
    """Wall time per phase, with the device synchronised at each boundary."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.seconds: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, phase: str) -> None:
        self.engine.synchronize()
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._t
        self._t = now


def gemm(A, B, C=None, *, alpha=1.0, beta=0.0, transa=False, transb=False,
         slices="auto", groups="auto", engine="auto", scheme="ozaki1", bits="auto", info=False):
    """FP64 ``alpha * op(A) @ op(B) + beta * C`` by the Ozaki scheme, exact up to one final rounding.

    Parameters
    ----------
    A, B : 2-D real arrays (NumPy, or CuPy with the cutile engine)
    C : array of shape (m, n), read only when ``beta != 0``
    alpha, beta : float
    transa, transb : bool
        Use the transpose of A / B.
    slices : "auto" or int
        int8 digit slices per operand; "auto" picks the fewest that keep the error at or
        below native DGEMM's, from the exponent spread of the data.
    groups : "auto", "all" or int
        Keep slice pairs with ``p + q < groups``: "auto" = slices (the triangle),
        "all" = every pair (``2*slices - 1``), fewer for a faster, less accurate product.
    engine : "auto", "numpy", "cutile" or an Engine
    scheme : "ozaki1" or "ozaki2"
        Ozaki scheme I (int8 digit slices, the triangle of slice pairs) or II (integers
        modulo coprimes <= 256, one int8 GEMM per modulus: fewer GEMMs for FP64 accuracy).
        Each gives the same bits on every engine and grid; the two schemes differ.
    bits : "auto" or int
        Scheme II only: integer bits per entry; "auto" as for ``slices``.
    info : bool
        Also return a :class:`GemmInfo`.

    Returns
    -------
    C : float64 array on the engine's device (NumPy arrays in, NumPy out), or ``(C, GemmInfo)``.

    Raises
    ------
    TypeError, ValueError
        Not 2-D, not real, shapes that do not match, bad slices/groups.
    """
    eng = get_engine(engine)
    xp = eng.xp
    host_in = isinstance(A, np.ndarray)
    for x, name in ((A, "A"), (B, "B")):
        check_real_matrix(x, name)
    a_rows = op_rows(eng.asarray(A).astype(xp.float64, copy=False), transa, True)
    b_rows = op_rows(eng.asarray(B).astype(xp.float64, copy=False), transb, False)
    (m, k), (n, kb) = a_rows.shape, b_rows.shape
    if k != kb:
        raise ValueError(f"inner dimensions differ: op(A) is {m}x{k}, op(B) is {kb}x{n}")
    c_dev = None
    if beta != 0.0:
        if C is None:
            raise ValueError("beta != 0 needs C")
        check_real_matrix(C, "C")
        if tuple(C.shape) != (m, n):
            raise ValueError(f"C has shape {tuple(C.shape)}, expected {(m, n)}")
        c_dev = eng.asarray(C).astype(xp.float64, copy=False)

    clock = Stopwatch(eng)
    (amax, bad_a), (bmax, bad_b) = eng.row_stats(a_rows), eng.row_stats(b_rows)
    e, f = exponents(xp, amax), exponents(xp, bmax)
    spread = 0
    if (bits if scheme == "ozaki2" else slices) == "auto":
        spread = max(spread_bits(xp, eng.entry_gaps(a_rows, e), count_le=eng.count_gaps_le),
                     spread_bits(xp, eng.entry_gaps(b_rows, f), count_le=eng.count_gaps_le))
    plan = make_plan(slices, groups, spread, scheme=scheme, bits=bits, k=k)
    check_k(plan, k)
    clock.lap("scales")
    nonfinite = bad_a or bad_b
    da = plan.split(eng, special.finite_part(xp, a_rows, bad_a), e)
    eb = plan.split(eng, special.finite_part(xp, b_rows, bad_b), f)
    clock.lap("split")
    ab = plan.multiply_combine(eng, da, eb, e, f)
    clock.lap("multiply")
    if nonfinite:
        counts = special.zeros_counts(xp, m, n)
        special.accumulate_counts(xp, counts, special.classify(xp, a_rows), special.classify(xp, b_rows))
        ab = special.apply_counts(xp, ab, counts)
    out = epilogue(xp, ab, alpha, beta, c_dev)
    clock.lap("combine")
    if host_in:
        out = eng.to_host(out)
    if not info:
        return out
    return out, make_info(plan, eng, m, n, k, spread, nonfinite, clock.seconds)


def check_k(plan: SlicePlan | ModularPlan, k: int) -> None:
    """Refuse a k whose group sums could leave the exact FP64 integers (the same on every rank)."""
    if k > plan.max_exact_k():
        what = (f"{plan.slices} slices and {plan.groups} groups" if plan.scheme == "ozaki1"
                else f"scheme ozaki2 ({plan.bits} bits)")
        raise InputError(f"k = {k} is too long for exact accumulation with {what} "
                         f"(at most {plan.max_exact_k()})")


def make_info(plan: SlicePlan | ModularPlan, eng: Engine, m, n, k, spread, nonfinite, seconds) -> GemmInfo:
    return GemmInfo(m=m, n=n, k=k, engine=eng.name, slices=plan.slices, groups=plan.groups,
                    pair_gemms=plan.pair_gemms, spread_bits=spread,
                    truncation_bound=float(plan.truncation_bound(k)),
                    rounding_bound=plan.rounding_bound, nonfinite_inputs=nonfinite,
                    seconds=dict(seconds), scheme=plan.scheme, bits=plan.bits)
