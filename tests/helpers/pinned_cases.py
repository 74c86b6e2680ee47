"""A fixed set of products whose SHA-256 of C is pinned (tests/test_pinned_bits.py).

The hashes were recorded before the one-pipeline refactor; any change of the bits of C for
these inputs, on any grid, block or engine, fails the pin. Certified "auto" changed the
"auto" cases on purpose (docs/numerics.md says why); fixed slices/bits kept theirs. The defaults
(scheme II, guarantee "dgemm") have cases of their own; scheme I's "auto" under "tight" is the
certified "auto" of before the guarantee levels, with its hashes unchanged.
"""
from __future__ import annotations

import numpy as np

M, K, N = 37, 53, 29

CASES = {
    "default": dict(),
    "default-phi2-ta": dict(phi=2.0, transa=True),
    "default-special": dict(special=True, transb=True),
    "s1-auto-dgemm": dict(scheme="ozaki1"),
    "s1-auto": dict(scheme="ozaki1", guarantee="tight"),
    "s1-auto-phi2-ta": dict(scheme="ozaki1", guarantee="tight", phi=2.0, transa=True),
    "s1-6all-tb": dict(slices=6, groups="all", transb=True),
    "s1-8-alphabeta": dict(slices=8, alpha=-1.5, beta=0.75, transa=True, transb=True),
    "s1-auto-special": dict(scheme="ozaki1", guarantee="tight", special=True),
    "s1-3x4": dict(slices=3, groups=4, phi=1.0),
    "s2-auto-tight": dict(scheme="ozaki2", guarantee="tight"),
    "s2-30-alphabeta-t": dict(scheme="ozaki2", bits=30, alpha=2.0, beta=-1.0, transa=True, transb=True),
    "s2-53-phi1": dict(scheme="ozaki2", bits=53, phi=1.0, transb=True),
    "s2-auto-special": dict(scheme="ozaki2", guarantee="tight", special=True, transa=True),
}


def dyadic(rows: int, cols: int, phi: float, seed: int) -> np.ndarray:
    """Random 53-bit mantissas times powers of two spread over about ``6 phi`` binades: built
    from integers by exact ``ldexp``, so the same bits on every machine (``exp`` is not
    correctly rounded and differs between CPUs, which would move the pins)."""
    rng = np.random.default_rng(seed)
    mantissa = rng.integers(-(2**53) + 1, 2**53, size=(rows, cols), dtype=np.int64).astype(np.float64)
    spread = max(1, int(6 * phi))
    return np.ldexp(mantissa, rng.integers(-spread, spread + 1, size=(rows, cols)) - 54)


def operands(case: dict):
    """(A, B, C0) of a case, in the storage the transposes ask for."""
    phi = case.get("phi", 0.5)
    a = dyadic(M, K, phi, 101)
    b = dyadic(K, N, phi, 102)
    a[4] = 0.0
    b[:, 6] = 0.0
    a[7, 3], b[9, 11] = 5e-324, -1e-310  # subnormals
    if case.get("special"):
        a[2, 5], a[10, 40], a[20, 0] = np.inf, -np.inf, np.nan
        b[5, 2], b[40, 17], b[30, 3] = -np.inf, 0.0, np.inf
    c0 = dyadic(M, N, 0.5, 103) if case.get("beta") else None
    return (a.T.copy() if case.get("transa") else a), (b.T.copy() if case.get("transb") else b), c0


def gemm_kwargs(case: dict) -> dict:
    keys = ("alpha", "beta", "transa", "transb", "slices", "groups", "scheme", "bits", "guarantee")
    return {key: case[key] for key in keys if key in case}
