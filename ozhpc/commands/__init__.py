"""What each ``ozhpc`` command does, one module per command (``commands/<name>.py`` is
``ozhpc <name>``; ``gemm.py`` also holds ``run``), callable from Python without argparse
(``ozhpc/cli.py`` only parses, dispatches and maps errors to exit codes), and the process around
every command (``lifecycle.py``: who prints, MPI start and finish, abort). A ``comm`` of None means
COMM_WORLD (one process without an MPI library); the functions return what rank 0 prints
(``demo`` prints its steps as it runs them)."""
from __future__ import annotations


def world(comm):
    """``comm``, or COMM_WORLD when it is None."""
    from ..parallel.mpi import MPI

    return MPI.COMM_WORLD if comm is None else comm
