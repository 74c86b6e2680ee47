"""Ozaki scheme II (integers modulo int8 coprimes, CRT) on the NumPy engine, the reference.

Every reference here is exact Python integer / Fraction arithmetic: the residues of
``round-half-even(a * 2**(bits - e))``, the integer product ``C' = X Y^T``, the rational
``op(A) op(B)``.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ozhpc
from ozhpc.engines import crt
from ozhpc.engines import numpy_engine
from ozhpc.engines.numpy_engine import RESIDUE_K, NumpyEngine, block_rows
from ozhpc.errors import InputError
from ozhpc.ozaki.plan import AUTO_BITS_TIGHT_MARGIN, FP64_BITS, DataSizes, ModularPlan, auto_bits, make_plan
from ozhpc.ozaki.scales import exponents, row_abs_max
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.reference import exact_entry, sample_indices

from helpers.inputs import assert_same_nonfinite_pattern, native_pattern_defined, phi_matrix, special_operands
from helpers.tolerances import NATIVE_RATIO_MAX, error_vs_native

ENGINE = NumpyEngine()
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DBL_MAX = np.finfo(np.float64).max
"""Exact values at or above this round to inf (DBL_MAX plus half an ulp)."""
U = Fraction(1, 2**53)


def balanced(x: int, p: int) -> int:
    hi = crt.balanced_range(p)[1]
    r = x % p
    return r - p if r > hi else r


def scaled_integer(a: float, bits: int, e: int) -> int:
    """``round-half-even(a * 2**(bits - e))`` exactly (Fraction rounds half to even)."""
    return round(Fraction(float(a)) * Fraction(2) ** (bits - e))


def exps_of(rows):
    return exponents(np, row_abs_max(np, rows))


def bits_equal(x, y):
    return x.shape == y.shape and x.tobytes() == y.tobytes()


# -- residues ------------------------------------------------------------------------------

def make_rows(kind: str, seed: int, rows: int, cols: int, bits: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "spread":  # wide exponent range inside each row, rows anywhere in the range
        top = rng.integers(-1060, 1024, size=(rows, 1))
        x = np.ldexp(rng.random((rows, cols)) - 0.5, top - rng.integers(0, 120, size=(rows, cols)))
    elif kind == "subnormal":
        x = np.ldexp(rng.integers(-2**30, 2**30, size=(rows, cols)).astype(np.float64),
                     -1074 + rng.integers(0, 40, size=(rows, 1)))
    elif kind == "huge":  # near DBL_MAX, with small entries beside them
        x = DBL_MAX * (1 - rng.random((rows, cols)) * 2.0**-20) * rng.choice([-1.0, 1.0], (rows, cols))
        small = rng.random((rows, cols)) < 0.4
        x[small] = np.ldexp(rng.random(small.sum()) - 0.5, rng.integers(900, 1023, small.sum()))
    else:  # ties: (n + 1/2) * 2**(e - bits) with e the row exponent set by a leading 0.75 * 2**top
        top = rng.integers(-900, 900, size=(rows, 1))
        width = min(bits, 52)
        n = rng.integers(-(2 ** (width - 1)), 2 ** (width - 1), size=(rows, cols)).astype(np.float64)
        x = np.ldexp(n + 0.5, top - bits)
        x[:, 0] = np.ldexp(0.75, top[:, 0])
    x[rng.random((rows, cols)) < 0.1] = 0.0
    x[rng.random((rows, cols)) < 0.05] = -0.0
    return x


def reference_residues(x, e, bits, primes):
    ints = [[scaled_integer(x[i, j], bits, int(e[i])) for j in range(x.shape[1])] for i in range(x.shape[0])]
    return ints, np.array([[[balanced(v, p) for v in row] for row in ints] for p in primes], dtype=np.int64)


@SETTINGS
@given(st.sampled_from(["spread", "subnormal", "huge", "ties"]), st.integers(0, 2**32 - 1),
       st.integers(crt.MIN_BITS, crt.MAX_BITS), st.sampled_from([1, 1000, 2**38]), st.integers(0, 2),
       st.integers(1, 5), st.integers(1, 9))
def test_residues_are_the_balanced_residues_of_the_rounded_integer(kind, seed, bits, k, bump, rows, cols):
    """Element for element: residues == balanced(round-half-even(a 2**(bits-e)) mod p), every modulus."""
    x = make_rows(kind, seed, rows, cols, bits)
    e = exps_of(x) + bump  # any exponent with |a| < 2**e is a valid row scale
    plan = ModularPlan.for_k(bits, k)
    got = ENGINE.residues(x, e, plan.tables)
    ints, want = reference_residues(x, e, bits, plan.tables.primes)
    assert got.dtype == np.int8 and got.shape == (plan.moduli,) + x.shape
    assert all(abs(v) <= 2**bits for row in ints for v in row)
    for l, p in enumerate(plan.tables.primes):
        lo, hi = crt.balanced_range(p)
        assert lo <= got[l].min() and got[l].max() <= hi
    assert np.array_equal(got.astype(np.int64), want)


def test_residues_of_ties_round_half_to_even():
    """Scaled values exactly halfway: the residues are those of the even neighbour."""
    bits = 20
    x = np.array([[0.75, 2.5 * 2.0**-20, 3.5 * 2.0**-20, -2.5 * 2.0**-20, 0.5 * 2.0**-20, -1.5 * 2.0**-20]])
    e = exps_of(x)
    assert int(e[0]) == 0
    plan = ModularPlan.for_k(bits, 16)
    got = ENGINE.residues(x, e, plan.tables).astype(np.int64)
    for l, p in enumerate(plan.tables.primes):
        assert got[l, 0, 1:].tolist() == [balanced(v, p) for v in (2, 4, -2, 0, -2)]
    _, want = reference_residues(x, e, bits, plan.tables.primes)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("block_entries", [numpy_engine.BLOCK_ENTRIES, 4])
def test_residues_of_extreme_rows(monkeypatch, block_entries):
    """The smallest subnormal, DBL_MAX, zero rows and entries far below a huge row scale; also
    one row per block (each block then picks its own scaling: ldexp or a product)."""
    monkeypatch.setattr(numpy_engine, "BLOCK_ENTRIES", block_entries)
    x = np.array([[5e-324, -5e-324, 0.0, 2.0**-1070],
                  [DBL_MAX, -DBL_MAX, 1.0, 2.0**-1000],
                  [0.0, -0.0, 0.0, 0.0]])
    e = exps_of(x)
    for bits in (crt.MIN_BITS, 53, crt.MAX_BITS):
        plan = ModularPlan.for_k(bits, 2**20)
        got = ENGINE.residues(x, e, plan.tables).astype(np.int64)
        ints, want = reference_residues(x, e, bits, plan.tables.primes)
        assert np.array_equal(got, want)
        assert 2 ** (bits - 2) < ints[1][0] == -ints[1][1] <= 2 ** (bits - 1)  # e = 1025 here
        assert ints[1][2:] == [0, 0]  # over 1000 bits below the row scale: rounds to 0
        assert not got[:, 2].any()


def test_one_reduction_gives_the_balanced_residue_for_every_modulus():
    """Step 1 of the CRT at its limits, for all moduli (the smallest too): |y| up to the
    largest sum that max_exact_k allows, exact ties y = (q + 1/2) p of the even modulus,
    residues next to the range ends."""
    from ozhpc.engines.crt import balanced as reduce_once
    top = 2**53 - 2**10
    assert ModularPlan.for_k(53, 1).max_exact_k() * crt.RESIDUE_MAX**2 <= top
    assert crt.MIN_MODULUS == min(crt.MODULI) > 4
    rng = np.random.default_rng(5)
    for p in crt.MODULI:
        row = np.array([p, 1.0 / p, *crt.balanced_range(p)])
        ys = [top, top - p, top - p // 2, 2**52 - 1, p // 2, p // 2 + 1, p - 1, 0]
        ys += [q * p + off for q in (top // p - 1, 3) for off in (-(p // 2), p // 2, p - 1)]
        ys += [int(v) for v in rng.integers(-top, top + 1, 200)]
        ys = [y for y in ys if abs(y) <= top]
        ys += [-y for y in ys]
        got = reduce_once(np, np.array(ys, dtype=np.float64), row)
        assert got.tolist() == [balanced(y, p) for y in ys], p


def test_crt_tables_reconstruct_the_integers():
    """W_l = 1 mod p_l and 0 mod the others; the pieces give W_l and M back; moduli coprime."""
    assert all(math.gcd(p, q) == 1 for i, p in enumerate(crt.MODULI) for q in crt.MODULI[i + 1:])
    for bits, k in ((8, 1), (53, 4096), (100, 2**38)):
        t = ModularPlan.for_k(bits, k).tables
        big_m = math.prod(t.primes)
        assert big_m > 4 * crt.product_bound(bits, k) >= math.prod(t.primes[:-1])  # fewest moduli

        def value(pieces):
            return sum(int(v) << (crt.PIECE_BITS * (len(pieces) - 1 - i)) for i, v in enumerate(pieces))

        assert 2 ** (crt.PIECE_BITS * (t.pieces - 1)) <= big_m < 2 ** (crt.PIECE_BITS * t.pieces)  # fewest
        assert t.weights.shape == (len(t.primes), t.pieces)
        assert value(t.m_pieces) == big_m and t.inv_m == 1.0 / big_m and t.shift == -2 * bits
        for l, p in enumerate(t.primes):
            w = value(t.weights[l])
            assert 0 <= w < big_m and all(w % q == (q == p) for q in t.primes)
            assert t.moduli[l].tolist() == [p, 1.0 / p, *crt.balanced_range(p), balanced(2**52, p)]


# -- CRT combine ---------------------------------------------------------------------------

def check_scaled(c: float, v: Fraction):
    """``c`` is ``v`` to within the reconstruction rounding (relative ROUNDING_ULPS * 2**-53)
    plus half a subnormal ulp (the final ldexp), or +-inf where ``v`` rounds beyond 2**1024.
    A computed value of exactly 2**1024 is +-DBL_MAX (``engines.digits.final_scale``: the
    operands' rounding can reach it), so DBL_MAX may stand for values up to 2**1024 + 2**971."""
    tol = crt.ROUNDING_ULPS * U * abs(v) + Fraction(1, 2**1075)
    top = Fraction(2) ** 1024 + Fraction(2) ** 971
    if abs(v) - tol >= top:
        assert c == (np.inf if v > 0 else -np.inf), (c, float(v))
    elif np.isinf(c):
        assert abs(v) + tol >= top and (c > 0) == (v > 0), (c, float(v))
    else:
        slack = Fraction(2) ** 971 if abs(c) == DBL_MAX else 0
        assert abs(Fraction(float(c)) - v) <= tol + slack, (c, float(v))


def blas_ldexp(x: float, s: int) -> np.ndarray:
    """``ldexp(x, s)`` as the combines finish: +0.0 for zeros, +-DBL_MAX for exactly 2**1024."""
    with np.errstate(over="ignore"):
        r = np.ldexp(np.array([x]), s)
        if np.isinf(r[0]) and abs(np.ldexp(x, s - 1)) <= 2.0**1023:
            r = np.copysign(DBL_MAX, r)
    return r + 0.0


def residue_sums(cprime, primes, k, rng):
    """Accumulators as the products leave them: any integers S_l = C' (mod p_l) of the size a
    k-term sum of residue products can have."""
    m, n = len(cprime), len(cprime[0])
    limit = min(k * crt.RESIDUE_MAX**2, 2**53 - 2**10 - 256)
    acc = np.empty((len(primes), m, n))
    for l, p in enumerate(primes):
        for i in range(m):
            for j in range(n):
                r = balanced(cprime[i][j], p)
                q = (limit - crt.RESIDUE_MAX) // p
                t = int(rng.integers(-q, q + 1)) if rng.random() < 0.7 else 0
                acc[l, i, j] = r + p * t
    assert np.abs(acc).max() <= limit
    return acc


def random_int(rng, bits):
    """An integer with ``|v| <= 2**bits`` (low bits zero beyond 62 bits)."""
    if bits <= 62:
        return int(rng.integers(-2**bits, 2**bits + 1))
    return int(rng.integers(-2**62, 2**62 + 1)) << (bits - 62)


def draw_cprime(kind, bits, k, rng):
    bound = crt.product_bound(bits, k)
    if kind == "product":  # an actual X Y^T row/column pair
        kk = min(k, 6)
        return sum(random_int(rng, bits) * random_int(rng, bits) for _ in range(kk))
    if kind == "tiny":
        return int(rng.integers(-2**20, 2**20))
    if kind == "zero":
        return 0
    if kind == "bound":
        return int(rng.choice([-1, 1])) * (bound - int(rng.integers(0, 2**10)))
    return int(rng.integers(-2**62, 2**62)) * bound // 2**62  # anywhere in [-bound, bound]


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(crt.MIN_BITS, crt.MAX_BITS),
       st.sampled_from([1, 7, 4096, 2**20, 2**38]), st.integers(1, 4), st.integers(1, 8),
       st.sampled_from(["normal", "subnormal", "overflow", "wide"]))
def test_crt_combine_is_the_exact_product_rounded(seed, bits, k, m, n, target):
    """combine(S) == C' * 2**(e_i + f_j - 2 bits) within ROUNDING_ULPS, for any C' within the
    bound (tiny, zero, negative, |C'| ~ product_bound), incl. subnormal and overflowing results."""
    rng = np.random.default_rng(seed)
    plan = ModularPlan.for_k(bits, k)
    kinds = ["product", "tiny", "zero", "bound", "uniform"]
    cprime = [[draw_cprime(kinds[int(rng.integers(0, 5))], bits, k, rng) for _ in range(n)] for _ in range(m)]
    acc = residue_sums(cprime, plan.tables.primes, k, rng)
    # row exponents near each other; each column aims its first-row entry at the target magnitude
    e = rng.integers(-200, 200) + rng.integers(-3, 4, size=m)
    lo, hi = {"normal": (-1000, 1000), "subnormal": (-1100, -1022), "overflow": (1018, 1030),
              "wide": (-1300, 1300)}[target]
    f = np.array([int(rng.integers(lo, hi)) - max(abs(cprime[0][j]).bit_length(), 1) - int(e[0]) + 2 * bits
                  for j in range(n)])
    got = plan.combine(ENGINE, acc, e, f)
    assert got.shape == (m, n) and got.dtype == np.float64
    for i in range(m):
        for j in range(n):
            s = int(e[i]) + int(f[j]) - 2 * bits
            v = cprime[i][j] * Fraction(2) ** s
            check_scaled(got[i, j], v)
            if abs(cprime[i][j]) < 2**52:  # every partial sum exact: exactly ldexp of C'
                assert bits_equal(got[i:i + 1, j], blas_ldexp(float(cprime[i][j]), s))


def test_crt_combine_subnormal_zero_and_overflow_like_ldexp():
    """Fixed cases: C' with more than 53 bits scaled to subnormal, DBL_MAX and beyond."""
    bits, k = 60, 1024
    plan = ModularPlan.for_k(bits, k)
    rng = np.random.default_rng(3)
    big = crt.product_bound(bits, k) - 12345
    cases = [(big, -1074 - big.bit_length() + 30), (-big, -1074 - big.bit_length() + 2),
             (big, -1074 - big.bit_length() - 5), (big, 1024 - big.bit_length()),
             (-big, 1023 - big.bit_length()), (3, -1076), (0, 1023), (0, -1200), (1, -1074), (-1, 1023)]
    for cp, s in cases:
        acc = residue_sums([[cp]], plan.tables.primes, k, rng)
        got = plan.combine(ENGINE, acc, np.array([s + 2 * bits]), np.array([0]))[0, 0]
        check_scaled(got, cp * Fraction(2) ** s)
        ref = blas_ldexp(float(cp), s)[0]  # ldexp of the correctly rounded C'
        # the ulp of ref's binade, 2^(e-53); np.spacing(ref) would overflow at DBL_MAX
        ulp = max(np.ldexp(1.0, int(np.frexp(ref)[1]) - 53), 5e-324) if np.isfinite(ref) else 0
        assert (got == ref) if not np.isfinite(ref) or ref == 0 else abs(got - ref) <= crt.ROUNDING_ULPS * ulp
        if cp == 0:
            assert got == 0
    assert np.isinf(plan.combine(ENGINE, residue_sums([[big]], plan.tables.primes, k, rng),
                                 np.array([1024 + 2 * bits]), np.array([0]))[0, 0])


def test_crt_combine_blocks_of_rows_give_the_same_bits(monkeypatch):
    """More rows than one CRT block: the same bits as combining each row on its own."""
    monkeypatch.setattr(numpy_engine, "BLOCK_ENTRIES", 64)
    bits, k = 55, 300
    plan = ModularPlan.for_k(bits, k)
    rng = np.random.default_rng(5)
    n = 3
    rows = block_rows(n)
    m = rows + 9
    cprime = [[draw_cprime("uniform", bits, k, rng) for _ in range(n)] for _ in range(m)]
    acc = residue_sums(cprime, plan.tables.primes, k, rng)
    e, f = rng.integers(-50, 50, size=m), rng.integers(-50, 50, size=n)
    whole = plan.combine(ENGINE, acc, e, f)
    for i in (0, rows - 1, rows, m - 1):
        assert bits_equal(whole[i:i + 1], plan.combine(ENGINE, acc[:, i:i + 1], e[i:i + 1], f))


# -- end to end ----------------------------------------------------------------------------

def op_rows_cols(a, b, transa, transb):
    return (a.T if transa else a), (b.T if transb else b)


def assert_within_info_bound(c, a_op, b_op, info, idx, extra=Fraction(0)):
    """GemmInfo's bound on the entries ``idx`` (plus ``extra``, absolute)."""
    e, f = exps_of(a_op), exps_of(b_op.T)
    plan = ModularPlan.for_k(info.bits, a_op.shape[1])
    assert info.truncation_bound == float(plan.truncation_bound(a_op.shape[1]))
    assert info.rounding_bound == crt.ROUNDING_ULPS * 2.0**-53 == plan.rounding_bound
    tau_k = plan.truncation_bound(a_op.shape[1])
    for i, j in idx:
        exact = exact_entry(a_op[i], b_op[:, j])
        bound = (Fraction(2) ** int(e[i] + f[j]) * tau_k
                 + Fraction(info.rounding_bound) * abs(Fraction(c[i, j])) + extra)
        assert abs(Fraction(c[i, j]) - exact) <= bound, (i, j, info.bits)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 7), st.integers(1, 7), st.integers(1, 40),
       st.sampled_from([0.0, 0.5, 2.0, 4.0]), st.one_of(st.just("auto"), st.integers(crt.MIN_BITS, 90)),
       st.booleans(), st.booleans())
def test_error_within_stated_bound(seed, m, n, k, phi, bits, transa, transb):
    """Fixed bits: |C - AB| <= 2**(e_i+f_j) tau k + rounding |C| (GemmInfo's bound); "auto": the
    certified per-entry guarantee ("dgemm", the default); every entry."""
    rng = np.random.default_rng(seed)
    a_op = phi_matrix(rng, m, k, phi)
    b_op = phi_matrix(rng, k, n, phi)
    a = np.ascontiguousarray(a_op.T) if transa else a_op
    b = np.ascontiguousarray(b_op.T) if transb else b_op
    c, info = ozhpc.gemm(a, b, transa=transa, transb=transb, engine="numpy", scheme="ozaki2", bits=bits, info=True)
    assert info.scheme == "ozaki2" and info.int8_gemms == info.moduli == info.planes and info.slices is None is info.groups
    if bits != "auto":
        assert info.bits == bits
        assert_within_info_bound(c, a_op, b_op, info, [(i, j) for i in range(m) for j in range(n)])
        return
    # certified "auto", guarantee "dgemm" (the default): k u (|A||B|)_ij plus two final roundings
    assert info.certified and info.guarantee == "dgemm"
    u = Fraction(k, 2**53)
    for i in range(m):
        for j in range(n):
            exact = exact_entry(a_op[i], b_op[:, j])
            mag = sum((abs(Fraction(float(x)) * Fraction(float(y))) for x, y in zip(a_op[i], b_op[:, j])), Fraction(0))
            slack = u * mag + 2 * u * abs(Fraction(c[i, j])) + Fraction(1, 2**1074)
            assert abs(Fraction(c[i, j]) - exact) <= slack, (i, j, info.widths)


@pytest.mark.parametrize("transa,transb", [(False, False), (True, False), (False, True), (True, True)])
def test_transposes_alpha_beta(rng, transa, transb):
    m, n, k = 37, 23, 91
    a = rng.standard_normal((k, m) if transa else (m, k))
    b = rng.standard_normal((n, k) if transb else (k, n))
    c0 = rng.standard_normal((m, n))
    a_op, b_op = op_rows_cols(a, b, transa, transb)
    got = ozhpc.gemm(a, b, c0, alpha=-1.5, beta=0.25, transa=transa, transb=transb, engine="numpy",
                     scheme="ozaki2")
    ab, info = ozhpc.gemm(np.ascontiguousarray(a_op), np.ascontiguousarray(b_op), engine="numpy",
                          scheme="ozaki2", info=True)
    assert bits_equal(got, -1.5 * ab + 0.25 * c0)  # alpha*AB and beta*C rounded separately, as BLAS
    assert_within_info_bound(ab, a_op, b_op, info, sample_indices(m, n, 30, seed=1))
    assert bits_equal(ozhpc.gemm(a, b, c0, alpha=0.0, beta=0.25, transa=transa, transb=transb,
                                 engine="numpy", scheme="ozaki2"), 0.25 * c0)


def test_shapes_across_chunk_and_block_boundaries(monkeypatch):
    """k past one product chunk, m past one residue and CRT block: still within the bound."""
    monkeypatch.setattr(numpy_engine, "BLOCK_ENTRIES", 64)
    rng = np.random.default_rng(11)
    for m, n, k in ((3, 2, RESIDUE_K + 5), (block_rows(2) + 3, 2, 5), (1, 1, 1)):
        a = standard_matrix(m, k, 1.0, seed=int(rng.integers(1000)))
        b = standard_matrix(k, n, 1.0, seed=int(rng.integers(1000)))
        c, info = ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2", info=True)
        idx = [(0, 0), (m - 1, n - 1)] + sample_indices(m, n, 6, seed=2)
        assert_within_info_bound(c, a, b, info, idx)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, RESIDUE_K - 1, RESIDUE_K, RESIDUE_K + 1, 2 * RESIDUE_K + 7]),
       st.sampled_from(["random", "-128", "aligned 127"]))
def test_residue_products_exact_in_float32_chunks(seed, k, fill):
    """The NumPy engine's int8 products (float32 BLAS in k-chunks, float64 sums of them) equal
    the int64 products exactly, at the extremes too: every residue -128 makes each chunk's sum
    exactly 2**24, the largest that float32 holds; residues of 127 whose signs agree give odd
    partial sums j * 16129, which float32 would round past 2**24 (a longer chunk)."""
    rng = np.random.default_rng(seed)
    m, n, planes = 3, 2, 2
    da = rng.integers(-128, 128, size=(planes, m, k)).astype(np.int8)
    eb = rng.integers(-128, 128, size=(planes, n, k)).astype(np.int8)
    if fill == "-128":
        da[:], eb[:] = -128, -128
    elif fill == "aligned 127":
        signs = np.where(rng.random((planes, 1, k)) < 0.5, -1, 1)
        da[:], eb[:] = 127 * signs, 127 * signs
    acc = np.zeros((planes, m, n))
    ENGINE.accumulate_moduli(acc, da, eb, None)
    want = np.einsum("gik,gjk->gij", da.astype(np.int64), eb.astype(np.int64))
    assert np.array_equal(acc.astype(np.int64), want) and np.array_equal(acc, want.astype(np.float64))


def test_k_zero_empty_and_zero_rows(rng):
    c0 = rng.standard_normal((3, 4))
    got, info = ozhpc.gemm(np.zeros((3, 0)), np.zeros((0, 4)), c0, beta=2.0, engine="numpy",
                           scheme="ozaki2", info=True)
    assert bits_equal(got, 2.0 * c0) and info.k == 0 and info.int8_gemms <= crt.moduli_needed(info.bits, 0)
    assert bits_equal(ozhpc.gemm(np.zeros((3, 0)), np.zeros((0, 4)), engine="numpy", scheme="ozaki2"),
                      np.zeros((3, 4)))
    for shape_a, shape_b in (((0, 5), (5, 4)), ((3, 5), (5, 0)), ((0, 0), (0, 0))):
        out = ozhpc.gemm(np.ones(shape_a), np.ones(shape_b), engine="numpy", scheme="ozaki2", bits=30)
        assert out.shape == (shape_a[0], shape_b[1])
    a = rng.standard_normal((6, 9))
    b = rng.standard_normal((9, 5))
    a[2] = 0.0
    b[:, 3] = 0.0
    a[4, :3] = [5e-324, -3e-320, 2.5e-310]
    c, info = ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2", info=True)
    assert not c[2].any() and not c[:, 3].any()
    assert_within_info_bound(c, a, b, info, [(i, j) for i in range(6) for j in range(5)])


def test_subnormal_rows_and_huge_rows():
    """Rows scaled near the bottom and the top of the range: exact residues, one ldexp at the end
    (subnormal results within half a subnormal ulp more, overflow to inf as in DGEMM)."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 30))
    a[0] *= 2.0**-1060
    a[1] *= 2.0**1000
    b = rng.standard_normal((30, 3))
    b[:, 0] *= 2.0**40
    b[:, 1] *= 2.0**-40
    c, info = ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2", bits=60, info=True)
    huge = exact_entry(a[1], b[:, 0])
    assert abs(huge) > 2**1030 and c[1, 0] == (np.inf if huge > 0 else -np.inf)
    assert c[1, 0] == ozhpc.gemm(a, b, engine="numpy")[1, 0]  # as scheme I
    assert 0 < abs(c[0, 2]) < 2.0**-1022 and abs(c[0, 1]) < 2.0**-1070
    finite = [(i, j) for i in range(4) for j in range(3) if (i, j) != (1, 0)]
    assert_within_info_bound(c, a, b, info, finite, extra=Fraction(1, 2**1075))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 6), st.integers(1, 6), st.data())
def test_nonfinite_pattern_matches_scheme_one_and_numpy(seed, m, n, k, data):
    a, b = special_operands(seed, m, n, k, data)
    with np.errstate(all="ignore"):
        native = a @ b
    one = ozhpc.gemm(a, b, engine="numpy")
    two = ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2")
    defined = native_pattern_defined(a, b)   # native only where its order cannot matter
    for want, where in ((one, np.ones_like(defined)), (native, defined)):
        assert_same_nonfinite_pattern(two, want, where)


def test_moduli_follow_the_data_and_never_exceed_the_worst_case(rng):
    """The moduli hold every |C'_ij| of the data at hand (its rows' 2-norms): never more than the
    worst case k 4**bits needs, fewer on spread rows, and the same for scaled copies of the data
    (the bound reads the rows over their scales)."""
    k = 300
    a = standard_matrix(40, k, 2.0, seed=1)
    b = standard_matrix(k, 30, 2.0, seed=2)
    for bits in (crt.MIN_BITS, 41, 53, 77, crt.MAX_BITS):
        worst = crt.moduli_needed(bits, k)
        counts = {name: ozhpc.gemm(x, y, engine="numpy", scheme="ozaki2", bits=bits, info=True)[1].int8_gemms
                  for name, (x, y) in {"all": (a, b), "rows": (a[:7], b), "cols": (a, b[:, 3:5]),
                                       "scaled": (a * 2.0**-600, b * 2.0**300)}.items()}
        assert max(counts.values()) <= worst and counts["scaled"] == counts["all"], (bits, counts)
        assert {make_plan("auto", "auto", s, scheme="ozaki2", bits=bits, k=k).moduli for s in (0, 9, 63)} == {worst}
    assert min(ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2", bits=53, info=True)[1].moduli,
               crt.moduli_needed(53, k) - 1) == crt.moduli_needed(53, k) - 1
    assert [crt.moduli_needed(53, kk) for kk in (1, 256, 4096, 2**20)] == sorted(
        crt.moduli_needed(53, kk) for kk in (1, 256, 4096, 2**20))


@pytest.mark.parametrize("bits", [56, 40, 100])
def test_panel_by_panel_accumulation_gives_the_same_bits(bits):
    """The SUMMA invariant: k split in pieces (any order), rows split in blocks, one combine:
    the same C as gemm."""
    rng = np.random.default_rng(8)
    m, n, k = 21, 13, 500
    a = standard_matrix(m, k, 1.0, seed=5)
    b = standard_matrix(k, n, 1.0, seed=6)
    c, info = ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2", bits=bits, info=True)
    plan = ModularPlan(info.bits, info.moduli, crt.reference_pieces(info.bits, k))
    assert plan.moduli == info.int8_gemms
    e, f = exps_of(a), exps_of(b.T)
    da, eb = plan.split(ENGINE, a, e), plan.split(ENGINE, np.ascontiguousarray(b.T), f)
    cuts = [0] + sorted(rng.choice(np.arange(1, k), size=6, replace=False).tolist()) + [k]
    pieces = list(zip(cuts[:-1], cuts[1:]))
    for order in (pieces, pieces[::-1]):
        acc = plan.zeros(ENGINE, m, n, k)
        for k0, k1 in order:
            plan.accumulate(ENGINE, acc, da[:, :, k0:k1], eb[:, :, k0:k1])
        assert bits_equal(plan.combine(ENGINE, acc, e, f), c)
    # a row block of A split on its own (with the global scales) and combined on its own
    rows = slice(4, 15)
    d_rows = plan.split(ENGINE, a[rows], e[rows])
    assert np.array_equal(d_rows, da[:, rows])
    acc = plan.zeros(ENGINE, 11, n, k)
    plan.accumulate(ENGINE, acc, d_rows, eb)
    assert bits_equal(plan.combine(ENGINE, acc, e[rows], f), c[rows])


@pytest.mark.parametrize("phi", [0.0, 0.5, 1.0, 2.0, 4.0])
def test_auto_is_at_least_as_accurate_as_native(phi):
    """Certified "auto" is at or below native DGEMM's error on the standard matrices."""
    for k, m, n, samples in ((256, 96, 64, 30), (4096, 32, 32, 10)):
        a = standard_matrix(m, k, phi, seed=int(10 * phi) + k + 7)
        b = standard_matrix(k, n, phi, seed=int(10 * phi) + k + 8)
        c, info = ozhpc.gemm(a, b, engine="numpy", scheme="ozaki2", info=True)
        assert info.certified
        ours, native = error_vs_native(c, a, b, samples=samples)
        assert ours <= NATIVE_RATIO_MAX * native, (phi, k, info.bits, ours, native)


# -- options -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,message", [
    (dict(slices=7, groups="auto", scheme="ozaki2"),
     "slices=7 is an option of scheme=ozaki1; with scheme=ozaki2 leave it out and set the accuracy with bits"),
    (dict(slices="auto", groups="all", scheme="ozaki2"),
     "groups=all is an option of scheme=ozaki1; with scheme=ozaki2 leave it out and set the accuracy with bits"),
    (dict(slices="auto", groups="auto", scheme="ozaki2", bits=7), "bits must be between 8 and 100, got 7"),
    (dict(slices="auto", groups="auto", scheme="ozaki2", bits=101), "bits must be between 8 and 100, got 101"),
    (dict(slices="auto", groups="auto", scheme="ozaki2", bits="many"), "bits must be 'auto' or an integer, got 'many'"),
    (dict(slices="auto", groups="auto", scheme="ozaki2", bits=True), "bits must be 'auto' or an integer, got True"),
    (dict(slices="auto", groups="auto", scheme="ozaki3"), "scheme must be one of ozaki1, ozaki2, got 'ozaki3'"),
    (dict(slices="auto", groups="auto", scheme="ozaki1", bits=50),
     "bits=50 needs scheme=ozaki2 (the scheme here is ozaki1, whose accuracy is set by slices)"),
])
def test_option_errors(kwargs, message):
    slices, groups = kwargs.pop("slices"), kwargs.pop("groups")
    with pytest.raises(InputError) as exc:
        make_plan(slices, groups, 0, k=100, **kwargs)
    assert str(exc.value) == message
    with pytest.raises(InputError) as exc:  # the same from gemm
        ozhpc.gemm(np.ones((2, 3)), np.ones((3, 2)), slices=slices, groups=groups, engine="numpy", **kwargs)
    assert str(exc.value) == message


def test_plan_limits():
    plan = ModularPlan.for_k(50, 10)
    with pytest.raises(InputError) as exc:
        ModularPlan(crt.MAX_BITS + 1, 3)
    assert str(exc.value) == "bits must be between 8 and 100, got 101"
    kmax = plan.max_exact_k()
    assert kmax * crt.RESIDUE_MAX**2 <= 2**53 - 2**10 < (kmax + 1) * crt.RESIDUE_MAX**2
    ModularPlan.for_k(100, kmax).check_k(kmax)
    with pytest.raises(InputError) as exc:
        ModularPlan.for_k(50, kmax + 1).check_k(kmax + 1)
    assert str(exc.value) == (f"k = {kmax + 1} is too long for exact accumulation with scheme ozaki2 "
                              f"(50 bits; at most {kmax})")
    def sizes(gap):
        return DataSizes(sq=(1, 1), nnz=(1, 1), norm_min=(1, 1), k=1, mean_gap=gap)
    for gap, excess in ((0.0, 0.0), (2.0, 0.0), (3.97, 0.855), (5.0, 2.4), (8.0, 6.9), (9.0, 7.9), (20.5, 19.4)):
        rule = FP64_BITS + math.ceil(excess - 1e-9)
        assert auto_bits(sizes(gap)) == rule, gap
        assert auto_bits(sizes(gap), "tight") == max(rule, FP64_BITS + math.ceil(gap) + AUTO_BITS_TIGHT_MARGIN), gap
    assert auto_bits(sizes(200.0)) == crt.MAX_BITS and auto_bits(None) == FP64_BITS
