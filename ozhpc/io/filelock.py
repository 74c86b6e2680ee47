"""An advisory lock that serialises the ozhpc jobs writing one output file.

The lock is ``fcntl.flock`` on a sidecar file ``.NAME.ozhpc-lock`` beside the (symlink-resolved)
target, not on the HDF5 file itself: HDF5 takes its own ``flock`` on files it opens, and a
second lock on the same file would make HDF5's fail. The sidecar is removed on release; a
waiter that wakes up on a removed sidecar takes the lock again on the new one, so two jobs
never hold it at once. Killed jobs release it with their file descriptors (the kernel does),
and a sidecar they leave behind is empty and harmless (the next job reuses and removes it).

Other users: a sidecar that another user's dead job left (mode 0644: not writable for us) is
opened read-only and, holding it shared, removed where the directory lets us (a sidecar of our
own is then locked), else locked read-only (``flock`` needs no write access, except on NFS), so
it never fails a run after the compute. One that another user's job holds at the check is
refused before the compute (:func:`check`). The sidecar is never opened through a symlink, and
anything but a regular file there is refused.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
from contextlib import contextmanager

from ..errors import InputError

log = logging.getLogger("ozhpc")


def lock_path(target: str) -> str:
    """The sidecar lock file of ``target`` (a path already resolved with ``os.path.realpath``)."""
    head, tail = os.path.split(target)
    return os.path.join(head, f".{tail}.ozhpc-lock")


NO_LOCKS = (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOLCK, errno.EINVAL)


NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""Never through a symlink, and never waiting in ``open`` (a FIFO planted there)."""


def _open(path: str, create: bool = True) -> tuple[int, bool]:
    """(fd, writable) on the sidecar ``path``: read-write (created if ``create``), or read-only
    where it is another user's file that we may not write (``flock`` needs no write access)."""
    try:
        try:
            fd, writable = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0) | NO_FOLLOW, 0o644), True
        except PermissionError:
            fd, writable = os.open(path, os.O_RDONLY | NO_FOLLOW), False
    except OSError as exc:
        why = "a symbolic link, which ozhpc never follows there" if exc.errno == errno.ELOOP else exc.strerror
        raise InputError(f"cannot open the lock file {path!r} ({why}); remove it") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"the lock file {path!r} is not a regular file; remove it")
    return fd, writable


def check(target: str, name: str) -> None:
    """Refuse, before the compute, a lock that the write could not take (a symlink, not a regular
    file, unreadable) or that another user's job holds now (``name``: the output as the user
    named it). Our own jobs' locks are waited for when the write starts, as always; a sidecar
    left by a dead job of anyone is not locked and is taken over then."""
    path = lock_path(target)
    try:
        owner = os.lstat(path).st_uid
    except FileNotFoundError:
        return  # created when the write starts (the directory is writable: checked)
    fd, _ = _open(path, create=False)
    try:
        if owner == os.geteuid():
            return
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: the ranks of this job probe at once
    except BlockingIOError:
        raise InputError(f"output file {name!r} is being written by another user's job (its lock file {path!r}, "
                         f"owned by uid {owner}, is held); try again when that job is done") from None
    except OSError as exc:
        if exc.errno not in NO_LOCKS:
            raise
    finally:
        os.close(fd)  # releases the probe's lock


def _acquire(path: str, wait: bool) -> int:
    """An fd holding the exclusive lock on the sidecar that ``path`` names right now
    (BlockingIOError at once, without ``wait``, where another job holds it)."""
    while True:
        fd, writable = _open(path)
        try:
            if not writable and _removed(fd, path, wait):
                os.close(fd)
                continue  # another user's sidecar, of a dead job: lock one of our own
            if not _lock(fd, path, wait):
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


def _removed(fd: int, path: str, wait: bool) -> bool:
    """Remove the sidecar ``path`` (open read-only as ``fd``: another user's) while holding it
    shared, so no job is inside; False where we may not remove it (a sticky directory) or the
    file system has no ``flock``: then it is locked read-only. (NFS locks exclusively only files
    open for writing, so a sidecar of our own is needed there.)"""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | (0 if wait else fcntl.LOCK_NB))
    except OSError as exc:  # BlockingIOError included: busy, without ``wait``
        if exc.errno in NO_LOCKS:
            return False
        raise
    try:
        if os.path.samestat(os.fstat(fd), os.stat(path)):
            os.unlink(path)
        return True  # removed, or by its holder meanwhile: lock the current one
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _lock(fd: int, path: str, wait: bool = True) -> bool:
    """Wait for the exclusive lock (a signal still ends the wait; without ``wait``, BlockingIOError
    where it is held); False where locks are unsupported.

    ``flock`` first, POSIX ``lockf`` where a file system only has those, and a warning
    (not a failure) where it has neither (e.g. Lustre mounted without ``flock``).
    """
    for take in (fcntl.flock, fcntl.lockf):
        try:
            take(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            return True
        except OSError as exc:
            if not wait and exc.errno in (errno.EAGAIN, errno.EACCES):  # lockf says EACCES
                raise BlockingIOError(exc.errno, exc.strerror) from None
            if exc.errno == errno.EBADF:  # read-only: NFS, or lockf, lock only what is open for writing
                raise InputError(f"cannot lock {path!r}: it is another user's lock file, which this file system "
                                 "locks only for its owner; ask them to remove it") from None
            if exc.errno not in NO_LOCKS:
                raise
    log.warning("%s: this file system supports no file locks; jobs writing the same file at the "
                "same time are not serialised", path)
    return False


@contextmanager
def locked(target: str, wait: bool = True):
    """Hold the exclusive lock of ``target`` for the block (advisory: only ozhpc honours it).
    Yields True; without ``wait``, False at once (not holding it) where another job holds it."""
    path = lock_path(target)
    try:
        fd = _acquire(path, wait)
    except BlockingIOError:
        yield False
        return
    try:
        yield True
    finally:
        try:
            os.unlink(path)  # still holding the lock: nobody else can be inside now
        except OSError:
            pass
        os.close(fd)
