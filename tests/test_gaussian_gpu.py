"""GPU tests of complex scheme II in the cuTile engine: the NumPy engine's bits (residue planes,
products, CRT), for every layout, bit range, conjugation, k chunk and M/N block.

Marked ``gpu``; every test skips cleanly when CuPy, cuda.tile or a GPU is missing.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from ozhpc.engines import crt, gaussian
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


def _limb_corners(bits: int) -> list[int]:
    """Integers ``|X| <= 2**bits`` whose 14-bit (and 16-bit) balanced limbs sit at their extremes:
    sums of ``+-2**(14 j + 13)`` (ties of every limb's rounding), and ``+-2**bits`` minus them, those
    exact in float64 after scaling (53 significant bits)."""
    out = set()
    for signs in np.ndindex(3, 3, 3):
        low = sum((s - 1) * 2**(14 * j + 13) for j, s in enumerate(signs))
        out.update({low, 2**bits - abs(low), 2**bits - 2**(bits - 1) + low, 2**(bits - 1) + low})
    out.update({2**bits, 2**bits - 1, 3 * 2**(bits - 2), 2**41, 2**41 + 2**27, 5 * 2**13})
    values = [v for v in out if abs(v) <= 2**bits and int(float(v)) == v]
    return sorted({s * v for v in values for s in (1, -1)})


def _corner_matrix(rng, bits: int, rows: int, cols: int):
    """Complex rows whose scaled parts (row exponent 0: ``X = x 2**bits``) are the limb corners, each
    part drawn independently (so both ``Xr +- w Xi`` extremes occur), a row of ``+-2**bits`` in both
    parts, and random entries elsewhere."""
    corners = np.array([math.ldexp(v, -bits) for v in _limb_corners(bits)])
    re = rng.choice(corners, size=(rows, cols))
    im = rng.choice(corners, size=(rows, cols))
    re[0], im[0] = 1.0, -1.0
    re[1], im[1] = -1.0, -1.0
    re[2, ::2], im[2, 1::2] = 1.0, 1.0
    re[-1] = rng.uniform(-1, 1, cols)
    return re + 1j * im


def _plan(bits, karatsuba: bool, odd_splits: bool = False):
    """Tables of the first moduli whose kinds are as asked (some Karatsuba moduli or none; an odd
    number of split moduli), pieces as the worst case at k = 200."""
    for count in range(1, len(gaussian.MODULI) + 1):
        t = gaussian.gaussian_tables(bits, count, gaussian.reference_pieces(bits, 200))
        if (t.splits < count) == karatsuba and (t.splits % 2 == 1) == odd_splits and count >= 3:
            return t
    raise AssertionError("no such plan")


@pytest.mark.parametrize("bits", [8, 40, 53, 56, 57, 58, 63, 64, 80, 81, 100])
@pytest.mark.parametrize("karatsuba", [False, True])
@pytest.mark.parametrize("layout", ["C", "T"])
@pytest.mark.parametrize("conj", [False, True])
def test_residue_planes_at_the_limb_extremes(gpu, bits, karatsuba, layout, conj):
    """Both residue paths (two reductions per split modulus up to NARROW_BITS, the parts' residues
    above) at the switch and the plans' extremes: entries at +-2**bits after scaling and at every
    limb's rounding tie, split and Karatsuba moduli, a tile-ragged shape: NumPy's planes."""
    engine, cp = gpu
    rng = np.random.default_rng(bits + 1000 * karatsuba)
    z = _corner_matrix(rng, bits, 37, 101)
    e = np.zeros(37, dtype=np.int32)
    t = _plan(bits, karatsuba)
    want = CPU.gaussian_residues(z, e, t, conj=conj)
    zd = cp.asarray(z) if layout == "C" else cp.ascontiguousarray(cp.asarray(z).T).T
    _same(cp.asnumpy(engine.gaussian_residues(zd, cp.asarray(e), t, conj=conj)), want)


@pytest.mark.parametrize("bits", [56, 57, 58, 100])
@pytest.mark.parametrize("karatsuba,odd_splits", [(False, False), (False, True), (True, True), (True, False)])
def test_crt_of_extreme_residues(gpu, bits, karatsuba, odd_splits):
    """The CRT kernel alone on residues drawn from each plane's balanced range with its ends
    (-128 for 256) weighted up, split moduli an odd count (a group of loads left over) or not, with
    and without Karatsuba moduli, a tile-ragged C: NumPy's components."""
    engine, cp = gpu
    t = _plan(bits, karatsuba, odd_splits)
    rng = np.random.default_rng(bits)
    m, n = 45, 77
    acc = np.empty((t.planes, m, n), dtype=np.int8)
    for g, p in enumerate(t.plane_primes):
        lo, hi = crt.balanced_range(p)
        acc[g] = np.where(rng.random((m, n)) < 0.3, rng.choice([lo, hi], (m, n)), rng.integers(lo, hi + 1, (m, n)))
    e, f = rng.integers(-60, 60, m).astype(np.int32), rng.integers(-60, 60, n).astype(np.int32)
    want = CPU.combine_gaussian(acc, e, f, t)
    dev = engine.zeros_gaussian(t, m, n)
    dev[...] = cp.asarray(acc)
    _same(cp.asnumpy(engine.combine_gaussian(dev, cp.asarray(e), cp.asarray(f), t)), want)


@pytest.mark.parametrize("bits", [57, 58])
def test_products_at_the_switch(gpu, bits):
    """Residues, products and CRT end to end at the residue kernel's switch, a Karatsuba plan,
    conjugated and transposed B, tile-ragged sizes: NumPy's C."""
    engine, cp = gpu
    rng = np.random.default_rng(bits)
    a, b = _corner_matrix(rng, bits, 70, 130), _corner_matrix(rng, bits, 50, 130)
    e, f = np.zeros(70, dtype=np.int32), np.zeros(50, dtype=np.int32)
    t = _plan(bits, True, True)
    want = CPU.multiply_combine_gaussian(CPU.gaussian_residues(a, e, t), CPU.gaussian_residues(b, f, t, conj=True),
                                         e, f, t)
    bt = cp.ascontiguousarray(cp.asarray(b).T).T
    da = engine.gaussian_residues(cp.asarray(a), cp.asarray(e), t)
    eb = engine.gaussian_residues(bt, cp.asarray(f), t, conj=True)
    _same(cp.asnumpy(engine.multiply_combine_gaussian(da, eb, cp.asarray(e), cp.asarray(f), t)), want)
