"""One process's product waits for the device only where the plan needs host values: the
identity reductions stay on the device, the statistics travel in one copy, and the phase times
come from the engine's timers (no synchronisation at each phase)."""
import numpy as np

import ozhpc
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.run.matrices import standard_matrix


class CountingEngine(NumpyEngine):
    """The NumPy engine, counting what would make a GPU wait: copies to the host, synchronisations."""

    def __init__(self):
        self.to_host_calls = self.synchronize_calls = 0

    def to_host(self, x):
        self.to_host_calls += 1
        return super().to_host(x)

    def synchronize(self) -> None:
        self.synchronize_calls += 1


def test_default_product_copies_to_host_three_times_and_never_synchronises():
    """Scheme II "auto" (certified): the inf/NaN flags of both operands in one copy, their row
    statistics in another, then C itself (NumPy in, NumPy out); the phase times are still there."""
    eng = CountingEngine()
    a, b = standard_matrix(48, 300, 0.5, seed=1), standard_matrix(300, 40, 0.5, seed=2)
    c, info = ozhpc.gemm(a, b, engine=eng, info=True)
    assert info.certified
    assert eng.synchronize_calls == 0
    assert eng.to_host_calls == 3
    assert set(info.seconds) >= {"scales", "split", "multiply", "combine", "certificate"}
    assert all(v >= 0 for v in info.seconds.values())
    assert np.array_equal(c, ozhpc.gemm(a, b, engine="numpy"))   # the same bits as the plain engine
