"""GPU tests of the cuTile engine: the same bits as the NumPy engine, everywhere.

Marked ``gpu``; every test skips cleanly when CuPy, cuda.tile or a GPU is missing.
"""
from __future__ import annotations

import numpy as np
import pytest

import ozhpc
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.ozaki.scales import exponents, row_abs_max

from helpers.inputs import phi_matrix

pytestmark = pytest.mark.gpu




def assert_same_bits(got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    assert np.array_equal(nan_g, nan_w), "NaN positions differ"
    g = got[~nan_g].view(np.int64) if got.dtype == np.float64 else got[~nan_g]
    w = want[~nan_w].view(np.int64) if want.dtype == np.float64 else want[~nan_w]
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, (f"{bad.size} of {g.size} entries differ, first: "
                           f"{got[~nan_g][bad[:3]]!r} vs {want[~nan_w][bad[:3]]!r}")


SHAPE = (157, 301, 96)


# ------------------------------------------------------------------------- split
def _split_both(gpu, x, nslices):
    engine, cp = gpu
    e = exponents(np, row_abs_max(np, x))
    want = NumpyEngine().split(x, e, nslices)
    got = engine.split(cp.asarray(x), cp.asarray(e), nslices)
    return cp.asnumpy(got), want


@pytest.mark.parametrize("phi", [0, 0.5, 1, 2, 4])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_split_bits(gpu, phi, layout):
    rng = np.random.default_rng(1)
    x = phi_matrix(rng, 157, 301, phi)
    engine, cp = gpu
    e = exponents(np, row_abs_max(np, x))
    want = NumpyEngine().split(x, e, 8)
    xd = cp.asarray(x)
    if layout == "F":
        xd = cp.asfortranarray(xd)
    elif layout == "strided":
        xd = cp.asarray(np.repeat(x, 2, axis=1))[:, ::2]
    got = engine.split(xd, cp.asarray(e), 8)
    assert_same_bits(cp.asnumpy(got), want)


def test_split_edge_values(gpu):
    rng = np.random.default_rng(2)
    rows = [
        (rng.integers(-2**20, 2**20, 64) + 0.5) * 2.0**-30,      # rint ties
        np.arange(64) * 2.0**-7 - 0.25,                          # exact digits, ties at 0.5
        rng.standard_normal(64) * 2.0**-1060,                    # subnormal row
        np.full(64, 5e-324) * rng.integers(-3, 4, 64),           # tiniest subnormals
        rng.standard_normal(64) * 2.0**1020,                     # near overflow
        np.concatenate([[1.7e308], rng.standard_normal(63) * 1e-300]),  # huge spread
        np.zeros(64),
        np.concatenate([[2.0**-1022], rng.standard_normal(63) * 2.0**-1070]),
        (127.5 / 128) * np.ones(64),                             # first digit rounds to 128
    ]
    x = np.stack(rows)
    for nslices in (1, 6, 9, 24):
        got, want = _split_both(gpu, x, nslices)
        assert_same_bits(got, want)


# ------------------------------------------------------------------------- gemm
def _gemm_operands(seed, phi, trans):
    """A and B of the SHAPE product, stored transposed where ``trans`` says so."""
    m, n, k = SHAPE
    rng = np.random.default_rng(seed)
    ta, tb = trans
    return (phi_matrix(rng, *((k, m) if ta else (m, k)), phi),
            phi_matrix(rng, *((n, k) if tb else (k, n)), phi))


@pytest.mark.parametrize("phi", [0, 0.5, 1, 2, 4])
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("slices", [6, 7, 8, "auto"])
def test_gemm_bits(gpu, phi, trans, slices):
    engine, cp = gpu
    ta, tb = trans
    A, B = _gemm_operands(10 + int(4 * phi), phi, trans)
    want, info_w = ozhpc.gemm(A, B, transa=ta, transb=tb, slices=slices, engine="numpy", info=True)
    got, info_g = ozhpc.gemm(A, B, transa=ta, transb=tb, slices=slices, engine=engine, info=True)
    assert info_g.slices == info_w.slices and info_g.groups == info_w.groups
    assert isinstance(got, np.ndarray)
    assert_same_bits(got, want)


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 17, 250), (128, 256, 300), (200, 64, 1)])
@pytest.mark.parametrize("groups", ["auto", "all"])
def test_gemm_shapes_groups(gpu, shape, groups):
    engine, cp = gpu
    m, n, k = shape
    rng = np.random.default_rng(3)
    A, B = phi_matrix(rng, m, k, 1.0), phi_matrix(rng, k, n, 1.0)
    want = ozhpc.gemm(A, B, slices=7, groups=groups, engine="numpy")
    got = ozhpc.gemm(A, B, slices=7, groups=groups, engine=engine)
    assert_same_bits(got, want)


@pytest.mark.parametrize("variant", ["unfused", "chunked", "blocked", "blocked_unfused"])
def test_unfused_paths(gpu, variant):
    """Group accumulators (SUMMA's path), k-chunking of the int32 sums and M/N blocking."""
    from ozhpc.engines.cutile_engine import CutileEngine
    _, cp = gpu
    kwargs = {"unfused": dict(fused=False), "chunked": dict(k_limit=300),
              "blocked": dict(memory_fraction=1e-9),
              "blocked_unfused": dict(fused=False, memory_fraction=1e-9)}[variant]
    engine = CutileEngine(**kwargs)
    rng = np.random.default_rng(4)
    m, n, k = 300, 270, 700
    A, B = phi_matrix(rng, m, k, 2.0), phi_matrix(rng, k, n, 2.0)
    want = ozhpc.gemm(A, B, slices=8, groups="all", engine="numpy")
    got = ozhpc.gemm(A, B, slices=8, groups="all", engine=engine)
    assert_same_bits(got, want)
    assert engine.last_path == ("int32-sums" if variant == "blocked" else "float64-acc")
    if variant.startswith("blocked"):
        assert engine.last_blocks[0] * engine.last_blocks[1] > 1


def test_accumulate_combine_match_numpy(gpu):
    """The engine methods one by one, with a k-panel loop (as SUMMA calls them)."""
    engine, cp = gpu
    ref = NumpyEngine()
    rng = np.random.default_rng(5)
    m, n, k, s = 70, 90, 400, 6
    a, bt = phi_matrix(rng, m, k, 1.0), phi_matrix(rng, n, k, 1.0)
    e, f = exponents(np, row_abs_max(np, a)), exponents(np, row_abs_max(np, bt))
    da, eb = ref.split(a, e, s), ref.split(bt, f, s)
    acc_w = ref.zeros_groups(s, m, n)
    acc_g = engine.zeros_groups(s, m, n)
    for k0 in range(0, k, 150):
        ref.accumulate_groups(acc_w, da[:, :, k0:k0 + 150], eb[:, :, k0:k0 + 150])
        engine.accumulate_groups(acc_g, cp.asarray(da[:, :, k0:k0 + 150]), cp.asarray(eb[:, :, k0:k0 + 150]))
    assert_same_bits(cp.asnumpy(acc_g), acc_w)
    assert_same_bits(cp.asnumpy(engine.combine_groups(acc_g, cp.asarray(e), cp.asarray(f))),
                     ref.combine_groups(acc_w, e, f))


# ------------------------------------------------------------------------- special values
def _special_case(name, rng):
    m, n, k = 40, 36, 50
    A, B = phi_matrix(rng, m, k, 1.0), phi_matrix(rng, k, n, 1.0)
    if name == "inf_nan":
        A[3, 7] = np.inf
        A[5, :] = -np.inf
        B[2, 4] = np.nan
        B[9, 11] = np.inf
        B[:, 20] = 0.0
    elif name == "zero_rows":
        A[0, :] = 0.0
        B[:, 0] = 0.0
        A[7, :] = -0.0
    elif name == "subnormal_inputs":
        A[1, :] *= 2.0**-1060
        B[:, 3] *= 2.0**-1065
        A[2, 5] = 5e-324
    elif name == "subnormal_outputs":
        A *= 2.0**-540
        B *= 2.0**-520
    elif name == "overflow":
        A *= 2.0**600
        B *= 2.0**500
        A[4, :] = 1.0
    elif name == "huge_range":
        A[:, ::3] *= 2.0**300
        B[::5, :] *= 2.0**-300
    return A, B


@pytest.mark.parametrize("name", ["inf_nan", "zero_rows", "subnormal_inputs", "subnormal_outputs",
                                  "overflow", "huge_range"])
@pytest.mark.parametrize("slices", [7, "auto"])
def test_special_values(gpu, name, slices):
    engine, cp = gpu
    A, B = _special_case(name, np.random.default_rng(6))
    want = ozhpc.gemm(A, B, slices=slices, engine="numpy")
    got = ozhpc.gemm(A, B, slices=slices, engine=engine)
    assert_same_bits(got, want)


def test_subnormal_outputs_are_really_subnormal(gpu):
    A, B = _special_case("subnormal_outputs", np.random.default_rng(6))
    got = ozhpc.gemm(A, B, slices=7, engine=gpu[0])
    tiny = np.abs(got)
    assert np.any((tiny > 0) & (tiny < 2.0**-1022))


def test_k_zero(gpu):
    engine, cp = gpu
    A, B = np.zeros((5, 0)), np.zeros((0, 7))
    got = ozhpc.gemm(A, B, slices=6, engine=engine)
    assert_same_bits(got, ozhpc.gemm(A, B, slices=6, engine="numpy"))


def test_cupy_in_cupy_out(gpu):
    engine, cp = gpu
    rng = np.random.default_rng(7)
    A, B = phi_matrix(rng, 64, 80, 0.5), phi_matrix(rng, 80, 48, 0.5)
    got = ozhpc.gemm(cp.asarray(A), cp.asarray(B), slices=7, engine=engine)
    assert isinstance(got, cp.ndarray)
    assert_same_bits(cp.asnumpy(got), ozhpc.gemm(A, B, slices=7, engine="numpy"))


def test_describe(gpu):
    d = gpu[0].describe()
    assert d["name"] == "cutile" and d["compute_capability"] and "tile_config" in d
    assert "workspace_bytes" in d


# ------------------------------------------------------------------ pair-kernel index widths
@pytest.mark.parametrize("pair_index", ["int32", "int64"])
def test_pair_index_widths_match_numpy(gpu, pair_index):
    """Both compilations of the pair kernel (TMA with int32 indices, cp.async with int64)
    give the NumPy engine's bits: one launch, int32 k-chunks, k panels summed in int32."""
    from dataclasses import replace
    from ozhpc.engines import cutile as ck
    from ozhpc.engines.cutile_engine import CutileEngine
    rng = np.random.default_rng(11)
    m, n, k = 300, 270, 700
    A, B = phi_matrix(rng, m, k, 1.0), phi_matrix(rng, k, n, 1.0)
    want = ozhpc.gemm(A, B, slices=8, groups="all", engine="numpy")
    base = ck.config_for(gpu[0].capability)
    panels = replace(base, pair_k_panel=128)   # 6 launches per k
    # group ranges per launch (15 groups as 4 + 4 + 4 + 3: g0 > 0, a short last range) and one per launch
    ranges = [replace(base, pair_launch_groups=groups, pair_k_panel=128) for groups in (4, 1)]
    for kwargs in ({}, {"k_limit": 300}, {"config": panels}, {"config": ranges[0]},
                   {"config": ranges[1], "k_limit": 300}):
        engine = CutileEngine(pair_index=pair_index, **kwargs)
        assert_same_bits(ozhpc.gemm(A, B, slices=8, groups="all", engine=engine), want)
        assert engine.launcher.last_pair_index == pair_index


@pytest.mark.parametrize("slices", [8, 9])
def test_large_problem_int32_blocks_equal_int64(gpu, slices):
    """n = 16384: with 8 slices the (15, n, n) int32 sums exceed int32 offsets, with 9 the
    slice buffers do too. "auto" then blocks over M/N (copying operand blocks) and still
    runs the int32 (TMA) kernel; its C equals the unblocked dynamic-int64 kernel's C."""
    from ozhpc.engines.cutile_engine import CutileEngine
    _, cp = gpu
    n = 16384
    rs = cp.random.RandomState(3)
    a = (rs.random_sample((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n)))
    b = (rs.random_sample((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n)))
    auto, wide = CutileEngine(), CutileEngine(pair_index="int64")
    got = ozhpc.gemm(a, b, slices=slices, groups="all", engine=auto)
    assert auto.launcher.last_pair_index == "int32" and auto.last_blocks != (1, 1)
    want = ozhpc.gemm(a, b, slices=slices, groups="all", engine=wide)
    assert wide.launcher.last_pair_index == "int64" and wide.last_blocks == (1, 1)
    assert bool(cp.all(got.view(cp.int64) == want.view(cp.int64)))


# ------------------------------------------------------------------ scheme II (CRT)
def _residues_both(gpu, x, bits, count=None):
    from ozhpc.engines import crt
    engine, cp = gpu
    e = exponents(np, row_abs_max(np, x))
    tables = crt.crt_tables(bits, count or crt.moduli_needed(bits, x.shape[1]))
    return engine, cp, e, tables, NumpyEngine().residues(x, e, tables)


@pytest.mark.parametrize("bits", [8, 30, 53, 60, 90, 100])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_residue_bits(gpu, bits, layout):
    x = phi_matrix(np.random.default_rng(21), 157, 301, 2.0)
    engine, cp, e, tables, want = _residues_both(gpu, x, bits)
    xd = cp.asarray(x)
    if layout == "F":
        xd = cp.asfortranarray(xd)
    elif layout == "strided":
        xd = cp.asarray(np.repeat(x, 2, axis=1))[:, ::2]
    assert_same_bits(cp.asnumpy(engine.residues(xd, cp.asarray(e), tables)), want)


def test_residue_edge_values(gpu):
    rng = np.random.default_rng(22)
    x = np.stack([
        (rng.integers(-2**20, 2**20, 64) + 0.5) * 2.0**-30,      # ties after scaling
        rng.standard_normal(64) * 2.0**-1060,                    # subnormal row
        np.full(64, 5e-324) * rng.integers(-3, 4, 64),
        rng.standard_normal(64) * 2.0**1020,                     # near overflow
        np.concatenate([[1.7e308], rng.standard_normal(63) * 1e-300]),
        np.zeros(64),
        np.concatenate([[2.0**-1022], rng.standard_normal(63) * 2.0**-1070]),
        (127.5 / 128) * np.ones(64),
        np.full(64, -1.0),
    ])
    # 63 / 64: the last bits of the float32 path and the first of the float64 one, with the
    # most moduli a reconstruction allows (down to p = 103)
    for bits, count in ((8, 24), (52, 24), (53, 24), (54, 24), (63, 33), (64, 33), (100, 24)):
        engine, cp, e, tables, want = _residues_both(gpu, x, bits, count=count)
        assert_same_bits(cp.asnumpy(engine.residues(cp.asarray(x), cp.asarray(e), tables)), want)


@pytest.mark.parametrize("acc_dtype", ["int32", "float64"])
def test_crt_combine_bits(gpu, acc_dtype):
    """The reconstruction alone, on sums anywhere in the accumulator's range and scales that
    give normal, subnormal, zero and overflowing results; 1, 2, 3, 4 and 7 pieces."""
    from ozhpc.engines import crt
    engine, cp = gpu
    rng = np.random.default_rng(23)
    m, n = 97, 130
    for bits, count in ((8, 3), (30, 9), (40, 12), (53, 16), (60, 17), (100, 30)):
        tables = crt.crt_tables(bits, count)
        if acc_dtype == "int32":
            acc = rng.integers(-2**31, 2**31, size=(count, m, n), dtype=np.int64).astype(np.int32)
        else:
            acc = rng.integers(-2**52, 2**52, size=(count, m, n), dtype=np.int64).astype(np.float64)
        acc[:, 0, :] = 0
        e = rng.integers(-600, 600, m).astype(np.int32)
        e[:4] = (-1100, -1000, 1000, 1100)
        f = rng.integers(-600, 600, n).astype(np.int32)
        want = NumpyEngine().combine_moduli(acc, e, f, tables)
        got = engine.combine_moduli(cp.asarray(acc), cp.asarray(e), cp.asarray(f), tables)
        assert_same_bits(cp.asnumpy(got), want)


@pytest.mark.parametrize("phi", [0, 0.5, 2, 4])
@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("bits", [40, 53, "auto"])
def test_gemm_ozaki2_bits(gpu, phi, trans, bits):
    engine, cp = gpu
    ta, tb = trans
    A, B = _gemm_operands(30 + int(4 * phi), phi, trans)
    kw = dict(transa=ta, transb=tb, scheme="ozaki2", bits=bits, info=True)
    want, info_w = ozhpc.gemm(A, B, engine="numpy", **kw)
    got, info_g = ozhpc.gemm(A, B, engine=engine, **kw)
    assert (info_g.scheme, info_g.bits, info_g.moduli) == ("ozaki2", info_w.bits, info_w.moduli)
    assert_same_bits(got, want)


@pytest.mark.parametrize("variant", ["whole", "chunked", "blocked", "blocked_chunked", "panels",
                                     "whole_single", "chunked_single"])
def test_ozaki2_paths(gpu, variant):
    """Scheme II's int8 residues: whole k, k chunks added into the residues, M/N blocks; with
    all products in one grid (the default) or one product per launch, and k panels."""
    from dataclasses import replace
    from ozhpc.engines.cutile_engine import CutileEngine
    engine, _ = gpu
    single = replace(engine.config, diagonal_launch_groups=1)
    kwargs = {"whole": {}, "chunked": dict(k_limit=300), "blocked": dict(memory_fraction=1e-9),
              "blocked_chunked": dict(k_limit=300, memory_fraction=1e-9),
              "panels": dict(config=replace(engine.config, diagonal_k_panel=128)),   # 6 launches per k
              "whole_single": dict(config=single), "chunked_single": dict(k_limit=300, config=single)}[variant]
    engine = CutileEngine(**kwargs)
    rng = np.random.default_rng(31)
    A, B = phi_matrix(rng, 300, 700, 2.0), phi_matrix(rng, 700, 270, 2.0)
    want = ozhpc.gemm(A, B, scheme="ozaki2", engine="numpy")
    assert_same_bits(ozhpc.gemm(A, B, scheme="ozaki2", engine=engine), want)
    assert engine.last_path == "int8-residues"
    assert (engine.last_blocks == (1, 1)) == (not variant.startswith("blocked"))


def _balanced_mod(x, primes):
    """Balanced residues of the integers ``x[l]`` (float64 or int) modulo ``primes[l]``."""
    from ozhpc.engines.crt import balanced_range
    out = np.empty(x.shape, dtype=np.int64)
    for l, p in enumerate(primes):
        lo, _ = balanced_range(p)
        out[l] = np.mod(np.asarray(x[l], dtype=np.int64) - lo, p) + lo
    return out


@pytest.mark.parametrize("k_limit", [None, 100])
def test_ozaki2_panels_match_numpy(gpu, k_limit):
    """SUMMA's calls for scheme II: residues once, diagonal products per k panel (added into
    the int8 residues; k_limit 100 also chunks each panel), one CRT."""
    from ozhpc.engines.cutile_engine import CutileEngine
    from ozhpc.ozaki.plan import ModularPlan
    _, cp = gpu
    engine = CutileEngine(k_limit=k_limit)
    ref = NumpyEngine()
    rng = np.random.default_rng(32)
    m, n, k = 70, 90, 400
    a, bt = phi_matrix(rng, m, k, 1.0), phi_matrix(rng, n, k, 1.0)
    e, f = exponents(np, row_abs_max(np, a)), exponents(np, row_abs_max(np, bt))
    plan = ModularPlan.for_k(55, k)
    da, eb = plan.split(ref, a, e), plan.split(ref, bt, f)
    acc_w = plan.zeros(ref, m, n, k)
    acc_g = plan.zeros(engine, m, n, k)
    assert acc_g.dtype == cp.int8 and acc_g.shape == (plan.moduli, m, n)
    for k0 in range(0, k, 150):
        plan.accumulate(ref, acc_w, da[:, :, k0:k0 + 150], eb[:, :, k0:k0 + 150])
        plan.accumulate(engine, acc_g, cp.asarray(da[:, :, k0:k0 + 150]), cp.asarray(eb[:, :, k0:k0 + 150]))
    assert_same_bits(cp.asnumpy(acc_g).astype(np.int64), _balanced_mod(acc_w, plan.tables.primes))
    with pytest.raises(TypeError, match=r"acc must come from zeros_moduli \(int8, rows contiguous\), got float64"):
        engine.accumulate_moduli(cp.zeros(acc_g.shape), cp.asarray(da), cp.asarray(eb), plan.tables)
    assert_same_bits(cp.asnumpy(plan.combine(engine, acc_g, cp.asarray(e), cp.asarray(f))),
                     plan.combine(ref, acc_w, e, f))


def test_residue_epilogue_at_the_int32_limit(gpu):
    """The pair kernel's int8 residues for all 64 moduli, k at the chunk limit, extreme
    residues (|acc| up to 2**31 - 2**18, plus the int8 already there) and random ones."""
    from ozhpc.engines import crt
    from ozhpc.engines import cutile as ck
    from ozhpc.engines.kernel_tables import modulus_table
    engine, cp = gpu
    rng = np.random.default_rng(44)
    primes = crt.MODULI
    kc = ck.k_chunk(1, 1, diagonal=True)
    g, m = len(primes), 16
    da = rng.integers(-128, 128, (g, m, kc), dtype=np.int8)
    eb = rng.integers(-128, 128, (g, m, kc), dtype=np.int8)
    da[:, 0::4], eb[:, 0::4] = -128, -128       # entry (0, 0): kc * 2**14 = 2**31 - 2**18
    da[:, 1::4], eb[:, 1::4] = -128, 127        # entry (1, 1): the most negative sum
    start = rng.integers(-128, 128, (g, m, m), dtype=np.int8)
    sums = np.stack([da[l].astype(np.float64) @ eb[l].astype(np.float64).T for l in range(g)])  # exact
    assert sums[:, 0, 0].max() == kc * 2**14 and sums[:, 1, 1].min() == -kc * 128 * 127
    want = _balanced_mod(start + sums, primes)
    res = cp.asarray(start)
    engine._pair_sums(cp.asarray(da), cp.asarray(eb), 0, kc, res, cp.asarray(modulus_table(primes)),
                      accumulate=True)
    assert_same_bits(cp.asnumpy(res).astype(np.int64), want)


@pytest.mark.parametrize("name", ["inf_nan", "zero_rows", "subnormal_inputs", "subnormal_outputs",
                                  "overflow", "huge_range"])
def test_ozaki2_special_values(gpu, name):
    engine, cp = gpu
    A, B = _special_case(name, np.random.default_rng(6))
    want = ozhpc.gemm(A, B, scheme="ozaki2", engine="numpy")
    assert_same_bits(ozhpc.gemm(A, B, scheme="ozaki2", engine=engine), want)


def test_ozaki2_large_problem_int32_blocks_equal_int64(gpu):
    """n = 16384, 16 moduli: the int32 sums and the residue buffers exceed int32 offsets;
    the int32 (TMA) kernel on group ranges equals the int64 kernel bit for bit."""
    from ozhpc.engines.cutile_engine import CutileEngine
    _, cp = gpu
    n = 16384
    rs = cp.random.RandomState(4)
    a = (rs.random_sample((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n)))
    b = (rs.random_sample((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n)))
    auto, wide = CutileEngine(), CutileEngine(pair_index="int64")
    got, info = ozhpc.gemm(a, b, scheme="ozaki2", bits=53, engine=auto, info=True)
    # group ranges keep int32 offsets: no M/N blocks, no operand copies
    assert info.moduli in (15, 16) and auto.launcher.last_pair_index == "int32" and auto.last_blocks == (1, 1)
    want = ozhpc.gemm(a, b, scheme="ozaki2", bits=53, engine=wide)
    assert wide.launcher.last_pair_index == "int64"
    assert bool(cp.all(got.view(cp.int64) == want.view(cp.int64)))


# ------------------------------------------------------------------ "auto" statistic kernels
def _gap_rows(rng):
    return np.stack([
        rng.standard_normal(300) * 2.0**-1060,                   # subnormal row
        np.concatenate([[1.7e308], rng.standard_normal(299) * 1e-300]),
        np.concatenate([[np.inf, -np.inf, np.nan, 0.0, -0.0, 5e-324], rng.standard_normal(294)]),
        np.zeros(300),
        (rng.random(300) - 0.5) * np.exp(4 * rng.standard_normal(300)),
        np.concatenate([[2.0**-1022], rng.standard_normal(299) * 2.0**-1070]),
    ] + [phi_matrix(rng, 1, 300, phi)[0] for phi in (0, 0.5, 1, 2, 4)])


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_gap_codes_match_numpy(gpu, layout):
    from ozhpc.engines.digits import NO_GAP
    engine, cp = gpu
    x = _gap_rows(np.random.default_rng(40))
    e = exponents(np, row_abs_max(np, x))
    want = NumpyEngine().entry_gaps(x, e)
    xd = cp.asarray(x)
    if layout == "F":
        xd = cp.asfortranarray(xd)
    elif layout == "strided":
        xd = cp.asarray(np.repeat(x, 2, axis=1))[:, ::2]
    got = cp.asnumpy(engine.entry_gaps(xd, cp.asarray(e)))
    assert_same_bits(got[:, :x.shape[1]], want)
    from ozhpc.engines.cutile import GAP_COLS
    assert got.shape[1] % GAP_COLS == 0 and np.all(got[:, x.shape[1]:] == NO_GAP)


def test_gap_counts_and_spread_match_numpy(gpu):
    from ozhpc.ozaki.scales import spread_bits
    engine, cp = gpu
    rng = np.random.default_rng(41)
    ref = NumpyEngine()
    for phi in (0, 0.5, 2, 4):
        x = phi_matrix(rng, 333, 517, phi)
        x[5] = 0.0
        e = exponents(np, row_abs_max(np, x))
        gaps_w, gaps_g = ref.entry_gaps(x, e), engine.entry_gaps(cp.asarray(x), cp.asarray(e))
        for width in (1, 3, 8):   # 3: not a kernel width, the generic path
            limits = np.sort(rng.integers(0, 64, (333, width)), axis=1).astype(np.int32)
            assert_same_bits(cp.asnumpy(engine.count_gaps_le(gaps_g, cp.asarray(limits))),
                             ref.count_gaps_le(gaps_w, limits))
        assert spread_bits(cp, gaps_g, count_le=engine.count_gaps_le) == spread_bits(np, gaps_w)


@pytest.mark.parametrize("per_sm, cols", [(0, "full"), (0, 17000), (8, 17000), (64, 300)])
def test_gap_counts_with_full_count_fields(gpu, per_sm, cols):
    """The count kernel's 8-bit fields at their largest (one part of the most tiles that fit,
    every entry in one bucket), parts forced by the field bound, and one tile per part."""
    from ozhpc.engines import cutile as ck
    engine, cp = gpu
    if cols == "full":   # the widest gap buffer that one part may count
        cols = ck.COUNT_MAX_TILES * 4 * ck.COUNT_TILE[1] // ck.GAP_COLS * ck.GAP_COLS
        one_part = ck.Launcher(0, (9, 0), 132)
        one_part.stat_ctas_per_sm = per_sm
        assert one_part.column_parts(21, cols // 4, ck.COUNT_TILE, ck.COUNT_MAX_TILES) == 1
        assert 4 * (cols // 4 // ck.COUNT_TILE[1]) > 240     # fields near 255
    rng = np.random.default_rng(43)
    x = np.ones((21, cols))
    x[3] = phi_matrix(rng, 1, cols, 2.0)[0]
    x[4, ::3] = 0.0
    e = exponents(np, row_abs_max(np, x))
    ref = NumpyEngine()
    gaps_w, gaps_g = ref.entry_gaps(x, e), engine.entry_gaps(cp.asarray(x), cp.asarray(e))
    limits = np.sort(rng.integers(0, 64, (21, 8)), axis=1).astype(np.int32)
    limits[:3] = np.arange(8)
    saved = engine.launcher.stat_ctas_per_sm
    engine.launcher.stat_ctas_per_sm = per_sm
    try:
        got = cp.asnumpy(engine.count_gaps_le(gaps_g, cp.asarray(limits)))
    finally:
        engine.launcher.stat_ctas_per_sm = saved
    assert_same_bits(got, ref.count_gaps_le(gaps_w, limits))
    assert got[0, 0] == cols


