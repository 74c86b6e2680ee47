"""HDF5 datasets named ``FILE.h5:/path``: validated reads, atomic writes.

Outputs never appear half-written at their final path: data goes to a
temporary file in the same directory which is renamed over the target only once
complete. An existing dataset is replaced only with ``force``; other datasets in
an existing output file are kept.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

import h5py
import numpy as np

from ..errors import InputError

PARALLEL_HDF5 = bool(h5py.get_config().mpi)
ATTRS_PREFIX = "ozhpc_"


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
        f = h5py.File(ref.file, "r")
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
    with h5py.File(ref.file, "r") as f:
        return np.ascontiguousarray(f[ref.path][rows, cols], dtype=np.float64)


def check_output(ref: DatasetRef, force: bool) -> None:
    """Refuse an output that would overwrite a dataset (without ``force``) or cannot be written."""
    parent = os.path.dirname(os.path.abspath(ref.file))
    if not os.path.isdir(parent):
        raise InputError(f"output directory {parent!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"output directory {parent!r} is not writable")
    if os.path.exists(ref.file):
        try:
            with h5py.File(ref.file, "r") as f:
                exists = ref.path in f
        except OSError:
            raise InputError(f"output file {ref.file!r} exists and is not an HDF5 file") from None
        if exists and not force:
            raise InputError(f"output {ref} exists; pass --force to replace it")


def temporary_path(ref: DatasetRef, tag: str = "") -> str:
    head, tail = os.path.split(os.path.abspath(ref.file))
    return os.path.join(head, f".{tail}.{tag or os.getpid()}.tmp")


def begin_output(ref: DatasetRef, tag: str = "") -> str:
    """Create the temporary file that will become ``ref.file`` (a copy when it exists)."""
    tmp = temporary_path(ref, tag)
    if os.path.exists(ref.file):
        shutil.copyfile(ref.file, tmp)
    else:
        h5py.File(tmp, "w").close()
    return tmp


def commit_output(tmp: str, ref: DatasetRef) -> None:
    """Atomically move the finished temporary file to its final name."""
    os.replace(tmp, ref.file)


def abandon_output(tmp: str) -> None:
    if os.path.exists(tmp):
        os.remove(tmp)


def prepare_dataset(f: h5py.File, path: str, shape, attrs: dict | None = None) -> h5py.Dataset:
    """(Re)create the float64 output dataset with its provenance attributes."""
    if path in f:
        del f[path]
    dset = f.create_dataset(path, shape=shape, dtype="<f8")
    for key, value in (attrs or {}).items():
        dset.attrs[ATTRS_PREFIX + key] = value
    return dset


def write_matrix(ref: DatasetRef, data: np.ndarray, force: bool = False, attrs: dict | None = None) -> None:
    """Write a whole matrix atomically (one process)."""
    check_output(ref, force)
    tmp = begin_output(ref)
    try:
        with h5py.File(tmp, "a") as f:
            prepare_dataset(f, ref.path, data.shape, attrs)[...] = data
        commit_output(tmp, ref)
    except BaseException:
        abandon_output(tmp)
        raise
