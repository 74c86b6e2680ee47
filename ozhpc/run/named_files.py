"""Reading a small file the user names (a job file, a report): a regular file only, so that a FIFO
never waits for a writer and a device is never read forever."""
from __future__ import annotations

import os
import stat

from ..errors import InputError


def read_regular(path: str, what: str) -> bytes:
    """The bytes of ``path``, or one InputError line starting with ``what`` (say ``"job file 'x'"``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode):
                with os.fdopen(os.dup(fd), "rb") as f:
                    return f.read()
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise InputError(f"{what} does not exist") from None
    except OSError as exc:
        raise InputError(f"{what} cannot be read ({exc.strerror})") from None
    raise InputError(f"{what} is {'a directory' if stat.S_ISDIR(mode) else 'not a regular file'}")
