"""Test inputs shared by several test modules."""
import numpy as np
from hypothesis import strategies as st

SPECIAL_VALUES = st.sampled_from([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 5e-324, 1e300])
"""Zeros of both signs, infinities, NaN, the smallest subnormal and a value whose square overflows."""


def phi_matrix(rng, rows, cols, phi):
    """``(rand - 0.5) * exp(phi * randn)``: entries spread over about ``phi`` e-folds (the
    Ozaki-scheme literature's test matrices)."""
    return (rng.random((rows, cols)) - 0.5) * np.exp(phi * rng.standard_normal((rows, cols)))


def sprinkle_special(data, *arrays):
    """Overwrite a drawn number of drawn entries of each array with drawn special values."""
    for x in arrays:
        for _ in range(data.draw(st.integers(0, x.size))):
            x.flat[data.draw(st.integers(0, x.size - 1))] = data.draw(SPECIAL_VALUES)
