"""``ozhpc warmup``: compile the cuTile kernels ahead of time into the node's kernel cache.

The cutile engine compiles each kernel variant on its first launch (tileiras: seconds per
variant). Run once per node (or once per shared cache directory) before the jobs: it runs
small products through the same SUMMA path as ``ozhpc gemm`` on one rank, for both schemes,
"auto" (the data statistic) and fixed accuracy, and with inf/NaN (the special-value kernels).
Padded shapes make the variants independent of the matrix size, so small products suffice.
"""
from __future__ import annotations

import time

import numpy as np

CASES = (
    ("ozaki1", {}), ("ozaki1", {"slices": 7}),
    ("ozaki2", {}), ("ozaki2", {"bits": 53}),
    ("ozaki1", {"nonfinite": True}), ("ozaki2", {"nonfinite": True}),
)


def operands(m: int, k: int, n: int, nonfinite: bool):
    from .matrices import standard_matrix

    a, b = standard_matrix(m, k, 0.5, 1), standard_matrix(k, n, 0.5, 2)
    if nonfinite:
        a[1, 2], b[3, 1] = np.inf, np.nan
    return a, b


def warm(engine, shape=(250, 300, 270), log=print) -> list[tuple[str, float]]:
    """Run every case of :data:`CASES` once on ``engine``; returns (case, seconds) pairs."""
    from mpi4py import MPI

    from .parallel import ProcessGrid, dist_gemm

    out = []
    with ProcessGrid(MPI.COMM_SELF) as grid:
        for scheme, opts in CASES:
            opts = dict(opts)
            a, b = operands(*shape, opts.pop("nonfinite", False))
            t0 = time.perf_counter()
            dist_gemm(grid, a, b, block=128, engine=engine, scheme=scheme, **opts)
            engine.synchronize()
            name = f"{scheme} {' '.join(f'{k}={v}' for k, v in opts.items()) or 'auto'}" + \
                (" inf/nan" if not np.isfinite(a).all() else "")
            out.append((name, time.perf_counter() - t0))
            log(f"  {name}: {out[-1][1]:.1f} s")
    return out


def run_warmup(cache: str | None = None, log=print) -> int:
    """The command: 0 when compiled (or nothing to do: no GPU engine here, said in one line)."""
    from .engines import EngineUnavailable, get_engine
    from .engines.toolchain import configure_cache, describe

    path = configure_cache(cache)
    try:
        engine = get_engine("cutile")
    except EngineUnavailable as exc:
        log(f"ozhpc warmup: nothing to compile, the cutile engine cannot run here ({exc})")
        return 0
    log(f"ozhpc warmup: {describe()}")
    t0 = time.perf_counter()
    warm(engine, log=log)
    log(f"ozhpc warmup: kernels compiled in {time.perf_counter() - t0:.1f} s into {path} "
        "(a second run only loads them)")
    return 0
