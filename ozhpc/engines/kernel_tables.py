"""Host-side rows of the cuTile kernels' constant tables (NumPy; :mod:`ozhpc.engines.cutile_engine`
and :mod:`ozhpc.engines.cutile_gaussian` upload them): the pair kernel's modulus rows and the residue
kernels' limb constants, every residue in the balanced range of
:func:`ozhpc.engines.crt.balanced_range` (the kernels' exactness arguments assume ``|c| <= p/2``)."""
from __future__ import annotations

import numpy as np

from . import cutile as ck
from .crt import balanced_range


def balanced_mod(c: int, p: int) -> int:
    """The residue of the integer ``c`` modulo ``p`` in ``balanced_range(p)``."""
    c %= p
    return c - p if c > balanced_range(p)[1] else c


def modulus_table(primes) -> np.ndarray:
    """The pair kernel's int32 (N, MOD_COLS) rows ``p, 2**16 mod p, lo, hi`` (scheme II)."""
    return np.array([(p, 2**16 % p, *balanced_range(p)) for p in primes], dtype=np.int32).reshape(-1, ck.MOD_COLS)


def limb_constants(primes, width: int = ck.LIMB_BITS, exponents=(1, 2, 3), factors=None) -> np.ndarray:
    """float64 (N, len(exponents)): ``balanced(f_i 2**(width j) mod p_i)`` per modulus ``p_i`` and
    ``j`` in ``exponents`` (``factors``: one ``f_i`` per modulus, 1 by default): the residue kernels'
    limb constants (real: 16-bit limbs, j = 1..3; complex: also 14-bit ones and those times a root of -1)."""
    factors = [1] * len(primes) if factors is None else factors
    return np.array([[balanced_mod(int(f) * 2**(width * j), p) for j in exponents] for p, f in zip(primes, factors)],
                    dtype=np.float64).reshape(-1, len(exponents))
