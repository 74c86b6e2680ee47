"""The standard test matrices of the Ozaki-scheme literature: ``(rand - 0.5) * exp(phi * randn)``.

Rows are drawn in fixed chunks, each from its own seeded stream, so any row
range can be generated on its own (by a rank, or in pieces for a huge file)
and the matrix does not depend on how it was cut.
"""
from __future__ import annotations

import numpy as np

ROW_CHUNK = 256


def standard_matrix_rows(m: int, n: int, phi: float, seed: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows ``start:stop`` of the m x n standard test matrix."""
    stop = m if stop is None else stop
    if not (0 <= start <= stop <= m):
        raise ValueError(f"row range {start}:{stop} outside 0:{m}")
    out = np.empty((stop - start, n), dtype=np.float64)
    for chunk in range(start // ROW_CHUNK, -(-stop // ROW_CHUNK)):
        lo, hi = chunk * ROW_CHUNK, min(m, (chunk + 1) * ROW_CHUNK)
        rng = np.random.default_rng([seed, chunk])
        block = (rng.random((hi - lo, n)) - 0.5) * np.exp(phi * rng.standard_normal((hi - lo, n)))
        a, b = max(lo, start), min(hi, stop)
        out[a - start:b - start] = block[a - lo:b - lo]
    return out


def standard_matrix(m: int, n: int, phi: float, seed: int) -> np.ndarray:
    return standard_matrix_rows(m, n, phi, seed)
