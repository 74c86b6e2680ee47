"""The JSON run report: what was computed, how, how long each phase took, and a checksum of C."""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import socket

import numpy as np


def sha256_of_matrix(c: np.ndarray) -> str:
    """SHA-256 of C as C-ordered little-endian float64 bytes (the same for any layout it came from)."""
    return hashlib.sha256(np.ascontiguousarray(c, dtype="<f8").tobytes()).hexdigest()


class RowHasher:
    """SHA-256 of a matrix fed in row order, one block of rows at a time."""

    def __init__(self):
        self._h = hashlib.sha256()

    def update(self, rows: np.ndarray) -> None:
        self._h.update(np.ascontiguousarray(rows, dtype="<f8").tobytes())

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def base_report() -> dict:
    from . import __version__

    return {
        "ozhpc_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def gflops(m: int, n: int, k: int, seconds: float) -> float:
    return 2.0 * m * n * k / seconds / 1e9 if seconds > 0 else float("nan")


def write_report(path: str, report: dict) -> None:
    """Write the report atomically (temporary file, then rename)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
    os.replace(tmp, path)
