"""Complex scheme II's arithmetic (:mod:`ozhpc.engines.gaussian`) and the NumPy engine's reference
of it, against exact Gaussian-integer products (Python integers)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ozhpc.engines import crt, gaussian
from ozhpc.engines.numpy_engine import NumpyEngine

ENG = NumpyEngine()


def test_moduli_are_coprime_int8_and_ordered_by_bits_per_product():
    primes = [p for p, _ in gaussian.MODULI]
    assert all(math.gcd(p, q) == 1 for i, p in enumerate(primes) for q in primes[:i])
    assert all(crt.MIN_MODULUS <= p <= 256 for p in primes)
    density = [math.log2(p) / gaussian.PRODUCTS[kind] for p, kind in gaussian.MODULI]
    assert density == sorted(density, reverse=True)
    for p, kind in gaussian.MODULI:
        assert gaussian.splits(p) == (kind == gaussian.SPLIT)
        if kind == gaussian.SPLIT:
            w = gaussian.root_of_minus_one(p)
            assert (w * w + 1) % p == 0 and math.gcd(2 * w, p) == 1
    # the 2M set: 22 moduli, 152 bits; FP64 accuracy (about 120 bits of M) in 17 of them
    assert len(gaussian.SPLIT_MODULI) == 22
    assert 152 < sum(math.log2(p) for p in gaussian.SPLIT_MODULI) < 153
    assert gaussian.route_costs(120) == {"mixed": (17, 34), "split": (17, 34), "karatsuba": (16, 48)}
    with pytest.raises(ValueError, match="not a square"):
        gaussian.root_of_minus_one(7)


def test_largest_plans_fit_the_reconstruction():
    """100 bits at the longest k an FP64 accumulator takes: within 7 pieces of 36 bits."""
    k = (2**53 - 2**10) // 2**14
    count = gaussian.moduli_needed(crt.MAX_BITS, k)
    tables = gaussian.gaussian_tables(crt.MAX_BITS, count, gaussian.reference_pieces(crt.MAX_BITS, k))
    assert tables.pieces <= crt.MAX_PIECES
    assert math.prod(tables.primes) > gaussian.need(gaussian.product_bound(crt.MAX_BITS, k))
    # (1/2 - 2**-34) M > |C'|, with every combination's |x| <= 384 N M <= 2**14 M
    assert gaussian.COMBINATION_MAX * count <= 2**14


@pytest.mark.parametrize("bits,count", [(54, 17), (80, 25), (100, 34)])
def test_folded_weights_give_each_component(bits, count):
    """``sum_l c_l W'_l`` is the component modulo M, for the plane combinations ``c_l`` of a product
    ``z * 1`` (split planes ``z +- w Im z``; Karatsuba ``Re z * 1, Im z * 0, (Re z + Im z) * 1``)."""
    t = gaussian.gaussian_tables(bits, count)
    big_m = math.prod(t.primes)
    rng = np.random.default_rng(bits)
    for re, im in rng.integers(-2**62, 2**62, (20, 2)).tolist() + [[0, 0], [1, -1]]:
        for tables, want, which in ((t.re, re, 0), (t.im, im, 1)):
            total = 0
            for l, (p, kind, w) in enumerate(zip(t.primes, t.kinds, t.roots)):
                planes = (re + w * im, re - w * im) if kind == gaussian.SPLIT else (re, 0, re + im)
                c = gaussian.combinations(kind, [v % p for v in planes])[which]
                total += c * sum(int(v) << (crt.PIECE_BITS * (tables.pieces - 1 - j))
                                 for j, v in enumerate(tables.weights[l]))
            assert (total - want) % big_m == 0


def _exact(x, exps, bits):
    """``X = rint(x 2**(bits - e))`` per part as Python integers (rows of Gaussian integers)."""
    out = []
    for row, e in zip(x, exps):
        out.append([(int(np.rint(np.ldexp(v.real, bits - int(e)))), int(np.rint(np.ldexp(v.imag, bits - int(e)))))
                    for v in row])
    return out


def _product(xa, xb):
    return [[(sum(a[0] * b[0] - a[1] * b[1] for a, b in zip(ra, rb)),
              sum(a[0] * b[1] + a[1] * b[0] for a, b in zip(ra, rb))) for rb in xb] for ra in xa]


def _exponents(z):
    mag = np.maximum(np.abs(z.real), np.abs(z.imag)).max(axis=1)
    return np.frexp(mag)[1].astype(np.int64)


def _check(c, want, e, f, bits):
    """Each component of C within the reconstruction's rounding of ``C' 2**(e+f-2bits)``, and exact
    where ``|C'| < 2**52``."""
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            for got, exact in zip((c[i, j].real, c[i, j].imag), want[i][j]):
                ref = Fraction(exact) * Fraction(2) ** (int(e[i]) + int(f[j]) - 2 * bits)
                if abs(exact) < 2**52:
                    assert Fraction(got) == ref, (i, j, got, float(ref))
                else:
                    assert abs(Fraction(got) - ref) <= crt.ROUNDING_ULPS * 2.0**-53 * abs(ref), (i, j)


def _gaussian_product(a, b, bits, count=None, conj=False):
    k = a.shape[1]
    count = count or gaussian.moduli_needed(bits, k)
    t = gaussian.gaussian_tables(bits, count, gaussian.reference_pieces(bits, k))
    e, f = _exponents(a), _exponents(b)
    da = ENG.gaussian_residues(a, e, t)
    eb = ENG.gaussian_residues(b, f, t, conj=conj)
    c = ENG.multiply_combine_gaussian(da, eb, e, f, t)
    return c, e, f, t, (da, eb)


def _random(rng, shape, spread=4.0):
    return ((rng.random(shape) - 0.5) * np.exp(spread * rng.standard_normal(shape))
            + 1j * (rng.random(shape) - 0.5) * np.exp(spread * rng.standard_normal(shape)))


@pytest.mark.parametrize("bits,count", [(54, None), (30, None), (80, 25), (100, None)])
def test_product_is_the_gaussian_integer_product(bits, count):
    rng = np.random.default_rng(bits)
    a, b = _random(rng, (4, 9)), _random(rng, (3, 9))
    c, e, f, t, _ = _gaussian_product(a, b, bits, count)
    assert (gaussian.KARATSUBA in t.kinds) == (count == 25 or bits == 100)
    _check(c, _product(_exact(a, e, bits), _exact(b, f, bits)), e, f, bits)


def test_residue_planes_are_the_definition():
    rng = np.random.default_rng(3)
    a = _random(rng, (3, 5), spread=8.0)
    for bits, count in ((54, 17), (100, 34)):
        t = gaussian.gaussian_tables(bits, count)
        e = _exponents(a)
        planes = ENG.gaussian_residues(a, e, t)
        x = _exact(a, e, bits)
        g = 0
        for p, kind, w in zip(t.primes, t.kinds, t.roots):
            lo, hi = crt.balanced_range(p)
            want = ([lambda v: v[0] + w * v[1], lambda v: v[0] - w * v[1]] if kind == gaussian.SPLIT
                    else [lambda v: v[0], lambda v: v[1], lambda v: v[0] + v[1]])
            for fn in want:
                expect = np.array([[(fn(v) - lo) % p + lo for v in row] for row in x])
                assert np.array_equal(planes[g], expect), (p, kind)
                g += 1


def test_worst_case_product_is_held_by_the_moduli():
    """Every part at +-2**bits, so that Re C' is the worst case 2 k 4**bits: reconstructed exactly
    by the fewest moduli that hold it."""
    bits, k = 20, 64
    near = 1.0 - 2.0**-53
    a = np.full((2, k), near * (1 + 1j))
    b = np.full((2, k), near * (1 - 1j))
    c, e, f, t, _ = _gaussian_product(a, b, bits)
    assert t.count == gaussian.moduli_needed(bits, k)
    assert np.array_equal(c.real, np.full((2, 2), 2.0 * k)) and np.array_equal(c.imag, np.zeros((2, 2)))


def test_conjugate_residues_multiply_by_the_conjugate():
    rng = np.random.default_rng(7)
    a, b = _random(rng, (3, 6)), _random(rng, (4, 6))
    c, e, f, _, _ = _gaussian_product(a, b, 54, conj=True)
    _check(c, _product(_exact(a, e, 54), _exact(np.conj(b), f, 54)), e, f, 54)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 12), st.integers(8, 100), st.integers(0, 2**31))
def test_any_shape_and_bits(m, n, k, bits, seed):
    rng = np.random.default_rng(seed)
    a, b = _random(rng, (m, k), 6.0), _random(rng, (n, k), 6.0)
    a[rng.random((m, k)) < 0.3] = 0
    b.imag[rng.random((n, k)) < 0.3] = 0
    c, e, f, _, _ = _gaussian_product(a, b, bits)
    _check(c, _product(_exact(a, e, bits), _exact(b, f, bits)), e, f, bits)


def test_accumulated_panels_give_the_same_bits():
    rng = np.random.default_rng(11)
    a, b = _random(rng, (5, 40)), _random(rng, (6, 40))
    c, e, f, t, (da, eb) = _gaussian_product(a, b, 54)
    acc = ENG.zeros_gaussian(t, 5, 6)
    for k0 in (0, 7, 29):
        k1 = {0: 7, 7: 29, 29: 40}[k0]
        ENG.accumulate_gaussian(acc, da[:, :, k0:k1], eb[:, :, k0:k1], t)
    again = ENG.combine_gaussian(acc, e, f, t)
    assert np.array_equal(again.view(np.int64), c.view(np.int64))


def _limbs14(x: int) -> list[int]:
    """The residue kernel's balanced 14-bit limbs of an integer (rint half to even of each quotient)."""
    out = []
    for shift in (42, 28, 14):
        q = Fraction(x, 2**shift)
        lj = round(q)   # Python's round of a Fraction: half to even, as the kernel's rint
        out.append(lj)
        x -= lj * 2**shift
    return [x] + out[::-1]


def test_two_reduction_residues_stay_exact_in_float32():
    """The complex residue kernel's two-reduction path (``gaussian_residues`` docstring): limbs of
    ``|X| <= 2**bits`` with ``sum_j |l_j| <= S = 3 * 2**13 + 2**(bits - 42)``, constants ``|c_j|,
    |d_j| <= 128`` for every modulus, so ``|A +- B| <= 256 S < 2**24`` up to NARROW_BITS and not one
    bit further."""
    gr = pytest.importorskip("ozhpc.engines.cutile.gaussian_residues")
    bits = gr.NARROW_BITS

    def bound(b):
        return 256 * (3 * 2**13 + 2**(b - 42))
    assert bound(bits) < 2**24 <= bound(bits + 1)
    for x in (2**bits, 2**bits - 1, 2**bits - 2**41, 2**41 + 2**27 + 2**13, 3 * 2**13, 2**bits - 2**41 - 2**27):
        for s in (1, -1):
            limbs = _limbs14(s * x)
            assert sum(l * 2**(14 * j) for j, l in enumerate(limbs)) == s * x
            assert all(abs(l) <= 2**13 for l in limbs[:3]) and abs(limbs[3]) <= 2**(bits - 42)
    for p, kind in gaussian.MODULI:
        lo, hi = crt.balanced_range(p)
        w = gaussian.root_of_minus_one(p) if kind == gaussian.SPLIT else 0
        for j in range(4):
            for c in (2**(14 * j) % p, w * 2**(14 * j) % p):
                assert min(abs(c), abs(c - p)) <= 128 and (c if c <= hi else c - p) >= lo


def test_kernel_tables_hold_the_balanced_constants():
    """The rows the GPU engines upload (:mod:`ozhpc.engines.kernel_tables`): every limb constant is
    congruent to its definition, ``f 2**(width j)``, modulo its modulus, and lies in the balanced
    range (so ``|c| <= 128``, what the kernels' exactness bounds assume); the pair kernel's rows are
    ``p, 2**16 mod p, lo, hi``."""
    pytest.importorskip("cuda.tile")
    from ozhpc.engines.kernel_tables import limb_constants, modulus_table

    primes = [p for p, _ in gaussian.MODULI]
    roots = [gaussian.root_of_minus_one(p) if kind == gaussian.SPLIT else 0 for p, kind in gaussian.MODULI]
    for width, exponents, factors in ((16, (1, 2, 3), None), (14, (1, 2, 3), None), (14, range(4), roots)):
        table = limb_constants(primes, width, exponents, factors)
        assert table.shape == (len(primes), len(exponents))
        for i, p in enumerate(primes):
            lo, hi = crt.balanced_range(p)
            f = 1 if factors is None else factors[i]
            for c, j in zip(table[i], exponents):
                assert c == int(c) and lo <= c <= hi and abs(c) <= 128
                assert (int(c) - f * 2**(width * j)) % p == 0
    rows = modulus_table(primes)
    assert rows.dtype == np.int32 and rows.tolist() == [[p, 2**16 % p, *crt.balanced_range(p)] for p in primes]
