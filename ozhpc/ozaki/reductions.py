"""The exact, order-free reductions over the ranks that share a product (:class:`Reductions`).

A product reduces every value that decides a bit of C (row scales, the plan's statistics, the
special-value flag, the certificate's verdict) with these callables, so every grid, block size
and panel width gives the same bits. SUMMA passes MPI allreduces
(:func:`ozhpc.parallel.summa.grid_reductions`); one process the identity (:data:`LOCAL`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


def _same(x):
    return x


@dataclass(frozen=True)
class Reductions:
    """Exact, order-free reductions over the ranks that share a piece of the product.

    Each takes and returns a NumPy array. ``a_max`` / ``a_sum``: over the pieces of each
    op(A) row (a MAX of row maxima, a SUM of integer counts); ``b_max`` / ``b_sum``: the same
    for op(B)^T rows; ``everywhere_max`` / ``everywhere_sum``: over every rank (the plan's
    inputs, the certificate's verdict, per-k statistics indexed by global k). One process:
    the identity (:data:`LOCAL`).
    """

    a_max: Callable = _same
    b_max: Callable = _same
    a_sum: Callable = _same
    b_sum: Callable = _same
    everywhere_max: Callable = _same
    everywhere_sum: Callable = _same


LOCAL = Reductions()


def is_local(reduce: Callable) -> bool:
    """Whether ``reduce`` is one process's identity (nothing to reduce, nothing to copy)."""
    return reduce is _same


def on_host(engine, reduce: Callable) -> Callable:
    """``reduce`` (NumPy arrays, MPI underneath) for arrays on the engine's device; the identity
    of one process stays on the device (no round trip, no synchronisation)."""
    if reduce is _same:
        return _same
    return lambda x: engine.asarray(reduce(engine.to_host(x)))
