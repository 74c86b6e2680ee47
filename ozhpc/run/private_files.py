"""Small files only this user may write: ozhpc's config directory, read and written safely.

What such a file says steers this user's runs, so, as for the kernel cache
(:func:`ozhpc.engines.toolchain.untrusted`), it is believed only where no other user could have
written it:

* the directory and every ancestor are owned by this user or root and not writable by group or
  others (a sticky ancestor such as /tmp is fine), and no component of its path is a symbolic link
  owned by another user (who could re-point it);
* the file itself is a regular file owned by this user or root, not writable by group or others,
  and opened without following a symbolic link;
* a write goes to a fresh temporary file (``mkstemp``: 0600, never an existing name) in that
  directory, renamed over the file: a link planted at the name is replaced, never followed.

A check that fails raises :class:`UntrustedFile` (an :class:`InputError`) with one line saying why.
"""
from __future__ import annotations

import os
import stat
import tempfile

from ..engines.toolchain import objection
from ..errors import InputError

MAX_BYTES = 1 << 20
"""A larger file is not one ozhpc wrote."""


class UntrustedFile(InputError):
    """The file or its directory could be written by another user, or is not a regular file."""


def config_dir(environ=os.environ) -> str:
    """``$XDG_CONFIG_HOME/ozhpc``, default ``~/.config/ozhpc``; a relative XDG_CONFIG_HOME is
    ignored, as the XDG base directory specification says (it would name another directory in
    every working directory)."""
    base = environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "ozhpc")


def directory_objection(path: str) -> str | None:
    """Why another user could change what is in the directory ``path`` (existing or not), or None."""
    try:
        return _directory_objection(path)
    except OSError as exc:
        return f"{path} cannot be checked ({exc.strerror})"


def _directory_objection(path: str) -> str | None:
    uid = os.geteuid()
    here = os.sep
    for part in os.path.abspath(path).split(os.sep)[1:]:
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (uid, 0):
            return f"{here} is a symbolic link owned by another user (uid {st.st_uid})"
    real = os.path.realpath(path)
    while not os.path.exists(real):   # not there yet: it would be created 0700 in its parent
        real = os.path.dirname(real)
    here, sticky_ok = real, os.path.realpath(path) != real
    while True:
        reason = objection(here, os.stat(here), uid, sticky_ok)
        if reason or here == os.path.dirname(here):
            return reason
        here, sticky_ok = os.path.dirname(here), True


def read_private(path: str) -> bytes | None:
    """The bytes of ``path``, or None when there is no such file."""
    reason = directory_objection(os.path.dirname(path))
    if reason:
        raise UntrustedFile(reason)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise UntrustedFile(f"{path} is a symbolic link") from None
        raise UntrustedFile(f"{path} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedFile(f"{path} is not a regular file")
        reason = objection(path, st)
        if reason:
            raise UntrustedFile(reason)
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise UntrustedFile(f"{path} is larger than {MAX_BYTES} bytes")
    return data


def write_private(path: str, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically, creating its directory 0700 where it is missing."""
    directory = os.path.dirname(path)
    reason = directory_objection(directory)
    if reason:
        raise UntrustedFile(reason)
    try:
        _make_dirs(directory)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write {path} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise InputError(f"cannot write {path} ({exc.strerror})") from None


def _make_dirs(path: str) -> None:
    """``path`` and its missing parents, each created 0700 (``os.makedirs`` gives the parents
    the umask's mode, which may let the group write)."""
    if not os.path.isdir(path):
        _make_dirs(os.path.dirname(path))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
