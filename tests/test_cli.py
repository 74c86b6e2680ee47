"""The ozhpc command line on one process (one refusal under mpiexec): results, atomic outputs,
error messages and exit codes."""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

import ozhpc
from ozhpc.run.report import sha256_of_matrix

from conftest import REPO, run_cli


def file_digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def inputs(tmp_path):
    src = tmp_path / "in.h5"
    for name, shape, seed in (("A", "40x30", 1), ("B", "30x20", 2), ("C0", "40x20", 3), ("Bt", "20x30", 4)):
        r = run_cli(["gen", "--phi", "1", "--shape", shape, "--seed", seed, f"{src}:/{name}"])
        assert r.returncode == 0, r.stderr
    with h5py.File(src, "a") as f:
        f["vec"] = np.ones(5)
        f["ints"] = np.ones((30, 20), dtype=np.int32)
        f.create_group("grp")
    return src


def read(path, name):
    with h5py.File(path, "r") as f:
        return f[name][...]


def test_gemm_writes_bitwise_result_and_report(inputs, tmp_path):
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    before = file_digest(inputs)
    r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/Bt", "--transb", "--alpha", "2", "--beta", "-1",
                 "--c", f"{inputs}:/C0", "-o", f"{out}:/C", "--report", report])
    assert r.returncode == 0, r.stderr
    a, bt, c0 = read(inputs, "A"), read(inputs, "Bt"), read(inputs, "C0")
    want = ozhpc.gemm(a, bt, c0, alpha=2.0, beta=-1.0, transb=True, engine="numpy")
    got = read(out, "C")
    assert got.tobytes() == want.tobytes()
    rep = json.loads(report.read_text())
    assert rep["sha256"] == sha256_of_matrix(got)
    assert (rep["m"], rep["n"], rep["k"]) == (40, 20, 30)
    assert {"read", "split", "multiply", "combine", "write"} <= set(rep["seconds"])
    assert rep["moduli"] >= 1 and rep["int8_gemms"] == rep["moduli"] and rep["slices"] is None   # the default: scheme II
    assert (rep["scheme"], rep["guarantee"], rep["certified"]) == ("ozaki2", "dgemm", True)
    assert rep["config"]["scheme"] == "ozaki2" and rep["config"]["bits"] == "auto"
    with h5py.File(out, "r") as f:
        attrs = dict(f["C"].attrs)
    assert attrs["ozhpc_scheme"] == "ozaki2" and attrs["ozhpc_moduli"] == rep["moduli"]
    assert attrs["ozhpc_guarantee"] == "dgemm" and attrs["ozhpc_bits"] == rep["bits"] and "ozhpc_slices" not in attrs
    assert f"scheme ozaki2: {rep['bits']} bits, {rep['moduli']} moduli ({rep['int8_gemms']} int8 GEMMs)" in r.stdout
    assert rep["config"]["transb"] is True and rep["config"]["alpha"] == 2.0
    assert file_digest(inputs) == before, "inputs must never be modified"
    assert sorted(os.listdir(tmp_path)) == ["in.h5", "out.h5", "run.json"], "no temporary files left"


def test_gemm_scheme_ozaki2_end_to_end(inputs, tmp_path):
    """--scheme ozaki2 (with several k-panels on one rank): the bits of ozhpc.gemm(scheme="ozaki2"),
    and the report, the output attributes and the summary line say which scheme, bits and moduli."""
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/Bt", "--transb", "--alpha", "2", "--beta", "-1",
                 "--c", f"{inputs}:/C0", "-o", f"{out}:/C", "--scheme", "ozaki2", "--block", "16", "--panel", "7",
                 "--report", report, "--progress", "off"])
    assert r.returncode == 0, r.stderr
    a, bt, c0 = read(inputs, "A"), read(inputs, "Bt"), read(inputs, "C0")
    want, info = ozhpc.gemm(a, bt, c0, alpha=2.0, beta=-1.0, transb=True, engine="numpy", scheme="ozaki2", info=True)
    got = read(out, "C")
    assert got.tobytes() == want.tobytes()
    scheme1 = ozhpc.gemm(a, bt, c0, alpha=2.0, beta=-1.0, transb=True, engine="numpy", scheme="ozaki1")
    assert got.tobytes() != scheme1.tobytes(), "the two schemes round differently (on this data)"
    rep = json.loads(report.read_text())
    assert rep["sha256"] == sha256_of_matrix(got)
    assert (rep["scheme"], rep["bits"], rep["moduli"]) == ("ozaki2", info.bits, info.moduli)
    assert rep["int8_gemms"] == rep["moduli"] and rep["slices"] is None and rep["panels"] == 5
    assert rep["config"]["scheme"] == "ozaki2" and rep["config"]["bits"] == "auto"
    with h5py.File(out, "r") as f:
        attrs = dict(f["C"].attrs)
    assert (attrs["ozhpc_scheme"], attrs["ozhpc_bits"], attrs["ozhpc_moduli"]) == ("ozaki2", info.bits, info.moduli)
    assert "ozhpc_slices" not in attrs and "ozhpc_groups" not in attrs
    assert f"scheme ozaki2: {info.bits} bits, {info.moduli} moduli ({info.moduli} int8 GEMMs)" in r.stdout

    # --bits: the accuracy knob of scheme II; fewer bits, fewer moduli, other bits of C.
    report = tmp_path / "run24.json"  # an existing report is replaced only with --force
    r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C24", "--scheme", "ozaki2",
                 "--bits", "24", "--report", report])
    assert r.returncode == 0, r.stderr
    want24, info24 = ozhpc.gemm(a, read(inputs, "B"), engine="numpy", scheme="ozaki2", bits=24, info=True)
    assert read(out, "C24").tobytes() == want24.tobytes()
    rep = json.loads(report.read_text())
    assert (rep["scheme"], rep["bits"], rep["moduli"]) == ("ozaki2", 24, info24.moduli)
    assert rep["config"]["bits"] == 24 and info24.moduli < info.moduli


def test_scheme_and_bits_parse_into_runconfig():
    from ozhpc.cli import build_parser, config_from_args

    def config(*extra):
        return config_from_args(build_parser().parse_args(["gemm", "a.h5:/A", "b.h5:/B", "-o", "c.h5:/C", *extra]))

    cfg = config()
    assert (cfg.scheme, cfg.bits, cfg.slices, cfg.groups) == (None, "auto", "auto", "auto")
    assert cfg.ozaki.scheme == "ozaki2" and cfg.guarantee == "dgemm"   # the defaults
    assert config("--slices", "8").ozaki.scheme == "ozaki1"          # slices imply scheme I
    assert config("--guarantee", "tight").ozaki.guarantee == "tight"
    cfg = config("--scheme", "ozaki2", "--bits", "40")
    assert (cfg.scheme, cfg.bits) == ("ozaki2", 40)
    assert cfg.describe()["scheme"] == "ozaki2" and cfg.describe()["bits"] == 40
    # "auto" is always allowed, for the other scheme's options too.
    assert config("--scheme", "ozaki2", "--slices", "auto", "--groups", "auto").bits == "auto"
    assert config("--scheme", "ozaki1", "--bits", "auto", "--slices", "5").slices == 5
    assert config("--bits", "8", "--scheme", "ozaki2").bits == 8
    assert config("--bits", "100", "--scheme", "ozaki2").bits == 100


@pytest.mark.parametrize("extra,message", [
    (["--scheme", "ozaki2", "--slices", "8"],
     "--slices 8 is an option of --scheme ozaki1; with --scheme ozaki2 leave it out and set the accuracy with --bits"),
    (["--scheme", "ozaki2", "--groups", "all", "--slices", "5"],
     "--slices 5 and --groups all are options of --scheme ozaki1; with --scheme ozaki2 leave them out and set "
     "the accuracy with --bits"),
    (["--scheme", "ozaki1", "--bits", "12"],
     "--bits 12 needs --scheme ozaki2 (the scheme here is ozaki1, whose accuracy is set by --slices)"),
])
def test_options_of_the_other_scheme_are_one_error(inputs, tmp_path, extra, message):
    out = tmp_path / "o.h5"
    r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C", *extra])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"ozhpc gemm: error: {message}"]
    assert not out.exists()


def test_existing_output_needs_force_and_is_kept(inputs, tmp_path):
    out = tmp_path / "out.h5"
    args = ["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C", "--slices", "3"]
    assert run_cli(args).returncode == 0
    first = file_digest(out)
    r = run_cli(args[:-1] + ["5"])
    assert r.returncode == 2
    assert f"output {out}:/C exists; pass --force to replace it" in r.stderr
    assert file_digest(out) == first
    r = run_cli(args[:-1] + ["5", "--force"])
    assert r.returncode == 0 and file_digest(out) != first


def test_output_next_to_other_datasets_keeps_them(inputs, tmp_path):
    out = tmp_path / "out.h5"
    with h5py.File(out, "w") as f:
        f["keep"] = np.arange(4.0)
    assert run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C"]).returncode == 0
    assert read(out, "keep").tolist() == [0.0, 1.0, 2.0, 3.0] and read(out, "C").shape == (40, 20)


@pytest.mark.parametrize("a,b,extra,message", [
    ("missing.h5:/A", "IN:/B", [], "input A file 'missing.h5' does not exist"),
    (".:/A", "IN:/B", [], "input A file '.' is a directory, not an HDF5 file"),
    ("IN:/A", "IN:/B", ["--beta", "2", "--c", ".:/C0"], "input C file '.' is a directory, not an HDF5 file"),
    ("IN:/nope", "IN:/B", [], "input A dataset '/nope' not found in 'IN'"),
    ("IN:/vec", "IN:/B", [], "input A IN:/vec must be 2-D, has shape (5,)"),
    ("IN:/A", "IN:/grp", [], "input B IN:/grp is a group, not a dataset"),
    ("IN:/A", "IN:/C0", [], "shape mismatch: op(A) from IN:/A is 40x30 but op(B) from IN:/C0 is 40x20"),
    ("IN:/A", "IN:/B", ["--beta", "1"], "--beta 1 needs an input C: add --c FILE.h5:/C"),
    ("IN:/A", "IN:/B", ["--beta", "1", "--c", "IN:/A"], "input C IN:/A has shape (40, 30), expected (40, 20)"),
])
def test_bad_input_is_one_clear_message_and_exit_2(inputs, tmp_path, a, b, extra, message):
    out = tmp_path / "out.h5"
    extra = [x.replace("IN", str(inputs)) for x in extra]
    r = run_cli(["gemm", a.replace("IN", str(inputs)), b.replace("IN", str(inputs)), "-o", f"{out}:/C", *extra],
                cwd=tmp_path)
    assert r.returncode == 2
    assert message.replace("IN", str(inputs)) in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def test_integer_datasets_exact_in_fp64_are_taken(inputs, tmp_path):
    """int32 and int64 inputs whose values are float64s (to 2^53, and wider powers of two) give
    the bits of the same product from float64 inputs; ``check`` reads them alike."""
    b = np.random.default_rng(5).integers(-2**20, 2**20, (30, 20))
    b[0, 0], b[1, 1], b[2, 2] = 2**53, -2**53, 2**60
    with h5py.File(inputs, "a") as f:
        f["i64"], f["i32"], f["f64"] = b, (b % 1000).astype(np.int32), b.astype(np.float64)
        f["f64_32"] = (b % 1000).astype(np.float64)
    out = tmp_path / "out.h5"
    for name in ("i64", "f64", "i32", "f64_32"):
        r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/{name}", "-o", f"{out}:/{name}", "--progress", "off"])
        assert r.returncode == 0, r.stderr
    assert read(out, "i64").tobytes() == read(out, "f64").tobytes()
    assert read(out, "i32").tobytes() == read(out, "f64_32").tobytes()
    r = run_cli(["check", f"{out}:/i64", "--a", f"{inputs}:/A", "--b", f"{inputs}:/i64", "--samples", "800"])
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("dtype, value", [(np.int64, 2**53 + 1), (np.int64, -(2**62 + 1)), (np.uint64, 2**64 - 1)])
def test_integer_datasets_too_wide_for_fp64_are_one_line(inputs, tmp_path, dtype, value):
    wide = np.ones((30, 20), dtype=dtype)
    wide[3, 4] = value
    with h5py.File(inputs, "a") as f:
        f["wide"] = wide
    refused_as_b_by_gemm_and_check(inputs, tmp_path, "wide", (
        f"input B {inputs}:/wide holds the integer {value}, which FP64 cannot represent exactly (integers are exact "
        "up to 2^53); convert the dataset to float64 first\n"))


def refused_as_b_by_gemm_and_check(inputs, tmp_path, name, message):
    """gemm refuses ``inputs:/name`` as B with ``message`` before writing out.h5, and check refuses it as B
    of the C that gemm then writes of A and B (left in out.h5:/C)."""
    out = tmp_path / "out.h5"
    r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/{name}", "-o", f"{out}:/C", "--progress", "off"])
    assert (r.returncode, r.stderr) == (2, "ozhpc gemm: error: " + message) and not out.exists()
    assert run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C"]).returncode == 0
    r = run_cli(["check", f"{out}:/C", "--a", f"{inputs}:/A", "--b", f"{inputs}:/{name}", "--samples", "800"])
    assert (r.returncode, r.stderr) == (2, "ozhpc check: error: " + message)


LONG_DOUBLE = pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max,
                                 reason="long double is FP64 here")


@LONG_DOUBLE
@pytest.mark.parametrize("name, value, shown", [("huge", np.longdouble("1e400"), "1e+400"),
                                                ("zhuge", 1 - np.longdouble("1e400") * 1j, "(1-1e+400j)")])
def test_long_doubles_beyond_fp64_are_one_line_everywhere_they_are_read(inputs, tmp_path, name, value, shown):
    """A finite long double that FP64 would make inf is refused, naming the file and dataset, by
    gemm, check and a job file alike, before anything is written."""
    big = np.ones((30, 20), dtype=np.clongdouble if "j" in shown else np.longdouble)
    big[7, 3] = value
    with h5py.File(inputs, "a") as f:
        f[name] = big
    out = tmp_path / "out.h5"
    message = (f"input B {inputs}:/{name} holds the value {shown}, beyond FP64's range (its largest number is "
               "1.7976931348623157e+308); scale the dataset into that range first\n")
    refused_as_b_by_gemm_and_check(inputs, tmp_path, name, message)
    job = tmp_path / "job.toml"
    job.write_text(f'[inputs]\na = "{inputs}:/A"\nb = "{inputs}:/{name}"\n[output]\nc = "{out}:/D"\n')
    r = run_cli(["run", job, "--progress", "off"])
    assert (r.returncode, r.stderr) == (2, "ozhpc run: error: " + message)
    with h5py.File(out, "r") as f:
        assert list(f) == ["C"]


@LONG_DOUBLE
def test_long_doubles_within_fp64_are_rounded_to_nearest(inputs, tmp_path):
    """Long doubles within FP64's range are read rounded to the nearest FP64 number (as docs/batch.md
    says): C is bit for bit the product of the rounded dataset, and check measures against it."""
    third = np.full((30, 20), np.longdouble(1) / 3)
    third[0, 0] = np.nextafter(np.longdouble(np.finfo(np.float64).max), np.longdouble(np.inf))  # rounds down
    with h5py.File(inputs, "a") as f:
        f["third"], f["third64"] = third, third.astype(np.float64)
    out = tmp_path / "out.h5"
    for name in ("third", "third64"):
        r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/{name}", "-o", f"{out}:/{name}", "--progress", "off"])
        assert r.returncode == 0, r.stderr
    assert read(out, "third").tobytes() == read(out, "third64").tobytes()
    r = run_cli(["check", f"{out}:/third", "--a", f"{inputs}:/A", "--b", f"{inputs}:/third", "--samples", "100"])
    assert r.returncode == 0, r.stderr


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not found (pip install mpich)")
def test_an_integer_too_wide_on_one_rank_stops_every_rank(inputs, tmp_path):
    """The wide value is in rank 1's blocks only: every rank exits 2, one line, nothing written."""
    wide = np.ones((40, 30), dtype=np.int64)
    wide[35, 29] = 2**53 + 1
    with h5py.File(inputs, "a") as f:
        f["wide"] = wide
    out = tmp_path / "out.h5"
    proc = subprocess.run([shutil.which("mpiexec"), "-n", "2", sys.executable, "-m", "ozhpc", "gemm",
                           f"{inputs}:/wide", f"{inputs}:/B", "-o", f"{out}:/C", "--grid", "2x1", "--block", "8",
                           "--progress", "off"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr == (f"ozhpc gemm: error: input A {inputs}:/wide holds the integer {2**53 + 1}, which FP64 "
                           "cannot represent exactly (integers are exact up to 2^53); convert the dataset to float64 "
                           "first\n")


@pytest.mark.parametrize("extra,message", [
    (["--slices", "x"], "--slices must be 'auto' or an integer, got 'x'"),
    (["--slices", "40"], "--slices must be between 1 and 24, got 40"),
    (["--block", "0"], "--block must be positive, got '0'"),
    (["--grid", "2by2"], "--grid must be N or MxN with positive integers, got '2by2'"),
    (["--engine", "gpu"], "invalid choice: 'gpu'"),
    (["--scheme", "ozaki3"], "argument --scheme: invalid choice: 'ozaki3'"),
    (["--accuracy", "bogus"], "argument --accuracy: invalid choice: 'bogus'"),
    (["--bits", "many"], "--bits must be 'auto' or an integer, got 'many'"),
    (["--scheme", "ozaki2", "--bits", "7"], "--bits must be between 8 and 100, got 7"),
    (["--scheme", "ozaki2", "--bits", "101"], "--bits must be between 8 and 100, got 101"),
])
def test_bad_options_exit_2(inputs, tmp_path, extra, message):
    r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{tmp_path}/o.h5:/C", *extra])
    assert r.returncode == 2 and message in r.stderr


@pytest.mark.parametrize("option", ["--report", "--cache-dir"])
@pytest.mark.parametrize("spelled", ["apart", "joined"])
def test_an_empty_path_option_is_refused_before_the_run(inputs, tmp_path, option, spelled):
    """``--report ''`` is not "no report", ``--cache-dir ''`` not the default cache: one line naming
    the option, exit 2, nothing written (gemm, and run over a job file; warmup's --cache-dir)."""
    given = [option, ""] if spelled == "apart" else [f"{option}="]
    out = tmp_path / "o.h5"
    message = f"error: {option} must not be an empty path\n"
    r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C", *given], cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, "ozhpc gemm: " + message)
    job = tmp_path / "job.toml"
    job.write_text(f'[inputs]\na = "{inputs}:/A"\nb = "{inputs}:/B"\n[output]\nc = "{out}:/C"\n')
    r = run_cli(["run", job, *given], cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, "ozhpc run: " + message)
    if option == "--cache-dir":
        r = run_cli(["warmup", *given], cwd=tmp_path)
        assert (r.returncode, r.stderr) == (2, "ozhpc warmup: " + message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.h5", "job.toml"]
    if spelled == "apart":   # blanks only: a name no one means
        r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C", option, "  "], cwd=tmp_path)
        assert (r.returncode, r.stderr) == (2, f"ozhpc gemm: error: {option} '  ' is blanks only; name a file or "
                                               "directory\n")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.h5", "job.toml"]


def test_negative_numbers_in_any_notation_are_values(inputs, tmp_path):
    """``--alpha -1+2j --beta -1e-3`` is the product of alpha=-1+2j, beta=-1e-3 (argparse took only
    -1 and -1.5 for values, and said "expected one argument" of -1e-3, -2j and -1+2j)."""
    out = tmp_path / "out.h5"
    r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C", "--alpha", "-1+2j", "--beta", "-1e-3",
                 "--c", f"{inputs}:/C0", "--progress", "off"])
    assert r.returncode == 0, r.stderr
    a, b, c0 = read(inputs, "A"), read(inputs, "B"), read(inputs, "C0")
    want = ozhpc.gemm(a, b, c0, alpha=-1 + 2j, beta=-1e-3, engine="numpy")
    assert read(out, "C").tobytes() == want.tobytes()
    r = run_cli(["check", f"{out}:/C", "--a", f"{inputs}:/A", "--b", f"{inputs}:/B", "--c", f"{inputs}:/C0",
                 "--alpha", "-1+2j", "--beta", "-1e-3"])
    assert r.returncode == 0, r.stderr


def test_bad_dataset_spec_exit_2(tmp_path):
    r = run_cli(["gen", "--shape", "3x3", f"{tmp_path}/x.h5"])
    assert r.returncode == 2 and "must be written FILE.h5:/dataset" in r.stderr


@pytest.mark.parametrize("args, message", [
    (["gen", "--dtype", "float32", "x.h5:/A"], "ozhpc gen: error: unrecognized arguments: --dtype\n"),
    (["gen", "--shape", "3x3", "--sede=3", "x.h5:/A"],
     "ozhpc gen: error: unrecognized arguments: --sede=3 (did you mean --seed?)\n"),
])
def test_unknown_option_is_named_not_the_value_after_it(tmp_path, args, message):
    """The value after an unknown option is not taken for the output (``'float32' must be written ...``)."""
    r = run_cli(args, cwd=tmp_path)
    assert (r.returncode, r.stderr, r.stdout) == (2, message, "")
    assert list(tmp_path.iterdir()) == []


def test_gen_is_reproducible_and_check_reports_errors(inputs, tmp_path):
    out = tmp_path / "out.h5"
    assert run_cli(["gen", "--phi", "1", "--shape", "40x30", "--seed", "1", f"{out}:/A"]).returncode == 0
    assert read(out, "A").tobytes() == read(inputs, "A").tobytes()
    assert run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C"]).returncode == 0
    r = run_cli(["check", f"{out}:/C", "--a", f"{inputs}:/A", "--b", f"{inputs}:/B", "--json", "--samples", "30"])
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    assert stats["samples"] == 30 and stats["max_rel_error"] <= stats["native_max_rel_error"]


def test_info_and_help():
    r = run_cli(["info"])
    assert r.returncode == 0 and "engine numpy: available" in r.stdout and "h5py" in r.stdout
    for command in ("gen", "gemm", "run", "check", "info", "demo"):
        h = run_cli([command, "--help"])
        assert h.returncode == 0 and "usage: ozhpc " + command in h.stdout
    h = " ".join(run_cli(["gemm", "--help"]).stdout.split())  # argparse wraps the lines
    assert "--scheme {ozaki1,ozaki2}" in h and "one int8 GEMM per modulus (about 15 for FP64 accuracy)" in h
    assert "--guarantee {dgemm,tight}" in h and "the bound native FP64 GEMM itself guarantees" in h
    assert "--bits BITS scheme ozaki2: integer bits per operand entry (8..100)" in h


def test_run_help_names_the_job_files_tables():
    """``run --help`` names exactly the tables a job file may hold (ozhpc.run.jobfile.SCHEMA)."""
    from ozhpc.run.jobfile import SCHEMA

    h = " ".join(run_cli(["run", "--help"]).stdout.split())
    assert "(inputs, output, gemm, layout, ozaki, run, summa tables;" in h
    assert list(SCHEMA) == ["inputs", "output", "gemm", "layout", "ozaki", "run", "summa"]


def test_demo_runs_end_to_end(tmp_path):
    r = run_cli(["demo", "--dir", tmp_path / "d", "--n", "128"])
    assert r.returncode == 0, r.stderr
    assert "ozhpc max / native max" in r.stdout
    assert json.loads((tmp_path / "d" / "run.json").read_text())["m"] == 128


def test_demo_dir_that_is_a_file_is_one_line(tmp_path):
    """--dir naming a file (or a path under one): one line, exit 2, the file kept."""
    (tmp_path / "f").write_text("mine")
    for d in (tmp_path / "f", tmp_path / "f" / "sub"):
        r = run_cli(["demo", "--dir", d, "--n", "8"])
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        reason = "File exists" if d.name == "f" else "Not a directory"
        assert r.stderr.splitlines() == [f"ozhpc demo: error: --dir {str(d)!r}: cannot create the directory "
                                         f"({reason})"]
    assert (tmp_path / "f").read_text() == "mine"


def test_demo_force_refuses_a_group_before_any_step(tmp_path):
    """--force replaces datasets, never a group: a group at out.h5:/C is refused before the demo
    writes in.h5 (which gemm would have refused only after both gen steps)."""
    d = tmp_path / "d"
    d.mkdir()
    with h5py.File(d / "out.h5", "w") as f:
        f.create_group("C")
    r = run_cli(["demo", "--dir", d, "--n", "8", "--force"])
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.splitlines() == [f"ozhpc demo: error: output {d}/out.h5:/C is a group; ozhpc never replaces a "
                                     "group, even with --force: name a dataset path"]
    assert sorted(p.name for p in d.iterdir()) == ["out.h5"]


def test_demo_prints_steps_a_shell_can_run(tmp_path):
    """Each step is printed quoted for a shell, so a --dir with a space copies and pastes right."""
    d = tmp_path / "my demo"
    r = run_cli(["demo", "--dir", d, "--n", "8"])
    assert r.returncode == 0, r.stderr
    steps = [line[len("$ ozhpc "):] for line in r.stdout.splitlines() if line.startswith("$ ozhpc ")]
    assert steps[0] == f"gen --phi 0.5 --shape 8x8 --seed 1 '{d}/in.h5:/A'"


def test_demo_replaces_nothing_without_force(tmp_path):
    """A second demo, or a directory that holds the user's own out.h5:/C or run.json, is refused in
    one line before any step (exit 2); every file keeps its bytes; --force replaces them."""

    def digests(d):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}

    d = tmp_path / "d"
    assert run_cli(["demo", "--dir", d, "--n", "16"]).returncode == 0
    before = digests(d)
    r = run_cli(["demo", "--dir", d, "--n", "16", "--phi", "1"])
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.splitlines() == [f"ozhpc demo: error: output {d}/in.h5:/A exists; pass --force to replace the "
                                     "demo's files"]
    assert digests(d) == before
    mine = tmp_path / "mine"
    mine.mkdir()
    for name, text in (("out.h5", None), ("run.json", "{}")):
        (mine / name).unlink(missing_ok=True)
        if text is None:
            with h5py.File(mine / name, "w") as f:
                f["C"] = np.arange(4.0)
        else:
            (mine / name).write_text(text)
        kept = digests(mine)
        r = run_cli(["demo", "--dir", mine, "--n", "16"])
        what = f"output {mine}/out.h5:/C" if text is None else f"report '{mine}/run.json'"
        assert (r.returncode, r.stderr.splitlines()) == (2, [f"ozhpc demo: error: {what} exists; pass --force to "
                                                             "replace the demo's files"])
        assert digests(mine) == kept   # no in.h5 made, nothing replaced
        (mine / "out.h5").unlink(missing_ok=True)
    r = run_cli(["demo", "--dir", d, "--n", "16", "--phi", "1", "--force"])
    assert r.returncode == 0, r.stderr
    assert digests(d)["in.h5"] != before["in.h5"]
