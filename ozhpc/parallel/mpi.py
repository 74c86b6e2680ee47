"""The MPI this process uses: mpi4py's, or a one-process stand-in when no MPI library loads.

Every module of the package that needs MPI takes ``MPI`` from here, never from mpi4py
directly, so that an install without an MPI library (``pip install "ozhpc[gpu]"`` on a
one-GPU machine) runs every command as one process (a 1x1 grid). Only a launch of several
ranks needs the real thing; :func:`check_launch` refuses such a launch in one line.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import InputError


def _load():
    """``(module, None)`` with mpi4py's MPI, or ``(serial stand-in, why mpi4py could not load)``."""
    try:
        from mpi4py import MPI as real
    except (ImportError, RuntimeError) as exc:  # RuntimeError: mpi4py found no MPI library
        from . import serial_comm

        return serial_comm, (str(exc).splitlines() or [type(exc).__name__])[0]
    return real, None


MPI, MISSING = _load()
"""``MISSING``: None when mpi4py and an MPI library loaded, else the first line of why not."""

LAUNCH_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")
"""Set by mpiexec / mpirun (Open MPI, MPICH and Intel MPI, MVAPICH) and srun in each rank.
srun's SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: a batch script's own shell has the latter."""
LAUNCH_RANK_VARS = ("PMIX_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")


def launch_sign(environ: Mapping[str, str] | None = None) -> str | None:
    """``"NAME=value"`` of a launcher variable that says this process is one of several ranks, or None."""
    env = os.environ if environ is None else environ
    for name in LAUNCH_SIZE_VARS:
        if env.get(name, "").isdigit() and int(env[name]) > 1:
            return f"{name}={env[name]}"
    for name in LAUNCH_RANK_VARS:  # a launcher that gives only the rank: any but 0 means several
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
    """The MPI library's own version line (``MPICH Version: 4.3.0``), or None without one."""
    return " ".join(MPI.Get_library_version().splitlines()[0].split()) if MISSING is None else None


def describe() -> str:
    """One line for ``ozhpc info``: the MPI library, or why there is none."""
    if MISSING is None:
        import mpi4py

        return f"mpi4py {mpi4py.__version__}: {library_version()}"
    sign = launch_sign()
    return (f"MPI: none ({MISSING}); every command runs as one process; a launch of several "
            "ranks needs an MPI library (pip install 'ozhpc[mpich]', or the site's MPI)"
            + (f"; this is such a launch ({sign}): other commands refuse it" if sign else ""))
