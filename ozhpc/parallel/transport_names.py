"""The transports SUMMA can move panels with, by name (no MPI import: the CLI and job files
check ``--transport`` / ``run.transport`` against this before MPI starts)."""

TRANSPORT_NAMES = ("auto", "nccl", "cuda-mpi", "mpi-host")
