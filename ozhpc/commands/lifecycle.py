"""The ``ozhpc`` process around a command: who prints, joining and leaving MPI, and aborting.

Arguments are parsed before MPI starts, so a usage error cannot hang anything: every rank
parses the same argv and exits 2; only the launcher's rank 0 prints. Commands that use MPI
agree on user errors collectively before raising (ozhpc.parallel.collective), so every rank
raises the same InputError and only rank 0 prints it. Anything else raised on any rank
prints a rank-tagged traceback and aborts the whole job (:func:`abort_job`).
"""
from __future__ import annotations

import os
import sys
import time

from .. import signals

ABORT_GRACE_S = 1.0
"""Pause between printing a failing rank's traceback and MPI_Abort: the launcher forwards output
asynchronously and drops what it has not forwarded when the job is killed."""


def _running_mpi():
    """mpi4py's MPI when this process has started it and not finished it yet, else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() else None


def launcher_rank() -> int:
    """This process's rank, from MPI when it is running, else from the launcher's environment."""
    mpi = _running_mpi()
    return mpi.COMM_WORLD.Get_rank() if mpi is not None else signals.env_rank()


def begin(command: str) -> None:
    """Before the command line is parsed: the signal handlers (rank 0 prints the signal's line),
    and no PyTorch import by cuda.tile (the command never uses it)."""
    from ..engines.toolchain import skip_foreign_frameworks

    signals.install(command, launcher_rank() == 0)
    skip_foreign_frameworks()


def join(*, check_launch: bool, forget_segments: bool) -> None:
    """Load MPI for a command (after checking that ``ulimit -f`` lets it start). ``check_launch``: without an MPI library one process runs alone,
    several ranks cannot (one line, exit 2). ``forget_segments``: nothing of MPI's may outlive the
    run in /dev/shm (only when this process owns COMM_WORLD and a real MPI loaded)."""
    if "mpi4py.MPI" not in sys.modules:  # MPI starts now
        from ..run.resources import check_mpi_file_size

        check_mpi_file_size()
    from ..parallel import mpi

    if check_launch:
        mpi.check_launch()
    if forget_segments and mpi.MISSING is None:
        signals.forget_mpi_segments(mpi.MPI)


def finish() -> None:
    """What the interpreter's exit would do, while the signal handlers still hold: flush the
    output, MPI_Finalize (without the GIL, so that the watcher still ends a rank whose peers
    left), the atexit functions (HDF5's close, logging). A signal from here on only is noted
    (:func:`signals.closing`); :func:`signals.exit` then decides, once, between the run's status
    and the signal's, so a signal after the run cannot kill the process with a wrong status."""
    import atexit

    signals.closing()
    sys.stdout.flush()
    if _running_mpi() is not None:
        from ..parallel.mpi import finalize

        finalize()
    atexit._run_exitfuncs()  # noqa: SLF001 -- documented as the interpreter's own exit step


def silence(stream) -> None:
    """Point ``stream``'s file descriptor at /dev/null (e.g. stdout, so that the interpreter's
    final flush does not fail again after a broken pipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError):
        pass
    os.close(devnull)


def abort_others(comm, code: int) -> None:
    """Only this rank failed (it has said why): under MPI take the others, blocked in a collective,
    down with MPI_Abort(code), its stderr closed first (MPICH would add a line of its own)."""
    mpi = sys.modules.get("mpi4py.MPI")
    comm = comm or (mpi.COMM_WORLD if mpi is not None else None)
    if _running_mpi() is not None and comm.Get_size() > 1:
        silence(sys.stderr)
        mpi.COMM_WORLD.Abort(code)


def abort_job() -> None:
    """Print this rank's traceback tagged with its rank, then abort every rank (exit 1)."""
    import traceback

    rank = launcher_rank()
    text = traceback.format_exc()
    sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.rstrip().splitlines()))
    sys.stderr.flush()
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None and any(name in os.environ for name in signals.LAUNCHER_RANK_VARS):
        from ..parallel.mpi import MPI as mpi  # the other ranks may be in MPI already: join to abort them
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1:
        time.sleep(ABORT_GRACE_S)
        mpi.COMM_WORLD.Abort(1)
    sys.exit(1)
