"""Registers, spills and key instructions of every launched cuTile kernel, compiled ahead of
time on the CPU (no GPU needed): a quick check before spending device time on a kernel change.

Needs ``cuda-tile[tileiras]`` and the CUDA binary utilities (cuobjdump, nvdisasm) on PATH::

    pip install "cuda-tile[tileiras]==1.7.0" "nvidia-cuda-cuobjdump==13.4.*" "nvidia-cuda-nvdisasm==13.4.*"
    export PATH=$(python3 -c "import nvidia, os; print(os.path.join(nvidia.__path__[0], 'cu13', 'bin'))"):$PATH
    python3 bench/speed/kernel_resources.py [--arch sm_90] [--kernels count row_summary] [--sass DIR]

Signatures are those of ``tests/test_cutile_typecheck.py`` (what the engine launches), with the
facts ``ct.launch`` infers for the engine's large arrays when they are 16-aligned (strides but the
last and the last two extents divisible by 16 bytes / 16: :data:`LARGE_ARRAYS`), as for n = 16384.
``--no-jit-facts`` leaves them out: what a shape not a multiple of 16 gets (for the split: 8-byte
loads, byte stores and a barrier per stored element instead of 16-byte loads and stores).
Columns: registers per thread, stack bytes (spills), and counts of TMA loads/stores
(UTMALDG/UTMASTG), warpgroup integer MMAs (IGMMA / HGMMA on sm_90) and shuffles (SHFL).
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import REPO, parser  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests"))

PATTERNS = {"TMA ld": r"UTMALDG", "TMA st": r"UTMASTG", "GMMA": r"[IH]GMMA", "SHFL": r"SHFL",
            "LDG": r"\bLDG", "STG": r"\bSTG"}


def resources(cubin: pathlib.Path) -> tuple[int, int]:
    out = subprocess.run(["cuobjdump", "-res-usage", str(cubin)], capture_output=True, text=True,
                         check=True).stdout
    reg = re.search(r"REG:(\d+)", out)
    stack = re.search(r"STACK:(\d+)", out)
    return int(reg.group(1)) if reg else -1, int(stack.group(1)) if stack else -1


def sass_counts(cubin: pathlib.Path) -> tuple[dict, str]:
    sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    return {k: len(re.findall(p, sass)) for k, p in PATTERNS.items()}, sass


LARGE_ARRAYS = {"split": (0, 1, 2), "gaps": (0, 1, 2), "residue": (0, 1, 3), "pair": (0, 1, 2),
                "pair_int64": (0, 1, 2), "combine": (0, 1, 2, 3), "crt": (0, 1, 2, 6),
                "row_summary": (0,), "count": (0,), "gaussian_residue": (0, 1, 3), "gaussian_crt": (0, 1, 2, 7)}
"""Parameters that are the engine's large, 16-aligned arrays (matrices, padded slices and
exponents), per kernel; the small tables (moduli, limits, per-part statistics) get no facts."""
COMPLEX_LAYOUT = {"gaussian_residue": 0, "gaussian_crt": 7}
"""The parameter held as float64 ``(rows, cols, 2)`` (a complex128 matrix's layout), per kernel: its
last extent is 2, its other two extents and strides are 16-aligned."""


def jit_like(name, sig):
    """``sig`` with the divisibility facts ``ct.launch`` infers for the large 16-aligned arrays."""
    import dataclasses
    from cuda.tile import compilation

    def facts(p):
        per16 = 128 // p.dtype.bitwidth          # elements per 16 bytes
        return dataclasses.replace(p, stride_divisible_by=(per16,) * (p.ndim - 1) + (1,),
                                   shape_divisible_by=(1,) * max(0, p.ndim - 2) + (16,) * min(p.ndim, 2))
    def complex_facts(p):
        return dataclasses.replace(p, stride_divisible_by=(2, 2, 1), shape_divisible_by=(16, 16, 1))
    large = LARGE_ARRAYS.get(name, ())
    return dataclasses.replace(sig, parameters=[
        (complex_facts(p) if i == COMPLEX_LAYOUT.get(name) else facts(p))
        if i in large and isinstance(p, compilation.ArrayConstraint) else p
        for i, p in enumerate(sig.parameters)])


def main(argv=None) -> int:
    from cuda.tile import compilation
    from ozhpc.engines import cutile as ck
    from test_cutile_typecheck import _signatures

    p = parser(__doc__)
    p.add_argument("--arch", default="sm_90", help="GPU code (sm_90, sm_100)")
    p.add_argument("--kernels", nargs="*", default=sorted(ck.KERNELS), help="kernel names (ozhpc.engines.cutile.KERNELS)")
    p.add_argument("--sass", type=pathlib.Path, help="also write each signature's SASS into this folder")
    p.add_argument("--no-jit-facts", action="store_true", help="the bare test signatures (no divisibility facts)")
    args = p.parse_args(argv)
    capability = (int(args.arch[3:-1]), int(args.arch[-1]))
    sigs = _signatures(ck.config_for(capability))
    print(f"| kernel | signature | registers | stack B | " + " | ".join(PATTERNS) + " |")
    print("|---|---|---|---|" + "---|" * len(PATTERNS))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.kernels:
            for i, sig in enumerate(sigs[name]):
                cubin = pathlib.Path(tmp) / f"{name}_{i}.cubin"
                with open(cubin, "wb") as f:
                    compilation.export_kernel(ck.KERNELS[name], [sig if args.no_jit_facts else jit_like(name, sig)],
                                              f, gpu_code=args.arch,
                                              output_format="cubin")
                reg, stack = resources(cubin)
                counts, sass = sass_counts(cubin)
                if args.sass:
                    args.sass.mkdir(parents=True, exist_ok=True)
                    (args.sass / f"{name}_{i}.sass").write_text(sass)
                print(f"| {name} | {i} | {reg} | {stack} | " + " | ".join(str(v) for v in counts.values()) + " |",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
