"""SIGINT / SIGTERM end the command with one line and exit status 128 + signal, no traceback,
and leave the node as clean as a normal exit.

:func:`install` runs first thing in the entry point (``ozhpc/__main__.py``), before NumPy, h5py
or MPI are imported, so a signal during start-up is handled like any other. The handler raises
:class:`Interrupted` (a KeyboardInterrupt, so ``except Exception`` and the collective error
agreement let it through) in the main thread; context managers on the way out remove their
temporaries (:class:`~ozhpc.io.h5out.OutputTransaction`, the report's temporary file) and the
entry point calls :func:`leave`. Where Python cannot raise (the handler ran inside a finalizer
or a weakref callback, whose exceptions Python prints as "Exception ignored"), the exception is
swallowed and the signal delivered again at the next safe point (:func:`_unraisable`). A commit
of a result runs :func:`deferred`: a signal during it takes effect right after it.

A rank blocked inside an MPI call never returns to Python to run that handler, so a watcher
thread, woken through ``signal.set_wakeup_fd``, prints the line at once (rank 0 only) and ends
the process ``EXIT_AFTER_S`` after the signal if the main thread has not, removing the
registered temporary files first. Every rank of a node leaves at the same moment, the one the
first of them to note the signal fixed (:func:`_agreed_deadline`): the launcher kills the ranks
still running when one exits, and would report signal 9 instead of 130/143. Temporary datasets inside an existing file cannot be removed from
the watcher thread; the next job writing the file removes them
(:func:`ozhpc.io.h5out.remove_stale`).

MPICH keeps one named shared-memory segment per node in ``/dev/shm`` until ``MPI_Finalize``,
which a process that leaves on a signal (or is killed) never reaches: :func:`forget_mpi_segments`
unlinks it as soon as every rank of the node has mapped it (the mappings stay valid), and
:func:`leave` unlinks whatever this process still maps, so nothing is left behind.
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
LAUNCHER_RANK_VARS = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")
SHM_DIR = "/dev/shm"
MPI_SEGMENTS = ("mpich_shm_",)
"""Names of MPI libraries' per-node segments in SHM_DIR that may be unlinked once mapped (MPICH
maps it at MPI_Init and never opens it by name again)."""

temporary_files: set[str] = set()
"""Files the watcher removes when it has to end a stuck process (h5out registers its new files)."""
_state = {"command": "ozhpc", "root": True, "printed": False, "signum": None, "deadline": 0.0,
          "defer": 0, "pending": None, "leaving": False, "installed": False, "agreed": None}
_lock = threading.RLock()  # the main thread's handler may run again while it holds it
_again = threading.Event()   # set by the unraisable hook: the watcher delivers the signal again
AGAIN_AFTER_S = 0.02
"""Pause before the signal is delivered again: the hook and the finalizer it ran in have returned."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def env_rank() -> int:
    """This process's rank as the launcher's environment gives it (0 without a launcher)."""
    for name in LAUNCHER_RANK_VARS:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def _handle(signum, frame):
    _note(signum)
    if _state["leaving"]:
        return
    if _state["defer"]:
        _state["pending"] = signum
        return
    for sig in SIGNALS:  # a second Ctrl-C must not interrupt the cleanup of the first
        signal.signal(sig, _ignore)
    raise Interrupted(signum)


def _ignore(signum, frame):
    _note(signum)


def _unraisable(default):
    """``sys.unraisablehook`` that swallows an :class:`Interrupted` raised where Python could not
    propagate it (a finalizer, a weakref callback) and delivers the signal again, so the main
    thread raises it at its next bytecode instead of printing "Exception ignored"."""
    def hook(unraisable):
        if not isinstance(unraisable.exc_value, Interrupted):
            return default(unraisable)
        if not _state["leaving"]:  # not from here: raised in this hook, it would fail the hook
            signal.signal(unraisable.exc_value.signum, _handle)
            _again.set()
        return None
    return hook


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
            _handle(pending, None)


def install(command: str | None = None, root: bool | None = None) -> None:
    """Handle SIGINT/SIGTERM for the rest of the process (from the main thread; a second call only
    updates the command and whether this rank prints). ``command``: the word after ``ozhpc`` in
    the line it prints (default: from ``sys.argv``); ``root``: this rank prints it (default:
    rank 0 of the launcher)."""
    _state.update(command=command if command is not None else _command_word(sys.argv[1:]),
                  root=env_rank() == 0 if root is None else root)
    if _state["installed"]:
        return
    _state["installed"] = True
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(r,), name="ozhpc-signals", daemon=True).start()
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    for sig in SIGNALS:
        signal.signal(sig, _handle)


def _command_word(argv) -> str:
    """The command of an ``ozhpc`` command line, before it is parsed (the first word not an option)."""
    return next((a for a in argv if not a.startswith("-")), "")


def received() -> int | None:
    """The signal that arrived, if any."""
    return _state["signum"]


def _note(signum: int) -> None:
    """Record the first signal, fix the moment every rank leaves, print the line (rank 0, once).
    Written with os.write: the main thread may be inside a write to sys.stderr."""
    with _lock:
        if _state["signum"] is None:
            _state.update(signum=signum, deadline=_agreed_deadline(time.monotonic() + EXIT_AFTER_S))
        if not _state["root"] or _state["printed"]:
            return
        _state["printed"] = True
    command = f"ozhpc {_state['command']}" if _state["command"] else "ozhpc"
    try:
        os.write(2, f"{command}: interrupted ({signal.Signals(signum).name})\n".encode())
    except OSError:
        pass


def _deadline_file() -> str | None:
    """Where the ranks of this node agree on the moment they leave: named after the launcher's
    process that started them (its proxy, or slurmstepd), so one per job and node; None
    without a launcher."""
    if not any(name in os.environ for name in LAUNCHER_RANK_VARS):
        return None
    return os.path.join(SHM_DIR, f"ozhpc-leave-{os.geteuid()}-{os.getppid()}")


def _agreed_deadline(mine: float) -> float:
    """The moment the first rank of this node to note the signal chose (CLOCK_MONOTONIC is one
    clock for the whole node), else ``mine``. The launcher kills the ranks still running the
    moment one of them exits after a signal: they must leave within milliseconds of each other,
    closer than the ranks note a signal on a loaded node. The file is written whole (linked into
    place) and removed by :func:`leave`."""
    path = _state["agreed"] = _deadline_file()  # named now: the launcher may be gone when we leave
    if path is None:
        return mine
    for _ in range(2):
        tmp = f"{path}.{os.getpid()}"
        try:
            with open(tmp, "w") as f:
                f.write(repr(mine))
            os.link(tmp, path)
            return mine
        except FileExistsError:
            try:
                with open(path) as f:
                    agreed = float(f.read())
            except (OSError, ValueError):
                return mine
            if abs(agreed - mine) < EXIT_AFTER_S:
                return agreed
            _unlink(path)  # left by an earlier job whose launcher had the same pid
        except OSError:
            return mine
        finally:
            _unlink(tmp)
    return mine


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def forget_mpi_segments(mpi) -> None:
    """Unlink the MPI library's named per-node segments once every rank of the node has mapped
    them (collective over ``mpi.COMM_WORLD``; ``mpi``: the MPI module the caller runs on, so this
    module imports no MPI itself): the mappings stay, the names go."""
    node = mpi.COMM_WORLD.Split_type(mpi.COMM_TYPE_SHARED)
    try:
        node.Barrier()
        _unlink_segments()
    finally:
        node.Free()


def _unlink_segments() -> None:
    """Unlink this process's mapped MPI segments in SHM_DIR (owned by this user)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[5].strip() for line in maps if f" {SHM_DIR}/" in line}
    except (OSError, IndexError):
        return
    for path in paths:
        name = os.path.basename(path)
        if path.endswith("(deleted)") or os.path.dirname(path) != SHM_DIR or not name.startswith(MPI_SEGMENTS):
            continue
        try:
            if os.stat(path).st_uid == os.geteuid():
                os.unlink(path)
        except OSError:
            pass  # another rank of the node was first


def leave(signum: int) -> None:
    """Exit with 128 + signum at the agreed moment, without MPI_Finalize (others may be stuck in
    MPI), after removing the registered temporary files and this process's MPI segments."""
    _state["leaving"] = True
    _note(signum)
    for sig in SIGNALS:
        try:
            signal.signal(sig, signal.SIG_IGN)
        except ValueError:
            pass  # not the main thread: the watcher
    for path in list(temporary_files):
        try:
            os.remove(path)
        except OSError:
            pass
    _unlink_segments()
    time.sleep(max(0.0, _state["deadline"] - time.monotonic()))
    if _state["agreed"]:
        _unlink(_state["agreed"])
    _flush_streams()
    os._exit(128 + _state["signum"])


def _flush_streams() -> None:
    """Flush stdout and stderr, ignoring a closed or broken stream (the process is leaving)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, RuntimeError):
            pass


def exit(code: int) -> None:  # noqa: A001 -- the process's exit, as sys.exit
    """End the process with ``code`` (MPI_Finalize and the atexit functions already ran, see the
    entry point), or as :func:`leave` when a signal arrived."""
    _state["leaving"] = True  # from here the handler only notes a signal
    if _state["signum"] is not None:
        leave(_state["signum"])
    _flush_streams()
    if _state["signum"] is not None:  # it came during the flush
        leave(_state["signum"])
    # sys.exit, not os._exit: a rank that _exits right after MPI_Finalize is now and then taken
    # for a failure by MPICH's launcher, which then kills the other ranks (exit 9, measured 1-6 in
    # 10 runs of mpiexec -n 4); the handlers stay installed through the interpreter's last steps
    sys.exit(code)


def _watch(fd: int) -> None:
    while True:
        data = os.read(fd, 1)
        if not data:
            return
        if data[0] in SIGNALS:
            break
    _note(data[0])
    while _again.wait(max(0.0, _state["deadline"] - time.monotonic())):
        _again.clear()
        time.sleep(AGAIN_AFTER_S)
        signal.raise_signal(_state["signum"])  # the main thread's handler raises it at its next bytecode
    leave(data[0])  # the main thread is stuck (in MPI) or still cleaning up: leave now
