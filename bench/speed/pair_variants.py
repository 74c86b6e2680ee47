"""Variants of scheme II's diagonal pair kernel for the product-rate sweep (``bench/speed/pair_sweep.py``).

Each variant computes what the production kernel computes (``ozhpc.engines.cutile.pair``,
``DIAGONAL``): ``S[g] = balanced((S[g] +) DA[g] @ EB[g]^T mod p_g)`` as int8, for every g of the
launch, reusing the production helpers (tile order, int8 residue epilogue), so the sweep compares
only the loop structure and the hints:

* ``tiles``: one (modulus, C tile) per block, the moduli of a launch in one grid (modulus-major);
* ``persistent``: a grid of about one block per SM (cluster), each looping over (modulus, tile)
  pairs with stride ``num_blocks`` (TileGym's static persistent GEMM): the producer warp can
  prefetch the next tile while the consumers run the epilogue of this one.

Compiled on the CPU (``python3 bench/speed/pair_variants.py``: registers, spills, TMA, warpgroup MMAs
of every variant via ``bench/speed/kernel_resources.py``'s helpers) before any GPU time is spent.
"""
from __future__ import annotations

import pathlib
import sys

import cuda.tile as ct

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # bench/: common (and this checkout's ozhpc)
from common import parser  # noqa: E402
from ozhpc.engines.cutile.pair import MOD_COLS, _int8_residue, _swizzle  # noqa: E402
from ozhpc.engines.cutile.tile_math import ZERO, ConstBool, ConstInt  # noqa: E402

VARIANTS = {
    # the production path (CutileEngine._pair_sums): 256x128x128 on 2-CTA clusters, whole k, one
    # (modulus, tile) per block with every modulus of a launch in one grid (as many as int32 allows)
    "base": dict(engine={}),
    "single": dict(engine=dict(diagonal_launch_groups=1)),        # one product per launch
    "single_panel8192": dict(engine=dict(diagonal_launch_groups=1, diagonal_k_panel=8192)),   # 2026-12-02's plan
    "base_panel4096": dict(engine=dict(diagonal_k_panel=4096)),
    # the variants of this module (2026-12-04 sweep; "base" then was single_panel8192 with
    # the kernel that looped over the moduli of a launch, "base_wholek" the same with whole k):
    # one (modulus, tile) per block, the moduli of a launch in one grid
    "tiles": dict(m=256, n=128, k=128),
    "tiles_wholek": dict(m=256, n=128, k=128, panel=0),
    "tiles_k256": dict(m=256, n=128, k=256),
    "tiles_lat4": dict(m=256, n=128, k=128, lat=4),
    "tiles_w8": dict(m=256, n=128, k=128, warps=8),
    "tiles_w8_wholek": dict(m=256, n=128, k=128, warps=8, panel=0),
    # persistent: one block per cluster, looping over (modulus, tile)
    "persist": dict(m=256, n=128, k=128, body="persistent"),
    "persist_wholek": dict(m=256, n=128, k=128, body="persistent", panel=0),
    "persist_k256": dict(m=256, n=128, k=256, body="persistent"),
    "persist_w8": dict(m=256, n=128, k=128, body="persistent", warps=8),
    "persist_w8_wholek": dict(m=256, n=128, k=128, body="persistent", warps=8, panel=0),
    "persist_w8_k256": dict(m=256, n=128, k=256, body="persistent", warps=8),
    "persist_w8_2waves": dict(m=256, n=128, k=128, body="persistent", warps=8, waves=2),
    "persist_128_occ2": dict(m=128, n=128, k=128, body="persistent", occ=2, ctas=1),
    # every modulus in one launch: int32-indexed views of more than 2**31 elements in all
    "tiles_big": dict(m=256, n=128, k=128, big=True),
    "persist_w8_big": dict(m=256, n=128, k=128, body="persistent", warps=8, big=True),
}


def _tile(DA, EB, S, MODS, g, bm, bn, ktiles, TM: ConstInt, TN: ConstInt, TK: ConstInt,
          ACCUMULATE: ConstBool, LAT: ConstInt):
    if ACCUMULATE:
        acc = ct.load(S, (g, bm, bn), (1, TM, TN), padding_mode=ZERO).reshape((TM, TN)).astype(ct.int32)
    else:
        acc = ct.zeros((TM, TN), ct.int32)
    for kt in range(ktiles):
        if LAT > 0:
            a = ct.load(DA, (g, bm, kt), (1, TM, TK), padding_mode=ZERO, latency=LAT).reshape((TM, TK))
            b = ct.load(EB, (g, kt, bn), (1, TK, TN), order=(0, 2, 1), padding_mode=ZERO,
                        latency=LAT).reshape((TK, TN))
        else:
            a = ct.load(DA, (g, bm, kt), (1, TM, TK), padding_mode=ZERO).reshape((TM, TK))
            b = ct.load(EB, (g, kt, bn), (1, TK, TN), order=(0, 2, 1), padding_mode=ZERO).reshape((TK, TN))
        acc = ct.mma(a, b, acc)
    res = _int8_residue(acc, ct.load(MODS, (g, 0), (1, MOD_COLS)))
    ct.store(S, (g, bm, bn), res.reshape((1, TM, TN)))


def _tiles_body(DA, EB, S, MODS, TM, TN, TK, GROUP_M, ACCUMULATE, LAT):
    num_m = ct.cdiv(DA.shape[1], TM)
    num_n = ct.cdiv(EB.shape[1], TN)
    tiles = num_m * num_n
    ktiles = ct.cdiv(DA.shape[2], TK)
    t = ct.bid(0)
    g = t // tiles
    bm, bn = _swizzle(t - g * tiles, num_m, num_n, GROUP_M)
    _tile(DA, EB, S, MODS, g, bm, bn, ktiles, TM, TN, TK, ACCUMULATE, LAT)


def _persistent_body(DA, EB, S, MODS, TM, TN, TK, GROUP_M, ACCUMULATE, LAT):
    num_m = ct.cdiv(DA.shape[1], TM)
    num_n = ct.cdiv(EB.shape[1], TN)
    tiles = num_m * num_n
    ktiles = ct.cdiv(DA.shape[2], TK)
    for t in range(ct.bid(0), tiles * S.shape[0], ct.num_blocks(0)):
        g = t // tiles
        bm, bn = _swizzle(t - g * tiles, num_m, num_n, GROUP_M)
        _tile(DA, EB, S, MODS, g, bm, bn, ktiles, TM, TN, TK, ACCUMULATE, LAT)


def _make(body, **hints):
    def kernel(DA, EB, S, MODS, TM: ConstInt, TN: ConstInt, TK: ConstInt, GROUP_M: ConstInt,
               ACCUMULATE: ConstBool, LAT: ConstInt):
        body(DA, EB, S, MODS, TM, TN, TK, GROUP_M, ACCUMULATE, LAT)
    kernel.__name__ = kernel.__qualname__ = f"pair_{body.__name__.strip('_').split('_')[0]}_" + \
        "_".join(f"{k}{v}" for k, v in hints.items())
    return ct.kernel(kernel, **hints)


BODIES = {"tiles": _tiles_body, "persistent": _persistent_body}


def kernel(body: str, occupancy: int = 1, num_ctas: int = 2, num_worker_warps: int | None = None):
    """The variant kernel (cached per hints: one JIT cache each)."""
    key = (body, occupancy, num_ctas, num_worker_warps)
    if key not in _KERNELS:
        hints = dict(occupancy=occupancy, num_ctas=num_ctas)
        if num_worker_warps:
            hints["num_worker_warps"] = num_worker_warps
        _KERNELS[key] = _make(BODIES[body], **hints)
    return _KERNELS[key]


_KERNELS: dict = {}


def launch(stream, v: dict, da, eb, out, mods, accumulate: bool, num_sms: int) -> None:
    """One launch of variant ``v`` over all moduli of ``da``, ``eb`` (views whose offsets fit int32)."""
    g, m, n = out.shape
    tiles = -(-m // v["m"]) * -(-n // v["n"])
    k = kernel(v.get("body", "tiles"), v.get("occ", 1), v.get("ctas", 2), v.get("warps"))
    blocks = tiles * g
    if v.get("body") == "persistent":
        blocks = min(blocks, num_sms // v.get("ctas", 2) * v.get("occ", 1) * v.get("waves", 1))
    ct.launch(stream, (blocks,), k, (da, eb, out, mods, v["m"], v["n"], v["k"], v.get("group", 8),
                                     bool(accumulate), int(v.get("lat", 0))))


def _signature(v: dict):
    from cuda.tile import compilation as C

    def arr(dtype, per16):
        return C.ArrayConstraint(dtype, 3, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                                 may_alias_internally=False, stride_constant=(None, None, 1),
                                 base_addr_divisible_by=16, stride_divisible_by=(per16, per16, 1),
                                 shape_divisible_by=(1, 16, 16))
    mods = C.ArrayConstraint(ct.int32, 2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                             may_alias_internally=False, stride_constant=(None, 1), base_addr_divisible_by=16)
    return C.KernelSignature([arr(ct.int8, 16), arr(ct.int8, 16), arr(ct.int8, 16), mods, v["m"], v["n"], v["k"],
                              v.get("group", 8), v.get("acc", False), v.get("lat", 0)],
                             C.CallingConvention.cutile_python_v2())


def main() -> int:
    import tempfile

    from cuda.tile import compilation
    from kernel_resources import resources, sass_counts

    p = parser("CPU AOT of the sweep's variants (sm_90): registers, spills, SASS counts.")
    p.add_argument("names", nargs="*")
    p.add_argument("--sass", type=pathlib.Path)
    args = p.parse_args()
    print("| variant | acc | registers | stack B | TMA ld | TMA st | GMMA | threads |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, v in VARIANTS.items():
            if args.names and name not in args.names or v.get("engine"):
                continue
            for acc in (False, True):
                v2 = dict(v, acc=acc)
                cubin = pathlib.Path(tmp) / f"{name}_{acc}.cubin"
                try:
                    with open(cubin, "wb") as f:
                        compilation.export_kernel(kernel(v.get("body", "tiles"), v.get("occ", 1), v.get("ctas", 2),
                                                         v.get("warps")),
                                                  [_signature(v2)], f, gpu_code="sm_90", output_format="cubin")
                except Exception as exc:
                    print(f"| {name} | {acc} | FAIL {type(exc).__name__}: {str(exc)[:150]} |", flush=True)
                    continue
                reg, stack = resources(cubin)
                counts, sass = sass_counts(cubin)
                import re
                import subprocess
                elf = subprocess.run(["cuobjdump", "-elf", str(cubin)], capture_output=True, text=True).stdout
                ntid = re.search(r"\.reqntid (\d+)|REQNTID[^\n]*?(\d+)", elf)
                if args.sass:
                    args.sass.mkdir(parents=True, exist_ok=True)
                    (args.sass / f"{name}_{acc}.sass").write_text(sass)
                print(f"| {name} | {acc} | {reg} | {stack} | {counts['TMA ld']} | {counts['TMA st']} | "
                      f"{counts['GMMA']} | {ntid.group(1) or ntid.group(2) if ntid else '?'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    raise SystemExit(main())
