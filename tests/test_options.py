"""Every numeric option of every command is range-checked before any work, and a bad option value
or dataset spec is one line ``ozhpc <cmd>: error: ...`` with exit status 2; the usage
is printed only for ``--help`` and a missing command."""
from __future__ import annotations

import hashlib
import os

import h5py
import pytest

from ozhpc import cli
from ozhpc.commands.plan import MAX_GPUS
from ozhpc.errors import InputError
from ozhpc.run.config import MAX_BLOCK, MAX_EXTENT, MAX_RANKS, MAX_SAMPLES, MAX_SEED
from ozhpc.run.jobfile import load_job
from ozhpc.run.matrices import standard_matrix

from conftest import run_cli

N = 24


@pytest.fixture
def d(tmp_path):
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"] = standard_matrix(N, N, 0.5, 1)
        f["B"] = standard_matrix(N, N, 0.5, 2)
        f["C"] = standard_matrix(N, N, 0.5, 3)
    return tmp_path


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def one_line(args, capsys, cwd):
    """Run ``ozhpc ARGS`` in this process from ``cwd``; (exit status, the one stderr line)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        code = cli.main(args)
    except SystemExit as exc:
        code = exc.code
    finally:
        os.chdir(old)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert captured.out == ""
    return code, lines[0]


GEMM = ["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", "--engine", "numpy", "--progress", "off"]
CHECK = ["check", "in.h5:/C", "--a", "in.h5:/A", "--b", "in.h5:/B"]
GEN = ["gen", "--shape", "4", "new.h5:/X"]

# (argv, the whole error line): every numeric option, below and above its range, and spellings
# that are not values at all.
BAD = [
    (GEN + ["--seed", "-1"], f"ozhpc gen: error: --seed must be between 0 and {MAX_SEED}, got -1"),
    (GEN + ["--seed", str(MAX_SEED + 1)], f"ozhpc gen: error: --seed must be between 0 and {MAX_SEED}, "
                                          f"got {MAX_SEED + 1}"),
    (GEN + ["--seed", "1.5"], "ozhpc gen: error: --seed must be an integer, got '1.5'"),
    (GEN + ["--phi", "-0.1"], "ozhpc gen: error: --phi must be between 0 and 80, got -0.1"),
    (GEN + ["--phi", "81"], "ozhpc gen: error: --phi must be between 0 and 80, got 81"),
    (GEN + ["--phi", "nan"], "ozhpc gen: error: --phi must be a finite number, got 'nan'"),
    (["gen", "--shape", "0x4", "new.h5:/X"], "ozhpc gen: error: --shape must be positive, got '0x4'"),
    (["gen", "--shape", "4x", "new.h5:/X"], "ozhpc gen: error: --shape must be N or MxN with positive integers, "
                                            "got '4x'"),
    (CHECK + ["--samples", "-5"], f"ozhpc check: error: --samples must be between 1 and {MAX_SAMPLES}, got -5"),
    (CHECK + ["--samples", "0"], f"ozhpc check: error: --samples must be between 1 and {MAX_SAMPLES}, got 0"),
    (CHECK + ["--samples", str(MAX_SAMPLES + 1)],
     f"ozhpc check: error: --samples must be between 1 and {MAX_SAMPLES}, got {MAX_SAMPLES + 1}"),
    (CHECK + ["--seed", "-1"], f"ozhpc check: error: --seed must be between 0 and {MAX_SEED}, got -1"),
    (CHECK + ["--seed", str(MAX_SEED + 1)], f"ozhpc check: error: --seed must be between 0 and {MAX_SEED}, "
                                            f"got {MAX_SEED + 1}"),
    (CHECK + ["--alpha", "inf"], "ozhpc check: error: --alpha must be a finite number, got 'inf'"),
    (CHECK + ["--beta", "x"], "ozhpc check: error: --beta must be a number, got 'x'"),
    (GEMM + ["--alpha", "x"], "ozhpc gemm: error: --alpha must be a number, got 'x'"),
    (GEMM + ["--alpha", "nan"], "ozhpc gemm: error: --alpha must be a finite number, got 'nan'"),
    (GEMM + ["--beta=-inf"], "ozhpc gemm: error: --beta must be a finite number, got '-inf'"),
    # a value that starts with '-' is the option's value, as argparse takes -1 and -1.5 (it used to
    # say "argument --beta: expected one argument" of these)
    (GEMM + ["--beta", "-inf"], "ozhpc gemm: error: --beta must be a finite number, got '-inf'"),
    (GEMM + ["--alpha", "-1e999"], "ozhpc gemm: error: --alpha must be a finite number, got '-1e999'"),
    (GEMM + ["--alpha", "1e-400"], "ozhpc gemm: error: --alpha holds 1e-400, which is below FP64's smallest number "
                                   "(5e-324) and would be 0; give 0 if that is meant"),
    (GEMM + ["--beta", "-2.4e-324"], "ozhpc gemm: error: --beta holds 2.4e-324, which is below FP64's smallest "
                                     "number (5e-324) and would be 0; give 0 if that is meant"),
    (CHECK + ["--alpha", "2+3e-999j"], "ozhpc check: error: --alpha holds 3e-999, which is below FP64's smallest "
                                       "number (5e-324) and would be 0; give 0 if that is meant"),
    (GEN[:2] + ["-4x2", "new.h5:/X"], "ozhpc gen: error: --shape must be N or MxN with positive integers, got '-4x2'"),
    (GEMM + ["--grid", "2x"], "ozhpc gemm: error: --grid must be N or MxN with positive integers, got '2x'"),
    (GEMM + ["--grid", "0x1"], "ozhpc gemm: error: --grid must be positive, got '0x1'"),
    (GEMM + ["--block", "0"], "ozhpc gemm: error: --block must be positive, got '0'"),
    (GEMM + ["--block", str(MAX_BLOCK + 1)],
     f"ozhpc gemm: error: --block must be at most {MAX_BLOCK}, got {MAX_BLOCK + 1}x{MAX_BLOCK + 1}"),
    (GEMM + ["--block", "100000000000"],
     f"ozhpc gemm: error: --block must be at most {MAX_BLOCK}, got 100000000000x100000000000"),
    (GEMM + ["--panel", "0"], f"ozhpc gemm: error: --panel must be 'auto' or an integer between 1 and {MAX_BLOCK}, "
                              "got 0"),
    (GEMM + ["--panel", "100000000000"],
     f"ozhpc gemm: error: --panel must be 'auto' or an integer between 1 and {MAX_BLOCK}, got 100000000000"),
    (GEMM + ["--panel", "wide"],
     f"ozhpc gemm: error: --panel must be 'auto' or an integer between 1 and {MAX_BLOCK}, got 'wide'"),
    (GEMM + ["--slices", "0"], "ozhpc gemm: error: --slices must be between 1 and 24, got 0"),
    (GEMM + ["--slices", "25"], "ozhpc gemm: error: --slices must be between 1 and 24, got 25"),
    (GEMM + ["--groups", "0"], "ozhpc gemm: error: --groups must be at least 1, got 0"),
    (GEMM + ["--slices", "3", "--groups", "6"],
     "ozhpc gemm: error: --groups 6 is more than the 5 groups that 3 slices have (at most 2*slices-1)"),
    (GEMM + ["--scheme", "ozaki2", "--bits", "7"], "ozhpc gemm: error: --bits must be between 8 and 100, got 7"),
    (GEMM + ["--scheme", "ozaki2", "--bits", "101"], "ozhpc gemm: error: --bits must be between 8 and 100, got 101"),
    (["demo", "--n", "0"], "ozhpc demo: error: --n must be between 1 and 65536, got 0"),
    (["demo", "--n", "65537"], "ozhpc demo: error: --n must be between 1 and 65536, got 65537"),
    (["demo", "--phi", "100"], "ozhpc demo: error: --phi must be between 0 and 80, got 100"),
    # hundreds or thousands of digits: one line, the number named by its length
    *[(argv + [digits], line.format(n=len(digits)))
      for digits in ("1" + "0" * 399, "9" * 5000)
      for argv, line in [
          (GEN[:-1] + ["--seed"], f"ozhpc gen: error: --seed must be between 0 and {MAX_SEED}, got a {{n}}-digit integer"),
          (GEN[:-1] + ["--phi"], "ozhpc gen: error: --phi must be a finite number, got a {n}-digit integer"),
          (GEMM + ["--block"], f"ozhpc gemm: error: --block must be at most {MAX_EXTENT}, got a {{n}}-digit integer"),
          (GEMM + ["--grid"], f"ozhpc gemm: error: --grid must be at most {MAX_RANKS}, got a {{n}}-digit integer"),
          (GEMM + ["--panel"], f"ozhpc gemm: error: --panel must be 'auto' or an integer between 1 and {MAX_BLOCK}, "
                               "got a {n}-digit integer"),
          (GEMM + ["--slices"], "ozhpc gemm: error: --slices must be between 1 and 24, got a {n}-digit integer"),
          (GEMM + ["--groups"], "ozhpc gemm: error: --groups must be between 1 and 2147483647, got a {n}-digit integer"),
          (GEMM + ["--bits"], "ozhpc gemm: error: --bits must be between 8 and 100, got a {n}-digit integer"),
          (GEMM + ["--alpha"], "ozhpc gemm: error: --alpha must be a finite number, got a {n}-digit integer"),
          (CHECK + ["--samples"], f"ozhpc check: error: --samples must be between 1 and {MAX_SAMPLES}, "
                                  "got a {n}-digit integer"),
          (CHECK + ["--seed"], f"ozhpc check: error: --seed must be between 0 and {MAX_SEED}, got a {{n}}-digit integer"),
          (["demo", "--n"], "ozhpc demo: error: --n must be between 1 and 65536, got a {n}-digit integer"),
          *[(["plan", *[w for o in ("m", "n", "k", "gpus") if o != name for w in (f"--{o}", "8")], f"--{name}"],
             f"ozhpc plan: error: --{name} must be an integer from 1 to {hi}, got a {{n}}-digit integer")
            for name, hi in (("m", MAX_EXTENT), ("n", MAX_EXTENT), ("k", MAX_EXTENT), ("gpus", MAX_GPUS))],
      ]],
    (["gen", "--shape", "2x" + "1" * 30, "new.h5:/X"],
     f"ozhpc gen: error: --shape must be at most {MAX_EXTENT}, got '2x{'1' * 30}'"),
    # dataset specs and missing arguments: one line, no usage
    (["gemm", "in.h5:A", "in.h5:/B", "-o", "out.h5:/C"],
     "ozhpc gemm: error: input A 'in.h5:A' must be written FILE.h5:/dataset"),
    (["gemm", "f:/a:b", "in.h5:/B", "-o", "out.h5:/C"],
     "ozhpc gemm: error: input A 'f:/a:b' must be written FILE.h5:/dataset"),
    (["gemm", "in.h5:/A", "in.h5:/B"], "ozhpc gemm: error: the following arguments are required: -o/--output"),
    (["gemm", "in.h5:/A", "in.h5:/B", "-o"], "ozhpc gemm: error: argument -o/--output: expected one argument"),
    (GEMM + ["--engine", "gpu"],
     "ozhpc gemm: error: argument --engine: invalid choice: 'gpu' (choose from 'auto', 'numpy', 'cutile')"),
    (["check", "in.h5:/C", "--a", "in.h5:/A"], "ozhpc check: error: the following arguments are required: --b"),
    (["gemn"], "ozhpc: error: argument COMMAND: invalid choice: 'gemn' (choose from 'gen', 'gemm', 'run', "
               "'check', 'fingerprint', 'warmup', 'plan', 'report', 'info', 'demo')"),
]


@pytest.mark.parametrize("argv,line", BAD, ids=[" ".join(a[-2:])[:40] for a, _ in BAD])
def test_bad_value_is_one_line_and_exit_2_before_any_work(d, capsys, argv, line):
    before = digest(d / "in.h5")
    code, got = one_line(argv, capsys, d)
    assert (code, got) == (2, line)
    assert digest(d / "in.h5") == before
    assert sorted(os.listdir(d)) == ["in.h5"]


def test_missing_command_prints_the_usage_and_one_error_line():
    r = run_cli([])
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0].startswith("usage: ozhpc ") and lines[-1] == "ozhpc: error: the following arguments are " \
                                                                  "required: COMMAND"


def test_help_still_prints_the_usage():
    r = run_cli(["gemm", "--help"])
    assert r.returncode == 0 and r.stdout.startswith("usage: ozhpc gemm ") and r.stderr == ""


def test_bad_value_under_the_console_script_is_one_line(d):
    """The whole process (entry point, not main): one line on stderr, exit 2, nothing written."""
    r = run_cli(GEMM + ["--panel", "100000000000"], cwd=d)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [f"ozhpc gemm: error: --panel must be 'auto' or an integer between 1 and "
                                     f"{MAX_BLOCK}, got 100000000000"]
    assert sorted(os.listdir(d)) == ["in.h5"]


def test_largest_block_and_panel_are_one_block_and_give_the_same_bits(d, capsys):
    """The largest allowed block and panel mean "the whole matrix" and cost no more memory."""
    code_big = _run_in(d, GEMM + ["-o", "out.h5:/Big", "--block", str(MAX_BLOCK), "--panel", str(MAX_BLOCK)])
    code_small = _run_in(d, GEMM + ["-o", "out.h5:/Small", "--block", "5", "--panel", "7"])
    assert code_big == code_small == 0
    capsys.readouterr()
    with h5py.File(d / "out.h5", "r") as f:
        assert f["Big"][...].tobytes() == f["Small"][...].tobytes()


def _run_in(cwd, argv):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return cli.main(argv)
    finally:
        os.chdir(old)


JOB = '[inputs]\na = "in.h5:/A"\nb = "in.h5:/B"\n[output]\nc = "out.h5:/C"\n'


@pytest.mark.parametrize("extra,message", [
    ("[layout]\nblock = 100000000000\n", f"layout.block must be at most {MAX_BLOCK}, got 100000000000x100000000000"),
    ("[layout]\nblock = \"3x100000000000\"\n", f"layout.block must be at most {MAX_BLOCK}, got 3x100000000000"),
    ("[layout]\npanel = 100000000000\n",
     f"layout.panel must be 'auto' or an integer between 1 and {MAX_BLOCK}, got 100000000000"),
    ("[gemm]\nalpha = inf\n", "gemm.alpha must be a finite number, got inf"),
    ("[gemm]\nbeta = nan\n", "gemm.beta must be a finite number, got nan"),
])
def test_job_file_values_out_of_range(d, extra, message):
    path = d / "job.toml"
    path.write_text(JOB + extra)
    with pytest.raises(InputError) as info:
        load_job(path)
    assert str(info.value) == f"{path}: {message}"
    r = run_cli(["run", path], cwd=d)
    assert r.returncode == 2 and r.stderr.splitlines() == [f"ozhpc run: error: {path}: {message}"]
    assert sorted(os.listdir(d)) == ["in.h5", "job.toml"]


def _raised_texts(path):
    """The string pieces of every ``raise`` in a module (docstrings and comments are not raised)."""
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for piece in ast.walk(node.exc):
                if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                    yield node.lineno, piece.value


def test_library_errors_name_no_command_line_flag():
    """Below the command line (``cli.py``, ``commands/``) an error names options as placeholders
    (:class:`ozhpc.errors.OptionError`), never as ``--flags``: a job-file or Python user is not
    told about ``--grid`` or ``--force``. (Slurm's own ``--mem`` names the site's limit, not ours.)"""
    import pathlib
    import re

    package = pathlib.Path(cli.__file__).parent
    face = {package / "cli.py", *(package / "commands").glob("*.py")}
    flagged = [f"{path.relative_to(package)}:{line}: {text!r}" for path in sorted(package.rglob("*.py"))
               if path not in face for line, text in _raised_texts(path)
               if re.search(r"(^|[\s(])--[a-z]", text) and "Slurm" not in text]
    assert flagged == []


def test_one_option_error_in_each_front_ends_words(d):
    """An option's error is worded once, below the command line; the API, ``ozhpc gemm`` and
    ``ozhpc run`` each read it in their own spelling (``run`` has ``--force`` itself)."""
    from mpi4py import MPI

    from ozhpc.parallel.grid import ProcessGrid

    with pytest.raises(InputError) as err:
        ProcessGrid(MPI.COMM_SELF, (2, 2))
    assert str(err.value) == ("grid=2x2 needs 4 MPI ranks, but the job has 1 (run with mpiexec -n 4, or leave "
                              "grid out for a near-square grid)")
    r = run_cli(GEMM + ["--grid", "2x2"], cwd=d)
    assert (r.returncode, r.stderr.splitlines()) == (2, [
        "ozhpc gemm: error: --grid 2x2 needs 4 MPI ranks, but the job has 1 (run with mpiexec -n 4, or leave "
        "--grid out for a near-square grid)"])
    with h5py.File(d / "out.h5", "w") as f:
        f["C"] = [[0.0]]
    (d / "job.toml").write_text('[inputs]\na = "in.h5:/A"\nb = "in.h5:/B"\n[output]\nc = "out.h5:/C"\n')
    r = run_cli(["run", "job.toml"], cwd=d)
    assert r.returncode == 2 and r.stderr.endswith(f"output {d}/out.h5:/C exists; pass --force to replace it\n"), r.stderr
