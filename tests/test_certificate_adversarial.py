"""Hostile inputs for the certificate of "auto" (NumPy engine, both schemes and guarantees): values at
the ends of the range (DBL_MAX, 2**1023, subnormals, exponents anywhere), exact and near
cancellation, rows of exponents anywhere against sparse columns, transposes, alpha, and complex
operands with one part tiny or zero. Every finite input ends certified, and certified means every
entry meets its guarantee against the exact product (Fractions; docs/numerics.md, "The guarantee")."""
from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ozhpc
from ozhpc.ozaki.plan import FINAL_ROUNDING_ULPS
from ozhpc.run.reference import exact_dot

from test_complex_certificate import exact_parts

SCHEMES = ("ozaki1", "ozaki2")
LEVELS = ("dgemm", "tight")
DBL_MAX = np.finfo(np.float64).max
U = Fraction(1, 2**53)
INF_FROM = Fraction(2) ** 1024 - Fraction(2) ** 970
"""Exact values of at least this magnitude round to inf."""
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

EDGES = [0.0, DBL_MAX, 2.0**1023, 1.5 * 2.0**1000, 0.75 * DBL_MAX, 5e-324, 2.0**-1070, 2.0**-1022, 3e-310,
         1.0, 1.0 + 2.0**-52, 1.0 - 2.0**-53]


def gemm(a, b, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ozhpc.AccuracyWarning)
        return ozhpc.gemm(a, b, engine="numpy", info=True, **kw)


def within(got, exact: Fraction, mag: Fraction, factor: int, rho: int) -> bool:
    """One component against the guarantee: ``factor u mag + rho u |C| + 2**-1074`` (one more
    ``u |C|`` at +-DBL_MAX, the clamp), or +-inf exactly where the exact value rounds to it."""
    if not np.isfinite(got):
        return bool(np.isinf(got)) and abs(exact) >= INF_FROM and (exact > 0) == (got > 0)
    rho += abs(got) == DBL_MAX
    g = Fraction(float(got))
    return abs(g - exact) <= factor * U * mag + rho * U * abs(g) + Fraction(1, 2**1074)


def real_failures(c, a, b, scheme, guarantee, alpha=1.0):
    """Entries of ``c`` (= alpha op(A) op(B), finite inputs) off their guarantee; with alpha, its own
    rounding on top (two more u |alpha AB|) and the bound scaled by |alpha|."""
    factor = max(a.shape[1], 1) if guarantee == "dgemm" else 1
    rho = FINAL_ROUNDING_ULPS[scheme] + (0 if alpha == 1.0 else 2)
    bad = []
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            exact = Fraction(alpha) * exact_dot(a[i], b[:, j])
            mag = abs(Fraction(alpha)) * exact_dot(np.abs(a[i]), np.abs(b[:, j]))
            if not within(c[i, j], exact, mag, factor, rho):
                bad.append((i, j, float(c[i, j])))
    return bad


@st.composite
def extreme_operands(draw):
    """Small operands of edge values and random ones with exponents anywhere, signs mixed; some pair
    of k indices cancelling exactly or to an ulp; sometimes ordinary rows and columns around them
    (so refining the bad entries is cheaper than widening every one)."""
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)

    def values(shape):
        pick = rng.integers(0, 4, size=shape)
        edge = rng.choice(EDGES, size=shape)
        wide = np.ldexp(rng.uniform(1, 2, size=shape), rng.integers(-1074, 1024, size=shape))
        near = np.ldexp(rng.uniform(1, 2, size=shape), rng.integers(-60, 60, size=shape))
        x = np.select([pick == 0, pick == 1, pick == 2], [edge, wide, near], rng.standard_normal(shape))
        return x * rng.choice([-1.0, 1.0], size=shape)

    a, b = values((m, k)), values((k, n))
    if k > 1 and draw(st.booleans()):
        a[:, 1] = a[:, 0]
        with np.errstate(over="ignore"):
            b[1] = -b[0] * draw(st.sampled_from([1.0, 1 + 2.0**-52, 1 - 2.0**-53]))
        b[1] = np.where(np.isfinite(b[1]), b[1], -b[0])
    pad = draw(st.sampled_from([0, 0, 12]))
    if pad:
        a, b = np.vstack([a, rng.standard_normal((pad, k))]), np.hstack([b, rng.standard_normal((k, pad))])
    return a, b


@settings(max_examples=150, **SETTINGS)
@given(extreme_operands(), st.sampled_from(SCHEMES), st.sampled_from(LEVELS), st.booleans(), st.booleans())
def test_edge_values_certify_and_certified_means_right(ops, scheme, guarantee, transa, transb):
    """Certified, and every entry within its guarantee (or inf exactly where the exact value rounds to
    inf); alpha = 2**-10 of the same product likewise, also where AB overflows (alpha multiplies the
    entry's total)."""
    a, b = ops
    given_a, given_b = (a.T.copy() if transa else a), (b.T.copy() if transb else b)
    c, info = gemm(given_a, given_b, scheme=scheme, guarantee=guarantee, transa=transa, transb=transb)
    assert info.certified is True, info.widths
    assert not real_failures(c, a, b, scheme, guarantee), info.widths
    c2, info2 = gemm(given_a, given_b, scheme=scheme, guarantee=guarantee, transa=transa, transb=transb,
                     alpha=2.0**-10)
    assert info2.certified is True
    assert not real_failures(c2, a, b, scheme, guarantee, alpha=2.0**-10), info2.widths


@settings(max_examples=60, **SETTINGS)
@given(st.integers(0, 2**32 - 1), st.integers(20, 160), st.sampled_from(SCHEMES), st.sampled_from(LEVELS),
       st.booleans())
def test_rows_of_any_exponent_against_sparse_columns(seed, k, scheme, guarantee, left):
    """Rows whose entries take any exponent (2**-1074 .. DBL_MAX, some products overflowing, some
    underflowing) against sparse columns of entries within 2**+-60: the inputs on which a pass without
    overflow after one with it once had a wrong 0 certified (refine.Kept)."""
    rng = np.random.default_rng(seed)
    m, n = (int(x) for x in rng.integers(1, 6, size=2))
    wide = np.ldexp(rng.uniform(1, 2, size=(m, k)), rng.integers(-1074, 1000, size=(m, k)))
    wide *= rng.choice([-1.0, 1.0], size=wide.shape)
    sparse = rng.standard_normal((k, n)) * np.ldexp(1.0, rng.integers(-60, 60, size=(k, n)))
    sparse = np.where(rng.random((k, n)) < 0.25, sparse, 0.0)
    a, b = (wide, sparse) if left else (sparse.T.copy(), wide.T.copy())
    c, info = gemm(a, b, scheme=scheme, guarantee=guarantee)
    assert info.certified is True, info.widths
    assert not real_failures(c, a, b, scheme, guarantee), info.widths


@settings(max_examples=60, **SETTINGS)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(1, 6), st.integers(1, 4),
       st.sampled_from([0, 30, 300, 1000, 1100]), st.sampled_from(["a", "b", "both"]), st.sampled_from(SCHEMES),
       st.sampled_from(LEVELS))
def test_complex_with_one_part_tiny_or_zero(seed, m, k, n, below, which, scheme, guarantee):
    """Complex operands whose imaginary parts sit ``below`` bits under the real ones (0: as large;
    1100: mostly underflowed to subnormals or 0), some entries purely real, with one exactly
    cancelling pair: both components of every entry within the guarantee (k + 1 under "dgemm")."""
    rng = np.random.default_rng(seed)

    def operand(shape, tiny):
        re = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-20, 20, size=shape))
        im = rng.standard_normal(shape) * (2.0**-below if tiny else 1.0)
        return re + 1j * np.where(rng.random(shape) < 0.3, 0.0, im)

    a = operand((m, k), which in ("a", "both"))
    b = operand((k, n), which in ("b", "both"))
    if k > 1:
        a[:, 1], b[1] = a[:, 0], -b[0]
    c, info = gemm(a, b, scheme=scheme, guarantee=guarantee)
    assert info.certified is True, info.widths
    factor = k + 1 if guarantee == "dgemm" else 1
    for i in range(m):
        for j in range(n):
            exact, mags = exact_parts(a[i], b[:, j])
            for got, want, mag in zip((c[i, j].real, c[i, j].imag), exact, mags):
                assert within(got, want, mag, factor, FINAL_ROUNDING_ULPS[scheme]), (i, j, info.widths)
