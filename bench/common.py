"""What every benchmark script shares: its parser, the inputs, the exact references, CUDA-event
timing, result files and the mpiexec line. A script finds this module with one line,
``sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))``; importing it puts this
checkout's ``ozhpc`` first on the path, so a script measures the code beside it."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys

REPO = str(pathlib.Path(__file__).resolve().parents[1])
if REPO not in sys.path:
    sys.path.insert(0, REPO)


# -- the command line -----------------------------------------------------------------------------

def parser(doc: str) -> argparse.ArgumentParser:
    """A script's parser with its module docstring as the help text (usage lines kept as written)."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


# -- inputs ---------------------------------------------------------------------------------------

def phi_matrix(xp, rs, shape, phi: float):
    """``(rand - 0.5) * exp(phi * randn)`` drawn from ``rs`` (NumPy or CuPy ``RandomState``), in place:
    the standard matrices' recipe with one temporary of the matrix's size."""
    a = rs.random_sample(shape, dtype=xp.float64)
    a -= 0.5
    e = rs.standard_normal(shape, dtype=xp.float64)
    e *= phi
    xp.exp(e, out=e)
    a *= e
    return a


def make_inputs(cp, n: int, phi: float, seed: int):
    """Square A and B of order n on the GPU, both from one stream of ``seed``."""
    rs = cp.random.RandomState(seed)
    a = phi_matrix(cp, rs, (n, n), phi)
    return a, phi_matrix(cp, rs, (n, n), phi)


# -- exact references -----------------------------------------------------------------------------

def sample_indices(n: int, count: int, seed: int) -> list[tuple[int, int]]:
    """``count`` entries (i, j) of an n x n C, drawn with ``seed``."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return [(int(i), int(j)) for i, j in zip(rng.integers(0, n, count), rng.integers(0, n, count))]


def reference(cp, a, b, idx) -> list[tuple]:
    """The exact value (a Fraction) and ``(|A||B|)_ij`` of each sampled entry."""
    import numpy as np

    from ozhpc.run.reference import exact_dot
    out = []
    for i, j in idx:
        row, col = cp.asnumpy(a[i, :]), cp.asnumpy(b[:, j])
        out.append((exact_dot(row, col), float(np.abs(row) @ np.abs(col))))
    return out


def sampled_error(cp, c, idx, ref) -> float:
    """``max |C_ij - exact_ij| / (|A||B|)_ij`` over the sampled entries."""
    from fractions import Fraction
    vals = cp.asnumpy(c[tuple(zip(*idx))]) if idx else []
    return max((float(abs(Fraction(float(v)) - ex)) / absab for v, (ex, absab) in zip(vals, ref)), default=0.0)


# -- timing ---------------------------------------------------------------------------------------

def time_events(cp, fn, reps: int, warm: bool = True) -> float:
    """Median seconds of ``fn()`` over ``reps`` runs between CUDA events (one warm-up run first
    unless the caller has warmed it up)."""
    if warm:
        fn()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


# -- result files ---------------------------------------------------------------------------------

def markdown_table(header: list[str], rows: list[list]) -> list[str]:
    """``header`` and ``rows`` as the lines of a Markdown table."""
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows])


def cpu_run_line(command: str) -> str:
    """Date, machine, NumPy and the command, as the opening lines of a CPU result file."""
    import numpy as np
    return (f"Date: {datetime.date.today()}, machine: {platform.node()} ({os.cpu_count()}-core CPU, "
            f"{platform.machine()}), NumPy {np.__version__}, engine numpy.\nCommand: `{command}`\n\n")


def command_line(argv=None) -> str:
    """How this script was called (``argv``: its arguments when ``main`` got them), as a result file
    quotes it."""
    return "python3 " + " ".join([os.path.relpath(sys.argv[0], REPO)] + list(sys.argv[1:] if argv is None else argv))


def write_cpu_markdown(path: str | None, title: str, table: list[str], intro: str = "", trailer: str = "",
                       argv=None) -> None:
    """A CPU result file at ``path``: the title, the run line (date, machine, command), ``intro``,
    the table's lines and ``trailer``; nothing without a path."""
    if path:
        with open(path, "w") as fh:
            fh.write(f"# {title}\n\n{cpu_run_line(command_line(argv))}{intro}" + "\n".join(table) + "\n" + trailer)


def write_result(out: str | None, markdown: str | None = None, data=None) -> None:
    """``OUT.md`` (when there is Markdown) and ``OUT.json`` (when there is data); nothing without OUT."""
    if not out:
        return
    if markdown is not None:
        with open(out + ".md", "w") as fh:
            fh.write(markdown if markdown.endswith("\n") else markdown + "\n")
    if data is not None:
        with open(out + ".json", "w") as fh:
            json.dump(data, fh, indent=1, default=str)


# -- MPI jobs -------------------------------------------------------------------------------------

def mpiexec_cmd(ranks: int) -> list[str]:
    """mpiexec with the flags this MPI needs (Open MPI refuses root without --allow-run-as-root)."""
    exe = shutil.which("mpiexec") or "mpiexec"
    cmd = [exe, "-n", str(ranks)]
    try:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    if ("Open MPI" in version or "OpenRTE" in version) and hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def useful(stderr: str, limit: int = 4000) -> str:
    """stderr without Open MPI's run-as-root / exit banners (tracebacks stay)."""
    keep = [x for x in stderr.splitlines() if not x.startswith("-----") and "root" not in x.lower()
            and x.strip() and "mpiexec" not in x and "Process name" not in x and "Exit code" not in x]
    return "\n".join(keep)[-limit:]
