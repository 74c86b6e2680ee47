"""Tile configs of the cuTile kernels per GPU architecture (explicit entries; an unknown one raises)
and the grid helpers every launcher uses."""
from __future__ import annotations

from dataclasses import dataclass

import cuda.tile as ct


@dataclass(frozen=True)
class TileConfig:
    """Tile sizes (and launch shapes) of the kernels for one architecture."""

    split_rows: int
    split_cols: int
    pair_m: int
    pair_n: int
    pair_k: int
    group_m: int
    combine_rows: int
    combine_cols: int
    pair_k_panel: int = 4096
    """k per pair-kernel launch; longer k is summed over launches in the int32 sums (L2 reuse:
    see :meth:`ozhpc.engines.cutile.launcher.Launcher.launch_pair`). 0: the whole k in one launch."""
    diagonal_k_panel: int = 0
    """k per launch of scheme II's products (0: the whole k; later panels add into the int8
    residues). H200, 15 moduli, int8 residues (``bench/speed/pair_sweep.py``, 2026-12-04): whole k
    1.259 / 1.236 POP/s at n = 16384 / 32768, panels of 8192 1.245 / 1.197, of 4096 1.094 / 1.058."""
    pair_launch_groups: int = 0
    """Scheme I groups per pair-kernel launch; 0: all of them (every CTA loops over the groups).
    H200, n = 16384, 7 slices: with k tiles of 128 one group per launch 1221 TOP/s, all 1173;
    with k tiles of 64 1019 / 1010 (2026-12-01)."""
    diagonal_pair_k: int = 0
    """k tile of scheme II's products (0: ``pair_k``). H200, n = 16384, 17 moduli, one product per
    launch, k panels of 8192 (``bench/speed/gpu_gemm.py --tune-diagonal``, 2026-12-01): 256 x 128 x 128
    1221 TOP/s against 1135 with k tiles of 64; 128 x 128 x 128 at occupancy 2 without clusters
    1205; GROUP_M 4 / 16 1100 / 1069; 128 x 256 x 64 1082."""

    diagonal_launch_groups: int = 0
    """At most this many products (moduli) per launch of scheme II's products; 0: as many as keep
    int32 offsets (all at n <= 8192, 7 at 16384, 1 at 32768). The moduli of a launch are the grid's
    slow axis (one (modulus, C tile) per block): 1.268 / 1.238 POP/s at n = 16384 / 32768 on the
    H200 against 1.259 / 1.236 for one product per launch (``bench/speed/pair_sweep.py``, 2026-12-04)."""
    crt_rows: int = 16
    crt_cols: int = 64
    crt_occupancy: int = 4
    """CRT tile and CTAs per SM: the float64 piece sums (4 for 16-17 moduli, up to 7) live in
    registers. CPU AOT, sm_90, 4 pieces: 16 x 64 at occupancy 4 116 registers, 32 x 64 at
    occupancy 1 220, no spills. H200, n = 16384, 17 moduli, 4 pieces (``bench/speed/gpu_gemm.py
    --tune-ozaki2``, 2026-12-01): 8.2 ms at 16 x 64 / occupancy 4, 9.9-10.0 ms at occupancy 2,
    10-11 ms for 8 x 64 and 16 x 32 at occupancy 4, 20.9 ms at 32 x 64 / occupancy 1 (22.4 ms
    there with 7 pieces, before the piece count followed M)."""
    residue_rows: int = 16
    residue_cols: int = 128
    """Residue tile: 32 x 128 (the split's) spills on sm_90 (CPU AOT: 255 registers, 8 B stack),
    16 x 128 needs 149 (C-ordered rows) / 251 (transposed rows) registers and no stack."""

    @property
    def diagonal_k(self) -> int:
        """The k tile of scheme II's products."""
        return self.diagonal_pair_k or self.pair_k


CONFIGS: dict[tuple[int, int], TileConfig] = {
    # H100/H200: 256x128 int8 tiles on a 2-CTA cluster (multicast TMA), occupancy 1, GROUP_M 8,
    # k tiles of 128, k panels of 4096, one group per launch: scheme I 1221 TOP/s at n = 16384
    # (7 slices), against 1173 with all groups per launch and 1010-1019 with k tiles of 64;
    # 128x128x128 at occupancy 2 870, k panels of 8192 965 (bench/speed/gpu_gemm.py --tune, 2026-12-01).
    # Split (and gap-code) tile 8 x 256: 3.30 / 3.45 TB/s on C-ordered / transposed rows at
    # n = 16384, 8 slices (78% / 82% of the 4.23 TB/s copy rate in the same run; 16 x 128
    # 2.97 / 3.19; bench/speed/gpu_gemm.py --tune-split, 2026-12-01).
    (9, 0): TileConfig(split_rows=8, split_cols=256, pair_m=256, pair_n=128, pair_k=128,
                       group_m=8, combine_rows=32, combine_cols=64, pair_launch_groups=1),
    # B200: TileGym's Blackwell GEMM tiles (256x256, 2-CTA clusters) scaled to int8 k.
    (10, 0): TileConfig(split_rows=32, split_cols=128, pair_m=256, pair_n=256, pair_k=128,
                        group_m=8, combine_rows=32, combine_cols=64),
}

PAIR_HINTS = {"occupancy": {"sm_90": 1, "sm_100": 1}, "num_ctas": {"sm_90": 2, "sm_100": 2}}
"""The pair kernels' hints per target (``ct.ByTarget`` keys, no default on purpose): the kernels
and :meth:`ozhpc.engines.cutile_engine.CutileEngine.describe` read this one table."""
PAIR_OCCUPANCY = ct.ByTarget(**PAIR_HINTS["occupancy"])
PAIR_NUM_CTAS = ct.ByTarget(**PAIR_HINTS["num_ctas"])


def config_for(capability: tuple[int, int]) -> TileConfig:
    """The tile config of a compute capability; raises for one not in :data:`CONFIGS`."""
    try:
        return CONFIGS[tuple(capability)]
    except KeyError:
        raise RuntimeError(
            f"no cuTile tile config for compute capability {capability[0]}.{capability[1]}; "
            f"known: {', '.join(f'{a}.{b}' for a, b in CONFIGS)}") from None


def tile_grid(rows: int, cols: int, tile_rows: int, tile_cols: int) -> tuple[int, int, int]:
    """One block per (tile_rows, tile_cols) tile of a rows x cols array."""
    return (cdiv(rows, tile_rows), cdiv(cols, tile_cols), 1)


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints."""
    return -(-a // b)
