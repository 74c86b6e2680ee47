"""Complex products through ``ozhpc.gemm`` and the CLI: every certified entry meets the guarantee per
component against the exact product (Fractions of the parts), on structured operands (purely real
or imaginary, conjugate transposes, A A^H, unitary and permutation operands, compensated scalings),
for both guarantees and both schemes; mixed real/complex operands and complex alpha/beta as a BLAS
computes them; uncertifiable input warned, strict exits 3; CPU == GPU bit for bit (``gpu``)."""
from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

import ozhpc
from ozhpc.ozaki.plan import FINAL_ROUNDING_ULPS
from ozhpc.ozaki.policy import Widening

from conftest import run_cli
from test_certificate_accuracy_option import run_without_levels
from test_complex_certificate import exact_parts

U = Fraction(1, 2**53)


def _random(rng, shape, phi=1.0):
    return ((rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
            + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape)))


def _op(x, mode):
    return x if mode == "N" else x.T if mode == "T" else x.conj().T


def assert_guarantee(c, a_op, b_op, guarantee, scheme="ozaki2"):
    """Every component of every entry within ``c u (|A||B| of the parts) + rho u |C| + 2**-1074``
    (c = k + 1 for "dgemm", 1 for "tight"), exactly."""
    k = a_op.shape[1]
    factor = k + 1 if guarantee == "dgemm" else 1
    a_op, b_op = np.asarray(a_op, dtype=complex), np.asarray(b_op, dtype=complex)
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            exact, mags = exact_parts(a_op[i], b_op[:, j])
            for got, want, mag in zip((c[i, j].real, c[i, j].imag), exact, mags):
                slack = (factor * U * mag + FINAL_ROUNDING_ULPS[scheme] * U * abs(Fraction(float(got)))
                         + Fraction(1, 2**1074))
                assert abs(Fraction(float(got)) - want) <= slack, (i, j, float(got), float(want))


def _unitary(rng, n):
    q, r = np.linalg.qr(_random(rng, (n, n), 0.0))
    return q * (np.diag(r) / np.abs(np.diag(r)))


def structured():
    rng = np.random.default_rng(32)
    a, b = _random(rng, (9, 14)), _random(rng, (14, 7))
    perm = np.eye(14)[rng.permutation(14)].astype(complex)
    scale = 2.0 ** rng.integers(-60, 60, 14)
    return {
        "random": (a, b, "N", "N"),
        "purely real": (a.real.astype(complex), b, "N", "N"),
        "purely imaginary": (1j * a.imag, 1j * b.real, "N", "N"),
        "conjugate transposes": (a.conj().T.copy(), b.conj().T.copy(), "C", "C"),
        "A A^H": (a, a, "N", "C"),
        "unitary": (_unitary(rng, 14)[:9], b, "N", "N"),
        "permutation": (a, perm, "N", "N"),
        "compensated scalings": (a * scale, b / scale[:, None], "N", "N"),   # columns up, rows down
        "k = 1": (a[:, :1], b[:1], "N", "N"),
        "zeros and a tiny part": (np.where(np.abs(a) > 0.3, a, 0) + 1e-300j, b, "N", "N"),
    }


@pytest.mark.parametrize("name", list(structured()))
@pytest.mark.parametrize("guarantee", ["dgemm", "tight"])
@pytest.mark.parametrize("scheme", ["ozaki2", "ozaki1"])
def test_structured_cases_meet_the_guarantee(name, guarantee, scheme):
    a, b, ta, tb = structured()[name]
    c, info = ozhpc.gemm(a, b, transa=ta, transb=tb, guarantee=guarantee, scheme=scheme, info=True, engine="numpy")
    assert c.dtype == np.complex128 and info.complex and info.certified, info.plan_summary
    assert_guarantee(c, _op(a, ta), _op(b, tb), guarantee, scheme)


def test_a_hermitian_product_is_exactly_hermitian_where_the_plan_is():
    """C = A A^H: the exact product is Hermitian, and so is C (each entry is a fixed function of
    the pair of rows; the diagonal's imaginary part is exactly 0)."""
    a = _random(np.random.default_rng(5), (12, 30))
    c = ozhpc.gemm(a, a, transb="C", engine="numpy")
    assert np.array_equal(c, c.conj().T) and not np.any(np.diag(c).imag)


def test_mixed_real_and_complex_as_blas():
    """A real operand is promoted: the bits of gemm(real A, complex B) are those of gemm(A + 0j, B),
    and a real product with complex alpha/beta/C is the real product scaled part by part."""
    rng = np.random.default_rng(8)
    ar, b, c0 = _random(rng, (6, 11)).real.copy(), _random(rng, (11, 5)), _random(rng, (6, 5))
    assert np.array_equal(ozhpc.gemm(ar, b, engine="numpy"), ozhpc.gemm(ar + 0j, b, engine="numpy"))
    br = b.real.copy()
    real = ozhpc.gemm(ar, br, engine="numpy")
    got = ozhpc.gemm(ar, br, c0, alpha=2 - 1j, beta=0.5j, engine="numpy")
    want = np.empty_like(got)
    want.real = 2 * real + (-0.5 * c0.imag)
    want.imag = -1 * real + 0.5 * c0.real
    assert np.array_equal(got, want)


def test_complex_alpha_beta_against_the_exact_result():
    rng = np.random.default_rng(9)
    a, b, c0 = _random(rng, (5, 8)), _random(rng, (8, 4)), _random(rng, (5, 4))
    alpha, beta = 0.75 - 1.25j, -0.5 + 2j
    c = ozhpc.gemm(a, b, c0, alpha=alpha, beta=beta, guarantee="tight", engine="numpy")
    ab = ozhpc.gemm(a, b, guarantee="tight", engine="numpy")
    # the epilogue is the schoolbook rule, each product and sum rounded once (no FMA)
    re = (alpha.real * ab.real - alpha.imag * ab.imag) + (beta.real * c0.real - beta.imag * c0.imag)
    im = (alpha.real * ab.imag + alpha.imag * ab.real) + (beta.real * c0.imag + beta.imag * c0.real)
    assert np.array_equal(c.real, re) and np.array_equal(c.imag, im)


def test_fixed_bits_are_exact_where_the_moduli_hold_the_product():
    """Gaussian integers: small integer parts, so every component is exact at any certified width."""
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, (7, 20)) + 1j * rng.integers(-50, 50, (7, 20))
    b = rng.integers(-50, 50, (20, 6)) + 1j * rng.integers(-50, 50, (20, 6))
    exact = a.astype(object) @ b.astype(object)
    for scheme in ("ozaki2", "ozaki1"):
        c = ozhpc.gemm(a, b, scheme=scheme, guarantee="tight", engine="numpy")
        assert np.array_equal(c, exact.astype(complex))


def _uncertifiable():
    """Each row's second part 2^-200 times its first, against columns the other way round: the
    entries off the diagonal are sums of products 2^-200 below the rows' and columns' scales, which
    no plan holds (and no column scaling helps: k's two columns want opposite shifts); the refinement
    by levels of scales certifies them (tests/test_complex_levels.py), so the failure paths below
    run with it off."""
    a = np.array([[1.0, 2.0**-200], [2.0**-200, 1.0]]) * (1 + 1j)
    b = np.array([[1.0, 2.0**-200], [2.0**-200, 1.0]]) * (1 - 1j)
    return a, b


def test_uncertifiable_input_warns_and_strict_raises(monkeypatch):
    monkeypatch.setattr(Widening, "refine_or", lambda self, step, *args: step)
    a, b = _uncertifiable()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _, info = ozhpc.gemm(a, b, guarantee="tight", info=True, engine="numpy")
    assert info.certified is False and info.uncertified == 2
    assert any(issubclass(w.category, ozhpc.AccuracyWarning) and "per component" in str(w.message) for w in seen)
    with pytest.raises(ozhpc.AccuracyError):
        ozhpc.gemm(a, b, guarantee="tight", accuracy="strict", engine="numpy")


def test_strict_exits_3_and_writes_nothing(tmp_path):
    import h5py

    a, b = _uncertifiable()
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = a, b
    proc = run_without_levels(["gemm", f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B", "-o", f"{tmp_path}/out.h5:/C",
                               "--guarantee", "tight", "--accuracy", "strict", "--progress", "off"])
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "per component" in proc.stderr and not (tmp_path / "out.h5").exists()


def test_cli_complex_transa_c_alpha_and_check(tmp_path):
    """``ozhpc gen --complex``, ``gemm --transa C --alpha 1+2j``, ``check`` and ``fingerprint`` on
    complex HDF5: C is complex128, equals ozhpc.gemm bit for bit, its attributes say how."""
    import h5py

    for shape, name, seed in (("30x20", "A", 1), ("30x9", "B", 2)):
        assert run_cli(["gen", "--shape", shape, "--complex", "--seed", str(seed), f"in.h5:/{name}"],
                       cwd=tmp_path).returncode == 0
    proc = run_cli(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", "--transa", "C", "--alpha", "1+2j",
                    "--progress", "off", "--report", "run.json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(tmp_path / "in.h5") as f, h5py.File(tmp_path / "out.h5") as g:
        a, b, c = f["A"][...], f["B"][...], g["C"][...]
        attrs = dict(g["C"].attrs)
    assert np.array_equal(c, ozhpc.gemm(a, b, transa="C", alpha=1 + 2j, engine="numpy"))
    assert attrs["ozhpc_transa"] == "C" and complex(attrs["ozhpc_alpha"]) == 1 + 2j and attrs["ozhpc_complex"]
    check = run_cli(["check", "out.h5:/C", "--a", "in.h5:/A", "--b", "in.h5:/B", "--transa", "C",
                     "--alpha", "1+2j", "--fingerprint"], cwd=tmp_path)
    assert check.returncode == 0 and "matches its attribute" in check.stdout, check.stdout + check.stderr
    wrong = run_cli(["check", "out.h5:/C", "--a", "in.h5:/A", "--b", "in.h5:/B", "--transa", "T",
                     "--alpha", "1+2j"], cwd=tmp_path)
    assert wrong.returncode != 0 and "transa=C" in wrong.stderr
    report = run_cli(["report", "run.json"], cwd=tmp_path)
    assert "C = 1+2j A^H B" in report.stdout and "complex" in report.stdout


def test_cli_refuses_bad_trans_and_alpha(tmp_path):
    bad = run_cli(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", "--alpha", "1+2xj"], cwd=tmp_path)
    assert bad.returncode == 2 and "--alpha must be a real or complex number (such as 2 or 1+2j), got '1+2xj'" in bad.stderr
    bad = run_cli(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", "--alpha", "1e999j"], cwd=tmp_path)
    assert bad.returncode == 2 and "--alpha must be a finite number" in bad.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["random", "conjugate transposes", "compensated scalings", "zeros and a tiny part"])
@pytest.mark.parametrize("scheme", ["ozaki2", "ozaki1"])
def test_gpu_gives_the_cpu_bits(gpu, name, scheme):
    engine, cp = gpu
    a, b, ta, tb = structured()[name]
    want, info = ozhpc.gemm(a, b, transa=ta, transb=tb, scheme=scheme, engine="numpy", info=True)
    got, ginfo = ozhpc.gemm(cp.asarray(a), cp.asarray(b), transa=ta, transb=tb, scheme=scheme, engine=engine,
                            info=True)
    got = cp.asnumpy(got)
    assert got.dtype == np.complex128 and (ginfo.widths, ginfo.certified) == (info.widths, info.certified)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.gpu
def test_gpu_large_complex_product_gives_the_cpu_bits(gpu):
    engine, cp = gpu
    rng = np.random.default_rng(17)
    a, b = _random(rng, (300, 1100), 0.5), _random(rng, (1100, 200), 0.5)
    want = ozhpc.gemm(a, b, engine="numpy")
    got = cp.asnumpy(ozhpc.gemm(cp.asarray(a), cp.asarray(b), engine=engine))
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
