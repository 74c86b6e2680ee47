"""``ozhpc demo``: gen, gemm (with a report) and check in one directory, each step printed as the
command line that runs it."""
from __future__ import annotations

import os
import shlex
from collections.abc import Callable

from ..errors import InputError
from ..io import h5io


def demo_files(directory: str) -> tuple[str, str, str]:
    """The demo's input file, output file and report under ``directory``."""
    return tuple(os.path.join(directory, name) for name in ("in.h5", "out.h5", "run.json"))


def demo_steps(directory: str, n: int, phi: float, force: bool = False) -> list[list[str]]:
    """The demo's command lines (without ``ozhpc``), files under ``directory``."""
    src, out, report_path = demo_files(directory)
    replace = ["--force"] if force else []
    return [
        ["gen", "--phi", str(phi), "--shape", f"{n}x{n}", "--seed", "1", *replace, f"{src}:/A"],
        ["gen", "--phi", str(phi), "--shape", f"{n}x{n}", "--seed", "2", *replace, f"{src}:/B"],
        ["gemm", f"{src}:/A", f"{src}:/B", "-o", f"{out}:/C", *replace, "--report", report_path],
        ["check", f"{out}:/C", "--a", f"{src}:/A", "--b", f"{src}:/B"],
    ]


def refuse_existing(directory: str, force: bool = False) -> None:
    """Without ``--force`` the demo replaces nothing: any of its outputs that exists already is one
    line (exit 2) before the first step, so no step writes before a later one would refuse; what
    even ``--force`` never replaces (a group at a dataset's path) is refused before it too."""
    src, out, report_path = demo_files(directory)
    for ref in (h5io.DatasetRef(src, "/A"), h5io.DatasetRef(src, "/B"), h5io.DatasetRef(out, "/C")):
        if os.path.lexists(ref.file):
            with h5io.reading(ref.file, "output") as f:
                if not force and f.get(ref.path, getlink=True) is not None:
                    raise InputError(f"output {ref} exists; pass --force to replace the demo's files")
                h5io.target_exists(f, ref, force=True)
    if not force and os.path.lexists(report_path):
        raise InputError(f"report {report_path!r} exists; pass --force to replace the demo's files")


def demo(directory: str, n: int, phi: float, run_command: Callable[[list[str]], int], force: bool = False) -> int:
    """Run the steps through ``run_command`` (argv -> exit status, as ``ozhpc.cli.main``), printing
    each first; the first non-zero status ends the demo and is returned. Without ``force`` an
    output that exists is refused first (InputError), as every command refuses one; with it, a
    group where a dataset goes is refused first."""
    refuse_existing(directory, force)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--dir {directory!r}: cannot create the directory ({exc.strerror})") from None
    for step in demo_steps(directory, n, phi, force):
        print("$ ozhpc " + shlex.join(step))
        code = run_command(step)
        if code:
            return code
    return 0
