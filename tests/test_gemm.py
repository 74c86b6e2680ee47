"""The product pipeline against exact references and NumPy: accuracy, special values, options.

Tests that take the ``product`` fixture run twice: through ``ozhpc.gemm`` and through SUMMA
(the one :class:`ozhpc.ozaki.product.Product` behind both)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ozhpc
from ozhpc.errors import InputError
from ozhpc.run.matrices import standard_matrix

from helpers.inputs import assert_same_nonfinite_pattern, native_pattern_defined, special_operands
from conftest import _summa_product
from helpers.tolerances import NATIVE_RATIO_MAX, error_vs_native


@pytest.mark.parametrize("k", [256, 4096])
@pytest.mark.parametrize("phi", [0.0, 0.5, 1.0, 2.0, 4.0])
def test_auto_is_at_least_as_accurate_as_native(product, phi, k):
    m, n = (64, 256) if k == 4096 else (256, 128)
    a = standard_matrix(m, k, phi, seed=int(10 * phi) + k)
    b = standard_matrix(k, n, phi, seed=int(10 * phi) + k + 1)
    c, info = product(a, b, info=True)
    ours, native = error_vs_native(c, a, b, samples=24 if k == 4096 else 40)
    assert ours <= NATIVE_RATIO_MAX * native, (info.slices, ours, native)


@pytest.mark.parametrize("transa,transb", [(False, False), (True, False), (False, True), (True, True)])
def test_transposes_alpha_beta_match_numpy(product, rng, transa, transb):
    m, n, k = 37, 23, 91
    a = rng.standard_normal((k, m) if transa else (m, k))
    b = rng.standard_normal((n, k) if transb else (k, n))
    c0 = rng.standard_normal((m, n))
    a_op, b_op = (a.T if transa else a), (b.T if transb else b)
    got = product(a, b, c0, alpha=-1.5, beta=0.25, transa=transa, transb=transb)
    want = -1.5 * (a_op @ b_op) + 0.25 * c0
    scale = np.abs(a_op) @ np.abs(b_op) + np.abs(c0)
    assert np.all(np.abs(got - want) <= 8 * k * 2.0**-53 * scale)
    # a transposed operand gives the same bits as the explicitly transposed array
    plain = product(np.ascontiguousarray(a_op), np.ascontiguousarray(b_op), c0, alpha=-1.5, beta=0.25,
                       engine="numpy")
    assert np.array_equal(got.view(np.uint64), plain.view(np.uint64))


def test_memory_order_and_repeat_do_not_change_bits(product, rng):
    a = standard_matrix(50, 70, 1.0, 3)
    b = standard_matrix(70, 40, 1.0, 4)
    c1 = product(a, b)
    c2 = product(np.asfortranarray(a), np.asfortranarray(b))
    c3 = product(a.astype(np.float64), b)
    assert c1.tobytes() == c2.tobytes() == c3.tobytes()


def test_beta_zero_ignores_nan_in_c(product, rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    c0 = np.full((4, 3), np.nan)
    assert np.isfinite(product(a, b, c0, beta=0.0)).all()


@pytest.mark.parametrize("path", ["gemm", "summa"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 6), st.integers(1, 12), st.data())
def test_nonfinite_pattern_matches_numpy(path, seed, m, n, k, data):
    a, b = special_operands(seed, m, n, k, data)
    with np.errstate(all="ignore"):
        want = a @ b
    run = ozhpc.gemm if path == "gemm" else _summa_product
    got = run(a, b, slices=4, engine="numpy")
    assert_same_nonfinite_pattern(got, want, native_pattern_defined(a, b))


def test_zero_rows_subnormals_and_empty_shapes(product, rng):
    a = rng.standard_normal((6, 9))
    b = rng.standard_normal((9, 5))
    a[2] = 0.0
    b[:, 3] = 0.0
    a[4] = rng.standard_normal(9) * 1e-310  # subnormal row
    c = product(a, b)
    assert not c[2].any() and not c[:, 3].any()
    assert np.allclose(c, a @ b, rtol=1e-13, atol=1e-320)
    assert product(np.zeros((3, 0)), np.zeros((0, 4))).tolist() == np.zeros((3, 4)).tolist()
    assert product(np.zeros((0, 5)), np.ones((5, 4))).shape == (0, 4)
    assert product(np.ones((2, 5)), np.ones((5, 0))).shape == (2, 0)
    c0 = rng.standard_normal((3, 4))
    assert np.array_equal(product(np.zeros((3, 0)), np.zeros((0, 4)), c0, beta=2.0), 2.0 * c0)


def test_huge_values_near_overflow(product):
    a = np.array([[1.7e308, 1.0], [1e-300, 2.0]])
    b = np.array([[0.5, 1.0], [1.0, 3.0]])
    got = product(a, b)
    with np.errstate(over="ignore"):
        want = a @ b
    assert np.array_equal(got, want)


@pytest.mark.parametrize("bad,message", [
    (dict(A=np.ones(3)), "A must be 2-D, got shape (3,)"),
    (dict(A=np.ones((2, 3), "datetime64[s]")), "A must hold real or complex numbers, got dtype datetime64[s]"),
    (dict(B=np.ones((4, 2))), "inner dimensions differ: op(A) is 2x3, op(B) is 4x2"),
    (dict(slices=0), "slices must be between 1 and 24, got 0"),
    (dict(beta=1.0), "beta != 0 needs C"),
    (dict(engine="fortran"), "unknown engine 'fortran'; choose one of: auto, numpy, cutile"),
])
def test_bad_arguments_raise_clear_errors(bad, message):
    args = dict(A=np.ones((2, 3)), B=np.ones((3, 2)))
    args.update(bad)
    a, b = args.pop("A"), args.pop("B")
    with pytest.raises((ValueError, TypeError)) as err:
        ozhpc.gemm(a, b, **{"engine": "numpy", **args})
    assert str(err.value) == message


@pytest.mark.parametrize("scalars, message", [
    (dict(alpha="2"), "alpha must be a real or complex number, got str '2'"),
    (dict(beta=[1.0]), "beta must be a real or complex number, got list [1.0]"),
    (dict(alpha=np.ones(2, complex)), "alpha must be a real or complex number, got ndarray array([1.+0.j, 1.+0.j])"),
])
def test_alpha_beta_of_the_wrong_type_are_refused_before_the_compute(product, monkeypatch, scalars, message):
    """One TypeError naming alpha or beta, raised before any product is run (not NumPy's
    UFuncTypeError after it)."""
    from ozhpc.ozaki.product import Product

    monkeypatch.setattr(Product, "multiply", lambda self: pytest.fail("the product ran"))
    with pytest.raises(TypeError) as err:
        product(np.ones((2, 3)), np.ones((3, 2)), np.ones((2, 2)), **scalars)
    assert str(err.value) == message


def test_alpha_beta_beyond_fp64_are_named(product):
    """An integer alpha or beta past FP64's range is one ValueError naming it, not a bare OverflowError."""
    for name in ("alpha", "beta"):
        with pytest.raises(ValueError) as err:
            product(np.ones((2, 3)), np.ones((3, 2)), np.ones((2, 2)), **{name: 10**400})
        assert str(err.value) == f"{name} must be within FP64's range, got a 401-digit integer"


def test_integer_arrays_are_taken_only_where_fp64_holds_them():
    """int64 / uint64 entries that FP64 would round (beyond 2^53, no float64 of their own) are one
    ValueError naming the operand, as the command line refuses such datasets; ones it holds are
    the same product as their float64 copy, bit for bit."""
    ok = np.array([[2**62, -(2**63), 2**53 + 2, 7]], dtype=np.int64)
    b = np.ones((4, 2))
    assert ozhpc.gemm(ok, b).tobytes() == ozhpc.gemm(ok.astype(np.float64), b).tobytes()
    cases = {"A": dict(A=np.array([[2**53 + 1, 0]], dtype=np.int64)),
             "B": dict(B=np.array([[1], [2**64 - 1]], dtype=np.uint64)),
             "C": dict(C=np.array([[-(2**62) - 1]], dtype=np.int64), beta=1.0)}
    wrong = {"A": 2**53 + 1, "B": 2**64 - 1, "C": -(2**62) - 1}
    for name, change in cases.items():
        args = {"A": np.ones((1, 2)), "B": np.ones((2, 1)), **change}
        with pytest.raises(ValueError) as err:
            ozhpc.gemm(args.pop("A"), args.pop("B"), args.pop("C", None), **args)
        assert str(err.value) == (f"{name} holds the integer {wrong[name]}, which FP64 cannot represent exactly "
                                  "(integers are exact up to 2^53); convert it to float64 first")


@pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max, reason="long double is FP64 here")
def test_long_doubles_beyond_fp64_are_refused_and_the_others_rounded():
    """A finite long double (real or complex part) that FP64 would make inf is one ValueError
    naming the operand, or alpha / beta; one within the range is rounded to the nearest float64
    (the product is bit for bit that of the rounded array)."""
    huge = np.longdouble("1e400")
    cases = {"A": (dict(A=np.array([[1, -huge]], dtype=np.longdouble)), "-1e+400"),
             "B": (dict(B=np.array([[1], [huge * 1j]], dtype=np.clongdouble)), "1e+400j"),
             "C": (dict(C=np.array([[huge]], dtype=np.longdouble), beta=1.0), "1e+400")}
    for name, (change, shown) in cases.items():
        args = {"A": np.ones((1, 2)), "B": np.ones((2, 1)), **change}
        with pytest.raises(ValueError) as err:
            ozhpc.gemm(args.pop("A"), args.pop("B"), args.pop("C", None), **args)
        assert str(err.value) == (f"{name} holds the value {shown}, beyond FP64's range (its largest "
                                  "number is 1.7976931348623157e+308); scale it into that range first")
    for name, value, shown in (("alpha", huge, "1e+400"), ("beta", np.clongdouble(1 - huge * 1j), "(1-1e+400j)")):
        with pytest.raises(ValueError) as err:
            ozhpc.gemm(np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1)), **{name: value})
        assert str(err.value) == f"{name} must be within FP64's range, got {shown}"
    third = np.full((3, 4), np.longdouble(1) / 3)
    b = np.arange(8.0).reshape(4, 2)
    assert ozhpc.gemm(third, b).tobytes() == ozhpc.gemm(third.astype(np.float64), b).tobytes()


def test_numpy_integers_are_slices_groups_and_bits(rng):
    """``bits=np.int64(30)`` (a sweep over np.arange) is the product of bits=30, bit for bit; it
    was refused as "must be 'auto' or an integer, got 30". A NumPy bool is still no integer."""
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((4, 3))
    assert ozhpc.gemm(a, b, bits=np.int64(30)).tobytes() == ozhpc.gemm(a, b, bits=30).tobytes()
    assert (ozhpc.gemm(a, b, slices=np.uint8(3), groups=np.int32(2)).tobytes()
            == ozhpc.gemm(a, b, slices=3, groups=2).tobytes())
    with pytest.raises(InputError) as err:
        ozhpc.gemm(a, b, slices=np.int16(40))
    assert str(err.value) == "slices must be between 1 and 24, got 40"
    with pytest.raises(InputError) as err:
        ozhpc.gemm(a, b, bits=np.bool_(True))
    assert str(err.value) == "bits must be 'auto' or an integer, got True"


def test_real_numbers_of_any_kind_are_alpha_and_beta(product, rng):
    a, b, c0 = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    want = product(a, b, c0, alpha=2.0, beta=-1.0)
    for alpha, beta in ((2, -1), (np.float32(2), np.int64(-1)), (np.array(2.0), np.array(-1))):
        assert np.array_equal(product(a, b, c0, alpha=alpha, beta=beta), want)


def test_lists_are_taken_as_numpy_takes_them(rng):
    a, b, c0 = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    got = ozhpc.gemm(a.tolist(), b.tolist(), c0.tolist(), beta=1.0, engine="numpy")
    assert isinstance(got, np.ndarray) and np.array_equal(got, ozhpc.gemm(a, b, c0, beta=1.0, engine="numpy"))
    with pytest.raises(TypeError) as err:
        ozhpc.gemm([[1.0, 2.0], [3.0]], b, engine="numpy")
    assert str(err.value) == ("A must be a 2-D array, got a list that NumPy cannot make one array of "
                              "(rows of different lengths?)")
    with pytest.raises(TypeError) as err:
        ozhpc.gemm([["x"] * 4], b, engine="numpy")
    assert str(err.value) == "A must hold real or complex numbers, got dtype <U1"


def test_masked_entries_are_refused_not_multiplied(rng):
    a, b, c0 = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    for name, args in (("A", (np.ma.masked_greater(a, 0.5), b)), ("B", (a, np.ma.masked_less(b, 0.0))),
                       ("C", (a, b, np.ma.masked_equal(c0, c0[1, 1])))):
        with pytest.raises(TypeError) as err:
            ozhpc.gemm(*args, beta=1.0, engine="numpy")
        assert str(err.value) == (f"{name} is a masked array with masked entries, and the product would use the "
                                  f"values under the mask; pass {name}.filled(0) to count them as 0, or {name}.data "
                                  "to use them")
    # nothing masked: the array's values, bit for bit
    got = ozhpc.gemm(np.ma.masked_array(a), b, c0, beta=1.0, engine="numpy")
    assert np.array_equal(got, ozhpc.gemm(a, b, c0, beta=1.0, engine="numpy"))


def test_info_reports_what_was_done(product):
    a = standard_matrix(30, 40, 0.5, 1)
    b = standard_matrix(40, 20, 0.5, 2)
    _, info = product(a, b, slices=7, groups="all", info=True)
    assert (info.m, info.n, info.k, info.slices, info.groups, info.int8_gemms) == (30, 20, 40, 7, 13, 49)
    assert {"scales", "split", "multiply", "combine"} <= set(info.seconds)
    assert info.engine == "numpy" and 0 < info.truncation_bound < 1e-12


def test_alpha_zero_does_not_use_the_product(product, rng):
    """BLAS: with alpha = 0, op(A) op(B) is not referenced, so inf/NaN in A do not reach C."""
    a, b, c0 = rng.standard_normal((4, 5)), rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    a[1, 2] = np.inf
    a[3, 0] = np.nan
    assert np.array_equal(product(a, b, c0, alpha=0.0, beta=-2.0), -2.0 * c0)
    c1 = product(a, b, c0, alpha=0.0, beta=1.0)
    assert np.array_equal(c1, c0) and c1 is not c0
    assert not product(a, b, alpha=0.0).any()


def test_reference_errors_for_zero_scale_and_nonfinite_entries():
    from ozhpc.run.reference import relative_errors

    a = np.array([[0.0, 0.0], [1.0, 2.0], [np.inf, 1.0]])
    b = np.array([[1.0, 3.0], [1.0, 4.0]])
    with np.errstate(all="ignore"):
        c = a @ b
    assert relative_errors(c, a, b, [(0, 0), (1, 1), (2, 0)]).tolist() == [0.0, 0.0, 0.0]
    bad = c.copy()
    bad[0, 0], bad[2, 0] = 1e-300, 0.0
    assert relative_errors(bad, a, b, [(0, 0), (2, 0)]).tolist() == [np.inf, np.inf]
