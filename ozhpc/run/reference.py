"""Exact references for error measurements: entries of op(A) op(B) as Fractions."""
from __future__ import annotations

from fractions import Fraction

import numpy as np


def exact_entry(a_row: np.ndarray, b_col: np.ndarray) -> Fraction:
    """``sum_k a_k b_k`` exactly (finite inputs)."""
    return sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a_row, b_col) if x and y),
               Fraction(0))


def exact_dot(x: np.ndarray, y: np.ndarray) -> Fraction:
    """``sum_k x_k y_k`` exactly (finite inputs), as :func:`exact_entry` but by integer
    arithmetic (each product is an integer times a power of two): ~10x faster for long k."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = (x != 0) & (y != 0)
    if not keep.any():
        return Fraction(0)
    mx, ex = np.frexp(x[keep])
    my, ey = np.frexp(y[keep])
    ix, iy = np.ldexp(mx, 53).astype(np.int64), np.ldexp(my, 53).astype(np.int64)
    shift = (ex.astype(np.int64) + ey) - 106
    low = int(shift.min())
    total = sum(int(a) * int(b) << int(s - low) for a, b, s in zip(ix, iy, shift))
    return Fraction(total, 1 << -low) if low < 0 else Fraction(total << low)


def sample_indices(m: int, n: int, count: int, seed: int = 0) -> list[tuple[int, int]]:
    """``count`` distinct (i, j) pairs (all of them when the matrix is small)."""
    if m * n <= count:
        return [(i, j) for i in range(m) for j in range(n)]
    rng = np.random.default_rng(seed)
    flat = rng.choice(m * n, size=count, replace=False)
    return [(int(x // n), int(x % n)) for x in np.sort(flat)]


def relative_errors(c: np.ndarray, a_op: np.ndarray, b_op: np.ndarray, idx, exact=None) -> np.ndarray:
    """``|c_ij - (AB)_ij| / (|A||B|)_ij`` on the sampled entries.

    ``exact``: the entries ``exact_entry(a_op[i], b_op[:, j])`` for ``idx``, when the caller
    already has them (they dominate the cost for long k; the result is the same).

    An entry with ``|A||B| == 0`` counts 0 when c_ij is exactly 0, else inf. Where the row or
    column holds inf/NaN, the entry counts 0 when c_ij is the value IEEE arithmetic gives
    (NumPy's own product), else inf.
    """
    out = np.zeros(len(idx))
    for t, (i, j) in enumerate(idx):
        row, col = a_op[i], b_op[:, j]
        if not (np.isfinite(row).all() and np.isfinite(col).all()):
            with np.errstate(all="ignore"):
                native = row @ col
            same = (np.isnan(native) and np.isnan(c[i, j])) or native == c[i, j]
            out[t] = 0.0 if same else np.inf
            continue
        if not np.isfinite(c[i, j]):
            out[t] = np.inf
            continue
        ref = exact_entry(row, col) if exact is None else exact[t]
        err = abs(Fraction(float(c[i, j])) - ref)
        scale = float(np.abs(row) @ np.abs(col))
        out[t] = float(err) / scale if scale else (np.inf if err else 0.0)
    return out
