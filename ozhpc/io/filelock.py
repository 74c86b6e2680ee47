"""An advisory lock that serialises the ozhpc jobs writing one output file.

The lock is ``fcntl.flock`` on a sidecar file ``.NAME.ozhpc-lock`` beside the (symlink-resolved)
target, not on the HDF5 file itself: HDF5 takes its own ``flock`` on files it opens, and a
second lock on the same file would make HDF5's fail. The sidecar is removed on release; a
waiter that wakes up on a removed sidecar takes the lock again on the new one, so two jobs
never hold it at once. Killed jobs release it with their file descriptors (the kernel does),
and a sidecar they leave behind is empty and harmless (the next job reuses and removes it).
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
from contextlib import contextmanager

from ..errors import InputError

log = logging.getLogger("ozhpc")


def lock_path(target: str) -> str:
    """The sidecar lock file of ``target`` (a path already resolved with ``os.path.realpath``)."""
    head, tail = os.path.split(target)
    return os.path.join(head, f".{tail}.ozhpc-lock")


def _acquire(path: str) -> int:
    """An fd holding the exclusive lock on the sidecar that ``path`` names right now."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(f"cannot create the lock file {path!r} ({exc.strerror})") from None
        try:
            if not _lock(fd, path):
                return fd  # no locks on this file system: not serialised (logged)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            return fd
        os.close(fd)  # the holder removed it while we waited: lock the current one


NO_LOCKS = (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOLCK, errno.EINVAL)


def _lock(fd: int, path: str) -> bool:
    """Wait for the exclusive lock (a signal still ends the wait); False where locks are unsupported.

    ``flock`` first, POSIX ``lockf`` where a file system only has those, and a warning
    (not a failure) where it has neither (e.g. Lustre mounted without ``flock``).
    """
    for take in (fcntl.flock, fcntl.lockf):
        try:
            take(fd, fcntl.LOCK_EX)
            return True
        except OSError as exc:
            if exc.errno not in NO_LOCKS:
                raise
    log.warning("%s: this file system supports no file locks; jobs writing the same file at the "
                "same time are not serialised", path)
    return False


@contextmanager
def locked(target: str):
    """Hold the exclusive lock of ``target`` for the block (advisory: only ozhpc honours it)."""
    path = lock_path(target)
    fd = _acquire(path)
    try:
        yield
    finally:
        try:
            os.unlink(path)  # still holding the lock: nobody else can be inside now
        except OSError:
            pass
        os.close(fd)
