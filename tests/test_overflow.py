"""Products at the top of the range, against exact rational references: an entry of C is +-inf
from finite inputs only where the exact value rounds to inf, and never certified otherwise; a
representation rounded up past DBL_MAX (a coarse grid: a huge entry elsewhere in the row) is
either widened until C is right or reported uncertified; the combine's headroom for rows above
2**480 changes no bit; alpha of an entry that overflows uses its total."""
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ozhpc
from ozhpc.ozaki import scales
from ozhpc.ozaki.plan import FINAL_ROUNDING_ULPS
from ozhpc.run.reference import exact_entry

from helpers.anyinput_cases import just_below_inf
from helpers.guarantee import exact_abs

SCHEMES = ("ozaki2", "ozaki1")
LEVELS = ("dgemm", "tight")
DBL_MAX = np.finfo(np.float64).max
U = Fraction(1, 2**53)
INF_FROM = Fraction(2) ** 1024 - Fraction(2) ** 970
"""Exact values of at least this magnitude round to inf (DBL_MAX plus half an ulp)."""
B_ENTRY = float.fromhex("0x1.1111111111111p+1021")


def reproducer():
    """A row scale of 2**86 makes the grid at 84 bits 4, so 6 is held as 8, and 8 B_ENTRY overflows."""
    return np.array([[0.9 * 2.0**86, 6.0]]), np.array([[0.0, 1.0], [B_ENTRY, 1.0]])


def entry_right(c, a, b, i, j, scheme, guarantee) -> bool:
    """C_ij is +-inf exactly where the exact value rounds to +-inf, else within the guarantee
    (docs/numerics.md; one more u |C| for a result clamped to +-DBL_MAX)."""
    exact = exact_entry(a[i], b[:, j])
    if np.isinf(c[i, j]):
        return abs(exact) >= INF_FROM and (exact > 0) == (c[i, j] > 0)
    got = Fraction(float(c[i, j]))
    factor = a.shape[1] if guarantee == "dgemm" else 1
    rho = FINAL_ROUNDING_ULPS[scheme] + (abs(c[i, j]) == DBL_MAX)
    return abs(got - exact) <= factor * U * exact_abs(a[i], b[:, j]) + rho * U * abs(got) + Fraction(1, 2**1074)


def run(product, a, b, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ozhpc.AccuracyWarning)
        return product(a, b, info=True, **kw)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_a_representation_rounded_past_dbl_max_is_widened_until_c_is_right(product, scheme, guarantee):
    """The 84-bit plan's C[0,0] is inf (8 B_ENTRY): no longer certified, the plan is widened, and C
    ends certified with the exact value's rounding."""
    a, b = reproducer()
    c, info = run(product, a, b, scheme=scheme, guarantee=guarantee)
    assert info.certified is True, info.widths
    assert c[0, 0] == 1.4381545078898528e+308 == float(exact_entry(a[0], b[:, 0]))
    assert all(entry_right(c, a, b, 0, j, scheme, guarantee) for j in range(2))


def test_an_inf_from_finite_inputs_is_never_certified_unproven():
    """At the first plan of the reproducer the certificate counts the inf entry as failing (its
    total, 8 B_ENTRY, does not prove that the exact value overflows)."""
    a, b = reproducer()
    _, info = ozhpc.gemm(a, b, info=True, engine="numpy")
    assert info.widths[0][:2] == [84, 1] and info.widths[0][2] > 1


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_a_true_overflow_is_inf_and_certified(product, scheme, guarantee):
    """An exact value beyond DBL_MAX is +-inf, certified at once; alpha < 1 scales the entry's total,
    so alpha * AB is finite where it is (2**-10 * 3 * 2**1023, not inf)."""
    a = np.array([[3.0 * 2.0**1000, 1.0], [-3.0 * 2.0**1001, 5.0]])
    b = np.array([[2.0**23, 1.0], [1.0, 1.0]])
    c, info = run(product, a, b, scheme=scheme, guarantee=guarantee)
    assert info.certified is True and info.widths[-1][1] == 0 and len(info.widths) == 1, info.widths
    assert c[0, 0] == np.inf and c[1, 0] == -np.inf
    assert all(entry_right(c, a, b, i, j, scheme, guarantee) for i in range(2) for j in range(2))
    c2, info2 = run(product, a, b, scheme=scheme, guarantee=guarantee, alpha=2.0**-10)
    assert info2.certified is True
    assert c2[0, 0] == 3.0 * 2.0**1013 and c2[1, 0] == -3.0 * 2.0**1014 and c2[0, 1] == 2.0**-10 * c[0, 1]


def near_top(seed, rows, scheme_gap, sign, over):
    """Operands whose exact products sit just below DBL_MAX (``over``: just above 2**1024) through
    one term ``x b``, with ``x`` far below its row's largest entry, so any plan short of ``x``'s
    last bit rounds it to the grid, half of the time up and past DBL_MAX."""
    rng = np.random.default_rng(seed)
    k = 3
    a = np.zeros((rows, k))
    b = np.zeros((k, 2))
    x = np.ldexp(1.0 + rng.random(rows), rng.integers(0, 40, rows))   # 53-bit significands, >= 1
    a[:, 0] = np.ldexp(0.5 + 0.5 * rng.random(rows), np.frexp(x)[1] + scheme_gap)   # the row scale
    a[:, 1] = x * sign
    a[:, 2] = rng.standard_normal(rows)
    b[1, 0] = DBL_MAX / np.max(x) * ((1 + 2.0**-30) if over else (1 - rng.random() * 2.0**-40))
    b[0, 0], b[2, 0] = 0.0, rng.standard_normal()
    b[:, 1] = rng.standard_normal(k)
    return a, b


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(20, 110), st.sampled_from([1.0, -1.0]),
       st.booleans(), st.sampled_from(SCHEMES), st.sampled_from(LEVELS))
def test_near_dbl_max_products_are_right_or_uncertified(seed, rows, gap, sign, over, scheme, guarantee):
    """Certified means right, entry by entry, also where the grid rounds an operand up past
    DBL_MAX; and these products end certified (the plans reach every bit of x)."""
    a, b = near_top(seed, rows, gap, sign, over)
    c, info = run(lambda *x, **kw: ozhpc.gemm(*x, engine="numpy", **kw), a, b, scheme=scheme, guarantee=guarantee)
    assert info.certified is True, info.widths
    bad = [(i, j) for i in range(rows) for j in range(2) if not entry_right(c, a, b, i, j, scheme, guarantee)]
    assert not bad, (bad, c, info.widths)


def test_the_headroom_changes_no_bit(monkeypatch, rng):
    """Rows and columns above 2**480 (overflowing, normal and subnormal results): C with the
    combine's headroom has the bits of C without it, for fixed and "auto" plans of both schemes."""
    a = rng.standard_normal((6, 40)) * np.ldexp(1.0, rng.integers(-1070, 1020, (6, 1)))
    b = rng.standard_normal((40, 5)) * np.ldexp(1.0, rng.integers(-1000, 1020, (1, 5)))
    a[0] = rng.standard_normal(40) * 2.0**1010
    b[:, 0] = b[:, 0] * 2.0**-100 + 1e300
    options = [dict(scheme="ozaki2"), dict(scheme="ozaki2", bits=60), dict(scheme="ozaki1"), dict(slices=5)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ozhpc.AccuracyWarning)
        got = [ozhpc.gemm(a, b, engine="numpy", **kw) for kw in options]
        monkeypatch.setattr(scales, "HEADROOM_EXP", 5000)
        want = [ozhpc.gemm(a, b, engine="numpy", **kw) for kw in options]
    assert any(np.isinf(c).any() for c in got) and any((np.abs(c) < 2.0**-1022).any() for c in got)
    for x, y, kw in zip(got, want, options):
        assert x.tobytes() == y.tobytes(), kw


def test_ozhpc_check_agrees_with_the_written_file(tmp_path):
    """``ozhpc gemm`` writes the reproducer's C certified and right, and ``ozhpc check`` passes it
    (it failed a certified inf: exit 4, "C is inf/NaN where the exact product is finite")."""
    import h5py

    from conftest import run_cli

    a, b = reproducer()
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = a, b
    r = run_cli(["gemm", f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B", "-o", f"{tmp_path}/out.h5:/C"])
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "out.h5", "r") as f:
        assert f["C"][0, 0] == 1.4381545078898528e+308 and bool(f["C"].attrs["ozhpc_certified"]) is True
    r = run_cli(["check", f"{tmp_path}/out.h5:/C", "--a", f"{tmp_path}/in.h5:/A", "--b", f"{tmp_path}/in.h5:/B"])
    assert r.returncode == 0 and r.stderr == "", (r.stdout, r.stderr)


def overflow_then_equilibrated():
    """Row 2 truly overflows (DBL_MAX (5 - 2**-40)); row 1's one term, 2**136 * 3 * 2**-50, is 53
    bits below its column's scale and fails scheme II's first plan ("tight"), so the operands are
    equilibrated, where nothing overflows and that term is lost at first: a pass with no lifted
    totals after one with them."""
    a = np.array([[2.0**-790, 0.0, 0.0], [0.0, 2.0**136, 0.0], [DBL_MAX, 0.0, DBL_MAX]])
    b = np.array([[5.0], [3 * 2.0**-50], [-(2.0**-40)]])
    return a, b


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_an_entry_kept_from_a_pass_with_overflow_keeps_its_own_total(product, scheme, guarantee):
    """Entries kept from an earlier pass carry that pass's total and shift. A placeholder NaN total
    for the later pass's entries once read as "an inf/NaN input": C[1, 0] = 0 (exact 3 * 2**87) was
    certified; and alpha scaled the kept overflow's total by the equilibrated scales' shift
    (2**-10 C[2, 0] was 1e240, not 8.8e305)."""
    a, b = overflow_then_equilibrated()
    c, info = run(product, a, b, scheme=scheme, guarantee=guarantee)
    assert info.certified is True, info.widths
    assert c[1, 0] == 3 * 2.0**86 and c[2, 0] == np.inf
    assert all(entry_right(c, a, b, i, 0, scheme, guarantee) for i in range(3))
    c2, info2 = run(product, a, b, scheme=scheme, guarantee=guarantee, alpha=2.0**-10)
    assert info2.certified is True and c2[1, 0] == 3 * 2.0**76
    assert c2[2, 0] == float(exact_entry(a[2], b[:, 0]) / 1024) and c2[0, 0] == 2.0**-10 * c[0, 0]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_a_level_that_rounds_to_inf_is_not_the_exact_rounding(scheme, guarantee):
    """A level's fl(P_L) = inf used to pass every bound (|C| read as inf): C[0, 0] was certified inf.
    An infinite level value passes only where it is exact; this one goes deeper, to DBL_MAX."""
    a, b = just_below_inf()
    assert exact_entry(a[0], b[:, 0]) == INF_FROM - Fraction(2) ** 910
    c, info = run(lambda *x, **kw: ozhpc.gemm(*x, engine="numpy", **kw), a, b, scheme=scheme, guarantee=guarantee)
    assert info.certified is True and info.refined_entries >= 1, info.widths
    assert c[0, 0] == DBL_MAX
    assert all(entry_right(c, a, b, i, j, scheme, guarantee) for i in range(a.shape[0]) for j in range(b.shape[1]))


def alpha_right(c, a, b, alpha, i, j, scheme, guarantee) -> bool:
    """``alpha C_ij`` as the guarantee of ``AB`` allows, scaled by alpha, plus its own rounding."""
    exact = Fraction(alpha) * exact_entry(a[i], b[:, j])
    if not np.isfinite(c[i, j]):
        return abs(exact) >= INF_FROM and (exact > 0) == (c[i, j] > 0)
    factor = a.shape[1] if guarantee == "dgemm" else 1
    rho = FINAL_ROUNDING_ULPS[scheme] + 2
    limit = abs(Fraction(alpha)) * factor * U * exact_abs(a[i], b[:, j]) + rho * U * abs(exact) + Fraction(1, 2**1074)
    return abs(Fraction(float(c[i, j])) - exact) <= limit


@pytest.mark.parametrize("seed,gap", [(1, 30), (2, 30), (2, 100), (4, 60)])
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("guarantee", LEVELS)
def test_alpha_of_an_overflowing_entry_is_right_whichever_step_certified_it(seed, gap, scheme, guarantee):
    """Entries of AB just past 2**1024 (near_top), among 60 ordinary rows and columns: alpha = 2**-10
    multiplies each one's total. Two ways it was wrong: a total certified only as large enough to
    overflow gave alpha C off by 2**-24 (an overflow now also needs its total to pass), and an entry
    the refinement recomputed had no total (alpha * inf = inf; it now keeps its exact value's)."""
    a, b = near_top(seed, 3, gap, 1.0, True)
    rng = np.random.default_rng(seed)
    a, b = np.vstack([a, rng.standard_normal((60, 3))]), np.hstack([b, rng.standard_normal((3, 60))])
    gemm = lambda *x, **kw: ozhpc.gemm(*x, engine="numpy", **kw)   # noqa: E731
    c, info = run(gemm, a, b, scheme=scheme, guarantee=guarantee)
    c2, info2 = run(gemm, a, b, scheme=scheme, guarantee=guarantee, alpha=2.0**-10)
    assert info.certified is True and info2.certified is True and np.isinf(c[:3, 0]).any()
    assert all(entry_right(c, a, b, i, 0, scheme, guarantee) for i in range(3))
    assert all(alpha_right(c2, a, b, 2.0**-10, i, j, scheme, guarantee) for i in range(6) for j in range(2))


@pytest.mark.parametrize("seed,gap", [(1, 30), (2, 100)])
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("im", [1e-200, 1e-3])
def test_complex_alpha_of_an_overflowing_entry(seed, gap, scheme, im):
    """The same with complex A (a small imaginary part) and alpha = 2**-10 (1 + i): each component of
    alpha C within 2**-48 of the exact one (relative to the components' sizes); both were inf."""
    a, b = near_top(seed, 3, gap, 1.0, True)
    rng = np.random.default_rng(seed)
    a, b = np.vstack([a, rng.standard_normal((30, 3))]), np.hstack([b, rng.standard_normal((3, 30))])
    a = a + 1j * im * rng.standard_normal(a.shape)
    alpha = 2.0**-10 * (1 + 1j)
    c, info = run(lambda *x, **kw: ozhpc.gemm(*x, engine="numpy", **kw), a, b, scheme=scheme, alpha=alpha)
    assert info.certified is True
    for i in range(3):
        re = exact_entry(np.concatenate([a[i].real, a[i].imag]), np.concatenate([b[:, 0], 0 * b[:, 0]]))
        im_ = exact_entry(np.concatenate([a[i].real, a[i].imag]), np.concatenate([0 * b[:, 0], b[:, 0]]))
        scale = Fraction(2) ** -10 * (abs(re) + abs(im_))
        for got, want in ((c[i, 0].real, Fraction(2) ** -10 * (re - im_)), (c[i, 0].imag, Fraction(2) ** -10 * (re + im_))):
            assert np.isfinite(got) and abs(Fraction(float(got)) - want) <= scale * Fraction(1, 2**48), (i, got)
