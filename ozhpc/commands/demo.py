"""``ozhpc demo``: gen, gemm (with a report) and check in one directory, each step printed as the
command line that runs it."""
from __future__ import annotations

import os
from collections.abc import Callable


def demo_steps(directory: str, n: int, phi: float) -> list[list[str]]:
    """The demo's command lines (without ``ozhpc``), files under ``directory``."""
    src, out = os.path.join(directory, "in.h5"), os.path.join(directory, "out.h5")
    report_path = os.path.join(directory, "run.json")
    return [
        ["gen", "--phi", str(phi), "--shape", f"{n}x{n}", "--seed", "1", "--force", f"{src}:/A"],
        ["gen", "--phi", str(phi), "--shape", f"{n}x{n}", "--seed", "2", "--force", f"{src}:/B"],
        ["gemm", f"{src}:/A", f"{src}:/B", "-o", f"{out}:/C", "--force", "--report", report_path],
        ["check", f"{out}:/C", "--a", f"{src}:/A", "--b", f"{src}:/B"],
    ]


def demo(directory: str, n: int, phi: float, run_command: Callable[[list[str]], int]) -> int:
    """Run the steps through ``run_command`` (argv -> exit status, as ``ozhpc.cli.main``), printing
    each first; the first non-zero status ends the demo and is returned."""
    os.makedirs(directory, exist_ok=True)
    for step in demo_steps(directory, n, phi):
        print("$ ozhpc " + " ".join(step))
        code = run_command(step)
        if code:
            return code
    return 0
