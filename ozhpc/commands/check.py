"""``ozhpc check``: the exact error of a stored C on sampled entries (:mod:`ozhpc.run.check`), and its
statistics in words or JSON."""
from __future__ import annotations

from types import SimpleNamespace

from ..io.h5io import DatasetRef
from ..run.check import run_check
from ..run.report import to_json
from . import world


def check(result: DatasetRef, a: DatasetRef, b: DatasetRef, *, c: DatasetRef | None = None, alpha: float = 1.0,
          beta: float = 0.0, transa: bool = False, transb: bool = False, samples: int = 64, seed: int = 0,
          fingerprint: bool = False, comm=None) -> dict:
    """The statistics of C = alpha op(A) op(B) + beta C0 (collective over ``comm``; the same on
    every rank). :func:`ozhpc.run.check.failures` says whether C passes."""
    options = SimpleNamespace(result=result, a=a, b=b, c=c, alpha=alpha, beta=beta, transa=transa,
                              transb=transb, samples=samples, seed=seed, fingerprint=fingerprint)
    return run_check(options, world(comm))


def check_lines(stats: dict, alpha: float = 1.0, beta: float = 0.0, as_json: bool = False) -> list[str]:
    """What ``ozhpc check`` prints on stdout for ``stats``."""
    if as_json:
        return [to_json(stats, indent=2)]
    scale = "|alpha||A||B| + |beta||C0|" if (alpha, beta) != (1.0, 0.0) else "|A||B|"
    inside = stats["samples"] - stats["outside_bound"]
    lines = [f"{stats['samples']} entries checked exactly; error = |C - exact| / ({scale})",
             f"  ozhpc : max {stats['max_rel_error']:.3e}  median {stats['median_rel_error']:.3e}",
             f"  native: max {stats['native_max_rel_error']:.3e}  median {stats['native_median_rel_error']:.3e}"
             "  (the FP64 dot of the same row and column)",
             f"  ozhpc max / native max = {stats['ratio_to_native']:.3g}",
             f"  bound {stats['bound']:.3e} ((k+2)u, any FP64 GEMM's worst case): {inside} of "
             f"{stats['samples']} entries within"]
    if "fingerprint" in stats:
        match = {None: "no ozhpc_fingerprint attribute to compare", True: "matches its attribute",
                 False: "DIFFERS from its attribute"}[stats["fingerprint_matches"]]
        lines.append(f"  fingerprint {stats['fingerprint']}: {match}")
    return lines
