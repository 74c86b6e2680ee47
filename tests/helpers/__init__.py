"""What the tests share, kept apart from the tests themselves: operands and strategies
(``inputs``), the exact guarantee check (``guarantee``), error tolerances (``tolerances``), the
pinned cases (``pinned_cases``), and the scripts the MPI tests launch under ``mpiexec``
(``mpi_worker``, ``dist_worker``, ``failing_rank``; run as files, they import their siblings
directly)."""
