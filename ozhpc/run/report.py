"""The JSON run report: what was computed, how, how long each phase took, and a checksum of C."""
from __future__ import annotations

import datetime
import errno
import importlib.metadata
import json
import math
import os
import platform
import socket
import tempfile

import numpy as np

from .. import signals
from ..io.checksum import RowHasher, sha256_of_matrix  # noqa: F401  (re-exported)


def base_report() -> dict:
    from .. import __version__

    return {
        "ozhpc_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        **library_versions(),
    }


GPU_DISTRIBUTIONS = {"cupy": ("cupy-cuda13x", "cupy-cuda12x", "cupy"), "cuda_tile": ("cuda-tile",)}
"""The report's GPU library fields and the pip distributions that install each."""


def library_versions() -> dict:
    """h5py, the MPI library (its own version line) and the GPU libraries installed here (None:
    no MPI library, or not installed); read from the package metadata, so nothing GPU is loaded."""
    import h5py

    from ..parallel.mpi import library_version

    found = {"h5py": h5py.__version__, "mpi": library_version()}
    for field, names in GPU_DISTRIBUTIONS.items():
        found[field] = next((v for v in map(_installed, names) if v), None)
    return found


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def gflops(m: int, n: int, k: int, seconds: float) -> float:
    return 2.0 * m * n * k / seconds / 1e9 if seconds > 0 else float("nan")


def check_report(path: str, force: bool, files=()) -> None:
    """Refuse, before any work, a report path that cannot or must not be written.

    ``files``: the run's input and output files; a report never replaces one of them.
    """
    from ..errors import InputError, OptionError, literal
    from ..io.h5io import check_output_file, same_file

    target = os.path.realpath(path)
    check_output_file(path, target, "report")
    for other in files:
        if same_file(path, other):
            raise InputError(f"report {path!r} is the run's HDF5 file {other!r}; choose another report path")
    if os.path.exists(target) and not force:
        raise OptionError(f"report {literal(repr(path))} exists; pass {{force=True}} to replace it")


def json_safe(value):
    """``value`` with every non-finite float as the string "inf", "-inf" or "nan": JSON has no
    such numbers (Python would write ``Infinity``, which jq and most parsers reject)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def to_json(value, **kwargs) -> str:
    """Strict JSON text of a report (:func:`json_safe`; anything else unknown as its ``str``)."""
    return json.dumps(json_safe(value), allow_nan=False, default=str, **kwargs)


def write_report(path: str, report: dict) -> None:
    """Write the report atomically: a temporary file beside it (always removed), then rename.

    A symlink is written through (its target is replaced); an existing report keeps its mode.
    Only a regular file is replaced (checked before the compute, and again here).
    """
    from ..io.h5io import foreign_symlink, special_file

    target = os.path.realpath(path)
    kind = special_file(target)
    if kind:
        raise OSError(errno.EEXIST, f"it is {kind} now, not a regular file, and was not replaced")
    if foreign_symlink(path):
        raise OSError(errno.EPERM, "it is now another user's symlink, which ozhpc does not write through")
    head, tail = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{tail}.", suffix=".tmp", dir=head)
    signals.temporary_files.add(tmp)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(to_json(report, indent=2, sort_keys=True) + "\n")
        try:
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
        signals.temporary_files.discard(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
