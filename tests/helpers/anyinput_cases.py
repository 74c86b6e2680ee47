"""Finite inputs that one scale per row and column cannot reach (issue 33's acceptance cases): each
name gives ``(A, B)``; certified "auto" must certify every one, with every entry within its
guarantee, and give the same bits on every grid and engine (tests/test_levels.py, the MPI worker's
"anyinput" mode, tests/test_levels_gpu.py)."""
from __future__ import annotations

import numpy as np

DBL_MAX = np.finfo(np.float64).max
X_253 = 2.0**-200 * (1 + 2.0**-52)


def docs_example(n: int = 24) -> np.ndarray:
    """docs/batch.md's matrix: ones on the diagonal, ``2**-200 (1 + 2**-52)`` elsewhere (253 bits per row)."""
    a = np.full((n, n), X_253)
    np.fill_diagonal(a, 1.0)
    return a


def block_matrix(size: int = 5, seed: int = 1) -> np.ndarray:
    """Four diagonal blocks of ordinary entries; the off-diagonal block (r, c) is the same kind of
    block times ``2**-(200 + 233 |r - c|)``: 2**-200 .. 2**-900 below the diagonal ones."""
    rng = np.random.default_rng(seed)
    out = np.empty((4 * size, 4 * size))
    for r in range(4):
        for c in range(4):
            scale = 1.0 if r == c else 2.0 ** -(200 + 233 * (abs(r - c) - 1) + 7 * (r + c))
            out[r * size:(r + 1) * size, c * size:(c + 1) * size] = rng.standard_normal((size, size)) * scale
    return out


def compensated(m: int = 12, k: int = 16, n: int = 10, p: int = 1000, seed: int = 2):
    """Column t of A times ``2**s_t``, row t of B times ``2**-s_t``, ``|s_t| <= p``: AB unchanged."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    s = rng.integers(-p, p + 1, size=k)
    s[:2] = (-p, p)
    return np.ldexp(a, s.reshape(1, -1)), np.ldexp(b, -s.reshape(-1, 1))


def subnormal_beside_huge(seed: int = 3):
    """Rows of A at DBL_MAX's scale holding a few entries at the subnormal end, and B's columns the
    other way round; the products of the small ones are what some entries of C are made of."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((8, 10)) * 2.0**1000
    a[0, 3], a[1, 4], a[2, 5] = 5e-324, -3e-310, 2.0**-1060
    a[3] = [5e-324 * (t + 1) for t in range(10)]        # a whole row of subnormals
    a[4, 1] = DBL_MAX / 4
    b = np.eye(10)
    b[:, 7] = rng.standard_normal(10) * 2.0**-1000
    b[9, 8] = DBL_MAX / 8
    b[3, 9], b[4, 9] = 1.0, 2.0**900                    # 5e-324 * 1 beside 2**1000-sized terms
    return a, b


def d2_pair(p: int, q: int):
    """``I x [[2**p, 0], [2**q, 1]]``: the issue's D2 family (entries ``|p - q|`` bits apart)."""
    return np.eye(2), np.array([[2.0**p, 0.0], [2.0**q, 1.0]])


def small_meets_big(p: int):
    """A small entry meeting ``2**p`` in one term of a dot product whose other terms are ordinary:
    ``C = [[3 * 2**-40 * 2**p + 1, 1], [...]]``: exact at no single scale per row."""
    a = np.array([[3 * 2.0**-40, 1.0, 0.5], [1.0, 2.0**-30, 0.0]])
    b = np.array([[2.0**p, 1.0], [1.0, 2.0**-p], [0.25, 1.0]])
    return a, b


def vandermonde_inverse():
    """``V @ inv(V)`` for ``V = vander(linspace(0.1, 3, 24))``: heavy cancellation, a lower bound
    of ``|A||B|`` from 7-bit magnitude digits far too coarse."""
    v = np.vander(np.linspace(0.1, 3, 24))
    return v, np.linalg.inv(v)


def just_below_inf(pad: int = 8):
    """Row 0 of op(A) holds 2**1023, which meets only B's column 1, and three entries 424-537 bits
    below it; C[0, 0] = (2**1024 - 2**971) + 2**970 - 2**910 rounds to DBL_MAX, but a level that
    drops the last term holds the midpoint 2**1024 - 2**970, which rounds to inf. ``pad``
    ordinary rows and columns make the refinement cheaper than a wider plan."""
    rng = np.random.default_rng(0)
    a = np.vstack([[2.0**1023, DBL_MAX * 2.0**-424, 2.0**560, -(2.0**486)], rng.standard_normal((pad, 4))])
    b = np.zeros((4, 2 + pad))
    b[:, 0], b[0, 1], b[:, 2:] = [0.0, 2.0**424, 2.0**410, 2.0**424], 1.0, rng.standard_normal((4, pad))
    return a, b


def cases() -> dict:
    """Every named case, as ``(A, B)``."""
    out = {"docs A@I": (docs_example(), np.eye(24)), "docs I@A": (np.eye(24), docs_example()),
           "1e300 over 1e-30": (np.eye(2), np.array([[1e300, 0.0], [1e-30, 1.0]])),
           "blocks A@I": (block_matrix(), np.eye(20)), "blocks I@A": (np.eye(20), block_matrix()),
           "compensated 2**1000": compensated(), "subnormal beside DBL_MAX": subnormal_beside_huge(),
           "V inv(V)": vandermonde_inverse(), "sum just below inf": just_below_inf()}
    for p, q in ((-500, -550), (0, -100), (300, -700), (1000, -1070)):
        out[f"D2 {p} {q}"] = d2_pair(p, q)
    for p in (100, 500, 1000):
        out[f"small meets 2**{p}"] = small_meets_big(p)
    return out
