"""One process's product waits for the device only where the host needs values: once before the
plan (both operands' row statistics in one copy), once for the certificate's verdict (the worst
ratio of a one-pass kernel over C), and for C itself when NumPy arrays came in; the identity
reductions stay on the device and the phase times come from the engine's timers."""
import numpy as np
import pytest

import ozhpc
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.run.matrices import standard_matrix


def counting(engine_class):
    """``engine_class`` counting what makes a GPU wait: copies to the host, synchronisations."""

    class Counting(engine_class):
        to_host_calls = synchronize_calls = 0

        def to_host(self, x):
            self.to_host_calls += 1
            return super().to_host(x)

        def synchronize(self) -> None:
            self.synchronize_calls += 1
            super().synchronize()

    return Counting


def operands():
    return standard_matrix(48, 300, 0.5, seed=1), standard_matrix(300, 40, 0.5, seed=2)


def test_default_product_copies_to_host_twice_and_never_synchronises():
    """Scheme II "auto" (certified) on the reference engine: the row statistics of both operands in
    one copy, then C itself (NumPy in, NumPy out; the certificate's array code runs on the host);
    the phase times are still there."""
    eng = counting(NumpyEngine)()
    a, b = operands()
    c, info = ozhpc.gemm(a, b, engine=eng, info=True)
    assert info.certified
    assert (eng.to_host_calls, eng.synchronize_calls) == (2, 0)
    assert set(info.seconds) >= {"scales", "split", "multiply", "combine", "certificate"}
    assert all(v >= 0 for v in info.seconds.values())
    assert np.array_equal(c, ozhpc.gemm(a, b, engine="numpy"))   # the same bits as the plain engine


@pytest.mark.gpu
@pytest.mark.parametrize("host_arrays", [False, True])
def test_gpu_product_copies_statistics_and_verdict_only(gpu, host_arrays):
    """The cuTile engine: the statistics (one copy), the verdict's worst ratio (one copy: the count
    only where some entry fails), C when NumPy arrays came in; never a synchronisation; the NumPy
    engine's bits and certificate."""
    from ozhpc.engines.cutile_engine import CutileEngine

    _, cp = gpu
    eng = counting(CutileEngine)()
    a, b = operands()
    args = (a, b) if host_arrays else (cp.asarray(a), cp.asarray(b))
    c, info = ozhpc.gemm(*args, engine=eng, info=True)
    want, want_info = ozhpc.gemm(a, b, engine="numpy", info=True)
    assert info.certified and info.widths == want_info.widths
    assert (eng.to_host_calls, eng.synchronize_calls) == (3 if host_arrays else 2, 0)
    assert np.array_equal(c if host_arrays else cp.asnumpy(c), want)
