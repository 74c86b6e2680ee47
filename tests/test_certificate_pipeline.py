"""Acceptance tests of certified "auto" in the real pipeline: ``ozhpc.gemm`` and SUMMA (the
``product`` fixture, tests/conftest.py), both schemes and both guarantees, against exact rational
references on sampled and worst-case entries. The guarantee (docs/numerics.md, "The guarantee"):
every finite entry satisfies

    |C_ij - (op(A) op(B))_ij| <= c u (|op(A)||op(B)|)_ij + rho u |C_ij| + 2**-1074,

u = 2**-53, c = k ("dgemm", the default) or 1 ("tight"), rho = plan.FINAL_ROUNDING_ULPS[scheme]. The pieces of the certificate are
tested one at a time in tests/test_certificate_pieces.py."""
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi4py import MPI

import ozhpc
from ozhpc.ozaki.plan import FINAL_ROUNDING_ULPS
from ozhpc.parallel import ProcessGrid
from ozhpc.parallel.summa import dist_gemm
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.reference import sample_indices

from helpers.guarantee import guarantee_holds, worst_entries

SCHEMES = ("ozaki1", "ozaki2")
LEVELS = ("dgemm", "tight")
U = Fraction(1, 2**53)
DBL_MAX = np.finfo(np.float64).max
CAP = {"ozaki1": 7 * 24, "ozaki2": 100}
"""The widest plan in bits (GemmInfo.bits): 24 slices, 100 bits."""


def gemm(A, B, C=None, **kw):
    return ozhpc.gemm(A, B, C, **{"engine": "numpy", **kw})





def certified(run, a, b, scheme, samples=30, guarantee="tight", **kw):
    """C = run(a, b) with "auto": certified, and the guarantee on sampled and worst entries."""
    c, info = run(a, b, scheme=scheme, info=True, guarantee=guarantee, **kw)
    assert info.certified is True and info.uncertified == 0 and info.guarantee == guarantee, info.widths
    assert info.worst_ratio <= 1 and info.widths and info.widths[-1][1] == 0, info.widths
    a_op = a.T if kw.get("transa") else a
    b_op = b.T if kw.get("transb") else b
    m, n = c.shape
    for i, j in sorted(set(sample_indices(m, n, samples, seed=3) + worst_entries(c, a_op, b_op))):
        assert guarantee_holds(c, a_op, b_op, scheme, i, j, guarantee), (scheme, guarantee, i, j, info.widths)
    return c, info


def same_bits(x, y) -> bool:
    return x.shape == y.shape and x.tobytes() == y.tobytes()


# -- compensated power-of-two scalings -------------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
@pytest.mark.parametrize("p", [30, 500])
def test_compensated_scalings(product, scheme, guarantee, p):
    """Column t of A times 2**s_t, row t of B times 2**-s_t, |s_t| <= p: the product is unchanged,
    and so is the guarantee (equilibration undoes the scaling)."""
    rng = np.random.default_rng(p + 1)
    a, b = rng.standard_normal((40, 48)), rng.standard_normal((48, 36))
    sc = 2.0 ** rng.integers(-p, p + 1, size=48)
    c, _ = certified(product, a * sc, b / sc[:, None], scheme, guarantee=guarantee)
    plain, _ = certified(product, a, b, scheme, guarantee=guarantee)
    factor = 48 if guarantee == "dgemm" else 1
    assert np.all(np.abs(c - plain) <= 4 * factor * 2.0**-53 * (np.abs(a) @ np.abs(b)))


# -- identity, permutation, diagonal, sparse -------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
def test_identity_and_permutations_are_exact(product, scheme):
    """Under "tight" each entry of a product with an identity, a permutation or a power-of-two
    diagonal is one product, which the certificate only passes when it is exact."""
    rng = np.random.default_rng(5)
    a = standard_matrix(24, 32, 4.0, seed=4)
    eye = np.eye(32)
    for left, right, want in ((a, eye, a), (eye[:24, :24], a, a), (a, eye[rng.permutation(32)], None),
                              (eye[rng.permutation(24)][:, :24], a, None)):
        c, info = product(left, right, scheme=scheme, guarantee="tight", info=True)
        assert info.certified is True
        assert same_bits(c, left @ right if want is None else want), (scheme, info.widths)
    # powers of two on the diagonal: every product exact (the rows' spread plus 2 x 20 bits stay
    # within scheme II's 100 bits; tests/test_certificate_pipeline.py's hard_matrix is what does not)
    a = standard_matrix(24, 32, 1.0, seed=4)
    pow2 = np.diag(2.0 ** rng.integers(-20, 20, size=32))
    for left, right in ((a, pow2), (pow2[:24, :24], a)):
        c, info = product(left, right, scheme=scheme, guarantee="tight", info=True)
        assert info.certified is True and same_bits(c, left @ right), (scheme, info.widths)


def identity_operand(case):
    rng = np.random.default_rng(6)
    if case.startswith("phi"):
        return standard_matrix(20, 25, float(case[3:]), seed=5)
    if case == "subnormal rows":   # whole rows in the subnormal range, a zero and a -0.0
        a = standard_matrix(20, 25, 1.0, seed=5)
        a[3:6] *= 2.0**-1060
        a[7, :2] = [0.0, -0.0]
        return a
    # phi = 6 rows times 2**r_i, |r_i| <= 300: the rows' own spread (<= 43 bits) fits 100 bits
    return standard_matrix(20, 25, 6.0, seed=5) * 2.0 ** rng.integers(-300, 300, size=(20, 1))


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("case", ["phi0.5", "phi2", "phi4", "phi6", "subnormal rows", "scaled phi6 rows"])
def test_gemm_with_identity_returns_a_bitwise(scheme, case):
    """gemm(A, I) == A bit for bit (a -0.0 entry comes out +0.0, as from a BLAS summing from
    +0.0); gemm(I, A) == A too where A's columns fit the widest plan (rows of A scaled apart
    make its columns span hundreds of bits, which op(B)'s per-column scales cannot hold)."""
    a = identity_operand(case)
    pairs = [(a, np.eye(25))] + ([(np.eye(20), a)] if case.startswith("phi") else [])
    for left, right in pairs:
        c, info = gemm(left, right, scheme=scheme, guarantee="tight", info=True)
        assert info.certified is True, info.widths
        assert same_bits(c, a + 0.0), info.widths
        certified(gemm, left, right, scheme, guarantee="dgemm")


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("span", [0, 30, 60])
def test_diagonal_operands(product, scheme, guarantee, side, span):
    """D A and A D with D's entries spanning 2**-span .. 2**span: each entry is one product, so
    the exact product needs no more bits than A's own rows / columns."""
    rng = np.random.default_rng(7)
    a = standard_matrix(24, 24, 2.0, seed=8)
    d = np.diag(rng.standard_normal(24) * 2.0 ** rng.integers(-span, span + 1, size=24))
    left, right = (d, a) if side == "left" else (a, d)
    c, _ = certified(product, left, right, scheme, guarantee=guarantee)
    # each entry is one product: the guarantee makes it (c + rho) u |ab| at most
    factor = 24 if guarantee == "dgemm" else 1
    assert np.all(np.abs(c - left @ right)
                  <= (factor + FINAL_ROUNDING_ULPS[scheme]) * np.spacing(np.abs(left @ right)))


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
@pytest.mark.parametrize("density", [0.05, 0.2])
@pytest.mark.parametrize("side", ["left", "right", "both"])
def test_sparse_like_operands(product, scheme, guarantee, density, side):
    """80-95% zeros on either side: entries with no overlapping nonzeros are exactly +0.0, every
    other entry meets the guarantee."""
    rng = np.random.default_rng(int(100 * density) + len(side))
    a, b = standard_matrix(24, 32, 1.0, seed=9), standard_matrix(32, 20, 2.0, seed=10)
    if side in ("left", "both"):
        a = np.where(rng.random(a.shape) < density, a, 0.0)
    if side in ("right", "both"):
        b = np.where(rng.random(b.shape) < density, b, 0.0)
    c, _ = certified(product, a, b, scheme, samples=60, guarantee=guarantee)
    zero = (np.abs(a) @ np.abs(b)) == 0
    assert not c[zero].any() and not np.signbit(c[zero]).any()
    if side == "both":
        assert zero.any()


# -- small k -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
def test_k_one_is_within_an_ulp_of_the_rounded_product(product, scheme):
    """Outer products: each entry is one product a_i b_j. Neither scheme rounds it correctly in
    every case (scheme I keeps the triangle of digit pairs, so the product is truncated before its
    one rounding; scheme II's CRT combine rounds twice; docs/numerics.md, "k = 1"): under "tight"
    every entry is within one ulp of NumPy's a*b (the guarantee, u |ab| + rho u |C|), most equal it,
    over a wide range of exponents and subnormal results."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((9, 1)) * 2.0 ** rng.integers(-500, 500, size=(9, 1))
    b = rng.standard_normal((1, 7)) * 2.0 ** rng.integers(-500, 500, size=(1, 7))
    a[0, 0], b[0, 0] = 1 + 2**-52, 3 * 2.0**-1070
    odd = np.array([[float.fromhex("0x1.8c46624528c57p-5")]]), np.array([[-float.fromhex("0x1.04dc5e6cf9491p+0")]])
    for x, y in ((a, b), (standard_matrix(6, 1, 4.0, seed=1), standard_matrix(1, 5, 4.0, seed=2)),
                 (rng.standard_normal((40, 1)), rng.standard_normal((1, 30))), odd):
        c, info = product(x, y, scheme=scheme, guarantee="tight", info=True)
        assert info.certified is True
        with np.errstate(under="ignore"):
            want = x * y + 0.0
        assert np.all(np.abs(c - want) <= np.spacing(np.abs(want))), (scheme, info.widths)
        if want.size > 1:
            assert np.mean(c == want) > 0.8


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_tiny_k(product, scheme, guarantee, k):
    for phi in (0.5, 2.0, 6.0):
        certified(product, standard_matrix(9, k, phi, seed=k), standard_matrix(k, 7, phi, seed=k + 9), scheme,
                  guarantee=guarantee)


# -- rows with one dominant entry, phi matrices ---------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_rows_with_one_dominant_entry(product, scheme, guarantee):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((30, 50)) * 2.0**-40
    a[np.arange(30), rng.integers(0, 50, 30)] = rng.standard_normal(30) * 2.0**20
    b = rng.standard_normal((50, 25))
    b[rng.integers(0, 50, 25), np.arange(25)] = 2.0**-45
    certified(product, a, b, scheme, guarantee=guarantee)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
@pytest.mark.parametrize("phi", [0.5, 1.0, 2.0, 4.0, 6.0])
def test_phi_matrices(scheme, guarantee, phi):
    a, b = standard_matrix(32, 160, phi, seed=11), standard_matrix(160, 28, phi, seed=12)
    certified(gemm, a, b, scheme, samples=20, guarantee=guarantee)


# -- alpha/beta and transposes --------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
@pytest.mark.parametrize("transa,transb", [(False, False), (False, True), (True, False), (True, True)])
def test_alpha_beta_and_transposes(product, scheme, guarantee, transa, transb):
    """C = fl(alpha * fl(AB) + beta * C0), each operation rounded, as BLAS: bit for bit NumPy's
    epilogue on the certified product."""
    rng = np.random.default_rng(13)
    m, n, k = 17, 13, 29
    a = rng.standard_normal((k, m) if transa else (m, k)) * 2.0 ** rng.integers(-30, 30, size=(1, 1))
    b = standard_matrix(n, k, 2.0, seed=3) if transb else standard_matrix(k, n, 2.0, seed=3)
    c0 = rng.standard_normal((m, n))
    kw = dict(transa=transa, transb=transb)
    ab, _ = certified(product, a, b, scheme, guarantee=guarantee, **kw)
    for alpha, beta in ((-1.5, 0.25), (3.0, 1.0), (1.0, -1.0), (0.1, 0.0)):
        got, info = product(a, b, c0, alpha=alpha, beta=beta, scheme=scheme, guarantee=guarantee, info=True, **kw)
        want = alpha * ab + beta * c0 if beta else alpha * ab
        assert info.certified is True and same_bits(got, want + 0.0), (alpha, beta)


# -- BLAS details -------------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", SCHEMES)
def test_blas_details(product, scheme):
    run = (lambda a, b: product(np.array(a, dtype=np.float64), np.array(b, dtype=np.float64),
                                scheme=scheme, guarantee="tight", info=True))
    c, info = run([[1.0, 2.0**-60]], [[2.0**-60], [1.0]])
    assert info.certified is True and c[0, 0] == 2.0**-59
    for a, b in (([[-1e-200]], [[1e-200]]), ([[1e-300, -1e-300]], [[1e-300], [1e-300]]),
                 ([[-5e-324]], [[0.5]])):
        c, info = run(a, b)
        assert info.certified is True and c[0, 0] == 0 and not np.signbit(c[0, 0]), (a, b)
    for a, b, want in (([[DBL_MAX]], [[1.0]], DBL_MAX), ([[1.0]], [[-DBL_MAX]], -DBL_MAX)):
        c, info = run(a, b)
        assert info.certified is True and c[0, 0] == want
    c, info = run([[1 + 2.0**-52]], [[1.0]])
    assert info.certified is True and c[0, 0] == 1 + 2.0**-52


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_special_values_zero_and_empty_operands(scheme, guarantee):
    """inf/NaN land where IEEE puts them (those entries are not counted), the finite entries are
    certified; k = 0, empty and all-zero operands give +0.0 and pass."""
    rng = np.random.default_rng(23)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 4))
    a[1, 2], b[3, 1] = np.inf, np.nan
    c, info = gemm(a, b, scheme=scheme, guarantee=guarantee, info=True)
    with np.errstate(all="ignore"):
        native = a @ b
    assert info.certified is True and np.array_equal(np.isnan(c), np.isnan(native))
    assert np.array_equal(np.isinf(c), np.isinf(native))
    finite = [(i, j) for i in range(5) for j in range(4) if np.isfinite(a[i]).all() and np.isfinite(b[:, j]).all()]
    assert finite and all(guarantee_holds(c, a, b, scheme, i, j, guarantee) for i, j in finite)
    for sa, sb in (((3, 0), (0, 4)), ((0, 5), (5, 4)), ((3, 5), (5, 0)), ((3, 4), (4, 2))):
        c, info = gemm(np.zeros(sa), np.zeros(sb), scheme=scheme, guarantee=guarantee, info=True)
        assert c.shape == (sa[0], sb[1]) and info.certified is True
        assert not c.any() and not np.signbit(c).any()


# -- what cannot be certified ------------------------------------------------------------------------

X = 2.0**-80 * (1 + 2.0**-52)
X_253 = 2.0**-200 * (1 + 2.0**-52)


def hard_matrix(n=72, x=X):
    """Ones on the diagonal, x elsewhere: A I = A needs 133 bits per row with x = 2**-80 (1 + 2**-52),
    more than scheme II's 100-bit cap (scheme I's 24 slices hold 168); 253 bits with X_253, more
    than either scheme holds."""
    a = np.full((n, n), x)
    np.fill_diagonal(a, 1.0)
    return a


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_253_bit_rows_certify_by_a_second_level(product, scheme, guarantee):
    """253-bit rows (more than either scheme's widest plan holds): the pass fails on every entry off
    the diagonal, the second level of scales holds them exactly (their own row scales), and C = A I
    = A, certified under accuracy="strict" (it used to warn, with 552 entries 100% wrong)."""
    a, eye = hard_matrix(24, X_253), np.eye(24)
    for left, right in ((a, eye), (eye, a)):
        c, info = product(left, right, scheme=scheme, guarantee=guarantee, accuracy="strict", info=True)
        assert info.certified is True and info.uncertified == 0, info.widths
        assert info.widths[0][1] == 24 * 23 and info.refined_entries == 24 * 23 and info.levels == 2
        assert info.exact_entries == 0 and same_bits(c, a)


def test_scheme2_widens_to_its_cap_then_refines_the_failing_entries():
    """Dense rows with one entry x (133 bits each): "auto" starts low (the spread is small), the
    certificate widens the plan pass by pass to scheme II's 100 bits; past the cap, recomputing
    the failing entries by levels costs less than scheme I's digits for every entry."""
    rng = np.random.default_rng(31)
    a = rng.uniform(0.5, 1.0, size=(24, 24))
    a[np.arange(24), rng.integers(0, 24, 24)] = X
    with warnings.catch_warnings():
        warnings.simplefilter("error", ozhpc.AccuracyWarning)
        c, info = gemm(a, np.eye(24), scheme="ozaki2", guarantee="tight", info=True)
    bits = [w[0] for w in info.widths]
    assert info.certified is True and info.scheme == "ozaki2" and same_bits(c, a), info.widths
    assert CAP["ozaki2"] in bits and bits[0] < CAP["ozaki2"] and bits == sorted(bits)
    assert info.refined_entries == 24 and info.widths[-1][1] == 0


@pytest.mark.parametrize("scheme", SCHEMES)
def test_133_bit_rows_certify_in_either_scheme(product, scheme):
    a = hard_matrix(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ozhpc.AccuracyWarning)
        c, info = product(a, np.eye(40), scheme=scheme, guarantee="tight", accuracy="strict", info=True)
    assert info.certified is True and same_bits(c, a)


# -- badly scaled inputs (property) ------------------------------------------------------------------

def badly_scaled_pair(rng, m, n, k, spread, zeros):
    """Power-of-two scalings per row, per column and per k index, random sparsity."""
    a = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-spread, spread + 1, size=(m, 1))
    b = rng.standard_normal((k, n)) * 2.0 ** rng.integers(-spread, spread + 1, size=(1, n))
    sc = rng.integers(-spread, spread + 1, size=k)
    a = a * 2.0 ** sc * 2.0 ** rng.integers(-spread // 4, spread // 4 + 1, size=(m, k))
    b = b * 2.0 ** -rng.integers(-spread, spread + 1, size=(k, 1))
    a[rng.random((m, k)) < zeros] = 0.0
    b[rng.random((k, n)) < zeros] = 0.0
    return a, b


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.integers(1, 8), st.integers(1, 12),
       st.integers(0, 80), st.sampled_from([0.0, 0.3, 0.7, 0.9]), st.sampled_from(SCHEMES), st.sampled_from(LEVELS))
def test_certified_means_the_guarantee_holds_everywhere(seed, m, n, k, spread, zeros, scheme, guarantee):
    """"auto" certifies every finite product, and then every entry meets the guarantee (exact check)."""
    rng = np.random.default_rng(seed)
    a, b = badly_scaled_pair(rng, m, n, k, spread, zeros)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c, info = gemm(a, b, scheme=scheme, guarantee=guarantee, info=True)
    assert info.certified is True and not any(issubclass(w.category, ozhpc.AccuracyWarning) for w in caught)
    for i in range(m):
        for j in range(n):
            assert guarantee_holds(c, a, b, scheme, i, j, guarantee), (i, j, info.widths)


# -- the same bits through gemm and SUMMA ------------------------------------------------------------

def structured_cases():
    rng = np.random.default_rng(41)
    a = standard_matrix(17, 23, 2.0, seed=1)
    sc = 2.0 ** rng.integers(-200, 200, size=23)
    sparse = np.where(rng.random((17, 23)) < 0.15, a, 0.0)
    dominant = rng.standard_normal((17, 23)) * 2.0**-40
    dominant[np.arange(17), rng.integers(0, 23, 17)] = 2.0**20
    return {"scaled": (a * sc, standard_matrix(23, 11, 1.0, seed=2) / sc[:, None]),
            "identity": (a, np.eye(23)),
            "sparse": (sparse, np.where(rng.random((23, 11)) < 0.15, standard_matrix(23, 11, 4.0, seed=3), 0.0)),
            "dominant": (dominant, standard_matrix(23, 11, 6.0, seed=4)),
            "hard": (hard_matrix(17)[:, :17], np.eye(17))}


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
@pytest.mark.parametrize("case", ["scaled", "identity", "sparse", "dominant", "hard"])
def test_gemm_and_summa_give_the_same_bits(scheme, guarantee, case):
    a, b = structured_cases()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ozhpc.AccuracyWarning)
        want, info = gemm(a, b, scheme=scheme, guarantee=guarantee, info=True)
        with ProcessGrid(MPI.COMM_SELF) as grid:
            for block, kb in (((1, 1), 3), ((5, 5), 7), ((13, 13), 3), ((5, 13), 7)):
                c, meta = dist_gemm(grid, a, b, block=block, kb=kb, engine="numpy", scheme=scheme,
                                    guarantee=guarantee, info=True)
                assert same_bits(c.gather(0), want), (block, kb)
                assert (meta.certified, meta.uncertified, meta.widths) == (info.certified, info.uncertified,
                                                                            info.widths)
    assert info.certified is True
