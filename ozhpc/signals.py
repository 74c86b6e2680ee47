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
registered temporary files first (MPI_Init and MPI_Finalize run without the GIL for it,
:mod:`ozhpc.parallel.mpi`). Temporary datasets inside an existing file cannot be removed from
the watcher thread; the next job writing the file removes them
(:func:`ozhpc.io.h5out.remove_stale`).

The launcher kills the other ranks the moment one that joined MPI exits without finalizing it,
and reports the signal 9 it used unless it no longer forwards any rank's output. So every rank
leaves at the same moment, the one the first of them to note the signal fixed
(:func:`_agreed_deadline`), and each closes its standard output and error as soon as it notes
the signal (:func:`_silence`), long before that moment. A normal exit ends with the C library's
``exit`` (:func:`exit`): MPICH tells its launcher there that the process finished MPI.

MPICH keeps one named shared-memory segment per node in ``/dev/shm`` until ``MPI_Finalize``,
which a process that leaves on a signal (or is killed) never reaches: :func:`forget_mpi_segments`
unlinks it as soon as every rank of the node has mapped it (the mappings stay valid), and
:func:`leave` unlinks whatever this process still maps, so nothing is left behind; the
segments of a job killed inside MPI_Init, before that, are removed by the next job of the user
on the node (:func:`_remove_dead_segments`).
"""
from __future__ import annotations

import ctypes
import os
import signal
import stat
import sys
import threading
import time
from contextlib import contextmanager

EXIT_AFTER_S = 2.0
"""Seconds from the signal to the exit of every rank: long enough for a rank that the launcher
signals late, or that waits for a core on a loaded node, to note it before the first one leaves."""
SIGNALS = (signal.SIGINT, signal.SIGTERM)
LAUNCHER_RANK_VARS = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")
"""Where a launcher (MPICH / Intel MPI, PMIx, Open MPI, MVAPICH, srun) gives each process its rank:
read here before MPI loads, and by :func:`ozhpc.parallel.mpi.launch_sign`."""
SHM_DIR = "/dev/shm"
AGREE_DIR = "ozhpc-{uid}"
"""This user's directory in SHM_DIR (mode 0700) for the files where the ranks of a node agree on
the moment they leave; only this user can create, replace or link anything in it."""
MPI_SEGMENTS = ("mpich_shm_",)
"""Names of MPI libraries' per-node segments in SHM_DIR that may be unlinked once mapped (MPICH
maps it at MPI_Init and never opens it by name again)."""
DEAD_SEGMENT_S = 600
"""Age after which an MPI segment of this user that no process maps is a dead job's: MPICH maps
the segment the moment it has created it."""

temporary_files: set[str] = set()
"""Files the watcher removes when it has to end a stuck process (h5out registers its new files)."""
_state = {"command": "ozhpc", "root": True, "printed": False, "signum": None, "deadline": 0.0,
          "defer": 0, "pending": None, "leaving": False, "final": False, "installed": False,
          "agreed": None}
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
    if not _note(signum) or _state["leaving"]:
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


def _note(signum: int) -> bool:
    """Record the first signal, fix the moment every rank leaves, print the line (rank 0, once),
    then silence this process's output. False: the process had already decided to exit without
    it (:func:`exit`), and the signal is ignored. Written with os.write: the main thread may be
    inside a write to sys.stderr."""
    with _lock:
        if _state["final"]:
            return False
        first = _state["signum"] is None
        if first:
            _state.update(signum=signum, deadline=_agreed_deadline(time.monotonic() + EXIT_AFTER_S))
        if _state["root"] and not _state["printed"]:
            _state["printed"] = True
            command = f"ozhpc {_state['command']}" if _state["command"] else "ozhpc"
            try:
                os.write(2, f"{command}: interrupted ({signal.Signals(signum).name})\n".encode())
            except OSError:
                pass
        if first:
            _silence()
    return True


def _silence() -> None:
    """Flush, then point standard output and error at /dev/null: the launcher stops waiting for
    this rank's output, and what the rank might still print would be more than the one line.
    Under a launcher, the copies of the ranks' output pipes that this rank holds are closed too
    (MPICH's proxy leaves each rank the ends of its own and of the ranks started before it)."""
    _flush_streams()
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    if any(name in os.environ for name in LAUNCHER_RANK_VARS):
        _close_output_copies()
    for fd in (1, 2):
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
    os.close(devnull)


def _close_output_copies() -> None:
    """Close this process's descriptors (above 2) of the pipes or sockets that are the standard
    output or error of this process or of a sibling (another rank the launcher's process started)."""
    ppid = os.getppid()
    pids = [os.getpid()]
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and int(entry) != pids[0] and _parent(entry) == ppid:
                pids.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    outputs = set()
    for pid in pids:
        for fd in (1, 2):
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                outputs.add((st.st_dev, st.st_ino))
    for entry in os.listdir("/proc/self/fd"):
        fd = int(entry)
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if fd > 2 and (st.st_dev, st.st_ino) in outputs:
            os.close(fd)


def _parent(pid: str) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _agree_dir() -> int | None:
    """A descriptor of this user's directory in SHM_DIR (created 0700 if missing), or None when
    the name is taken by anything else: a link, another user's directory, one others can write."""
    path = os.path.join(SHM_DIR, AGREE_DIR.format(uid=os.geteuid()))
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        return None
    return fd


def _agreed_deadline(mine: float) -> float:
    """The moment the first rank of this node to note the signal chose (CLOCK_MONOTONIC is one
    clock for the whole node), else ``mine``. The ranks must leave within milliseconds of each
    other, closer than they note a signal on a loaded node (see the module's docstring). The
    file, named after the launcher's process that started the ranks (its proxy, or slurmstepd:
    one per job and node), lives in this user's private directory, is created exclusively and
    never through a link, is linked into place whole, and is removed by :func:`leave`."""
    if not any(name in os.environ for name in LAUNCHER_RANK_VARS):
        return mine
    fd = _agree_dir()
    if fd is None:
        return mine
    name = f"leave-{os.getppid()}"  # named now: the launcher may be gone when we leave
    _state["agreed"] = (fd, name)
    tmp = f"{name}.{os.getpid()}"
    for _ in range(2):
        try:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
            with os.fdopen(out, "w") as f:
                f.write(repr(mine))
            os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            return mine
        except FileExistsError:
            agreed = _read_agreed(fd, name)
            if agreed is None:
                return mine
            if abs(agreed - mine) < EXIT_AFTER_S:
                return agreed
            _unlink(name, fd)  # left by an earlier job whose launcher had the same pid
        except OSError:
            return mine
        finally:
            _unlink(tmp, fd)
    return mine


def _read_agreed(fd: int, name: str) -> float | None:
    try:
        with os.fdopen(os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def _unlink(path: str, dir_fd: int | None = None) -> None:
    try:
        os.unlink(path, dir_fd=dir_fd)
    except OSError:
        pass


def _forget_agreement() -> None:
    """Remove this node's agreement file, and the directory if no other job of this user uses it."""
    fd, name = _state["agreed"]
    _unlink(name, fd)
    try:
        os.rmdir(os.path.join(SHM_DIR, AGREE_DIR.format(uid=os.geteuid())))
    except OSError:
        pass  # not empty: another rank or job of this user is leaving too


def forget_mpi_segments(mpi) -> None:
    """Unlink the MPI library's named per-node segments once every rank of the node has mapped
    them (collective over ``mpi.COMM_WORLD``; ``mpi``: the MPI module the caller runs on, so this
    module imports no MPI itself): the mappings stay, the names go."""
    node = mpi.COMM_WORLD.Split_type(mpi.COMM_TYPE_SHARED)
    try:
        node.Barrier()
        _unlink_segments()
        if node.Get_rank() == 0:
            _remove_dead_segments()
    finally:
        node.Free()


def _mapped(maps: str) -> set[str]:
    """The files in SHM_DIR that a process's ``/proc/PID/maps`` maps."""
    try:
        with open(maps) as f:
            return {line.split(None, 5)[5].strip() for line in f if f" {SHM_DIR}/" in line}
    except (OSError, IndexError):
        return set()


def _remove_dead_segments() -> None:
    """Unlink this user's MPI segments in SHM_DIR that a dead job left (one killed inside MPI_Init,
    before :func:`forget_mpi_segments`): older than DEAD_SEGMENT_S and mapped by no process."""
    now, uid = time.time(), os.geteuid()
    old = set()
    for name in os.listdir(SHM_DIR):
        path = os.path.join(SHM_DIR, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if name.startswith(MPI_SEGMENTS) and stat.S_ISREG(st.st_mode) and st.st_uid == uid \
                and now - st.st_mtime > DEAD_SEGMENT_S:
            old.add(path)
    if old:
        old -= set().union(*(_mapped(f"/proc/{pid}/maps") for pid in os.listdir("/proc") if pid.isdigit()))
    for path in old:
        _unlink(path)


def _unlink_segments() -> None:
    """Unlink this process's mapped MPI segments in SHM_DIR (owned by this user)."""
    for path in _mapped("/proc/self/maps"):
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
    MPI), after removing the registered temporary files and this process's MPI segments. From
    the watcher, nothing once the main thread has chosen the normal exit (:func:`exit`)."""
    with _lock:
        if _state["final"]:
            return
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
        _forget_agreement()
    _flush_streams()
    os._exit(128 + _state["signum"])


def _flush_streams() -> None:
    """Flush stdout and stderr, ignoring a closed or broken stream (the process is leaving)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, RuntimeError):
            pass


def closing() -> None:
    """The command is done: from here a signal is only noted (the watcher still ends a process
    stuck in MPI_Finalize), and :func:`exit` decides. A rank that left from MPI_Finalize's
    return on a signal could not agree with rank 0, which may have finished already."""
    _state["leaving"] = True


def exit(code: int) -> None:  # noqa: A001 -- the process's exit, as sys.exit
    """End the process with ``code`` (MPI_Finalize and the atexit functions already ran, see the
    entry point), or as :func:`leave` when a signal arrived before this point. The choice is
    made once, under the lock that notes signals: a signal noted later is ignored, so a signal at
    any moment gives either the normal exit or 128 + signal with its line, never something else.
    Only the rank that prints the line makes that choice; the others, done with MPI, exit with
    ``code``, so that the launcher's status (the OR of the ranks') agrees with the line.
    No interpreter shutdown follows (it restores the default handlers, and a signal in it would
    kill the process without the line), only the C library's ``exit``: its handlers flush C
    streams, close HDF5 and let MPICH tell its launcher that MPI was finished (``os._exit``
    skips that, and the launcher then kills the other ranks: exit 9)."""
    closing()
    _flush_streams()
    with _lock:  # another rank has finished MPI too: rank 0, which prints the line, decides
        _state["final"] = _state["signum"] is None or not _state["root"]
    if not _state["final"]:
        leave(_state["signum"])
    if _state["agreed"]:  # a signal this rank noted, then left to rank 0
        _forget_agreement()
    libc = ctypes.CDLL(None)
    libc.exit.argtypes = [ctypes.c_int]
    libc.exit(code)


def _watch(fd: int) -> None:
    while True:
        data = os.read(fd, 1)
        if not data:
            return
        if data[0] in SIGNALS and _note(data[0]):
            break
    while _again.wait(max(0.0, _state["deadline"] - time.monotonic())):
        _again.clear()
        time.sleep(AGAIN_AFTER_S)
        signal.raise_signal(_state["signum"])  # the main thread's handler raises it at its next bytecode
    leave(data[0])  # the main thread is stuck (in MPI) or still cleaning up: leave now
