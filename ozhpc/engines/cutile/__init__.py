"""cuTile kernels of the Ozaki schemes, one op per module, bitwise equal to the NumPy engine.

Each op module holds, in TileGym's order, its constants, its ``@stored_kernel`` (a ``ct.kernel``
kept in :mod:`ozhpc.engines.kernel_store`) and a ``launch`` that computes the grid:

* :mod:`.split` -- scheme I's digit slices; :mod:`.residues` -- scheme II's residues;
* :mod:`.pair` -- the int8 pair GEMM of both schemes (and the host's k chunks and index width);
* :mod:`.combine` -- scheme I's FP64 combine; :mod:`.crt` -- scheme II's CRT reconstruction;
* :mod:`.row_summary` -- the scales, the inf/NaN counts and the row sizes of whole rows in one
  pass; :mod:`.gaps`, :mod:`.count` -- the "auto" statistic's gap codes and counts;
* :mod:`.gaussian_residues`, :mod:`.gaussian_crt` -- complex scheme II's residue planes and its
  two-component CRT (its products are :mod:`.pair`'s).

Shared: :mod:`.config` (tile configs per architecture, grids), :mod:`.tile_math` (exact powers of
two, ``ldexp``, ``rint``, row tiles, scheme II's constant table), :mod:`.ieee` (NumPy's rounding for
any finite value, products kept out of FMAs: the statistics), :mod:`.launcher` (per device:
hint variants, the pair kernel's grid and index width cached per shape). The checks and the
layout (padding, contiguity, workspaces) are the engine's, :mod:`ozhpc.engines.cutile_engine`.

The package needs only ``cuda.tile``: no CuPy, no GPU, so CI type-checks every kernel
(tests/test_cutile_typecheck.py). Every op's numerics are argued in its module docstring.
"""
from __future__ import annotations

from .config import CONFIGS, PAIR_HINTS, TileConfig, config_for  # noqa: F401
from .count import COUNT_FIELD_BITS, COUNT_FIELD_MASK, COUNT_MAX_FIELDS, COUNT_MAX_TILES, COUNT_TILE  # noqa: F401
from .crt import CRT_GROUP, CRT_WIDE_PIECES  # noqa: F401
from .gaps import GAP_COLS  # noqa: F401
from .launcher import Launcher  # noqa: F401
from .pair import (INT32_INDEX_LIMIT, K_PAIR_LIMIT, MOD_COLS, PAIR_INDEX_FALLBACK,  # noqa: F401
                   fits_int32, k_chunk, widest_group)
from .residues import FLOAT32_RESIDUE_BITS  # noqa: F401
from .row_summary import SUMMARY_TILE  # noqa: F401
from .tile_math import LIMB_BITS, LIMB_COL, MP_COLS, TABLE_COLS, WEIGHT_COL  # noqa: F401
from . import combine, count, crt, gaps, gaussian_crt, gaussian_residues, pair, residues, row_summary, split

KERNELS = {
    "split": split._split_kernel,
    "pair": pair._pair_kernel,
    "pair_int64": pair._pair_kernel_int64,
    "combine": combine._combine_kernel,
    "residue": residues._residue_kernel,
    "crt": crt._crt_kernel,
    "gaps": gaps._gap_kernel,
    "count": count._count_kernel,
    "gaussian_residue": gaussian_residues._gaussian_residue_kernel,
    "gaussian_crt": gaussian_crt._gaussian_crt_kernel,
    "row_summary": row_summary._row_summary_kernel,
}
"""Every kernel of the package by name (the type-check test and ``bench/speed/kernel_resources.py``)."""
