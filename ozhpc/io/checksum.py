"""SHA-256 of a matrix as C-ordered little-endian float64 bytes (complex128 for a complex one:
the real and imaginary parts interleaved), whole or fed in row blocks."""
from __future__ import annotations

import hashlib

import numpy as np


def sha256_of_matrix(c: np.ndarray) -> str:
    """SHA-256 of C as C-ordered little-endian float64 bytes (the same for any layout it came from)."""
    return hashlib.sha256(np.ascontiguousarray(c, dtype=byte_order(c)).tobytes()).hexdigest()


def byte_order(c) -> str:
    """The bytes a matrix is hashed as: little-endian complex128 or float64."""
    return "<c16" if np.iscomplexobj(c) else "<f8"


class RowHasher:
    """SHA-256 of a matrix fed in row order, one block of rows at a time."""

    def __init__(self):
        self._h = hashlib.sha256()

    def update(self, rows: np.ndarray) -> None:
        self._h.update(np.ascontiguousarray(rows, dtype=byte_order(rows)).tobytes())

    def hexdigest(self) -> str:
        return self._h.hexdigest()
