"""The README's "Use" block runs as written, top to bottom, in a fresh directory (small shapes)."""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.mpi
SMALL = {"1024x1024": "64x64", "256x192": "48x40", "192x128": "40x32"}
SKIP = ("sbatch ",)  # needs Slurm and a GPU


def use_block() -> list[str]:
    """The command lines of the first ```bash block under "## Use" (comments dropped)."""
    text = open(os.path.join(REPO, "README.md")).read()
    section = text.split("\n## Use\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def shim(bin_dir) -> None:
    """An ``ozhpc`` command on PATH that runs this checkout (as ``pip install .`` would)."""
    path = bin_dir / "ozhpc"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -m ozhpc \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not found (pip install mpich)")
def test_readme_use_block_runs(tmp_path):
    lines = use_block()
    assert any(line.startswith("ozhpc run jobs/demo.toml") for line in lines)
    work, bin_dir = tmp_path / "clone", tmp_path / "bin"
    bin_dir.mkdir()
    shim(bin_dir)
    shutil.copytree(os.path.join(REPO, "jobs"), work / "jobs", ignore=shutil.ignore_patterns("*.h5", "*.json"))
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ran = 0
    for line in lines:
        if line.startswith(SKIP):
            continue
        for big, small in SMALL.items():
            line = line.replace(big, small)
        proc = subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        ran += 1
    assert ran == len(lines) - 1
    assert (work / "run.json").exists() and (work / "jobs" / "demo_run.json").exists()


def gemm_examples() -> list[str]:
    """The ``ozhpc gemm`` lines of the README's Use block and of ``ozhpc --help``'s examples."""
    from ozhpc.cli import EPILOG

    lines = use_block() + [line.split("  #", 1)[0].strip() for line in EPILOG.splitlines()]
    return [line for line in lines if " ozhpc gemm " in f" {line} "]


def test_each_option_of_a_gemm_example_shows_something():
    """No example spells out a default (``--scheme ozaki2`` once it became the default): leaving
    any one option out of a line changes the run it describes."""
    import shlex

    from ozhpc import cli
    from ozhpc.errors import InputError

    parser = cli.build_parser()
    gemm = parser._subparsers._group_actions[0].choices["gemm"]  # noqa: SLF001
    options = {o: a for a in gemm._actions for o in a.option_strings if not a.required}  # noqa: SLF001

    def run_of(argv):
        try:
            cfg = cli.config_from_args(parser.parse_args(argv))
        except InputError as exc:   # e.g. --beta without its --c: the option was needed
            return str(exc)
        return {**vars(cfg), "scheme": cfg.ozaki.scheme}

    examples = gemm_examples()
    assert len(examples) >= 5
    for line in examples:
        argv = shlex.split(line, comments=True)
        argv = argv[argv.index("ozhpc") + 1:]
        for i, token in enumerate(argv):
            if token in options:
                bare = options[token].nargs == "?" and (i + 1 == len(argv) or argv[i + 1].startswith("-"))
                width = 1 if options[token].nargs == 0 or bare else 2   # --transb alone: no value
                assert run_of(argv[:i] + argv[i + width:]) != run_of(argv), (line, token)


@pytest.mark.skipif(not os.path.isdir(os.path.join(REPO, ".git")) and not os.path.isfile(os.path.join(REPO, ".git")),
                    reason="not a git checkout: nothing to ignore files for")
def test_what_the_quick_start_and_use_block_leave_is_ignored():
    """Following the README in the checkout leaves no untracked files behind for ``git status``."""
    left = ["ozhpc-demo/run.json", "ozhpc-demo/in.h5", "ozhpc-demo/out.h5", "jobs/demo_run.json",
            "jobs/grid2x2_run.json", "jobs/demo_in.h5", "run.json", "in.h5", "out.h5"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *left], cwd=REPO, capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(left)
