"""Ozaki scheme II: the modular (CRT) representation shared by every engine.

Each operand row is scaled to integers, ``X_ij = rint(a_ij * 2**(bits - e_i))``
(``|X| <= 2**bits``, an exact FP64 integer: below 2**53 by the rint, above it because
an FP64 value that large has no fraction bits). The product of the integer matrices,
``C' = X Y^T``, is computed modulo pairwise coprime moduli ``p_l <= 256``: one int8 GEMM
per modulus on the balanced residues (``|r| <= 128``), exact in int32. The Chinese
remainder theorem gives ``C'`` back exactly when ``|C'| < M (1/2 - 2**-37)`` (``M = prod p_l``;
the margin below M/2 absorbs the rounding of step 3's quotient, so it cannot be off by one). Then
``C = C' * 2**(e_i+f_j-2 bits)``. The moduli hold every ``|C'_ij|`` of the data at hand
(:func:`data_product_bound`, from the operands' row norms), never more than ``k 4**bits``.

Reconstruction, the same operations on every engine (:func:`ozhpc.engines.numpy_engine`
is the reference), with ``W_l = (M/p_l) * ((M/p_l)**-1 mod p_l) mod M`` and every big
integer held as ``P`` FP64 pieces of ``PIECE_BITS`` bits (most significant first; ``P`` the
fewest that hold ``M``, :attr:`CrtTables.pieces`, so the work per entry follows the moduli):

1. ``r_l = balanced(S_l mod p_l)`` for the sums ``S_l`` (exact integers, ``|S_l| <= 2**53 -
   2**10``: :meth:`ModularPlan.max_exact_k`): one reduction ``r = S - rint(S * fl(1/p)) * p``
   and one conditional ``+-p``. The quotient is off by less than 1/2 (relative error 2**-52
   of ``|S/p| < 2**53 / MIN_MODULUS``) and ``q * p`` stays below 2**53 (exact, FMA or not),
   so ``|r| < p``. The balanced residue is unique: any correct rounding gives the same;
2. ``s_t = sum_l r_l * W_l[t]``: exact integers (each term < 2**43, at most 32 terms);
3. ``K = rint(x / M)`` with ``x`` = the pieces ``s`` summed in FP64 (Horner, 2**36 apart):
   ``x = K*M + C'``, ``|x| <= N * 128 * M <= 2**12 M``, so the roundings of the Horner sum (at
   most ``7 * 2**-53 |x|``, FMA or not) and of ``x * fl(1/M)`` move ``x / M`` by less than
   ``2**-37``; with ``|C'| < M (1/2 - 2**-37)`` the rounding cannot move ``K`` (on every engine);
4. ``P_t = s_t - K * M[t]`` (exact), carries propagated from the least significant piece
   (``c = rint(P_t / 2**PIECE_BITS)``, exact) so every piece but the first is balanced;
5. ``total = P_{P-1} + P_{P-2} * 2**36 + ...`` added from the least significant piece (each
   product exact, so an FMA rounds like a multiply and an add), then one exact-or-once
   rounded ``ldexp(total, e_i + f_j - 2 bits)``.

The result differs from the correctly rounded ``C' * 2**(...)`` by at most a few ulps
(:data:`ROUNDING_ULPS`), and it is the same bits on every engine, grid and panel width:
``C'`` is exact whatever the order of the k sums, the moduli depend on ``bits``, the global
``k`` and the operands' global row norms (exact integers) alone, and the pieces on ``bits`` and
``k`` alone (:func:`reference_pieces`: as many as the worst-case moduli need, so a fixed
``bits`` gives the same bits whatever moduli the data allows).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

PIECE_BITS = 36
MAX_PIECES = 7
"""Big integers (M, the CRT weights) as at most 7 pieces of 36 bits: M < 2**252."""

RESIDUE_MAX = 128
"""Largest |balanced residue| (modulus 256 gives -128..127; odd moduli at most 127)."""

MIN_BITS, MAX_BITS = 8, 100
"""Integer bits per operand entry. At most two FP64 integers (the residue step splits X
into ``H * 2**52 + L``), and ``2 * 100 + log2 k + 2`` bits of M stay below 2**252 for
every k an FP64 accumulator can take (k < 2**39)."""

SPLIT = 2.0**52
SHORT_BITS = 80
"""Up to this many bits ``X = H * 2**52 + L`` has ``|H * (2**52 mod p)| <= 2**28 * 128`` and
``|L| <= 2**51``, so ``H * (2**52 mod p) + L`` is an exact FP64 integer below 2**52 and one
balanced reduction of it gives the residue of X (three above: of H, of L, of the combination)."""


def _coprime_moduli(limit: int = 256, count: int = 64) -> tuple[int, ...]:
    """Pairwise coprime integers from ``limit`` down, greedily (largest first: fewest GEMMs)."""
    out: list[int] = []
    for p in range(limit, 1, -1):
        if all(math.gcd(p, q) == 1 for q in out):
            out.append(p)
            if len(out) == count:
                break
    return tuple(out)


MODULI = _coprime_moduli()
"""256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217, 211, ... (log2 of the
product grows by 7.4-8 bits per modulus)."""
MIN_MODULUS = min(MODULI)
"""29: step 1's single reduction needs ``2**53 / p * 2**-52 < 1/2``, i.e. p > 4."""


def balanced_range(p: int) -> tuple[int, int]:
    """Canonical residues ``lo..hi`` of modulus ``p``: ``-(p//2) .. p-1-p//2``."""
    return -(p // 2), p - 1 - p // 2


def product_bound(bits: int, k: int) -> int:
    """Largest ``|C'_ij| = |sum_k X_ik Y_jk|`` with ``|X|, |Y| <= 2**bits``."""
    return max(k, 1) * 4**bits


def _ceil_sqrt(num: int, den: int) -> int:
    """Smallest integer r >= 0 with ``r**2 * den >= num`` (``num >= 0``, ``den > 0``)."""
    q = -(-num // den)
    r = math.isqrt(q)
    return r if r * r >= q else r + 1


def data_product_bound(bits: int, sq: tuple[int, int], nnz: tuple[int, int], norm_bits: int) -> int:
    """An upper bound of every ``|C'_ij|`` from the operands' own sizes (the data-dependent CRT range):
    ``|C'_ij| <= ||X_i||_2 ||Y_j||_2`` (Cauchy-Schwarz) and ``||X_i||_2 <= 2**bits ||x_i 2**-e_i||_2 +
    sqrt(nnz_i) / 2`` (``X = rint(x 2**(bits - e))``), with ``sq`` the largest ``||x_i 2**-e_i||_2**2``
    over the rows of each operand in units of ``2**-norm_bits`` (rounded up) and ``nnz`` the largest
    row count. All exact integers, so every rank and engine picks the same moduli."""
    sides = [_ceil_sqrt(s * 4**bits, 2**norm_bits) + -(-_ceil_sqrt(c, 1) // 2) for s, c in zip(sq, nnz)]
    return sides[0] * sides[1]


def crt_need(bound: int) -> int:
    """The smallest admissible M is above this: ``M (1/2 - 2**-37) > bound`` (step 3)."""
    return 2 * bound + ((2 * bound) >> 35) + 1


def _fewest_moduli(need: int) -> int | None:
    m = 1
    for count, p in enumerate(MODULI, 1):
        m *= p
        if m > need:
            return count
    return None


def moduli_needed(bits: int, k: int, bound: int | None = None) -> int:
    """Fewest moduli (from the front of :data:`MODULI`) whose product holds ``product_bound`` (the
    worst case ``k 4**bits``), or the smaller ``bound`` when a data-dependent bound of every
    ``|C'_ij|`` is given."""
    worst = product_bound(bits, k)
    count = _fewest_moduli(crt_need(worst if bound is None else max(1, min(bound, worst))))
    if count is None:
        raise ValueError(f"{bits} bits and k = {k} need more than {len(MODULI)} moduli")
    return count


def reference_pieces(bits: int, k: int) -> int:
    """Pieces of every scheme II plan for ``bits`` and ``k``: those of the moduli ozhpc took before
    the data-dependent range (the fewest with ``M > 4 k 4**bits``), so that the additions of step 5,
    hence the bits of C, do not depend on how many moduli the data needed."""
    count = _fewest_moduli(4 * product_bound(bits, k))
    return pieces_for(math.prod(MODULI[:count])) if count is not None else MAX_PIECES


def pieces_for(value: int) -> int:
    """Fewest PIECE_BITS-bit pieces that hold ``0 <= value`` (at least one)."""
    return max(1, -(-value.bit_length() // PIECE_BITS))


def _pieces(value: int, count: int) -> list[float]:
    """``value`` (0 <= value < 2**(count*PIECE_BITS)) as ``count`` exact FP64 integers, most significant first."""
    mask = (1 << PIECE_BITS) - 1
    return [float((value >> (PIECE_BITS * (count - 1 - t))) & mask) for t in range(count)]


@dataclass(frozen=True)
class CrtTables:
    """Constants of one (bits, moduli count) choice, as the kernels read them.

    ``moduli`` float64 ``(N, 5)``: ``p, fl(1/p), lo, hi, balanced(2**52 mod p)``;
    ``weights`` float64 ``(N, pieces)``: the pieces of ``W_l``; ``m_pieces`` float64
    ``(pieces,)``: the pieces of ``M``; ``inv_m``: ``fl(1/M)``; ``shift = -2 * bits``.
    """

    bits: int
    count: int
    moduli: np.ndarray
    weights: np.ndarray
    m_pieces: np.ndarray
    inv_m: float

    @property
    def shift(self) -> int:
        return -2 * self.bits

    @property
    def pieces(self) -> int:
        """Pieces per big integer: the fewest that hold M (4 for the 16-17 moduli of 53-56 bits)."""
        return self.m_pieces.shape[0]

    @property
    def primes(self) -> tuple[int, ...]:
        return MODULI[:self.count]


@lru_cache(maxsize=64)
def crt_tables(bits: int, count: int, pieces: int | None = None) -> CrtTables:
    """The tables of ``count`` moduli, big integers as ``pieces`` pieces (default: the fewest that
    hold M; more pieces give the same C' with leading zero pieces)."""
    if not MIN_BITS <= bits <= MAX_BITS:
        raise ValueError(f"bits must be in [{MIN_BITS}, {MAX_BITS}], got {bits}")
    if not 1 <= count <= len(MODULI):
        raise ValueError(f"moduli count must be in [1, {len(MODULI)}], got {count}")
    ps = MODULI[:count]
    big_m = math.prod(ps)
    pieces = max(pieces_for(big_m), pieces or 0)
    if pieces > MAX_PIECES:
        raise ValueError(f"{count} moduli exceed the {MAX_PIECES * PIECE_BITS}-bit reconstruction")
    mod = np.empty((count, 5), dtype=np.float64)
    weights = np.empty((count, pieces), dtype=np.float64)
    for i, p in enumerate(ps):
        lo, hi = balanced_range(p)
        c52 = (2**52) % p
        c52 = c52 - p if c52 > hi else c52
        mod[i] = (p, 1.0 / p, lo, hi, c52)
        ml = big_m // p
        weights[i] = _pieces(ml * pow(ml, -1, p) % big_m, pieces)
    for a in (mod, weights):
        a.setflags(write=False)
    m_pieces = np.array(_pieces(big_m, pieces), dtype=np.float64)
    m_pieces.setflags(write=False)
    return CrtTables(bits, count, mod, weights, m_pieces, 1.0 / big_m)


def balanced(xp, y, row):
    """Balanced residue of exact FP64 integers ``|y| <= 2**53 - 2**10`` modulo ``row[0]`` (``row`` =
    one line of :attr:`CrtTables.moduli`): one reduction and the range fix-ups, step 1 above; the
    result is unique, so every engine agrees."""
    p, inv_p, lo, hi = (float(v) for v in row[:4])
    r = y - xp.rint(y * inv_p) * p
    r = xp.where(r > hi, r - p, r)
    return xp.where(r < lo, r + p, r)


def exact_pieces(xp, acc, tables: "CrtTables", reduce: bool = True):
    """Steps 1-4 on the residue sums ``acc`` (one per modulus, any exact integer type: FP64 sums or
    an engine's balanced residues): FP64 ``(P, m, n)`` with ``C' = sum_t P_t 2**(PIECE_BITS (P-1-t))``
    exactly, every piece an integer, pieces 1..P-1 balanced. Exact steps only, so the same on every
    engine; step 5 (:func:`ozhpc.engines.numpy_engine._crt_combine`) or an exact sum rounds them.
    Without ``reduce``, ``acc`` holds exact small integers (a complex component's residue
    combinations) that step 2 sums as they are."""
    sums = acc.astype(xp.float64)
    npieces = tables.pieces
    unit = 2.0**PIECE_BITS
    pieces = xp.zeros((npieces,) + sums.shape[1:], dtype=xp.float64)
    for l in range(sums.shape[0]):
        r = balanced(xp, sums[l], tables.moduli[l]) if reduce else sums[l]
        for t in range(npieces):
            pieces[t] += r * float(tables.weights[l, t])
    x = pieces[0]
    for t in range(1, npieces):
        x = x * unit + pieces[t]
    quotient = xp.rint(x * tables.inv_m)
    for t in range(npieces):
        pieces[t] -= quotient * float(tables.m_pieces[t])
    for t in range(npieces - 1, 0, -1):
        carry = xp.rint(pieces[t] * (1.0 / unit))
        pieces[t] -= carry * unit
        pieces[t - 1] += carry
    return pieces


ROUNDING_ULPS = 3
"""Bound on the reconstruction's rounding, in units of 2**-53 |C|: the piece additions
(partial sums never exceed |C'| by more than a factor 1 + 2**-35) and the final scaling."""
