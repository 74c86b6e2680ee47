"""Per-device state of the cuTile launches that need more than their op module's ``launch``: the
pair kernel's hint variants, k panels, grid and index width (cached per shape), the CRT kernel's
variants, and the column parts of the statistics kernels. The other ops are launched through their
module's ``launch`` (a grid costs nothing to recompute)."""
from __future__ import annotations

from . import crt, pair
from .config import TileConfig, cdiv, config_for
from .pair import PAIR_INDEX_FALLBACK, PAIR_KERNELS, fits_int32

STAT_CTAS_PER_SM = 8
"""The row-statistics and count kernels split the columns into parts until their grid has
about this many blocks per SM (each block loops over its part; the engine reduces the parts)."""


class Launcher:
    """Pair and CRT launches and the statistics kernels' column parts for one device; ``stream`` is
    anything ``ct.launch`` takes.

    ``launch_*`` take device arrays (``__cuda_array_interface__``), already validated
    and laid out by the engine: slices (s, rows, k) k-contiguous, accumulators and
    outputs C-contiguous, exponents int32.
    """

    def __init__(self, device: int, capability: tuple[int, int], num_sms: int,
                 config: TileConfig | None = None,
                 occupancy: int | None = None, num_ctas: int | None = None,
                 pair_index: str = "auto"):
        if pair_index != "auto" and pair_index not in PAIR_KERNELS:
            raise ValueError(f"pair_index must be 'auto' or one of {sorted(PAIR_KERNELS)}, "
                             f"got {pair_index!r}")
        self.device = device
        self.capability = tuple(capability)
        self.config = config or config_for(self.capability)
        self.num_sms = num_sms
        self.occupancy = occupancy
        self.num_ctas = num_ctas
        self.pair_index = pair_index
        self.last_pair_index: str | None = None
        self.stat_ctas_per_sm = STAT_CTAS_PER_SM
        self._cache: dict = {}
        hints = {}
        if occupancy is not None:
            hints["occupancy"] = occupancy
        if num_ctas is not None:
            hints["num_ctas"] = num_ctas
        self._pair = {name: k.replace_hints(**hints) if hints else k
                      for name, k in PAIR_KERNELS.items()}
        self._crt = crt.variants(self.config.crt_occupancy)

    def pair_index_for(self, *arrays) -> str:
        """The pair kernel (index width) for these arrays: int32 when they all fit."""
        if self.pair_index != "auto":
            if self.pair_index == "int32" and not all(fits_int32(a) for a in arrays):
                raise ValueError("pair_index='int32' but an array has offsets >= 2**31: "
                                 + ", ".join(f"{a.shape}" for a in arrays))
            return self.pair_index
        return "int32" if all(fits_int32(a) for a in arrays) else PAIR_INDEX_FALLBACK

    def _key(self, name, *arrays):
        return (name, tuple(tuple(a.shape) for a in arrays), tuple(str(a.dtype) for a in arrays),
                self.device, self.capability)

    def launch_pair(self, stream, da, eb, sums, mods, *, diagonal: bool = False,
                    accumulate: bool = False, first_group: int = 0) -> None:
        """``sums[g] (+)= sum_{p+q=first_group+g} da[p] @ eb[q].T`` (int32; ``diagonal``: int8
        residues of ``(sums[g] +) da[g] @ eb[g].T`` modulo ``mods[g, 0]``, ``mods`` (G, MOD_COLS)
        int32, ``first_group`` 0, every modulus in one grid); the caller bounds k.

        One launch per k panel (``config.pair_k_panel``, ``config.diagonal_k_panel``; 0: whole k),
        later panels adding into ``sums``: within a panel the GROUP_M row tiles of A and the B
        tiles they share stay in L2 across the pairs of a group (scheme I).
        Grid and index width are cached per (shapes, strides, dtypes, device, capability).
        """
        cfg = self.config
        k = da.shape[2]
        width = (cfg.diagonal_k_panel if diagonal else cfg.pair_k_panel) or max(k, 1)
        for k0 in range(0, max(k, 1), width):
            a, b = da[:, :, k0:k0 + width], eb[:, :, k0:k0 + width]
            key = self._key("pair", a, b, sums) + (a.strides, b.strides, sums.strides, diagonal)
            entry = self._cache.get(key)
            if entry is None:
                entry = self._cache[key] = (pair.grid(cfg, a.shape[1], b.shape[1], sums.shape[0], diagonal),
                                            self.pair_index_for(a, b, sums))
            grid, index = entry
            self.last_pair_index = index
            pair.launch(stream, self._pair[index], grid, cfg, a, b, sums, mods, first_group,
                        diagonal, accumulate or k0 > 0)

    def column_parts(self, rows: int, cols: int, tile: tuple[int, int], max_tiles: int | None = None) -> int:
        """Column parts for the row-statistics / count kernels: about ``stat_ctas_per_sm``
        blocks per SM, at most one tile per part, at most ``max_tiles`` tiles per part."""
        row_blocks, col_tiles = max(1, cdiv(rows, tile[0])), max(1, cdiv(cols, tile[1]))
        parts = cdiv(self.stat_ctas_per_sm * self.num_sms, row_blocks)
        if max_tiles is not None:
            parts = max(parts, cdiv(col_tiles, max_tiles))
        return max(1, min(parts, col_tiles))

    def launch_crt(self, stream, acc, row_exps, col_exps, tables, c, shift: int, pieces: int) -> None:
        crt.launch(stream, self.config, self._crt, acc, row_exps, col_exps, tables, c, shift, pieces)
