"""Levels of scales and exact dots on the GPU: the cuTile engine certifies every acceptance input
with the NumPy engine's bits, and its exact dots (CuPy, the same integer steps) are the NumPy
engine's, correctly rounded.

Marked ``gpu``; every test skips cleanly when CuPy, cuda.tile or a GPU is missing.
"""
from __future__ import annotations

import numpy as np
import pytest

import ozhpc
from ozhpc.engines import get_engine

from helpers.anyinput_cases import cases
from helpers.guarantee import guarantee_holds

pytestmark = pytest.mark.gpu

CASES = cases()


@pytest.mark.parametrize("scheme", ["ozaki1", "ozaki2"])
@pytest.mark.parametrize("guarantee", ["dgemm", "tight"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_cutile_certifies_with_the_numpy_bits(gpu, name, scheme, guarantee):
    """Every acceptance case: certified on the GPU, every entry within its guarantee (exact), the
    same C bit for bit and the same counts as the NumPy engine."""
    a, b = CASES[name]
    kw = dict(scheme=scheme, guarantee=guarantee, accuracy="strict", info=True)
    want, ref = ozhpc.gemm(a, b, engine="numpy", **kw)
    got, info = ozhpc.gemm(a, b, engine="cutile", **kw)
    assert info.certified and got.tobytes() == want.tobytes(), (info.widths, ref.widths)
    assert (info.refined_entries, info.levels, info.exact_entries) == (ref.refined_entries, ref.levels,
                                                                       ref.exact_entries)
    for i in range(got.shape[0]):
        for j in range(got.shape[1]):
            assert guarantee_holds(got, a, b, scheme, i, j, guarantee), (i, j)


def test_exact_dots_on_the_gpu_are_the_numpy_bits(gpu):
    """The engine's exact_dots on CuPy arrays: the NumPy engine's values, bit for bit, on entries
    that cancel to almost nothing, spread over the whole exponent range, and subnormal."""
    engine, cp = gpu
    rng = np.random.default_rng(5)
    k = 300
    a = np.ldexp(rng.standard_normal((40, k)), rng.integers(-1000, 1000, (40, k)))
    b = np.ldexp(rng.standard_normal((30, k)), rng.integers(-60, 60, (30, k)))
    a[0], b[0] = 1.0, 0.0
    b[0, :2] = (1.0, -1.0)
    a[1, :3], b[1, :3] = (2.0**-1074, 1.0, 1.0), (1.0, 2.0**-600, -2.0**-600)
    rows, cols = rng.integers(0, 40, 500), rng.integers(0, 30, 500)
    rows[:2], cols[:2] = (0, 1), (0, 1)
    want = get_engine("numpy").exact_dots(a, b, rows, cols)
    got = cp.asnumpy(engine.exact_dots(cp.asarray(a), cp.asarray(b), cp.asarray(rows), cp.asarray(cols)))
    assert got.tobytes() == want.tobytes()
