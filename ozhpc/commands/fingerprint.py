"""``ozhpc fingerprint``: a dataset's grid-independent fingerprint; each rank reads a share of the rows."""
from __future__ import annotations

from ..errors import InputError
from ..io import h5io
from ..parallel import collective_errors
from ..run.fingerprint import fingerprint_dataset
from . import world


def fingerprint(dataset: h5io.DatasetRef, comm=None) -> str:
    """The 64 hex digits of ``dataset`` (collective over ``comm``; a bad dataset is refused on every rank)."""
    comm = world(comm)
    with collective_errors(comm, catch=InputError):
        h5io.dataset_info(dataset)
    return fingerprint_dataset(dataset.file, dataset.path, comm=comm)
