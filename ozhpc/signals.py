"""SIGINT / SIGTERM end the command with one line and exit status 128 + signal, no traceback.

The handler raises :class:`Interrupted` (a KeyboardInterrupt, so ``except Exception`` and the
collective error agreement let it through) in the main thread; context managers on the way
out remove their temporaries (:class:`~ozhpc.io.h5out.OutputTransaction`, the report's
temporary file) and ``entry_point`` exits. A rank blocked inside an MPI call never returns to
Python to run that handler, so a watcher thread, woken through ``signal.set_wakeup_fd``,
prints the line at once (rank 0 only) and ends the process ``EXIT_AFTER_S`` after the signal
if the main thread has not, removing the registered temporary files first. Every rank leaves
at that same moment (the launcher forwards the signal to all): a rank that left early would
make ``mpiexec`` kill the others, and report signal 9 instead of 130/143. Temporary datasets
inside an existing file cannot be removed from the watcher thread; the next job writing the
file removes them (:func:`ozhpc.io.h5out.remove_stale`). The commit of a result runs
:func:`deferred`: a signal during it takes effect right after it.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

EXIT_AFTER_S = 2.0
"""Seconds from the signal to the exit of every rank: long enough for a rank that the launcher
signals late, or that waits for a core on a loaded node, to note it before the first one leaves."""
SIGNALS = (signal.SIGINT, signal.SIGTERM)

temporary_files: set[str] = set()
"""Files the watcher removes when it has to end a stuck process (h5out registers its new files)."""
_state = {"command": "ozhpc", "root": True, "printed": False, "signum": None, "deadline": 0.0,
          "defer": 0, "pending": None}
_lock = threading.Lock()


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum, frame):
    if _state["defer"]:
        _state["pending"] = signum
        return
    for sig in SIGNALS:  # a second Ctrl-C must not interrupt the cleanup of the first
        signal.signal(sig, lambda *_: None)
    raise Interrupted(signum)


@contextmanager
def deferred():
    """A signal inside the block takes effect when it ends (a commit is never cut in two)."""
    _state["defer"] += 1
    try:
        yield
    finally:
        _state["defer"] -= 1
        if not _state["defer"] and _state["pending"] is not None:
            pending, _state["pending"] = _state["pending"], None
            _raise(pending, None)


def install(command: str, root: bool) -> None:
    """Handle SIGINT/SIGTERM for the rest of the process (call once, from the main thread)."""
    _state.update(command=command, root=root)
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    for sig in SIGNALS:
        signal.signal(sig, _raise)
    threading.Thread(target=_watch, args=(r,), name="ozhpc-signals", daemon=True).start()


def received() -> int | None:
    """The signal that arrived, if any."""
    return _state["signum"]


def _note(signum: int) -> None:
    """Record the first signal, fix the moment every rank leaves, print the line (rank 0, once)."""
    with _lock:
        if _state["signum"] is None:
            _state.update(signum=signum, deadline=time.monotonic() + EXIT_AFTER_S)
        if not _state["root"] or _state["printed"]:
            return
        _state["printed"] = True
    try:
        sys.stderr.write(f"ozhpc {_state['command']}: interrupted ({signal.Signals(signum).name})\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def leave(signum: int) -> None:
    """Exit with 128 + signum at the agreed moment, without MPI_Finalize (others may be stuck in MPI)."""
    _note(signum)
    time.sleep(max(0.0, _state["deadline"] - time.monotonic()))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(128 + _state["signum"])


def _watch(fd: int) -> None:
    while True:
        data = os.read(fd, 1)
        if not data:
            return
        if data[0] in SIGNALS:
            break
    _note(data[0])
    time.sleep(max(0.0, _state["deadline"] - time.monotonic()))
    for path in list(temporary_files):  # the main thread is stuck (in MPI): clean what we can
        try:
            os.remove(path)
        except OSError:
            pass
    leave(data[0])
