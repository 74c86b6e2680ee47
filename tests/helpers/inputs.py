"""Test inputs shared by several test modules."""
import numpy as np
from hypothesis import strategies as st

JOB_FILES = """\
[inputs]
a = "in.h5:/A"
b = "in.h5:/B"
[output]
c = "out.h5:/C"
report = "run.json"
"""
"""The input and output tables of a job file (TOML) with paths relative to the job's directory."""

SPECIAL_VALUES = st.sampled_from([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 5e-324, 1e300])
"""Zeros of both signs, infinities, NaN, the smallest subnormal and a value whose square overflows."""


def phi_matrix(rng, rows, cols, phi):
    """``(rand - 0.5) * exp(phi * randn)``: entries spread over about ``phi`` e-folds (the
    Ozaki-scheme literature's test matrices)."""
    return (rng.random((rows, cols)) - 0.5) * np.exp(phi * rng.standard_normal((rows, cols)))


def awkward(rng, rows, cols, phi=1.0):
    """phi entries with a zero row and column, subnormals, huge and tiny entries (the certificate's
    structured cases)."""
    x = phi_matrix(rng, rows, cols, phi)
    x[3] = 0.0
    x[:, 5] = 0.0
    x[7, 2], x[8, 9], x[9, 4] = 5e-324, -3e-310, 1e300
    x[10, :] *= 2.0**-1000
    return x


def sprinkle_special(data, *arrays):
    """Overwrite a drawn number of drawn entries of each array with drawn special values."""
    for x in arrays:
        for _ in range(data.draw(st.integers(0, x.size))):
            x.flat[data.draw(st.integers(0, x.size - 1))] = data.draw(SPECIAL_VALUES)


def special_operands(seed, m, n, k, data):
    """Standard-normal A (m x k) and B (k x n) with special values sprinkled in."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    sprinkle_special(data, a, b)
    return a, b


def native_pattern_defined(a, b):
    """Entries where native DGEMM's inf/NaN pattern does not depend on its summation order.

    Where a product of finite entries overflows (1e300 * 1e300), IEEE makes it an inf product
    and the BLAS's order decides between inf and NaN (inf - inf); ozhpc sums the finite products
    exactly (docs/numerics.md). These are the entries where |A||B| of the finite parts is finite."""
    with np.errstate(all="ignore"):
        finite_mag = np.abs(np.where(np.isfinite(a), a, 0)) @ np.abs(np.where(np.isfinite(b), b, 0))
    return np.isfinite(finite_mag)


def assert_same_nonfinite_pattern(got, want, where):
    """NaN, +inf and -inf at the same entries of ``got`` and ``want`` within ``where``."""
    assert np.array_equal(np.isnan(got)[where], np.isnan(want)[where])
    assert np.array_equal(np.isposinf(got)[where], np.isposinf(want)[where])
    assert np.array_equal(np.isneginf(got)[where], np.isneginf(want)[where])


def square_inputs(directory, n: int):
    """``directory``/in.h5 with the standard n x n phi = 0.5 matrices /A (seed 1) and /B (seed 2):
    the inputs of the CLI tests that need a real product; returns ``directory``."""
    import h5py

    from ozhpc.run.matrices import standard_matrix

    with h5py.File(directory / "in.h5", "w") as f:
        f["A"] = standard_matrix(n, n, 0.5, 1)
        f["B"] = standard_matrix(n, n, 0.5, 2)
    return directory
