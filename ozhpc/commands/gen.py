"""``ozhpc gen``: the standard test matrix (rand - 0.5) * exp(phi * randn) into an HDF5 dataset.

Each rank generates and writes only its own row chunks, so the file is the same for any rank count."""
from __future__ import annotations

from ..errors import InputError
from ..io import distio, h5io, h5out
from ..parallel import ProcessGrid, collective_errors
from ..run.fingerprint import fingerprint_distributed
from ..run.matrices import standard_matrix_distributed
from ..run.resources import check_disk, check_matrix_fits
from ..run.runner import ranks_on_this_node
from . import world


def gen(output: h5io.DatasetRef, shape: tuple[int, int], phi: float = 0.5, seed: int = 0, force: bool = False,
        comm=None) -> str:
    """Write the m x n matrix to ``output`` (collective over ``comm``); returns the line that says so."""
    m, n = shape
    comm = world(comm)
    with ProcessGrid(comm, (comm.Get_size(), 1)) as grid:
        with collective_errors(grid.comm, catch=InputError):  # before generating: a refusal costs nothing
            h5io.check_output(output, force)
            check_matrix_fits(-(-m // grid.size), n, ranks_on_this_node(grid.comm))
            check_disk(output.file, m, n)
            h5out.check_size_limit(output.file, 8 * m * n)
        local = standard_matrix_distributed(grid, m, n, phi, seed)
        attrs = {"phi": phi, "seed": seed, "fingerprint": fingerprint_distributed(local)}
        distio.write_distributed(output, local, attrs=attrs, force=force)
    return f"wrote {m}x{n} test matrix (phi={phi}, seed={seed}) to {output}"
