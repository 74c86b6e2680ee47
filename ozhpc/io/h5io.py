"""HDF5 datasets named ``FILE.h5:/path``: validated reads, output checks, whole-matrix writes.

Outputs never appear half-written at their final path (:mod:`ozhpc.io.h5out` says how). An
existing dataset is replaced only with ``force``, a group never; other datasets in an existing
output file are kept.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import h5py
import numpy as np

from ..errors import InputError

PARALLEL_HDF5 = bool(h5py.get_config().mpi)
ATTRS_PREFIX = "ozhpc_"
TMP_PREFIX = ".ozhpc-tmp-"  # temporary result datasets (ozhpc.io.h5out); removed when found stale
BUSY_WAIT_S = 120.0
"""How long an open waits while another process holds the file (HDF5's own file lock: a writer
excludes readers, a reader excludes writers). Readers (the checks before a run) hold it for
milliseconds; a writer for as long as it writes C."""


def _locked_by_another(exc: OSError) -> bool:
    text = str(exc)
    return "unable to lock file" in text or "errno = 11" in text


def open_file(path: str, mode: str = "r", wait_s: float = BUSY_WAIT_S, **kwargs) -> h5py.File:
    """``h5py.File``, waiting (up to ``wait_s``) while another process holds HDF5's lock on it:
    two jobs that touch one file (one checking it, one writing its result) take turns instead
    of failing. Any other error is raised at once."""
    deadline, delay = time.monotonic() + wait_s, 0.01
    while True:
        try:
            return h5py.File(path, mode, **kwargs)
        except OSError as exc:
            if not _locked_by_another(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(0.25, 2 * delay)


@dataclass(frozen=True)
class DatasetRef:
    """A dataset in an HDF5 file, written ``FILE.h5:/path/to/dataset``."""

    file: str
    path: str

    @classmethod
    def parse(cls, text: str, what: str = "dataset") -> "DatasetRef":
        file, sep, path = str(text).rpartition(":")
        if not sep or not file or not path.startswith("/") or path == "/":
            raise InputError(f"{what} {text!r} must be written FILE.h5:/dataset")
        return cls(file, path)

    def __str__(self) -> str:
        return f"{self.file}:{self.path}"


def dataset_info(ref: DatasetRef, what: str = "input") -> tuple[tuple[int, int], np.dtype]:
    """Shape and dtype of a 2-D real floating dataset, or an InputError that says what is wrong."""
    if not os.path.exists(ref.file):
        raise InputError(f"{what} file {ref.file!r} does not exist")
    try:
        f = open_file(ref.file, "r")
    except OSError as exc:
        raise InputError(f"{what} file {ref.file!r} is not a readable HDF5 file ({exc})") from None
    with f:
        obj = f.get(ref.path)
        if obj is None:
            raise InputError(f"{what} dataset {ref.path!r} not found in {ref.file!r}")
        if not isinstance(obj, h5py.Dataset):
            raise InputError(f"{what} {ref} is a group, not a dataset")
        if obj.ndim != 2:
            raise InputError(f"{what} {ref} must be 2-D, has shape {obj.shape}")
        if obj.dtype.kind != "f":
            raise InputError(f"{what} {ref} must hold real floating-point numbers, has dtype {obj.dtype}")
        return tuple(int(n) for n in obj.shape), obj.dtype


def read_matrix(ref: DatasetRef, what: str = "input", rows=slice(None), cols=slice(None)) -> np.ndarray:
    """The (sub)matrix as C-ordered float64, after :func:`dataset_info` checks."""
    dataset_info(ref, what)
    with open_file(ref.file, "r") as f:
        return np.ascontiguousarray(f[ref.path][rows, cols], dtype=np.float64)


def check_output(ref: DatasetRef, force: bool, inputs=()) -> None:
    """Refuse, before any work, an output that cannot or must not be written.

    ``inputs``: the run's input refs; the output may share their file, never their dataset.
    """
    target = os.path.realpath(ref.file)
    if ref.path.lstrip("/").startswith(TMP_PREFIX):
        raise InputError(f"output {ref}: names starting with {TMP_PREFIX} are ozhpc's temporaries; choose another")
    check_output_file(ref.file, target, "output")
    for other in inputs:
        if other is not None and other.path == ref.path and same_file(other.file, target):
            raise InputError(f"output {ref} is an input of this run ({other}); choose another dataset")
    if os.path.exists(target):
        try:
            f = open_file(target, "r")
        except OSError as exc:
            if _locked_by_another(exc):
                raise InputError(f"output file {ref.file!r} stayed locked by another program for "
                                 f"{BUSY_WAIT_S:.0f} s; try again when it is done with it") from None
            raise InputError(f"output file {ref.file!r} exists and is not an HDF5 file") from None
        with f:
            target_exists(f, ref, force)


def check_output_file(name: str, target: str, what: str) -> None:
    """The file ``name`` (resolved to ``target``) may be created or written in place."""
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise InputError(f"{what} directory {parent!r} does not exist")
    if not writable(parent):
        raise InputError(f"{what} directory {parent!r} is not writable")
    if os.path.isdir(target):
        raise InputError(f"{what} {name!r} is a directory")
    if os.path.exists(target) and not writable(target):
        raise InputError(f"{what} file {name!r} is read-only (no write permission); ozhpc never changes "
                         "a file's permissions, even with --force: make it writable or choose another file")


def writable(path: str) -> bool:
    """Writable for us AND by its mode bits (root may write anything; we still honour 0444)."""
    try:
        return os.access(path, os.W_OK) and bool(os.stat(path).st_mode & 0o222)
    except OSError:
        return False


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (through symlinks and hard links)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def target_exists(f: h5py.File, ref: DatasetRef, force: bool) -> bool:
    """Whether ``ref.path`` is a dataset that ``force`` lets us replace; refuse groups and children."""
    parts = ref.path.strip("/").split("/")
    node = f
    for i, part in enumerate(parts):
        obj = node.get(part)
        if obj is None:
            return False
        prefix = "/" + "/".join(parts[:i + 1])
        if isinstance(obj, h5py.Group):
            node = obj
            continue
        if not isinstance(obj, h5py.Dataset):
            raise InputError(f"output {ref}: {prefix} is not a dataset or group; choose another path")
        if i < len(parts) - 1:
            raise InputError(f"output {ref}: {prefix} is a dataset and cannot hold {ref.path}; choose another path")
        if not force:
            raise InputError(f"output {ref} exists; pass --force to replace it")
        return True
    raise InputError(f"output {ref} is a group; ozhpc never replaces a group, even with --force: "
                     "name a dataset path")
