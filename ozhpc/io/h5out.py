"""One result dataset written into an HDF5 file without copying the file.

Under the file's advisory lock (:mod:`ozhpc.io.filelock`, held from start to commit) the
result is written to a new dataset ``/.ozhpc-tmp-<tag>`` inside the target file (into a new
file ``.NAME.ozhpc-<tag>.tmp`` beside it when the target does not exist yet), then renamed to
its final path only once complete. An old dataset there (``force``) is first renamed aside,
deleted only once the new one has its name, and renamed back if that fails. So a killed job
leaves no partial result at the final name, only a temporary that the next writer of the file
removes (it holds the lock, so every temporary it finds is from a dead job). The file itself is
never replaced: its mode, owner, hard links and the symlinks pointing at it stay as they are,
and its other datasets are not touched.

Full disks: HDF5 cannot recover from a write that fails for lack of space (ENOSPC, EDQUOT, or
EFBIG past ``ulimit -f``): its metadata then points past the end of the file. So before each
session that changes the file, the space it can grow by is reserved on disk
(``posix_fallocate``: C's bytes plus ``SLACK`` for metadata) while the file is still unchanged;
no room means one line (InputError) and an intact file. The result's own bytes are then written
into blocks that already exist. (Copy-on-write file systems, e.g. btrfs or ZFS, allocate again
on every write: there the reservation is only a check.)

Space: the dataset is contiguous and allocated when created (no fill). Files ozhpc creates
keep their free-space map (HDF5 "persistent free space", serial HDF5 only), so a rerun with
``force`` reuses the space its previous result freed: such a file holds at most two results'
worth of space per dataset. HDF5 never shrinks a file below its last object; ``h5repack``
rewrites one compactly.
"""
from __future__ import annotations

import errno
import logging
import os
import posixpath
import resource
import secrets
from contextlib import ExitStack, contextmanager

import h5py
import numpy as np
from h5py import h5d, h5p

from .. import signals
from ..errors import InputError
from . import h5io
from .filelock import locked

TMP_PREFIX = h5io.TMP_PREFIX
SLACK = 256 << 10
"""Bytes reserved beyond C for the metadata one session writes (object headers, attributes,
links, the free-space map): about 12 KiB for a result with ozhpc's attributes."""
NO_FALLOCATE = (errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS)
log = logging.getLogger("ozhpc")


def new_tag() -> str:
    """A name part unique to this write (pid and random bits)."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def temp_file_path(target: str, tag: str) -> str:
    head, tail = os.path.split(target)
    return os.path.join(head, f".{tail}.ozhpc-{tag}.tmp")


def check_size_limit(path: str, nbytes: int) -> None:
    """Refuse, before the compute, an output file that would grow past this process's file size
    limit (``ulimit -f``, RLIMIT_FSIZE) while a result of ``nbytes`` is written: C and its metadata,
    and the reservation for the commit's metadata on top (:func:`reserve`), ``2 * SLACK`` in all."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return
    target = os.path.realpath(path)
    peak = (os.path.getsize(target) if os.path.isfile(target) else 0) + nbytes + 2 * SLACK
    if peak > soft:
        raise InputError(f"output file {path!r} may grow to {peak} bytes while the result is written, past this "
                         f"process's file size limit of {soft} bytes (ulimit -f)")


def reserve(path: str, nbytes: int = 0, offset: int | None = None, name: str | None = None) -> None:
    """Make sure ``nbytes`` (+ ``SLACK``) past the end of ``path`` (``offset`` None), or its
    range ``offset:offset+nbytes``, have blocks on disk, or raise an InputError naming the file
    as ``name``; the file's contents are unchanged either way (a failed reservation is undone)."""
    fallocate = getattr(os, "posix_fallocate", None)  # not on macOS
    if fallocate is None:
        return
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        start, length = (size, nbytes + SLACK) if offset is None else (offset, nbytes)
        try:
            if length > 0:
                fallocate(fd, start, length)
        except OSError as exc:
            if exc.errno in NO_FALLOCATE:
                return  # this file system cannot reserve: the write itself finds out
            if os.fstat(fd).st_size > size:
                os.ftruncate(fd, size)
            why = "past this process's file size limit (ulimit -f)" if exc.errno == errno.EFBIG else exc.strerror
            raise InputError(f"no room for {max(0, start + length - size)} more bytes in {name or path!r} "
                             f"({why}); the file was not changed") from None
    finally:
        os.close(fd)


@contextmanager
def open_output(path: str, mode: str = "r+", room: int | None = None, name: str | None = None, **kwargs):
    """``h5py.File`` with the failure to open turned into one clear line. ``room``: bytes the
    session may add (C's, or 0 for metadata alone), reserved first (:func:`reserve`; ``name``:
    the file as the user named it); None for sessions that only write into space already
    allocated."""
    if room is not None:
        reserve(path, room, name=name)
    try:
        f = h5io.open_file(path, mode, **kwargs)
    except OSError as exc:
        raise InputError(f"cannot open output file {path!r} for writing ({exc}); is it open in "
                         "another program?") from None
    with f:
        yield f


def stale_files(target: str) -> list[str]:
    """The temporary files beside ``target`` that writers of a new file left (live or dead)."""
    head, tail = os.path.split(target)
    return [os.path.join(head, name) for name in os.listdir(head)
            if name.startswith(f".{tail}.ozhpc-") and name.endswith(".tmp")]


def remove_stale(target: str, f: h5py.File | None) -> None:
    """Delete what killed jobs left (call with the lock held: then no live job owns any). A file
    this user may not remove (another user's, in a sticky directory) is left: its name is unique."""
    for path in stale_files(target):
        log.info("removing %s, left by a job that was killed", path)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove %s, left by a job that was killed (%s)", path, exc.strerror)
    for name in [n for n in (f or {}) if n.startswith(TMP_PREFIX)]:
        log.info("removing %s:/%s, left by a job that was killed", target, name)
        try:
            del f[name]
        except (KeyError, OSError, RuntimeError) as exc:
            raise InputError(f"output file {target!r} is damaged: HDF5 cannot remove the temporary /{name} "
                             f"of a dead job ({exc}); copy the datasets you need into a new file") from None


def stale_bytes(target: str) -> int:
    """Bytes on disk that the temporaries in and beside ``target`` hold (a temporary holds C's)."""
    held = sum(os.stat(path).st_blocks * 512 for path in stale_files(target) if os.path.isfile(path))
    if os.path.isfile(target):
        with h5io.open_file(target, "r") as f:
            held += sum(f[n].id.get_storage_size() for n in f if n.startswith(TMP_PREFIX))
    return held


def clear_stale(path: str, remove: bool = True) -> int:
    """Before the compute: what dead jobs left in and beside the output file ``path`` (after a
    full disk, a temporary that still holds C's bytes) is removed under the file's lock, so the
    disk check that follows counts the space it gave back; ``remove`` False (a dry run): only
    counted, as what removing them would give back at most. Returns the bytes to count as free
    on top of the file system's (0 once removed). Nothing is touched while another job holds
    the lock: its temporaries may be live."""
    target = os.path.realpath(path)
    try:
        held = stale_bytes(target)
    except (OSError, KeyError, RuntimeError):
        return 0  # a damaged file or an unreadable temporary: check_output says so
    if not held or not remove:
        return held
    with locked(target, wait=False) as mine:
        if not mine:
            return 0
        if os.path.exists(target):
            with open_output(target, room=0, name=path) as f:
                remove_stale(target, f)
        else:
            remove_stale(target, None)
    return 0


def create_file(path: str) -> None:
    """A new, empty HDF5 file that keeps its free-space map (space reuse on reruns)."""
    kwargs = {} if h5io.PARALLEL_HDF5 else dict(fs_strategy="fsm", fs_persist=True, fs_threshold=1)
    try:
        h5io.open_file(path, "w-", wait_s=0, **kwargs).close()
    except OSError as exc:
        raise InputError(f"cannot create the output file {path!r} ({exc})") from None


def create_dataset(f: h5py.File, name: str, shape, attrs: dict | None):
    """The float64 result dataset, contiguous and allocated now (no fill: every entry is written),
    its bytes reserved on disk (HDF5 may have placed it in free space inside the file)."""
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5d.FILL_TIME_NEVER)
    dset = f.create_dataset(name, shape=tuple(shape), dtype="<f8", dcpl=dcpl)
    for key, value in (attrs or {}).items():
        dset.attrs[h5io.ATTRS_PREFIX + key] = value
    offset = dset.id.get_offset()
    if offset is not None:
        reserve(f.filename, dset.id.get_storage_size(), offset)
    return dset


def publish_file(tmp: str, target: str) -> None:
    """Give the finished new file its final name, never over a file that appeared meanwhile."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise InputError(f"output file {target!r} was created by another program during this run; "
                         "it was not replaced") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        os.rename(tmp, target)  # no hard links here; the lock keeps other ozhpc jobs out
        return
    os.unlink(tmp)


class OutputTransaction:
    """Rank 0's side of one output write: lock, checks, temporary dataset, commit or abort.

    ``with OutputTransaction(ref, force, tag) as txn: txn.create(shape, attrs); <write
    txn.tmp_name in txn.file>; txn.commit(digest)``. Leaving the block without ``commit``
    (an error, a signal) removes the temporary; the lock is held for the whole block.
    """

    def __init__(self, ref: h5io.DatasetRef, force: bool, tag: str):
        self.ref, self.force = ref, force
        self.target = os.path.realpath(ref.file)  # through symlinks: the file they point to
        self.tmp_name = f"/{TMP_PREFIX}{tag}"
        self.file = self.target
        self.new_file = False
        self.done = False
        self._tag = tag
        self._stack = ExitStack()

    def __enter__(self) -> "OutputTransaction":
        self._stack.enter_context(locked(self.target))
        try:
            self._begin()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if not self.done:
                self.abort()
        finally:
            self._stack.close()

    def _begin(self) -> None:
        """Check again under the lock (another job may have written meanwhile), clear leftovers."""
        h5io.check_output_file(self.ref.file, self.target, "output")
        if os.path.exists(self.target):
            with open_output(self.target, room=0, name=self.ref.file) as f:
                h5io.target_exists(f, self.ref, self.force)
                remove_stale(self.target, f)
        else:
            remove_stale(self.target, None)
            self.new_file = True
            self.file = temp_file_path(self.target, self._tag)
            signals.temporary_files.add(self.file)
            create_file(self.file)

    def open(self, mode: str = "r+", room: int | None = None, **kwargs):
        return open_output(self.file, mode, room, name=self.ref.file, **kwargs)

    def create(self, shape, attrs: dict | None = None) -> None:
        with self.open(room=8 * int(np.prod(shape))) as f:
            create_dataset(f, self.tmp_name, shape, attrs)

    def commit(self, digest: str | None = None) -> None:
        """Rename the finished temporary into place; an old dataset there is renamed aside first
        and deleted only once the new one has its name (renamed back if that fails)."""
        with signals.deferred():
            with self.open(room=0) as f:
                if digest is not None:
                    f[self.tmp_name].attrs[h5io.ATTRS_PREFIX + "sha256"] = digest
                replace = h5io.target_exists(f, self.ref, self.force)
                parent = posixpath.dirname(self.ref.path)
                if parent != "/":
                    f.require_group(parent)
                if replace:
                    aside = f"{self.tmp_name}-old"
                    f.move(self.ref.path, aside)
                    try:
                        f.move(self.tmp_name, self.ref.path)
                    except BaseException:
                        f.move(aside, self.ref.path)
                        raise
                    del f[aside]
                else:
                    f.move(self.tmp_name, self.ref.path)
            if self.new_file:
                publish_file(self.file, self.target)
                signals.temporary_files.discard(self.file)
            self.done = True

    def abort(self) -> None:
        """Remove the temporary; never raises (it runs while another error is on its way)."""
        try:
            if self.new_file:
                if os.path.exists(self.file):
                    os.remove(self.file)
                signals.temporary_files.discard(self.file)
            elif os.path.exists(self.file):
                with self.open(room=0) as f:
                    if self.tmp_name in f:
                        del f[self.tmp_name]
        except Exception as exc:  # noqa: BLE001 -- the next writer removes it (remove_stale)
            log.warning("could not remove the temporary %s:%s (%s); the next write removes it",
                        self.file, self.tmp_name, exc)

