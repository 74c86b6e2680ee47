"""``ozhpc gemm`` and ``ozhpc run``: one product from HDF5 to HDF5 (:func:`ozhpc.run.runner.execute`),
from a :class:`~ozhpc.run.config.RunConfig` or from a TOML job file."""
from __future__ import annotations

import os

from ..run.config import RunConfig
from ..run.jobfile import load_job
from ..run.runner import execute
from . import world


def use_cache_dir(cache_dir: str | None) -> None:
    """--cache-dir for this process, before any engine imports cuda.tile (the runner applies it)."""
    from ..engines.toolchain import CACHE_ENV

    if cache_dir:
        os.environ[CACHE_ENV] = cache_dir


def gemm(cfg: RunConfig, comm=None, cache_dir: str | None = None) -> dict:
    """Run ``cfg``; returns the run report (every rank)."""
    use_cache_dir(cache_dir)
    return execute(cfg, comm=comm)


def run(job: str, comm=None, *, force: bool | None = None, report: str | None = None, progress: str | None = None,
        accuracy: str | None = None, cache_dir: str | None = None, dry_run: bool = False) -> tuple[dict, str | None]:
    """Run the job file ``job`` (the arguments, when given, override its keys; ``dry_run``: check
    it and state its plan and memory, as ``gemm --dry-run``); returns the run report and where it
    was written (None for a dry run, which writes nothing)."""
    use_cache_dir(cache_dir)
    cfg = load_job(job, comm=world(comm), force=force, report=report, progress=progress, accuracy=accuracy,
                   dry_run=dry_run or None)
    return execute(cfg, comm=comm), None if dry_run else cfg.report
