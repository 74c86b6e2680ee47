"""Job files: validation errors (exact messages, exit 2 through the CLI), relative paths,
overrides, and the report a job run writes (every field, SHA-256 of the written C)."""
import hashlib
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import REPO, run_cli
from helpers.inputs import JOB_FILES
from ozhpc.errors import InputError
from ozhpc.io.h5io import DatasetRef
from ozhpc.run.config import RunConfig
from ozhpc.run.jobfile import SCHEMA, load_job, parse_job

GOOD = JOB_FILES




def write_job(d, text, name="job.toml"):
    path = d / name
    path.write_text(text)
    return path


def error_of(path, **kw):
    with pytest.raises(InputError) as info:
        load_job(path, **kw)
    return str(info.value)


# ----------------------------------------------------------------- validation messages

@pytest.mark.parametrize("extra, message", [
    ("[gemm]\nalpha = \"x\"\n", 'gemm.alpha must be a number, got string "x"'),
    ("[gemm]\nbeta = true\n", "gemm.beta must be a number, got boolean true"),
    ("[gemm]\ntransa = 1\n", 'gemm.transa must be true, false, "N", "T" or "C", got integer 1'),
    ("[layout]\ngrid = 4\n", 'layout.grid must be "auto" or a string "PxQ", got integer 4'),
    ("[layout]\ngrid = \"2y2\"\n", "layout.grid must be N or MxN with positive integers, got '2y2'"),
    ("[layout]\nblock = 0\n", "layout.block must be positive, got integer 0"),
    ("[layout]\nblock = 2.5\n", 'layout.block must be an integer NB or a string "MBxNB", got float 2.5'),
    ("[ozaki]\nslices = 99\n", "ozaki.slices must be between 1 and 24, got 99"),
    ("[ozaki]\nslices = \"many\"\n", "ozaki.slices must be 'auto' or an integer, got 'many'"),
    ("[ozaki]\nengine = \"cuda\"\n", 'ozaki.engine must be one of "auto", "numpy", "cutile", got string "cuda"'),
    ("[run]\nprogress = \"yes\"\n", 'run.progress must be one of "auto", "bar", "log", "off", got string "yes"'),
    ("[run]\ntransport = \"tcp\"\n",
     'run.transport must be one of "auto", "nccl", "cuda-mpi", "mpi-host", got string "tcp"'),
    ("[layout]\npanel = \"wide\"\n", 'layout.panel must be "auto" or a positive integer, got string "wide"'),
    ("[layout]\npanel = -4\n", "layout.panel must be 'auto' or an integer between 1 and 2147483647, got -4"),
    ("[gemm]\nalpah = 2.0\n",
     "unknown key gemm.alpah (did you mean gemm.alpha?); allowed in [gemm]: transa, transb, alpha, beta"),
    ("[layout]\nblocks = 4\n",
     "unknown key layout.blocks (did you mean layout.block?); allowed in [layout]: grid, block, panel"),
    ("[layuot]\ngrid = \"auto\"\n",
     "unknown table [layuot] (did you mean [layout]?); allowed tables: "
     "[inputs], [output], [gemm], [layout], [ozaki], [run], [summa]"),
    ("[gemm]\nbeta = 0.5\n", 'gemm.beta = 0.5 needs an input C: add inputs.c = "FILE.h5:/C"'),
    ("[ozaki]\nscheme = \"ozaki3\"\n", 'ozaki.scheme must be one of "ozaki1", "ozaki2", got string "ozaki3"'),
    ("[ozaki]\nscheme = \"ozaki2\"\nbits = 7\n", "ozaki.bits must be between 8 and 100, got 7"),
    ("[ozaki]\nscheme = \"ozaki2\"\nbits = 101\n", "ozaki.bits must be between 8 and 100, got 101"),
    ("[ozaki]\nscheme = \"ozaki2\"\nbits = \"many\"\n", "ozaki.bits must be 'auto' or an integer, got 'many'"),
    ("[ozaki]\nscheme = \"ozaki2\"\nbits = true\n", 'ozaki.bits must be "auto" or an integer, got boolean true'),
    ("[ozaki]\nscheme = \"ozaki2\"\nbits = 40.0\n", 'ozaki.bits must be "auto" or an integer, got float 40.0'),
    ("[ozaki]\nbit = 40\n",
     "unknown key ozaki.bit (did you mean ozaki.bits?); allowed in [ozaki]: scheme, slices, groups, bits, "
     "guarantee, accuracy, engine"),
    ("[ozaki]\naccuracy = \"bogus\"\n", "ozaki.accuracy must be one of warn, strict, got 'bogus'"),
    ("[ozaki]\naccuracy = true\n", "ozaki.accuracy must be one of warn, strict, got True"),
    ("[ozaki]\nscheme = \"ozaki2\"\nslices = 8\n",
     'ozaki.slices = 8 is an option of ozaki.scheme = "ozaki1"; with ozaki.scheme = "ozaki2" leave it out '
     "and set the accuracy with ozaki.bits"),
    ("[ozaki]\ngroups = \"all\"\nscheme = \"ozaki2\"\nslices = 8\nbits = 40\n",
     'ozaki.slices = 8 and ozaki.groups = "all" are options of ozaki.scheme = "ozaki1"; with ozaki.scheme = '
     '"ozaki2" leave them out and set the accuracy with ozaki.bits'),
    ("[ozaki]\nscheme = \"ozaki1\"\nslices = 6\nbits = 30\n",
     'ozaki.bits = 30 needs ozaki.scheme = "ozaki2" (the scheme here is "ozaki1", whose accuracy is set by '
     'ozaki.slices)'),
])
def test_bad_values_name_file_table_and_key(jobdir, extra, message):
    path = write_job(jobdir, GOOD + extra)
    assert error_of(path) == f"{path}: {message}"


def test_table_of_wrong_type(jobdir):
    path = write_job(jobdir, "gemm = 3\n" + GOOD)
    assert error_of(path) == f"{path}: gemm must be a table [gemm], got integer 3"
    path = write_job(jobdir, GOOD + "[inputs.extra]\n")
    assert error_of(path) == f"{path}: unknown key inputs.extra; allowed in [inputs]: a, b, c"


@pytest.mark.parametrize("text, message", [
    (GOOD.replace('a = "in.h5:/A"\n', ""), "missing required key inputs.a"),
    (GOOD.replace('c = "out.h5:/C"\n', ""), "missing required key output.c"),
    ('[inputs]\na = "in.h5:/A"\nb = "in.h5:/B"\n', "missing required key output.c (the file has no [output] table)"),
    (GOOD.replace('"in.h5:/A"', '"in.h5"'), "inputs.a 'in.h5' must be written FILE.h5:/dataset"),
    (GOOD.replace('"in.h5:/A"', "3"), 'inputs.a must be a string "FILE.h5:/dataset", got integer 3'),
])
def test_missing_and_malformed_keys(jobdir, text, message):
    path = write_job(jobdir, text)
    assert error_of(path) == f"{path}: {message}"


def test_missing_input_file_and_dataset_reuse_h5io_checks(jobdir):
    path = write_job(jobdir, GOOD.replace("in.h5:/B", "nope.h5:/B"))
    assert error_of(path) == f"{path}: inputs.b file {str(jobdir / 'nope.h5')!r} does not exist"
    path = write_job(jobdir, GOOD.replace("in.h5:/B", "in.h5:/Q"))
    assert error_of(path) == f"{path}: inputs.b dataset '/Q' not found in {str(jobdir / 'in.h5')!r}"
    path = write_job(jobdir, GOOD.replace("in.h5:/B", "in.h5:/V"))
    assert error_of(path) == f"{path}: inputs.b {jobdir / 'in.h5'}:/V must be 2-D, has shape (5,)"
    # check_files=False only parses
    assert load_job(path, check_files=False).b == DatasetRef(str(jobdir / "in.h5"), "/V")


def test_toml_syntax_error_has_line_and_column(jobdir):
    path = write_job(jobdir, GOOD + "[gemm]\nalpha = = 2\n")
    assert error_of(path) == f"{path}: TOML syntax error: Invalid value (at line 8, column 9)"


def test_a_byte_order_mark_is_not_read_as_toml(jobdir):
    plain = load_job(write_job(jobdir, GOOD), check_files=False)
    path = jobdir / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert load_job(path, check_files=False) == plain
    path.write_bytes(b"\xef\xbb\xbf" + b"\xef\xbb\xbf" + GOOD.encode())   # only one leading mark is skipped
    assert error_of(path, check_files=False).startswith(f"{path}: TOML syntax error")


def test_grid_that_does_not_match_the_ranks_names_layout_grid(jobdir):
    from mpi4py import MPI

    path = write_job(jobdir, GOOD + '[layout]\ngrid = "2x2"\n')
    assert error_of(path, comm=MPI.COMM_SELF) == (
        f'{path}: layout.grid = "2x2" needs 4 MPI ranks, but the job has 1 '
        '(run with mpiexec/srun -n 4, or set grid = "auto")')
    assert load_job(write_job(jobdir, GOOD + '[layout]\ngrid = "1x1"\n'), comm=MPI.COMM_SELF).grid == (1, 1)


def test_job_file_itself_missing(tmp_path):
    assert error_of(tmp_path / "no.toml") == f"job file {str(tmp_path / 'no.toml')!r} does not exist"


def test_job_file_that_is_not_a_regular_file(tmp_path):
    """A directory, a FIFO (which would wait for a writer forever) or a device: one line, exit 2."""
    os.mkfifo(tmp_path / "fifo.toml")
    for path, what in ((tmp_path, "a directory"), (tmp_path / "fifo.toml", "not a regular file"),
                       ("/dev/zero", "not a regular file")):
        r = run_cli(["run", path, "--dry-run"], timeout=30)
        assert (r.returncode, r.stdout, r.stderr) == (2, "", f"ozhpc run: error: job file {str(path)!r} is {what}\n")


# ----------------------------------------------------------------- what a good file gives

def test_full_schema_maps_onto_runconfig(jobdir):
    text = """
[inputs]
a = "in.h5:/A"
b = "in.h5:/B"
c = "in.h5:/C0"
[output]
c = "out.h5:/C"
report = "run.json"
force = true
[gemm]
transa = false
transb = false
alpha = 2
beta = -1.5
[layout]
grid = "1x3"
block = "8x4"
panel = 3
[ozaki]
scheme = "ozaki1"
slices = 9
groups = "all"
bits = "auto"
accuracy = "strict"
engine = "numpy"
[run]
progress = "off"
transport = "mpi-host"
"""
    path = write_job(jobdir, text)
    cfg = load_job(path)
    d = str(jobdir)
    assert cfg == RunConfig(a=DatasetRef(f"{d}/in.h5", "/A"), b=DatasetRef(f"{d}/in.h5", "/B"),
                            c=DatasetRef(f"{d}/in.h5", "/C0"), out=DatasetRef(f"{d}/out.h5", "/C"),
                            report=f"{d}/run.json", force=True, transa=False, transb=False,
                            alpha=2.0, beta=-1.5, grid=(1, 3), block=(8, 4), scheme="ozaki1", slices=9,
                            groups="all", bits="auto", accuracy="strict",
                            engine="numpy", progress="off", transport="mpi-host", panel=3)
    assert isinstance(cfg.alpha, float)


@pytest.mark.parametrize("ozaki, scheme, bits, slices", [
    ('scheme = "ozaki2"\nbits = 40\n', "ozaki2", 40, "auto"),
    ('scheme = "ozaki2"\nbits = "auto"\nslices = "auto"\ngroups = "auto"\n', "ozaki2", "auto", "auto"),
    ('scheme = "ozaki1"\nbits = "auto"\nslices = 6\n', "ozaki1", "auto", 6),
    ('slices = 6\n', "ozaki1", "auto", 6),        # slices imply scheme I
    ('bits = 40\n', "ozaki2", 40, "auto"),         # the default scheme II
])
def test_scheme_and_bits_keys(jobdir, ozaki, scheme, bits, slices):
    cfg = load_job(write_job(jobdir, GOOD + "[ozaki]\n" + ozaki))
    assert (cfg.ozaki.scheme, cfg.bits, cfg.slices, cfg.groups) == (scheme, bits, slices, "auto")


def test_defaults_come_from_runconfig_only(jobdir):
    cfg = load_job(write_job(jobdir, GOOD))
    defaults = RunConfig(a=cfg.a, b=cfg.b, out=cfg.out, report=cfg.report)
    assert cfg == defaults
    assert cfg.c is None


def test_input_c_is_dropped_when_beta_is_zero(jobdir):
    cfg = load_job(write_job(jobdir, GOOD.replace('b = "in.h5:/B"', 'b = "in.h5:/B"\nc = "in.h5:/C0"')))
    assert cfg.c is None


def test_relative_paths_are_relative_to_the_job_file(jobdir, tmp_path, monkeypatch):
    (jobdir / "sub").mkdir()
    path = write_job(jobdir / "sub", GOOD.replace("in.h5", "../in.h5").replace('"run.json"', '"../r/run.json"'))
    absolute = write_job(jobdir, GOOD.replace("out.h5", str(tmp_path / "abs.h5")), "abs.toml")
    monkeypatch.chdir(tmp_path)
    cfg = load_job(os.path.relpath(path))
    assert cfg.a == DatasetRef(str(jobdir / "in.h5"), "/A")
    assert cfg.out == DatasetRef(str(jobdir / "sub" / "out.h5"), "/C")
    assert cfg.report == str(jobdir / "r" / "run.json")
    assert load_job(absolute).out == DatasetRef(str(tmp_path / "abs.h5"), "/C")


def test_overrides_replace_file_values(jobdir):
    cfg = load_job(write_job(jobdir, GOOD), force=True, report="other.json", progress=None)
    assert cfg.force and cfg.report == "other.json" and cfg.progress == "auto"


def test_schema_keys_are_runconfig_fields():
    fields = set(RunConfig.__dataclass_fields__)
    for table, keys in SCHEMA.items():
        for key, spec in keys.items():
            assert spec.field in fields, f"{table}.{key}"


def test_home_is_expanded(jobdir):
    kwargs = parse_job('[inputs]\na = "~/a.h5:/A"\nb = "b.h5:/B"\n[output]\nc = "c.h5:/C"\nreport = "~/r.json"\n',
                       "t", "/base")
    assert kwargs["a"] == DatasetRef(os.path.expanduser("~/a.h5"), "/A")
    assert kwargs["report"] == os.path.expanduser("~/r.json")


def test_parse_job_is_pure():
    kwargs = parse_job('[inputs]\na = "/x/a.h5:/A"\nb = "b.h5:/B"\n[output]\nc = "c.h5:/C"\n', "t", "/base")
    assert kwargs["a"] == DatasetRef("/x/a.h5", "/A") and kwargs["b"] == DatasetRef("/base/b.h5", "/B")


# ----------------------------------------------------------------- through the CLI

def test_an_empty_report_path_is_refused_not_taken_for_the_directory(jobdir):
    """``output.report = ""`` names no file: refused before the run (it used to resolve to the job
    file's directory, and the empty --report to no report at all)."""
    path = write_job(jobdir, GOOD.replace('report = "run.json"', 'report = ""'))
    assert error_of(path) == f"{path}: output.report must not be an empty path"
    proc = run_cli(["run", path, "--progress", "off"])
    assert (proc.returncode, proc.stderr) == (2, f"ozhpc run: error: {path}: output.report must not be an empty path\n")
    assert not (jobdir / "out.h5").exists()


def test_cli_errors_exit_2_with_the_message(jobdir):
    path = write_job(jobdir, GOOD + "[gemm]\nalpha = \"x\"\n")
    proc = run_cli(["run", path])
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == f'ozhpc run: error: {path}: gemm.alpha must be a number, got string "x"'
    assert not (jobdir / "out.h5").exists()

    path = write_job(jobdir, GOOD.replace("in.h5:/A", "missing.h5:/A"))
    proc = run_cli(["run", path])
    assert proc.returncode == 2
    assert f"{path}: inputs.a file {str(jobdir / 'missing.h5')!r} does not exist" in proc.stderr

    proc = run_cli(["run", jobdir / "absent.toml"])
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_scheme_ozaki2_job_through_the_cli(jobdir, tmp_path):
    """``ozhpc run`` with [ozaki] scheme = "ozaki2": the bits of ozhpc.gemm(scheme="ozaki2", bits=...),
    the report says so; an option of the other scheme is one error line, exit 2, no output."""
    import ozhpc

    path = write_job(jobdir, GOOD + '[layout]\nblock = 4\npanel = 3\n[ozaki]\nscheme = "ozaki2"\nbits = 30\n'
                                    '[run]\nprogress = "off"\n')
    proc = run_cli(["run", path])
    assert proc.returncode == 0, proc.stderr
    with h5py.File(jobdir / "in.h5", "r") as f:
        want, info = ozhpc.gemm(f["A"][...], f["B"][...], engine="numpy", scheme="ozaki2", bits=30, info=True)
    report = json.loads((jobdir / "run.json").read_text())
    assert report["sha256"] == sha256_of_dataset(jobdir / "out.h5", "/C") == hashlib.sha256(want.tobytes()).hexdigest()
    assert (report["scheme"], report["bits"], report["moduli"]) == ("ozaki2", 30, info.moduli)
    assert report["config"]["scheme"] == "ozaki2" and report["config"]["bits"] == 30

    bad = write_job(jobdir, GOOD.replace("out.h5", "bad.h5") + '[ozaki]\nscheme = "ozaki2"\ngroups = 3\n', "bad.toml")
    proc = run_cli(["run", bad])
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f'ozhpc run: error: {bad}: ozaki.groups = 3 is an option of ozaki.scheme = "ozaki1"; with ozaki.scheme = '
        '"ozaki2" leave it out and set the accuracy with ozaki.bits']
    assert not (jobdir / "bad.h5").exists()


def sha256_of_dataset(path, name):
    with h5py.File(path, "r") as f:
        data = f[name][...]
    assert data.dtype == np.dtype("<f8")
    return hashlib.sha256(np.ascontiguousarray(data, dtype="<f8").tobytes()).hexdigest()


REPORT_FIELDS = {
    "ozhpc_version", "date", "host", "python", "numpy", "config", "m", "n", "k", "ranks", "grid",
    "block", "engine", "scheme", "bits", "moduli", "slices", "groups", "int8_gemms", "error_bound", "seconds",
    "bytes_sent", "gflops", "tflops", "sha256", "certified", "uncertified", "worst_ratio", "widths",
}
PHASES = {"read", "split", "multiply", "combine", "write", "total"}


def check_report(report, m, n, k, ranks, grid, block, c_file, c_name="/C"):
    missing = REPORT_FIELDS - set(report)
    assert not missing, f"report lacks {sorted(missing)}"
    assert (report["m"], report["n"], report["k"]) == (m, n, k)
    assert report["ranks"] == ranks
    assert report["grid"] == list(grid)
    assert report["block"] == list(block)
    assert PHASES <= set(report["seconds"]), report["seconds"]
    assert all(v >= 0 for v in report["seconds"].values())
    assert len(report["bytes_sent"]["per_rank"]) == ranks
    assert report["tflops"] >= 0 and report["gflops"] >= 0
    assert report["sha256"] == sha256_of_dataset(c_file, c_name)


def test_run_writes_c_and_a_complete_report(jobdir, tmp_path):
    text = GOOD.replace('b = "in.h5:/B"', 'b = "in.h5:/B"\nc = "in.h5:/C0"') + """
[gemm]
alpha = 0.5
beta = 2.0
[layout]
block = "4x3"
[ozaki]
engine = "numpy"
[run]
progress = "off"
"""
    path = write_job(jobdir, text)
    proc = run_cli(["run", os.path.relpath(path, tmp_path)], cwd=tmp_path)  # relative to the file, not the cwd
    assert proc.returncode == 0, proc.stderr
    report = json.loads((jobdir / "run.json").read_text())
    check_report(report, 13, 7, 11, 1, (1, 1), (4, 3), jobdir / "out.h5")
    assert report["config"]["alpha"] == 0.5 and report["config"]["beta"] == 2.0

    # Same product through `ozhpc gemm`: the same bits.
    proc = run_cli(["gemm", jobdir / "in.h5:/A", jobdir / "in.h5:/B", "-o", tmp_path / "g.h5:/C",
                    "--c", jobdir / "in.h5:/C0", "--alpha", "0.5", "--beta", "2", "--engine", "numpy",
                    "--progress", "off"])
    assert proc.returncode == 0, proc.stderr
    assert sha256_of_dataset(tmp_path / "g.h5", "/C") == report["sha256"]

    # The output exists now: a rerun needs --force (exit 2), and --report overrides.
    proc = run_cli(["run", path])
    assert proc.returncode == 2 and "exists; pass --force" in proc.stderr
    proc = run_cli(["run", path, "--force", "--report", tmp_path / "r2.json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r2.json").read_text())["sha256"] == report["sha256"]


@pytest.mark.mpi
def test_run_under_mpiexec_matches_one_rank(jobdir, tmp_path):
    """4 ranks on a 2x2 grid (ragged blocks) give the bits of the 1-rank run, and the report says so."""
    import shutil

    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("no mpiexec")
    base = GOOD + "[layout]\nblock = 5\ngrid = \"{grid}\"\n[ozaki]\nengine = \"numpy\"\n[run]\nprogress = \"off\"\n"
    one = write_job(jobdir, base.format(grid="1x1"), "one.toml")
    four = write_job(jobdir, base.format(grid="2x2").replace("out.h5", "out4.h5").replace("run.json", "run4.json"),
                     "four.toml")
    assert run_cli(["run", one]).returncode == 0
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([mpiexec, "-n", "4", sys.executable, "-m", "ozhpc", "run", str(four)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    r1 = json.loads((jobdir / "run.json").read_text())
    r4 = json.loads((jobdir / "run4.json").read_text())
    check_report(r4, 13, 7, 11, 4, (2, 2), (5, 5), jobdir / "out4.h5")
    assert r4["sha256"] == r1["sha256"]


def test_shipped_jobs_parse():
    jobs = os.path.join(REPO, "jobs")
    names = sorted(n for n in os.listdir(jobs) if n.endswith(".toml"))
    assert {"demo.toml", "grid2x2.toml", "gpu_cluster.toml"} <= set(names)
    for name in names:
        load_job(os.path.join(jobs, name), check_files=False)
