"""Ozaki scheme II for complex operands: products of Gaussian integers modulo int8 moduli.

A complex row is scaled as a real one with ONE exponent for its real and imaginary parts (``e_i``
from the larger of the two maxima), and each part becomes an integer, ``X = Xr + i Xi`` with
``Xr = rint(Re(a) 2**(bits - e))``, ``Xi = rint(Im(a) 2**(bits - e))`` (exactly as
:mod:`ozhpc.engines.crt` scales a real entry). The Gaussian-integer product ``C' = X Y^T`` has
``|Re C'|, |Im C'| <= ||X_i||_2 ||Y_j||_2 <= 2 k 4**bits`` (the norms over both parts: each
component is a real dot product of length 2k of the parts), and is computed modulo int8 moduli
``p <= 256`` from FEWER real int8 products than the four of the schoolbook rule:

* **split moduli** (odd, every prime factor 1 mod 4: then ``w**2 = -1 (mod p)`` has a root ``w``):
  ``a + b i -> (a + w b, a - w b) mod p`` is a ring isomorphism ``Z[i]/(p) -> (Z/p)**2`` (``p`` odd
  and ``w`` a unit, so it can be undone), so TWO products per modulus,
  ``U = sum_t u(X_t) u(Y_t)`` and ``V = sum_t v(X_t) v(Y_t)`` with ``u = a + w b``, ``v = a - w b``,
  give ``Re C' = (U + V) / 2`` and ``Im C' = (U - V) / (2 w)`` modulo p;
* **Karatsuba moduli** (the others, coprime to the split ones): THREE products,
  ``P1 = Xr Yr``, ``P2 = Xi Yi``, ``P3 = (Xr + Xi)(Yr + Yi)``; ``Re C' = P1 - P2``,
  ``Im C' = P3 - P1 - P2`` modulo p.

Every plane is a balanced residue (``|r| <= 128``, int8) and every product one int8 GEMM of the
real pair kernel; the reductions are unique, so every engine gets the same int8 planes.

**Which moduli.** A split modulus adds ``log2(p) / 2`` bits of ``M`` per product, a Karatsuba
modulus ``log2(p) / 3``; :data:`MODULI` lists the candidates (pairwise coprime, at most 256) in
that order of bits per product, and a plan takes the fewest from its front whose product ``M``
holds the data (as scheme II: :func:`moduli_needed`). The 22 split moduli hold 152 bits (241, 233,
229, 221 = 13 * 17, 205 = 5 * 41, 197, 193, 181, 173, 157, 149, 137, 113, ...); FP64 accuracy
(about 120 bits of ``M``) takes 16-17 of them, 32-34 products, where Karatsuba on scheme II's
real moduli takes 16 moduli and 48 products (:func:`route_costs` tabulates both). Past 142 bits
Karatsuba moduli (256, 253, 251, ...) join; 100 bits per entry at the largest k need 34 moduli.

**Reconstruction** (the real CRT of :mod:`ozhpc.engines.crt`, once per component): the residue of
a component modulo ``p_l`` is a small integer combination ``c_l`` of the modulus's planes (``U + V``
and ``U - V``; ``P1 - P2`` and ``P3 - P1 - P2``: ``|c_l| <= 384``) times a constant, ``1/2`` or
``1/(2w)`` modulo ``p_l`` (1 for Karatsuba), which is folded into the CRT weight:
``W'_l = W_l * h_l mod M``. So ``s_t = sum_l c_l W'_l[t]`` (each term below ``2**45``, at most 48
terms: exact) is congruent to the component modulo ``M``, and steps 3-5 of :mod:`ozhpc.engines.crt`
follow unchanged: ``|x| <= 384 N M <= 2**14 M`` here (``2**12 M`` for real moduli), so the
roundings of step 3 move ``x / M`` by less than ``2**-35`` and the moduli must hold
``M (1/2 - 2**-34) > |C'|`` (:func:`need`). Every engine sums the same ``c_l`` (combinations of
the unique balanced planes, not reduced again), so it gets the same pieces and the same bits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import crt as _crt

SPLIT, KARATSUBA = "split", "karatsuba"
PRODUCTS = {SPLIT: 2, KARATSUBA: 3}
"""int8 products (and residue planes per operand) per modulus of each kind."""
COMBINATION_MAX = 384
"""Largest ``|c_l|`` of a component's combination of residues (``|P3 - P1 - P2| <= 3 * 128``)."""
MARGIN_SHIFT = 33
"""The moduli hold ``2 |C'| (1 + 2**-33)``, i.e. ``M (1/2 - 2**-34) > |C'|``: step 3's quotient
cannot be off with ``|x| <= 2**14 M`` (module docstring)."""


def _prime_factors(p: int) -> list[int]:
    out, q, f = [], p, 2
    while f * f <= q:
        while q % f == 0:
            out.append(f)
            q //= f
        f += 1
    return out + ([q] if q > 1 else [])


def splits(p: int) -> bool:
    """Whether ``Z[i]/(p)`` splits into two copies of ``Z/p``: p odd, every prime factor 1 mod 4."""
    return p % 2 == 1 and p > 1 and all(f % 4 == 1 for f in _prime_factors(p))


def root_of_minus_one(p: int) -> int:
    """The smallest ``w`` in [1, p) with ``w**2 = -1 (mod p)`` (``p`` a split modulus)."""
    for w in range(1, p):
        if (w * w + 1) % p == 0:
            return w
    raise ValueError(f"-1 is not a square modulo {p}")


def _greedy(accept, taken=()) -> list[int]:
    """Pairwise coprime integers from 256 down that ``accept`` takes, coprime to ``taken`` too."""
    out: list[int] = []
    for p in range(256, 2, -1):
        if accept(p) and all(math.gcd(p, q) == 1 for q in (*taken, *out)):
            out.append(p)
    return out


SPLIT_MODULI = tuple(_greedy(splits))
"""22 split moduli, 152 bits of M: 241, 233, 229, 221, 205, 197, 193, 181, 173, 157, ..., 37, 29."""
KARATSUBA_MODULI = tuple(_greedy(lambda p: True, SPLIT_MODULI))
"""The other moduli coprime to them: 256, 253, 251, 249, 239, 227, 223, 217, 211, ..."""


def _order(p: int, kind: str) -> tuple:
    return (-math.log2(p) / PRODUCTS[kind], kind, -p)


MODULI: tuple[tuple[int, str], ...] = tuple(sorted(
    [(p, SPLIT) for p in SPLIT_MODULI if p >= _crt.MIN_MODULUS]
    + [(p, KARATSUBA) for p in KARATSUBA_MODULI if p >= _crt.MIN_MODULUS],
    key=lambda pk: _order(*pk)))
"""Candidates ``(p, kind)`` by bits of M per product, most first (the real CRT's smallest modulus,
29, bounds them from below)."""


def need(bound: int) -> int:
    """The smallest admissible M is above this: ``M (1/2 - 2**-34) > bound``."""
    return 2 * bound + ((2 * bound) >> MARGIN_SHIFT) + 1


def product_bound(bits: int, k: int) -> int:
    """Worst case of ``|Re C'_ij|``, ``|Im C'_ij|``: a real dot product of length 2k of parts
    ``|X|, |Y| <= 2**bits``."""
    return _crt.product_bound(bits, 2 * max(k, 1))


def _fewest(need_value: int) -> int | None:
    m = 1
    for count, (p, _) in enumerate(MODULI, 1):
        m *= p
        if m > need_value:
            return count
    return None


def moduli_needed(bits: int, k: int, bound: int | None = None) -> int:
    """Fewest moduli from the front of :data:`MODULI` whose M holds the worst case
    (:func:`product_bound`) or the smaller data bound ``bound`` of every component (the real
    :func:`ozhpc.engines.crt.data_product_bound` of the operands' rows over both parts)."""
    worst = product_bound(bits, k)
    count = _fewest(need(worst if bound is None else max(1, min(bound, worst))))
    if count is None or _crt.pieces_for(math.prod(p for p, _ in MODULI[:count])) > _crt.MAX_PIECES:
        raise ValueError(f"{bits} bits and k = {k} need more than the {_crt.MAX_PIECES * _crt.PIECE_BITS}-bit "
                         "complex reconstruction holds")
    return count


def reference_pieces(bits: int, k: int) -> int:
    """Pieces of every complex plan for ``bits`` and ``k``: those of the moduli that hold 4 times the
    worst case (as :func:`ozhpc.engines.crt.reference_pieces`), so that the additions of step 5, hence
    the bits of C, do not depend on how many moduli the data needed."""
    count = _fewest(4 * product_bound(bits, k))
    return _crt.pieces_for(math.prod(p for p, _ in MODULI[:count])) if count else _crt.MAX_PIECES


@dataclass(frozen=True)
class GaussianTables:
    """Constants of one (bits, moduli count, pieces) choice.

    ``primes`` / ``kinds`` / ``roots``: the moduli in kernel order, split ones first (``roots``: ``w``,
    0 for Karatsuba); ``plane_primes``: the modulus of each residue plane (two per split modulus:
    ``u, v``; three per Karatsuba modulus: ``r, i, r + i``); ``residue`` float64 ``(N, 8)`` rows ``p,
    fl(1/p), lo, hi, balanced(2**52 mod p), w, 0, 0`` (the split of each part, then its combination);
    ``re`` / ``im``: the real CRT's tables of each component, weights folded (module docstring).
    """

    bits: int
    count: int
    primes: tuple[int, ...]
    kinds: tuple[str, ...]
    roots: tuple[int, ...]
    residue: np.ndarray
    re: _crt.CrtTables
    im: _crt.CrtTables

    @property
    def splits(self) -> int:
        """Split moduli (the first ones)."""
        return self.kinds.count(SPLIT)

    @property
    def planes(self) -> int:
        """int8 residue planes per operand entry, one int8 product each."""
        return sum(PRODUCTS[kind] for kind in self.kinds)

    @property
    def plane_primes(self) -> tuple[int, ...]:
        return tuple(p for p, kind in zip(self.primes, self.kinds) for _ in range(PRODUCTS[kind]))

    @property
    def pieces(self) -> int:
        return self.re.pieces

    @property
    def shift(self) -> int:
        return -2 * self.bits


def combination_weights(p: int, kind: str, root: int) -> tuple[int, int]:
    """``(h_re, h_im)`` modulo p: a component's residue is ``h * c`` for its plane combination ``c``
    (split: ``c = U + V``, ``U - V``; Karatsuba: ``P1 - P2``, ``P3 - P1 - P2``)."""
    if kind == SPLIT:
        return pow(2, -1, p), pow(2 * root, -1, p)
    return 1, 1


@lru_cache(maxsize=64)
def gaussian_tables(bits: int, count: int, pieces: int | None = None) -> GaussianTables:
    """The tables of the first ``count`` of :data:`MODULI`, big integers as ``pieces`` pieces
    (default: the fewest that hold M)."""
    if not _crt.MIN_BITS <= bits <= _crt.MAX_BITS:
        raise ValueError(f"bits must be in [{_crt.MIN_BITS}, {_crt.MAX_BITS}], got {bits}")
    if not 1 <= count <= len(MODULI):
        raise ValueError(f"complex moduli count must be in [1, {len(MODULI)}], got {count}")
    chosen = sorted(MODULI[:count], key=lambda pk: (pk[1] != SPLIT, _order(*pk)))
    primes = tuple(p for p, _ in chosen)
    kinds = tuple(kind for _, kind in chosen)
    roots = tuple(root_of_minus_one(p) if kind == SPLIT else 0 for p, kind in chosen)
    big_m = math.prod(primes)
    pieces = max(_crt.pieces_for(big_m), pieces or 0)
    if pieces > _crt.MAX_PIECES:
        raise ValueError(f"{count} complex moduli exceed the {_crt.MAX_PIECES * _crt.PIECE_BITS}-bit reconstruction")
    residue = np.zeros((count, 8), dtype=np.float64)
    base = np.empty((count, 5), dtype=np.float64)
    weights = {"re": np.empty((count, pieces)), "im": np.empty((count, pieces))}
    for i, (p, kind, w) in enumerate(zip(primes, kinds, roots)):
        lo, hi = _crt.balanced_range(p)
        c52 = (2**52) % p
        base[i] = (p, 1.0 / p, lo, hi, c52 - p if c52 > hi else c52)
        residue[i, :5] = base[i]
        residue[i, 5] = w
        ml = big_m // p
        unit = ml * pow(ml, -1, p) % big_m
        for part, h in zip(("re", "im"), combination_weights(p, kind, w)):
            weights[part][i] = _crt._pieces(unit * h % big_m, pieces)
    m_pieces = np.array(_crt._pieces(big_m, pieces), dtype=np.float64)
    for a in (residue, base, m_pieces, *weights.values()):
        a.setflags(write=False)
    re, im = (_crt.CrtTables(bits, count, base, weights[part], m_pieces, 1.0 / big_m) for part in ("re", "im"))
    return GaussianTables(bits, count, primes, kinds, roots, residue, re, im)


def combinations(kind: str, planes):
    """``(c_re, c_im)``: the plane combinations of one modulus (``planes``: its 2 or 3 residue
    planes, or their products), exact small integers in any array type."""
    if kind == SPLIT:
        u, v = planes
        return u + v, u - v
    p1, p2, p3 = planes
    return p1 - p2, p3 - p1 - p2


def route_costs(bits_of_m: float) -> dict[str, tuple[int, int]]:
    """``(moduli, products)`` to reach ``log2 M > bits_of_m`` by each route: ``"mixed"`` (this module's
    :data:`MODULI`), ``"split"`` (split moduli only, two products each; None past their 152 bits) and
    ``"karatsuba"`` (scheme II's real moduli, three products each)."""
    def walk(moduli, cost):
        total = 0.0
        for count, p in enumerate(moduli, 1):
            total += math.log2(p)
            if total > bits_of_m:
                return count, cost(count)
        return None

    mixed = walk([p for p, _ in MODULI], lambda n: sum(PRODUCTS[kind] for _, kind in MODULI[:n]))
    return {"mixed": mixed, "split": walk(SPLIT_MODULI, lambda n: 2 * n),
            "karatsuba": walk(_crt.MODULI, lambda n: 3 * n)}
