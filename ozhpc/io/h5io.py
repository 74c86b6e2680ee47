"""HDF5 datasets named ``FILE.h5:/path``: names, the one way files are opened to read, checks of
inputs and outputs before any work.

Dataset names are kept as HDF5 resolves them (:func:`dataset_path`), and an output is compared
with the inputs as files (device and inode) and as HDF5 objects, so no other spelling of an
input can be written over. Outputs never appear half-written at their final path
(:mod:`ozhpc.io.h5out` says how). An existing dataset is replaced only with ``force``, a group
never; other datasets in an existing output file are kept.
"""
from __future__ import annotations

import os
import posixpath
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass

import h5py
import numpy as np
from h5py import h5z

from ..errors import InputError, OptionError, literal
from ..ozaki.gemm import fp64_misfit
from . import filelock

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


def _busy(what: str, path: str) -> InputError:
    return InputError(f"{what} file {path!r} stayed locked by another program for {BUSY_WAIT_S:.0f} s; "
                      "try again when it is done with it")


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


def dataset_path(text: str) -> str:
    """``text`` as HDF5 resolves it: repeated ``/`` are one, ``.`` components name the group
    they are in (``..`` is an ordinary name in HDF5). ``//A``, ``/./A`` and ``/A`` are one name,
    so they compare equal wherever ozhpc compares or creates names. The InputError names what
    is not a dataset name: no leading ``/``, the root group, a trailing ``/`` (a group's name)."""
    if not text.startswith("/"):
        raise InputError("must start with '/'")
    if text.endswith("/"):
        raise InputError("must not end with '/' (that names a group)")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if not parts:
        raise InputError("is the root group, not a dataset")
    return "/" + "/".join(parts)


@dataclass(frozen=True)
class DatasetRef:
    """A dataset in an HDF5 file, written ``FILE.h5:/path/to/dataset``; ``path`` is kept as
    :func:`dataset_path` normalises it."""

    file: str
    path: str

    def __post_init__(self):
        try:
            object.__setattr__(self, "path", dataset_path(self.path))
        except InputError as exc:
            raise InputError(f"dataset {self.file}:{self.path}: the dataset name {exc}") from None

    @classmethod
    def parse(cls, text: str, what: str = "dataset") -> "DatasetRef":
        file, sep, path = str(text).rpartition(":")
        if "\0" in str(text):
            raise InputError(f"{what} {text!r} must not contain a NUL character")
        if not sep or not file or not path.startswith("/"):
            raise InputError(f"{what} {text!r} must be written FILE.h5:/dataset")
        try:
            return cls(file, dataset_path(path))
        except InputError as exc:
            raise InputError(f"{what} {text!r}: the dataset name {exc}") from None

    def __str__(self) -> str:
        return f"{self.file}:{self.path}"


SPECIAL_FILES = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                 (stat.S_ISSOCK, "a socket"))


def special_file(path: str) -> str | None:
    """What ``path`` (followed through symlinks) is when it is neither a regular file, a directory
    nor absent: "a FIFO", "a character device", ... Such a file is never opened (opening a FIFO
    waits for a writer) nor replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return next((kind for test, kind in SPECIAL_FILES if test(mode)), None)


def not_regular(what: str, name: str, kind: str) -> InputError:
    return OptionError(f"{what} {literal(repr(name))} is {kind}, not a regular file; ozhpc reads and writes only "
                       "regular files and never replaces anything else, even with {force=True}")


@contextmanager
def reading(path: str, what: str = "input"):
    """The one way ozhpc opens a file to read it: waits (up to ``BUSY_WAIT_S``) while another
    program writes it, and says in one line (InputError) why a file cannot be opened."""
    if not os.path.exists(path):
        raise InputError(f"{what} file {path!r} does not exist")
    if os.path.isdir(path):
        raise InputError(f"{what} file {path!r} is a directory, not an HDF5 file")
    kind = special_file(path)
    if kind:
        raise not_regular(f"{what} file", path, kind)
    try:
        f = open_file(path, "r")
    except OSError as exc:
        if _locked_by_another(exc):
            raise _busy(what, path) from None
        raise InputError(f"{what} file {path!r} is not a readable HDF5 file ({' '.join(str(exc).split())})") from None
    with f:
        yield f


def any_complex(*refs: DatasetRef) -> bool:
    """Whether any of the datasets holds complex numbers."""
    return any(dataset_info(ref)[1].kind == "c" for ref in refs)


def dataset_info(ref: DatasetRef, what: str = "input") -> tuple[tuple[int, int], np.dtype]:
    """Shape and dtype of a 2-D dataset of floating-point, integer or complex numbers (complex as
    h5py writes them: a compound of ``r`` and ``i``) that can be read as stored, or an InputError
    that says what is wrong (integers too wide for FP64 and long doubles beyond its range are
    refused where they are read: :func:`exact_float64`)."""
    with reading(ref.file, what) as f:
        try:
            obj = f.get(ref.path)
        except (KeyError, OSError, RuntimeError) as exc:  # a broken link on the way
            raise InputError(f"{what} {ref} cannot be opened ({exc})") from None
        if obj is None:
            raise InputError(f"{what} dataset {ref.path!r} not found in {ref.file!r}")
        if not isinstance(obj, h5py.Dataset):
            raise InputError(f"{what} {ref} is a group, not a dataset")
        if obj.ndim != 2:
            raise InputError(f"{what} {ref} must be 2-D, has shape {obj.shape}")
        if obj.dtype.kind not in "fiuc":
            raise InputError(f"{what} {ref} must hold real or complex numbers (floating point, integers or "
                             f"complex as h5py writes them), has dtype {obj.dtype}")
        check_readable(obj, ref, what)
        return tuple(int(n) for n in obj.shape), obj.dtype


def check_readable(dset: h5py.Dataset, ref: DatasetRef, what: str) -> None:
    """Refuse what HDF5 would read wrongly or not at all: a filter that is not installed (an
    error in the middle of a read), a virtual dataset with a missing source (read silently as
    fill values)."""
    plist = dset.id.get_create_plist()
    for i in range(plist.get_nfilters()):
        code, _, _, name = plist.get_filter(i)
        if not h5z.filter_avail(code):
            label = f"{code} ({name.decode(errors='replace')})" if name else str(code)
            raise InputError(f"{what} {ref} needs HDF5 filter {label} to be read, which is not installed "
                             "here (hdf5plugin provides the common ones)")
    if not dset.is_virtual:
        return
    for source in dset.virtual_sources():
        if "%" in source.file_name or "%" in source.dset_name:
            continue  # printf-style names of an unlimited mapping: HDF5 resolves them per block
        found = _vds_source(ref.file, source.file_name)
        if found is None:
            raise InputError(f"{what} {ref} is a virtual dataset whose source file {source.file_name!r} is "
                             "missing (HDF5 would read its part as fill values)")
        try:
            with open_file(found, "r") as g:
                present = isinstance(g.get(source.dset_name), h5py.Dataset)
        except OSError:
            present = False
        if not present:
            raise InputError(f"{what} {ref} is a virtual dataset whose source {found}:{source.dset_name} is "
                             "missing (HDF5 would read its part as fill values)")


def _vds_source(vds_file: str, name: str) -> str | None:
    """The source file a virtual dataset in ``vds_file`` reads, found where HDF5 looks
    (H5Pset_virtual_prefix: ``$HDF5_VDS_PREFIX``, the virtual dataset's directory, the name as
    given); None when there is none."""
    if name == ".":
        return vds_file
    if os.path.isabs(name):
        return name if os.path.isfile(name) else None
    prefix = os.environ.get("HDF5_VDS_PREFIX")
    for base in ([prefix] if prefix else []) + [os.path.dirname(vds_file), "."]:
        candidate = os.path.join(base, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def value_dtype(dtype) -> np.dtype:
    """What a dataset of ``dtype`` is computed in: complex128 for complex numbers, else float64."""
    return np.dtype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)


def exact_float64(values, ref, what: str = "input") -> np.ndarray:
    """``values`` read from dataset ``ref`` as C-ordered float64 (complex128 for complex values),
    or one InputError where the copy would not be its numbers (:func:`~ozhpc.ozaki.gemm.fp64_misfit`:
    an integer FP64 would round, a long double beyond FP64's range)."""
    values = np.asarray(values)
    why = fp64_misfit(values, "the dataset")
    if why:
        raise InputError(f"{what} {ref} holds {why}")
    return np.ascontiguousarray(values, dtype=value_dtype(values.dtype))


def check_output(ref: DatasetRef, force: bool, inputs=()) -> None:
    """Refuse, before any work, an output that cannot or must not be written.

    ``inputs``: the run's input refs; the output may share their file, never their dataset,
    whatever names the two are given (another spelling of the path or the file, a symlink, a
    hard link of the file or of the dataset, a soft or external link: HDF5 compares objects).
    """
    target = os.path.realpath(ref.file)
    if ref.path.lstrip("/").startswith(TMP_PREFIX):
        raise InputError(f"output {ref}: names starting with {TMP_PREFIX} are ozhpc's temporaries; choose another")
    check_output_file(ref.file, target, "output")
    filelock.check(target, ref.file)
    read = [(source, other) for other in inputs if other is not None for source in datasets_read(other)]
    for source, other in read:
        if source.path == ref.path and same_file(source.file, target):
            raise InputError(f"output {ref} is an input of this run ({_reading(other, source)}); choose another dataset")
    if not os.path.exists(target):
        return
    try:
        f = open_file(target, "r")
    except OSError as exc:
        if _locked_by_another(exc):
            raise _busy("output", ref.file) from None
        if h5py.is_hdf5(target):
            raise InputError(f"output file {ref.file!r} is damaged: HDF5 cannot open it ({exc})") from None
        raise InputError(f"output file {ref.file!r} exists and is not an HDF5 file") from None
    with f:
        check_intact(f, ref.file)
        if target_exists(f, ref, force):
            for source, other in read:
                if same_object(f[ref.path], source):
                    raise InputError(f"output {ref} is an input of this run ({_reading(other, source)}, the same "
                                     "HDF5 object); choose another dataset")


MAX_VDS_DEPTH = 8
"""Virtual datasets whose sources are virtual datasets, followed this deep."""


def datasets_read(ref: DatasetRef, depth: int = 0) -> list[DatasetRef]:
    """``ref`` and, for a virtual dataset, every dataset it reads (its sources, theirs, ...): an
    output must be none of them. Sources named by printf-style patterns are not followed."""
    out = [ref]
    if depth >= MAX_VDS_DEPTH:
        return out
    try:
        with reading(ref.file) as f:
            dset = f.get(ref.path)
            mapped = dset.virtual_sources() if isinstance(dset, h5py.Dataset) and dset.is_virtual else []
    except (InputError, KeyError, OSError, RuntimeError):
        return out  # an input that cannot be read is refused as an input
    for source in mapped:
        found = None if "%" in source.file_name + source.dset_name else _vds_source(ref.file, source.file_name)
        if found is not None:
            name = source.dset_name if source.dset_name.startswith("/") else "/" + source.dset_name
            out += datasets_read(DatasetRef(found, name), depth + 1)
    return out


def _reading(other: DatasetRef, source: DatasetRef) -> str:
    return str(other) if source is other else f"{other}, a virtual dataset that reads {source}"


def same_object(obj, ref: DatasetRef) -> bool:
    """Whether the dataset ``ref`` names is ``obj`` (HDF5 compares file and object address)."""
    try:
        with reading(ref.file) as g:
            other = g.get(ref.path)
            return other is not None and other.id == obj.id
    except (InputError, KeyError, OSError):
        return False  # an input that cannot be read is refused as an input


def check_intact(f: h5py.File, name: str) -> None:
    """Refuse an output file the write would fail on after the compute: its root group cannot be
    listed, or a temporary of a dead job (which the write removes) cannot be opened, as an
    older ozhpc that ran out of disk space could leave it."""
    key = "/"
    try:
        for key in [k for k in f if k.startswith(TMP_PREFIX)]:
            f[key]
    except (KeyError, OSError, RuntimeError) as exc:
        raise InputError(f"output file {name!r} is damaged: HDF5 cannot open {key} ({exc}); copy the "
                         "datasets you need into a new file and write there") from None


def foreign_symlink(path: str) -> tuple[str, int] | None:
    """The first symlink on the way to ``path`` that the kernel's ``fs.protected_symlinks``
    would not follow: in a sticky world-writable directory (``/tmp``), owned neither by us nor
    by the directory's owner. Such a link was planted by another user, and writing through it
    would write where they chose; nodes that set ``fs.protected_symlinks = 0`` follow it."""
    parts = [p for p in os.path.join(os.getcwd(), path).split("/") if p][::-1]  # a stack
    here, hops = "/", 0
    while parts:
        part = parts.pop()
        if part == ".":
            continue
        if part == "..":
            here = os.path.dirname(here)
            continue
        step = os.path.join(here, part)
        try:
            st = os.lstat(step)
        except OSError:
            return None  # the rest does not exist yet
        if not stat.S_ISLNK(st.st_mode):
            here = step
            continue
        d = os.stat(here)
        if d.st_mode & stat.S_ISVTX and d.st_mode & stat.S_IWOTH and st.st_uid not in (os.geteuid(), d.st_uid):
            return step, st.st_uid
        hops += 1
        if hops > 40:
            return None  # a loop: opening it fails on its own
        target = os.readlink(step)
        here = "/" if target.startswith("/") else here
        parts += [p for p in target.split("/") if p][::-1]
    return None


def check_output_file(name: str, target: str, what: str) -> None:
    """The file ``name`` (resolved to ``target``) may be created or written in place."""
    planted = foreign_symlink(name)
    if planted:
        raise InputError(f"{what} {name!r} goes through the symlink {planted[0]!r} of uid {planted[1]} in a "
                         "world-writable sticky directory; ozhpc never writes through another user's symlink there")
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise InputError(f"{what} directory {parent!r} does not exist")
    if not writable(parent):
        raise InputError(f"{what} directory {parent!r} is not writable")
    if os.path.isdir(target):
        raise InputError(f"{what} {name!r} is a directory")
    kind = special_file(target)
    if kind:
        raise not_regular(what if what == "report" else f"{what} file", name, kind)
    if os.path.exists(target) and not writable(target):
        raise OptionError(f"{what} file {literal(repr(name))} is read-only (no write permission); ozhpc never "
                          "changes a file's permissions, even with {force=True}: make it writable or choose "
                          "another file")


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
    """Whether ``ref.path`` is a dataset that ``force`` lets us replace; refuse groups and children,
    and a path that leaves the file (:func:`within_file`)."""
    within_file(f, ref, ref.path)
    parts = ref.path.lstrip("/").split("/")
    node = f
    for i, part in enumerate(parts):
        obj = node.get(part)
        prefix = "/" + "/".join(parts[:i + 1])
        if obj is None:
            if node.get(part, getlink=True) is not None:
                raise InputError(f"output {ref}: {prefix} is a soft or external link that points to nothing; "
                                 "choose another path, or remove the link")
            return False
        if isinstance(obj, h5py.Group):
            node = obj
            continue
        if not isinstance(obj, h5py.Dataset):
            raise InputError(f"output {ref}: {prefix} is not a dataset or group; choose another path")
        if i < len(parts) - 1:
            raise InputError(f"output {ref}: {prefix} is a dataset and cannot hold {ref.path}; choose another path")
        if not force:
            raise OptionError(f"output {literal(ref)} exists; pass {{force=True}} to replace it")
        return True
    raise OptionError(f"output {literal(ref)} is a group; ozhpc never replaces a group, even with "
                      "{force=True}: name a dataset path")


MAX_SOFT_LINKS = 16
"""Soft links followed on one output path at most (HDF5's own limit, H5L_NUM_LINKS)."""


def within_file(f: h5py.File, ref: DatasetRef, path: str, depth: int = 0) -> str:
    """``path`` in ``f`` with its soft links replaced by what they name, walked link by link
    without ever following an external link: one on the way, itself or behind a soft link, is
    refused (the result would go into another file, perhaps an input, opened read-write through
    the link). Returns the path of hard links it names (as far as it exists)."""
    group = "/"
    for part in [p for p in path.split("/") if p not in ("", ".")]:
        here = posixpath.join(group, part)
        link = f.get(here, getlink=True)  # ``group`` is reached through hard links only
        if link is None:
            return here  # the rest does not exist yet: it is created in this file
        if isinstance(link, h5py.ExternalLink):
            raise InputError(f"output {ref}: {here} is an external link (to {link.filename}:{link.path}); ozhpc "
                             "writes only into the file named, never through a link into another: choose another path")
        if isinstance(link, h5py.SoftLink):
            if depth >= MAX_SOFT_LINKS:
                raise InputError(f"output {ref}: more than {MAX_SOFT_LINKS} soft links on the way (a loop?); "
                                 "choose another path")
            here = within_file(f, ref, posixpath.join(group, link.path), depth + 1)
        group = here
    return group
