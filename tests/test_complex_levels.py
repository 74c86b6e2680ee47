"""Levels of scales for complex products (ozhpc/ozaki/refine.py, ``Refinement`` on complex operands):
the issue's inputs made complex (both parts alike, or an imaginary part far below the real one in the
same complex row) are certified under both guarantees and schemes, every component of every entry
within its guarantee against the exact product (Fractions of the parts), through ``ozhpc.gemm`` and
SUMMA with the same bits; the input no plan certifies is certified; a random family with a wide
exponent spread (hypothesis)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ozhpc
from ozhpc.ozaki.plan import FINAL_ROUNDING_ULPS
from ozhpc.ozaki.refine import complex_rows, interleaved

from conftest import _summa_product
from helpers.anyinput_cases import cases
from test_complex_certificate import exact_parts
from test_complex_gemm import _uncertifiable
from test_complex_gemm import assert_guarantee as _finite_guarantee

CASES = cases()
OVERFLOW = Fraction(2**1024) - Fraction(2**970)
"""Where an exact component rounds to +-inf (half an ulp of DBL_MAX above it)."""
U, TINY = Fraction(1, 2**53), Fraction(1, 2**1074)
SCHEMES = ("ozaki1", "ozaki2")
GUARANTEES = ("dgemm", "tight")


def assert_guarantee(c, a, b, guarantee, scheme):
    """Every entry whose components are finite within its guarantee
    (:func:`test_complex_gemm.assert_guarantee`); an infinite component an exact one past FP64's
    range, with its sign (a row at DBL_MAX's scale), the other component within its guarantee."""
    k, factor = a.shape[1], a.shape[1] + 1 if guarantee == "dgemm" else 1
    for i, j in np.ndindex(*c.shape):
        if np.isfinite(c[i, j]):
            _finite_guarantee(c[i:i + 1, j:j + 1], a[i:i + 1], b[:, j:j + 1], guarantee, scheme)
            continue
        exact, mags = exact_parts(a[i], b[:, j])
        for got, want, mag in zip((c[i, j].real, c[i, j].imag), exact, mags):
            if np.isinf(got):
                assert abs(want) >= OVERFLOW and (got > 0) == (want > 0), (i, j, got)
            else:
                slack = factor * U * mag + FINAL_ROUNDING_ULPS[scheme] * U * abs(Fraction(float(got))) + TINY
                assert abs(Fraction(float(got)) - want) <= slack, (i, j, got, k)


def complex_case(name: str, variant: str):
    """``alike``: both parts of A the real case's, B's halved and minus a quarter of it (no component
    past DBL_MAX);
    ``far``: A's imaginary part 2**-60 times its real part (a complex row whose parts are far apart:
    one scale per complex row holds the imaginary part 60 bits lower), B real."""
    a, b = CASES[name]
    if variant == "alike":
        return a * (1 + 1j), b * (0.5 - 0.25j)
    return a + 1j * np.ldexp(a, -60), b.astype(complex)


def test_complex_rows_give_each_component_as_a_real_product():
    """The rows of length 2k: their real products are Re and Im of the complex product, exactly
    (integer parts, so every product and sum is exact in FP64)."""
    rng = np.random.default_rng(1)
    a = rng.integers(-9, 9, (3, 5)) + 1j * rng.integers(-9, 9, (3, 5))
    b = rng.integers(-9, 9, (4, 5)) + 1j * rng.integers(-9, 9, (4, 5))
    want = a @ b.T
    for component in ("real", "imag"):
        ra, rb = complex_rows(np, a, b, component)
        assert ra.shape == (3, 10) and rb.shape == (4, 10)
        assert np.array_equal(ra @ rb.T, getattr(want, component))
    assert interleaved(np.array([0, 3])).tolist() == [0, 1, 6, 7]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", GUARANTEES)
@pytest.mark.parametrize("variant", ["alike", "far"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_acceptance_case_made_complex_is_certified(name, variant, scheme, guarantee):
    """Certified under accuracy="strict", every component within its guarantee (exact), and SUMMA
    (1 x 1 grid, blocks and k-panels) gives the same bits."""
    a, b = complex_case(name, variant)
    c, info = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, guarantee=guarantee, accuracy="strict", info=True)
    assert info.certified is True and info.uncertified == 0, info.widths
    assert_guarantee(c, a, b, guarantee, scheme)
    if variant == "alike":
        assert _summa_product(a, b, scheme=scheme, guarantee=guarantee, accuracy="strict").tobytes() == c.tobytes()


def test_the_input_no_plan_certifies_is_certified_by_levels():
    """Each row's second part 2**-200 below its first, against columns the other way round: no plan
    holds the off-diagonal entries; the refinement recomputes them, every component within "tight"."""
    a, b = _uncertifiable()
    for scheme in SCHEMES:
        c, info = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, guarantee="tight", accuracy="strict", info=True)
        assert info.certified and info.refined_entries >= 2 and info.levels >= 1, info.widths
        assert_guarantee(c, a, b, "tight", scheme)
        (re, im), _ = exact_parts(a[0], b[:, 1])
        assert c[0, 1] == complex(float(re), float(im))


def wide(rng, shape, spread):
    """Complex entries whose parts are standard normals times independent powers of two over
    ``+-spread``, some zeros."""
    parts = [np.ldexp(rng.standard_normal(shape), rng.integers(-spread, spread + 1, size=shape)) for _ in range(2)]
    return np.where(rng.random(shape) < 0.3, 0.0, parts[0] + 1j * parts[1])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 5), st.integers(1, 6),
       st.sampled_from([200, 600, 1000]), st.sampled_from(SCHEMES), st.sampled_from(GUARANTEES), st.booleans())
def test_wide_exponent_spread_is_certified(seed, m, n, k, spread, scheme, guarantee, identity):
    """Complex entries spread over 2**+-spread per part (and identity operands that turn a column's
    spread into the entries of C): certified, every component within its guarantee."""
    rng = np.random.default_rng(seed)
    a, b = wide(rng, (m, k), spread), wide(rng, (k, n), spread)
    if identity:
        a = np.eye(m, k, dtype=complex)
    c, info = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, guarantee=guarantee, accuracy="strict", info=True)
    assert info.certified is True, info.widths
    assert_guarantee(c, a, b, guarantee, scheme)


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_complex_levels_have_the_same_bits_on_every_grid(ranks):
    """Complex inputs refined by levels, every grid of 2-4 ranks, int8-plane and FP64 panels, both
    schemes (tests/helpers/complex_levels_worker.py): certified, C bit for bit ``ozhpc.gemm``'s."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec not found (pip install mpich)")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    worker = os.path.join(repo, "tests", "helpers", "complex_levels_worker.py")
    env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, worker], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failures"] == [] and result["cases"] == 4 * 2 * 2 * len({2: [0, 1], 3: [0, 1], 4: [0, 1, 2]}[ranks])
