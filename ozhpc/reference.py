"""Exact references for error measurements: entries of op(A) op(B) as Fractions."""
from __future__ import annotations

from fractions import Fraction

import numpy as np


def exact_entry(a_row: np.ndarray, b_col: np.ndarray) -> Fraction:
    """``sum_k a_k b_k`` exactly (finite inputs)."""
    return sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a_row, b_col) if x and y),
               Fraction(0))


def sample_indices(m: int, n: int, count: int, seed: int = 0) -> list[tuple[int, int]]:
    """``count`` distinct (i, j) pairs (all of them when the matrix is small)."""
    if m * n <= count:
        return [(i, j) for i in range(m) for j in range(n)]
    rng = np.random.default_rng(seed)
    flat = rng.choice(m * n, size=count, replace=False)
    return [(int(x // n), int(x % n)) for x in np.sort(flat)]


def relative_errors(c: np.ndarray, a_op: np.ndarray, b_op: np.ndarray, idx) -> np.ndarray:
    """``|c_ij - (AB)_ij| / (|A||B|)_ij`` on the sampled entries (0 where |A||B| is 0)."""
    out = np.zeros(len(idx))
    for t, (i, j) in enumerate(idx):
        row, col = a_op[i], b_op[:, j]
        exact = exact_entry(row, col)
        scale = float(np.abs(row) @ np.abs(col))
        err = abs(Fraction(float(c[i, j])) - exact)
        out[t] = float(err) / scale if scale else float(err != 0) * np.inf
    return out
