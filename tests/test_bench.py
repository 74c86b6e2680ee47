"""The benchmark suite runs as documented on a CPU: every script answers ``--help`` (its docstring,
without a GPU), ``bench/gpu.sh`` refuses an unknown MODE before running anything, every mode
that bench/README.md lists is one that gpu.sh knows, and bench/README.md names every script
(and only scripts that exist)."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
SCRIPTS = sorted(str(p.relative_to(REPO)) for p in BENCH.glob("**/*.py") if p.name != "common.py")
ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def gpu_sh(mode: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(BENCH / "gpu.sh")], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=dict(ENV, MODE=mode, OUT="/nonexistent/out", **env))


def known_modes() -> list[str]:
    return re.search(r'^MODES="([^"]+)"', (BENCH / "gpu.sh").read_text(), re.M).group(1).split()


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_answers_help(script):
    proc = subprocess.run([sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: " + pathlib.Path(script).name), proc.stdout[:300]


def test_gpu_sh_refuses_an_unknown_mode_before_running_anything():
    proc = gpu_sh("tests bogus")
    assert proc.returncode == 2
    assert proc.stderr == f"bench/gpu.sh: unknown MODE 'bogus' (known modes: {' '.join(known_modes())})\n"
    assert proc.stdout == ""


def test_gpu_sh_dry_run_prints_each_mode_and_its_limit():
    proc = gpu_sh("tests accept", DRY="1", ACCEPT_S="123")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "== tests (<= 300 s, log /nonexistent/out/tests.txt)" in lines
    assert "== accept (<= 123 s, log /nonexistent/out/accept.txt)" in lines
    accept = next(x for x in lines if "bench/speed/hw_speed.py" in x)
    assert "--sizes 4096 8192 16384 32768" in accept and "--out /nonexistent/out/accept" in accept
    tests = next(x for x in lines if "pytest" in x)
    assert " -n 4 " in tests and "tests/test_pinned_bits.py" in tests and "test_shared_gpu" not in tests
    assert [x.split(" | ")[0] for x in lines if x.startswith("| ") and "mode" not in x] == ["| tests", "| accept"]
    assert not pathlib.Path("/nonexistent/out").exists()


def test_every_mode_runs_a_script_that_exists():
    proc = gpu_sh(" ".join(known_modes()), DRY="1")
    assert proc.returncode == 0, proc.stderr
    paths = set(re.findall(r"\bbench/[\w/]+\.(?:py|sh)", proc.stdout))
    assert paths and all((REPO / p).is_file() for p in paths), paths


def test_readme_lists_exactly_the_modes_of_gpu_sh():
    readme = (BENCH / "README.md").read_text()
    listed = re.findall(r"^\| `(\w+)` \| ", readme.split("## GPU runs")[1], re.M)
    assert sorted(listed) == sorted(known_modes())


def readme_spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", (BENCH / "README.md").read_text())


@pytest.mark.parametrize("script", sorted(str(p.relative_to(BENCH)) for p in BENCH.rglob("*")
                                          if p.suffix in (".py", ".sh")))
def test_readme_names_every_script(script):
    """bench/README.md names each script (``speed/hw_speed.py`` or ``bench/speed/hw_speed.py``,
    alone or with its options) in a code span: a new script says what it measures there."""
    assert any(re.match(rf"(?:bench/)?{re.escape(script)}(?: |$)", span) for span in readme_spans()), script


def test_every_script_the_readme_names_exists():
    named = {m.group(0) for span in readme_spans()
             for m in [re.match(r"(?:bench/)?(?:\w+/)*\w+\.(?:py|sh)(?= |$)", span)] if m}
    where = {name: REPO / name if name.startswith(("tests/", "bench/")) else
             REPO / "tests" / name if name.startswith("test_") else BENCH / name for name in named}
    assert len(named) >= 30
    assert sorted(name for name, path in where.items() if not path.is_file()) == []
