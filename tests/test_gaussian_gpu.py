"""GPU tests of complex scheme II in the cuTile engine: the NumPy engine's bits (residue planes,
products, CRT), for every layout, bit range, conjugation, k chunk and M/N block.

Marked ``gpu``; every test skips cleanly when CuPy, cuda.tile or a GPU is missing.
"""
from __future__ import annotations

import numpy as np
import pytest

from ozhpc.engines import gaussian
from ozhpc.engines.numpy_engine import NumpyEngine

from helpers.inputs import phi_matrix

pytestmark = pytest.mark.gpu
CPU = NumpyEngine()


def _complex(rng, m, n, phi=0.5):
    return phi_matrix(rng, m, n, phi) + 1j * phi_matrix(rng, m, n, phi)


def _exps(z):
    return np.frexp(np.maximum(np.abs(z.real), np.abs(z.imag)).max(axis=1))[1].astype(np.int32)


def _tables(bits, k, count=None):
    return gaussian.gaussian_tables(bits, count or gaussian.moduli_needed(bits, k), gaussian.reference_pieces(bits, k))


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    view = np.int64 if got.dtype.kind in "fc" else got.dtype
    bad = np.flatnonzero(got.view(view) != want.view(view))
    assert bad.size == 0, f"{bad.size} of {got.size} differ"


@pytest.mark.parametrize("bits,count", [(30, None), (54, None), (63, None), (70, None), (90, 25), (100, None)])
@pytest.mark.parametrize("layout", ["C", "T", "strided"])
@pytest.mark.parametrize("conj", [False, True])
def test_residue_planes(gpu, bits, count, layout, conj):
    engine, cp = gpu
    rng = np.random.default_rng(bits)
    z = _complex(rng, 77, 131, phi=2.0)
    z[3] = 0
    z[5, ::3] = 1e-300 + 0j
    e = _exps(z)
    t = _tables(bits, 131, count)
    want = CPU.gaussian_residues(z, e, t, conj=conj)
    zd = cp.asarray(z)
    if layout == "T":
        zd = cp.ascontiguousarray(zd.T).T
    elif layout == "strided":
        zd = cp.asarray(np.repeat(z, 2, axis=1))[:, ::2]
    _same(cp.asnumpy(engine.gaussian_residues(zd, cp.asarray(e), t, conj=conj)), want)


@pytest.mark.parametrize("bits,count", [(54, None), (90, 25), (100, None)])
def test_product_and_crt(gpu, bits, count):
    engine, cp = gpu
    rng = np.random.default_rng(5)
    a, b = _complex(rng, 150, 300), _complex(rng, 140, 300)
    e, f = _exps(a), _exps(b)
    t = _tables(bits, 300, count)
    want = CPU.multiply_combine_gaussian(CPU.gaussian_residues(a, e, t), CPU.gaussian_residues(b, f, t, conj=True),
                                         e, f, t)
    da = engine.gaussian_residues(cp.asarray(a), cp.asarray(e), t)
    eb = engine.gaussian_residues(cp.asarray(b), cp.asarray(f), t, conj=True)
    _same(cp.asnumpy(engine.multiply_combine_gaussian(da, eb, cp.asarray(e), cp.asarray(f), t)), want)
    acc = engine.zeros_gaussian(t, 150, 140)
    for k0, k1 in ((0, 96), (96, 112), (112, 300)):   # panels, as SUMMA accumulates them
        engine.accumulate_gaussian(acc, da[:, :, k0:k1], eb[:, :, k0:k1], t)
    _same(cp.asnumpy(engine.combine_gaussian(acc, cp.asarray(e), cp.asarray(f), t)), want)


def test_chunks_and_blocks(gpu):
    """k chunks (k_limit) and M/N blocks (a tiny memory fraction) give the same bits."""
    _, cp = gpu
    from ozhpc.engines.cutile_engine import CutileEngine

    rng = np.random.default_rng(9)
    a, b = _complex(rng, 300, 200), _complex(rng, 260, 200)
    e, f = _exps(a), _exps(b)
    t = _tables(54, 200)
    want = CPU.multiply_combine_gaussian(CPU.gaussian_residues(a, e, t), CPU.gaussian_residues(b, f, t), e, f, t)
    engine = CutileEngine(k_limit=48, memory_fraction=1e-9)
    got = engine.multiply_combine_gaussian(engine.gaussian_residues(cp.asarray(a), cp.asarray(e), t),
                                           engine.gaussian_residues(cp.asarray(b), cp.asarray(f), t),
                                           cp.asarray(e), cp.asarray(f), t)
    assert engine.last_blocks != (1, 1)
    _same(cp.asnumpy(got), want)
