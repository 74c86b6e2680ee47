"""The MPI this process uses: mpi4py's, or a one-process stand-in when no MPI library loads.

Every module of the package that needs MPI takes ``MPI`` from here, never from mpi4py
directly, so that an install without an MPI library (``pip install "ozhpc[gpu]"`` on a
one-GPU machine) runs every command as one process (a 1x1 grid). Only a launch of several
ranks needs the real thing; :func:`check_launch` refuses such a launch in one line.

Importing this module starts MPI, as importing mpi4py's would, unless mpi4py was imported
already (then its importer chose); :func:`finalize` ends it. Both calls release the GIL.
"""
from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

from ..errors import InputError
from ..signals import LAUNCHER_RANK_VARS


def _load():
    """``(module, None)`` with mpi4py's MPI, started (:func:`_start`), or ``(serial stand-in, why
    mpi4py could not load)``."""
    try:
        import mpi4py

        # else mpi4py's importer, or whoever turned its start off, chose how MPI starts
        deferred = "mpi4py.MPI" not in sys.modules and mpi4py.rc.initialize
        if deferred:
            mpi4py.rc.initialize = False
            if mpi4py.rc.finalize is None:
                mpi4py.rc.finalize = True  # at the interpreter's exit, as mpi4py would (Python API users)
        from mpi4py import MPI as real
    except (ImportError, RuntimeError) as exc:  # RuntimeError: mpi4py found no MPI library
        from . import serial_comm

        return serial_comm, (str(exc).splitlines() or [type(exc).__name__])[0]
    if deferred:
        _start(real)
    return real, None


def _library(real):
    """The MPI library under mpi4py's module, for calls that must not hold the GIL."""
    return ctypes.CDLL(real.__file__)  # its symbol lookup reaches libmpi, which the module links


def _start(real) -> None:
    """MPI_Init_thread as mpi4py would at import (its thread level; errors raised as exceptions),
    but without the GIL: MPI_Init waits for every rank of the node, and a signal in that time
    must still reach the watcher thread of ozhpc.signals (a rank that leaves then would otherwise
    leave the others spinning in MPI_Init forever)."""
    import mpi4py

    level = {"single": real.THREAD_SINGLE, "funneled": real.THREAD_FUNNELED,
             "serialized": real.THREAD_SERIALIZED}.get(mpi4py.rc.thread_level, real.THREAD_MULTIPLE)
    level = level if mpi4py.rc.threads else real.THREAD_SINGLE
    init = _library(real).MPI_Init_thread
    init.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    provided = ctypes.c_int()
    code = init(None, None, level, ctypes.byref(provided))  # ctypes releases the GIL for the call
    if code != 0:
        raise RuntimeError(f"MPI_Init_thread() failed [error code: {code}]")
    if mpi4py.rc.errors == "exception":
        for comm in (real.COMM_SELF, real.COMM_WORLD):
            comm.Set_errhandler(real.ERRORS_RETURN)


def finalize() -> None:
    """MPI_Finalize without the GIL (it waits for every rank; see :func:`_start`)."""
    if MISSING is None and MPI.Is_initialized() and not MPI.Is_finalized():
        code = _library(MPI).MPI_Finalize()
        if code != 0:
            raise RuntimeError(f"MPI_Finalize() failed [error code: {code}]")


MPI, MISSING = _load()
"""``MISSING``: None when mpi4py and an MPI library loaded, else the first line of why not."""

LAUNCH_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")
"""Set by mpiexec / mpirun (Open MPI, MPICH and Intel MPI, MVAPICH) and srun in each rank.
srun's SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: a batch script's own shell has the latter.
The rank variables are :data:`ozhpc.signals.LAUNCHER_RANK_VARS` (the signal handlers read them
before MPI loads)."""


def launch_sign(environ: Mapping[str, str] | None = None) -> str | None:
    """``"NAME=value"`` of a launcher variable that says this process is one of several ranks, or None."""
    env = os.environ if environ is None else environ
    for name in LAUNCH_SIZE_VARS:
        if env.get(name, "").isdigit() and int(env[name]) > 1:
            return f"{name}={env[name]}"
    for name in LAUNCHER_RANK_VARS:  # a launcher that gives only the rank: any but 0 means several
        if env.get(name, "").isdigit() and int(env[name]) > 0:
            return f"{name}={env[name]}"
    return None


def check_launch(environ: Mapping[str, str] | None = None) -> None:
    """Refuse, in one line, a launch of several ranks when mpi4py has no MPI library (every rank
    would otherwise run the whole job alone)."""
    sign = launch_sign(environ)
    if MISSING is not None and sign is not None:
        raise InputError(f"this is one of several MPI ranks ({sign}), but there is no MPI library to join "
                         f"them (mpi4py: {MISSING}); install one (pip install 'ozhpc[mpich]', or build mpi4py "
                         "against the site's MPI: README, 'Install'), or run one process")


def library_version() -> str | None:
    """The MPI library's own version line (``MPICH Version: 4.3.0``), or None without one (Open MPI
    ends its string with a NUL, which no report or terminal should carry)."""
    if MISSING is not None:
        return None
    return " ".join(MPI.Get_library_version().replace("\0", " ").splitlines()[0].split())


def describe() -> str:
    """One line for ``ozhpc info``: the MPI library, or why there is none."""
    if MISSING is None:
        import mpi4py

        return f"mpi4py {mpi4py.__version__}: {library_version()}"
    sign = launch_sign()
    return (f"MPI: none ({MISSING}); every command runs as one process; a launch of several "
            "ranks needs an MPI library (pip install 'ozhpc[mpich]', or the site's MPI)"
            + (f"; this is such a launch ({sign}): other commands refuse it" if sign else ""))
