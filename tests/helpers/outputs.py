"""A whole matrix written through :class:`ozhpc.io.h5out.OutputTransaction` on one process: what
the data-loss tests drive under file-size limits (the runner writes C by blocks instead)."""
from __future__ import annotations

from ozhpc.io import h5io
from ozhpc.io.h5out import OutputTransaction, new_tag


def write_whole(ref: h5io.DatasetRef, data, force: bool = False, attrs: dict | None = None) -> None:
    """Create, fill and commit ``ref`` as one transaction."""
    with OutputTransaction(ref, force, new_tag()) as txn:
        txn.create(data.shape, attrs)
        with txn.open() as f:
            f[txn.tmp_name][...] = data
        txn.commit()
