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

from ozhpc.engines import cutile_kernels as ck  # noqa: E402
from ozhpc.engines.base import group_product_bound  # noqa: E402

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
    pair = [_sig([_array(ct.int8, 3, big), _array(ct.int8, 3, big), _array(ct.int32, 3, big),
                  cfg.pair_m, cfg.pair_n, cfg.pair_k, cfg.group_m, latency])
            for latency in sorted({cfg.pair_latency, 0, 4})]
    combine = [_sig([_array(acc_dtype, 3, big), _array(ct.int32, 1), _array(ct.int32, 1),
                     _array(ct.float64, 2), cfg.combine_rows, cfg.combine_cols])
               for acc_dtype in (ct.float64, ct.int32)]
    return {"split": split, "pair": pair, "combine": combine}


@pytest.mark.parametrize("gpu_code", GPU_CODES)
@pytest.mark.parametrize("name", sorted(ck.KERNELS))
def test_kernel_exports(name, gpu_code):
    capability = (int(gpu_code[3:-1]), int(gpu_code[-1]))
    sigs = _signatures(ck.config_for(capability))[name]
    buf = io.BytesIO()
    compilation.export_kernel(ck.KERNELS[name], sigs, buf, gpu_code=gpu_code,
                              output_format="tileir_bytecode", bytecode_version=BYTECODE)
    assert buf.getvalue(), f"{name}: empty bytecode for {gpu_code}"


def test_config_table_is_explicit():
    assert (9, 0) in ck.CONFIGS and (10, 0) in ck.CONFIGS
    with pytest.raises(RuntimeError, match="no cuTile tile config"):
        ck.config_for((7, 5))


def test_tiles_are_powers_of_two_and_k_bound_holds():
    for cfg in ck.CONFIGS.values():
        for v in (cfg.split_rows, cfg.split_cols, cfg.pair_m, cfg.pair_n, cfg.pair_k,
                  cfg.combine_rows, cfg.combine_cols):
            assert v > 0 and v & (v - 1) == 0
        # one pair over one k-tile always fits an int32 accumulator
        assert cfg.pair_k * ck.DIGIT_MAX**2 < 2**31
    assert ck.K_PAIR_LIMIT * ck.DIGIT_MAX**2 < 2**31 <= (ck.K_PAIR_LIMIT + 1) * ck.DIGIT_MAX**2


def test_k_chunk_keeps_int32_exact():
    for s in (1, 6, 8, 12, 24):
        for d in (1, s, 2 * s - 1):
            kc = ck.k_chunk(s, d)
            assert kc % 16 == 0
            assert kc * group_product_bound(s, d) < 2**31
            assert ck.k_chunk(s, d, k_limit=300) == max(16, 300 // ck.widest_group(s, d) // 16 * 16)
    assert ck.k_chunk(8, 8) >= 32768      # one chunk at n = 32768 with the triangle
    assert ck.k_chunk(7, 7) >= 32768


def test_group_product_bound_is_the_largest_group_of_digit_products():
    for s in range(1, 13):
        for d in range(1, 2 * s):
            want = max(sum((127 if p == 0 else 64) * (127 if q == 0 else 64)
                           for p in range(s) for q in range(s) if p + q == g) for g in range(d))
            assert group_product_bound(s, d) == want
