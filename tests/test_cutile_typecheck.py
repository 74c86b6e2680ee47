"""CPU check of every cuTile kernel: front-end compile to TileIR bytecode for sm_90 and sm_100.

Runs without a GPU and without CuPy (only ``cuda.tile`` is needed); it parses, infers
types, checks tile shapes (powers of two), the ``ct.mma`` dtype rules (int8 x int8 ->
int32) and per-architecture dtype support for each signature the engine launches.
"""
from __future__ import annotations

import io

import pytest

ct = pytest.importorskip("cuda.tile")
compilation = pytest.importorskip("cuda.tile.compilation")

from ozhpc.engines import cutile as ck  # noqa: E402
from ozhpc.engines import crt as crt_tables  # noqa: E402
from ozhpc.engines.cutile import tile_math  # noqa: E402
from ozhpc.engines.digits import DIGIT_MAX, group_product_bound  # noqa: E402
from ozhpc.engines.kernel_store import StoredKernel  # noqa: E402
from ozhpc.ozaki.scales import COUNT_WIDTH  # noqa: E402

GPU_CODES = ("sm_90", "sm_100")
BYTECODE = "13.4"


def _array(dtype, ndim, index_dtype=None, last_contiguous=True):
    """An array argument as the engine passes it: last axis contiguous, 16-byte aligned."""
    return compilation.ArrayConstraint(
        dtype, ndim,
        index_dtype=index_dtype or ct.int32,
        stride_lower_bound_incl=0,
        alias_groups=(),
        may_alias_internally=False,
        stride_constant=(None,) * (ndim - 1) + ((1,) if last_contiguous else (None,)),
        base_addr_divisible_by=16,
    )


def _sig(params):
    return compilation.KernelSignature(params, compilation.CallingConvention.cutile_python_v2())


def _int():
    return compilation.ScalarConstraint(ct.int32)


def _signatures(cfg: ck.TileConfig):
    """kernel name -> the signatures the engine launches with this config."""
    big = ct.int64
    split = [
        _sig([_array(ct.float64, 2), _array(ct.int32, 1), _array(ct.int8, 3, big), _int(),
              cfg.split_rows, cfg.split_cols, trans])
        for trans in (False, True)
    ]
    pair_args = {diagonal: [cfg.pair_m, cfg.pair_n, cfg.diagonal_k if diagonal else cfg.pair_k, cfg.group_m]
                 for diagonal in (False, True)}
    flags = [(accumulate, diagonal) for accumulate in (False, True) for diagonal in (False, True)]
    # scheme II's diagonal products store int8 residues (modulus table MODS), scheme I int32 sums
    pair = [_sig([_array(ct.int8, 3), _array(ct.int8, 3), _array(ct.int8 if f[1] else ct.int32, 3),
                  _array(ct.int32, 2), _int(), *pair_args[f[1]], *f]) for f in flags]
    pair_int64 = [_sig([_array(ct.int8, 3, big), _array(ct.int8, 3, big),
                        _array(ct.int8 if f[1] else ct.int32, 3, big), _array(ct.int32, 2), _int(),
                        *pair_args[f[1]], *f]) for f in flags]
    combine = [_sig([_array(acc_dtype, 3, big), _array(ct.int32, 1), _array(ct.int32, 1),
                     _array(ct.float64, 2), cfg.combine_rows, cfg.combine_cols])
               for acc_dtype in (ct.float64, ct.int32)]
    residue = [
        _sig([_array(ct.float64, 2), _array(ct.int32, 1), _array(ct.float64, 2), _array(ct.int8, 3, big),
              _int(), _int(), cfg.residue_rows, cfg.residue_cols, trans, short, f32])
        for trans in (False, True) for short, f32 in ((False, False), (True, False), (True, True))
    ]
    crt = [_sig([_array(acc_dtype, 3, big), _array(ct.int32, 1), _array(ct.int32, 1),
                 _array(ct.float64, 2), _array(ct.float64, 2), _array(ct.float64, 2),
                 _array(ct.float64, 2), _int(), cfg.crt_rows, cfg.crt_cols, pieces, acc_dtype == ct.int8,
                 ck.CRT_GROUP])
           for acc_dtype in (ct.float64, ct.int32, ct.int8) for pieces in range(1, crt_tables.MAX_PIECES + 1)]
    gaps = [_sig([_array(ct.float64, 2), _array(ct.int32, 1), _array(ct.int8, 2, big),
                  cfg.split_rows, cfg.split_cols, trans]) for trans in (False, True)]
    count = [_sig([_array(ct.int32, 2, big), _array(ct.int32, 2), _array(ct.int32, 3),
                   *ck.COUNT_TILE, width]) for width in (1, COUNT_WIDTH)]
    gaussian_residue = [
        _sig([_array(ct.float64, 3), _array(ct.int32, 1), _array(ct.float64, 2), _array(ct.int8, 3, big),
              _int(), _int(), _int(), *ck.gaussian_residues.RESIDUE_TILE, trans, short, f32, conj, narrow])
        for trans in (False, True)
        for short, f32, narrow in ((False, False, False), (True, False, False), (True, True, False), (True, True, True))
        for conj in (False, True)]
    gaussian_crt = [_sig([_array(ct.int8, 3, big), _array(ct.int32, 1), _array(ct.int32, 1),
                          *(_array(ct.float64, 2) for _ in range(4)), _array(ct.float64, 3, big),
                          _int(), _int(), _int(), *ck.gaussian_crt.CRT_TILE, pieces, ck.gaussian_crt.CRT_GROUP])
                    for pieces in range(1, crt_tables.MAX_PIECES + 1)]
    row_summary = [_sig([_array(ct.float64, 2), _array(ct.int64, 2), _array(ct.int32, 1), *ck.SUMMARY_TILE, trans])
                   for trans in (False, True)]
    return {"split": split, "pair": pair, "pair_int64": pair_int64, "combine": combine,
            "residue": residue, "crt": crt, "gaps": gaps, "count": count,
            "row_summary": row_summary, "gaussian_residue": gaussian_residue, "gaussian_crt": gaussian_crt}


@pytest.mark.parametrize("gpu_code", GPU_CODES)
@pytest.mark.parametrize("name", sorted(ck.KERNELS))
def test_kernel_exports(name, gpu_code):
    capability = (int(gpu_code[3:-1]), int(gpu_code[-1]))
    sigs = _signatures(ck.config_for(capability))[name]
    buf = io.BytesIO()
    compilation.export_kernel(ck.KERNELS[name], sigs, buf, gpu_code=gpu_code,
                              output_format="tileir_bytecode", bytecode_version=BYTECODE)
    assert buf.getvalue(), f"{name}: empty bytecode for {gpu_code}"


def test_every_kernel_of_the_package_is_type_checked():
    """A kernel added to any module of ``ozhpc.engines.cutile`` must be in KERNELS (and so get
    signatures above), or the exports test would not cover it."""
    import importlib
    import pkgutil
    found = {}
    for info in pkgutil.iter_modules(ck.__path__):
        module = importlib.import_module(f"{ck.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, StoredKernel) and value._pyfunc.__module__ == module.__name__:
                found[f"{info.name}.{value._pyfunc.__name__}"] = value
    assert sorted(id(k) for k in found.values()) == sorted(id(k) for k in ck.KERNELS.values()), sorted(found)
    assert set(_signatures(ck.config_for((9, 0)))) == set(ck.KERNELS)


def test_config_table_is_explicit():
    assert (9, 0) in ck.CONFIGS and (10, 0) in ck.CONFIGS
    with pytest.raises(RuntimeError, match="no cuTile tile config"):
        ck.config_for((7, 5))


def test_tiles_are_powers_of_two_and_k_bound_holds():
    for cfg in ck.CONFIGS.values():
        for v in (cfg.split_rows, cfg.split_cols, cfg.pair_m, cfg.pair_n, cfg.pair_k,
                  cfg.combine_rows, cfg.combine_cols, cfg.crt_rows, cfg.crt_cols,
                  cfg.residue_rows, cfg.residue_cols):
            assert v > 0 and v & (v - 1) == 0
        assert ck.GAP_COLS % (4 * ck.COUNT_TILE[1]) == 0     # int32 words of 4 gap codes
        # k panels start on k-tile boundaries (16-byte aligned slices for TMA)
        assert cfg.pair_k_panel % cfg.pair_k == 0 and cfg.diagonal_k_panel % cfg.diagonal_k == 0
        # one pair over one k-tile always fits an int32 accumulator
        assert cfg.pair_k * DIGIT_MAX**2 < 2**31 and cfg.diagonal_k & (cfg.diagonal_k - 1) == 0
    assert ck.K_PAIR_LIMIT * DIGIT_MAX**2 < 2**31 <= (ck.K_PAIR_LIMIT + 1) * DIGIT_MAX**2


def test_scheme2_table_columns_do_not_overlap():
    """The CRT weights (up to MAX_PIECES), the limb constants and the table width."""
    assert ck.WEIGHT_COL + crt_tables.MAX_PIECES <= ck.LIMB_COL
    assert ck.LIMB_COL + 3 <= ck.TABLE_COLS
    # float32 residues: 4 limbs of LIMB_BITS cover FLOAT32_RESIDUE_BITS + 1 bits, and the limb
    # sum (|limb| <= 2**(LIMB_BITS-1), constants <= RESIDUE_MAX) stays exact in float32
    assert 4 * ck.LIMB_BITS >= ck.FLOAT32_RESIDUE_BITS + 1
    assert 2**(ck.LIMB_BITS - 1) * (1 + 3 * crt_tables.RESIDUE_MAX) < 2**24


def test_k_chunk_keeps_int32_exact():
    for s in (1, 6, 8, 12, 24):
        for d in (1, s, 2 * s - 1):
            kc = ck.k_chunk(s, d)
            assert kc % 16 == 0
            assert kc * group_product_bound(s, d) < 2**31
            assert ck.k_chunk(s, d, k_limit=300) == max(16, 300 // ck.widest_group(s, d) // 16 * 16)
    assert ck.k_chunk(8, 8) >= 32768      # one chunk at n = 32768 with the triangle
    assert ck.k_chunk(7, 7) >= 32768


def test_k_chunk_diagonal_keeps_residue_products_exact():
    """Scheme II: one product of residues |r| <= 128 per int32 sum, whatever the slice count."""
    from ozhpc.engines import crt
    kc = ck.k_chunk(16, 16, diagonal=True)
    # the pair kernel adds the products to an int8 residue already there
    assert kc % 16 == 0 and kc * crt.RESIDUE_MAX**2 + crt.RESIDUE_MAX < 2**31 <= (kc + 16) * crt.RESIDUE_MAX**2
    assert ck.k_chunk(16, 16, k_limit=300, diagonal=True) == 288
    assert kc >= 131056                   # one chunk up to n = 131056


def test_group_product_bound_is_the_largest_group_of_digit_products():
    for s in range(1, 13):
        for d in range(1, 2 * s):
            want = max(sum((127 if p == 0 else 64) * (127 if q == 0 else 64)
                           for p in range(s) for q in range(s) if p + q == g) for g in range(d))
            assert group_product_bound(s, d) == want


def _view(shape, strides, itemsize):
    from types import SimpleNamespace
    return SimpleNamespace(shape=shape, strides=strides, itemsize=itemsize)


def _contiguous(shape, itemsize):
    strides, acc = [], itemsize
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= d
    return _view(tuple(shape), tuple(strides), itemsize)


def test_fits_int32_bounds_the_last_element_offset():
    assert ck.fits_int32(_contiguous((8, 16384, 16384), 1))            # last offset 2**31 - 1
    assert not ck.fits_int32(_contiguous((8, 16384, 16400), 1))
    assert not ck.fits_int32(_contiguous((15, 16384, 16384), 4))      # 15 * 2**28 int32 sums
    assert ck.fits_int32(_contiguous((15, 8192, 16384), 4))
    assert ck.fits_int32(_contiguous((0, 2**40, 1), 1))                # empty
    # a k-chunk view keeps the parent's strides: its offsets are the parent's
    assert not ck.fits_int32(_view((8, 16384, 4096), (16384 * 16400, 16400, 1), 1))
    assert not ck.fits_int32(_view((1, 2**31, 1), (2**31, 1, 1), 1))


def test_launcher_picks_int32_only_when_offsets_fit():
    launcher = ck.Launcher(0, (9, 0), 132)
    small = _contiguous((8, 4096, 4096), 1), _contiguous((8, 4096, 4096), 1), _contiguous((15, 4096, 4096), 4)
    big = _contiguous((8, 32768, 32768), 1), _contiguous((8, 32768, 32768), 1), _contiguous((15, 8192, 8192), 4)
    assert launcher.pair_index_for(*small) == "int32"
    assert launcher.pair_index_for(*big) == ck.PAIR_INDEX_FALLBACK
    forced = ck.Launcher(0, (9, 0), 132, pair_index="int32")
    with pytest.raises(ValueError, match="offsets >= 2\\*\\*31"):
        forced.pair_index_for(*big)
    assert ck.Launcher(0, (9, 0), 132, pair_index="int64").pair_index_for(*small) == "int64"
    with pytest.raises(ValueError, match="pair_index must be 'auto' or one of"):
        ck.Launcher(0, (9, 0), 132, pair_index="int16")


def test_column_parts_fill_the_sms_and_keep_count_fields_below_overflow():
    launcher = ck.Launcher(0, (9, 0), 132)
    per_sm = launcher.stat_ctas_per_sm
    tile = ck.COUNT_TILE
    rows = 1024 * tile[0]
    assert launcher.column_parts(rows, 16384, tile) == -(-per_sm * 132 // 1024)
    assert launcher.column_parts(tile[0], 16384, tile) == min(per_sm * 132, 16384 // tile[1])
    assert launcher.column_parts(tile[0], 3 * tile[1], tile) == 3      # at most one tile per part
    assert launcher.column_parts(0, 0, tile) == 1
    launcher.stat_ctas_per_sm = 0                                      # only the field bound left
    width = ck.COUNT_MAX_TILES * tile[1]
    assert launcher.column_parts(rows, width, tile, ck.COUNT_MAX_TILES) == 1
    assert launcher.column_parts(rows, width + 1, tile, ck.COUNT_MAX_TILES) == 2
    # a part adds at most 4 codes per word lane and tile to a field
    assert 4 * ck.COUNT_MAX_TILES <= ck.COUNT_FIELD_MASK == 2**ck.COUNT_FIELD_BITS - 1
    assert ck.COUNT_MAX_FIELDS * ck.COUNT_FIELD_BITS <= 64
    assert COUNT_WIDTH <= ck.COUNT_MAX_FIELDS


def test_int8_residue_arithmetic_reaches_the_balanced_residue():
    """A NumPy model of the pair kernel's epilogue (:func:`ozhpc.engines.cutile.pair._int8_residue`),
    with and without the FMA contraction of ``fl(y) * fl(1/p) + 1.5 * 2**23``: for every
    modulus and int32 sums across the whole range, one fix-up each way gives the balanced residue."""
    import numpy as np
    from ozhpc.engines import crt
    rng = np.random.default_rng(45)
    acc = np.concatenate([rng.integers(-2**31, 2**31, 200_000), np.arange(-70_000, 70_000),
                          np.arange(2**31 - 70_000, 2**31), np.arange(-2**31, -2**31 + 70_000)]).astype(np.int64)
    magic = np.float32(tile_math.RINT_MAGIC32)
    for p in crt.MODULI:
        lo, hi = crt.balanced_range(p)
        y = (acc >> 16) * (2**16 % p) + (acc & 0xFFFF)
        assert np.abs(y).max() < 2**24                       # exact in float32
        inv = np.float32(1.0) / np.float32(p)
        yf = y.astype(np.float32)
        for t in ((yf * inv) + magic,                                            # two roundings
                  (yf.astype(np.float64) * np.float64(inv) + np.float64(magic)).astype(np.float32)):  # FMA
            r = y - (t.view(np.int32).astype(np.int64) - tile_math.RINT_MAGIC32_BITS) * p
            r = np.where(r > hi, r - p, r)
            r = np.where(r < lo, r + p, r)
            assert np.array_equal(r, np.mod(acc - lo, p) + lo), p
