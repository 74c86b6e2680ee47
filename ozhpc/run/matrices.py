"""The standard test matrices ``(rand - 0.5) * exp(phi * randn)`` (phi widens the exponent range).

Rows are drawn in fixed chunks of ROW_CHUNK rows, each from its own counter-keyed
stream ``default_rng([seed, chunk])``, so any row range can be generated on its own
and the matrix does not depend on how it was cut: :func:`standard_matrix_distributed`
gives each MPI rank only its own chunks (``ozhpc gen`` under mpiexec), and the file is
the same for any rank count, bit for bit :func:`standard_matrix`.
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


def standard_matrix_distributed(grid, m: int, n: int, phi: float, seed: int):
    """This rank's rows of the standard matrix as a DistMatrix on a P x 1 grid, in blocks of
    ROW_CHUNK rows: each rank draws only its own chunks' streams (no rank builds the whole)."""
    from ..parallel.distmatrix import DistMatrix
    from ..parallel.layout import BlockCyclic

    if grid.q != 1:
        raise ValueError(f"the generator distributes rows only: it needs a Px1 grid, got {grid.p}x{grid.q}")
    layout = BlockCyclic(m, n, ROW_CHUNK, max(1, n), grid.p, 1)
    parts = [standard_matrix_rows(m, n, phi, seed, lo, hi) for lo, hi, _ in layout.rows.segments(grid.myrow)]
    local = np.concatenate(parts) if parts else np.empty((0, n), dtype=np.float64)
    return DistMatrix(grid, layout, local)
