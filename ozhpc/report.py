"""The JSON run report: what was computed, how, how long each phase took, and a checksum of C."""
from __future__ import annotations

import datetime
import json
import os
import platform
import socket

import numpy as np

from .io.checksum import RowHasher, sha256_of_matrix  # noqa: F401  (re-exported)


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
