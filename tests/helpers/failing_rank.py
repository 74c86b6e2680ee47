"""``python tests/helpers/failing_rank.py ARGS`` = ``ozhpc ARGS`` with rank 1 raising in its second
k-panel (tests/test_mpi.py): the job must end on every rank, with no hang and no output.
The failure is injected here, so the product code carries no test hook."""
from mpi4py import MPI

from ozhpc import cli
from ozhpc.ozaki.product import Product

_accumulate = Product.accumulate
_calls = [0]


def _failing(self, panel_a, panel_b):
    _calls[0] += 1
    if MPI.COMM_WORLD.Get_rank() == 1 and _calls[0] == 2:
        raise RuntimeError("simulated failure on rank 1 in the panel loop")
    return _accumulate(self, panel_a, panel_b)


Product.accumulate = _failing
cli.entry_point()
