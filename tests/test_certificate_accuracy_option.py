"""The front end of the accuracy certificate: ``--accuracy`` / ``ozaki.accuracy``, what
``warn`` and ``strict`` do to a run (exit 3, nothing written / one warning line, C written), the
report's and the attributes' certificate fields, the summary line, and ``dist_gemm(accuracy=)``.

Runner-level tests make the certificate fail by patching ``Product.info``; the end-to-end tests
at the bottom use an input that scheme II's 100-bit cap cannot certify, in real subprocesses.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from dataclasses import replace

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from conftest import REPO, run_cli
from helpers.inputs import JOB_FILES
from ozhpc import cli
from ozhpc.errors import AccuracyError, AccuracyWarning, InputError, OptionError, cli_spelling
from ozhpc.io.h5io import DatasetRef
from ozhpc.ozaki.product import Product
from ozhpc.parallel import ProcessGrid, dist_gemm
from ozhpc.run.config import RunConfig
from ozhpc.run.jobfile import load_job
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.runner import execute

COMM = MPI.COMM_SELF
MPIEXEC = shutil.which("mpiexec")


def sha256_file(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def attrs_of(path, name="/C"):
    with h5py.File(path, "r") as f:
        return dict(f[name].attrs)


# ------------------------------------------------------------------ options

def test_bad_accuracy_option_exits_2_with_one_argparse_line(tmp_path):
    for command in (["gemm", f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B", "-o", f"{tmp_path}/o.h5:/C"],
                    ["run", f"{tmp_path}/job.toml"]):
        r = run_cli([*command, "--accuracy", "bogus"])
        assert r.returncode == 2
        # Python 3.12.8+ lists the choices without quotes.
        assert r.stderr.strip().splitlines()[-1] in {
            f"ozhpc {command[0]}: error: argument --accuracy: invalid choice: 'bogus' (choose from {choices})"
            for choices in ("'warn', 'strict'", "warn, strict")}
        assert not (tmp_path / "o.h5").exists()


def test_runconfig_checks_accuracy_in_the_api_words_and_the_cli_spells_it(tmp_path):
    ref = DatasetRef(str(tmp_path / "x.h5"), "/X")
    with pytest.raises(OptionError) as info:
        RunConfig(a=ref, b=ref, out=ref, accuracy="bogus")
    assert str(info.value) == "accuracy must be one of warn, strict, got 'bogus'"
    assert str(info.value.spelled(cli_spelling)) == "--accuracy must be one of warn, strict, got 'bogus'"
    cfg = RunConfig(a=ref, b=ref, out=ref, accuracy="strict")
    assert cfg.ozaki.accuracy == "strict" and cfg.describe()["accuracy"] == "strict"
    assert RunConfig(a=ref, b=ref, out=ref).accuracy == "warn"


JOB = JOB_FILES + """\
force = true
[ozaki]
engine = "numpy"
{ozaki}
[run]
progress = "off"
"""


def write_job(d, ozaki, name="job.toml"):
    path = d / name
    path.write_text(JOB.format(ozaki=ozaki))
    return path


@pytest.mark.parametrize("value, got", [('"bogus"', "'bogus'"), ("3", "3"), ('"Strict"', "'Strict'")])
def test_job_key_accuracy_bad_value_names_the_key(jobdir, value, got):
    path = write_job(jobdir, f"accuracy = {value}")
    with pytest.raises(InputError) as info:
        load_job(path)
    assert str(info.value) == f"{path}: ozaki.accuracy must be one of warn, strict, got {got}"
    r = run_cli(["run", path])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"ozhpc run: error: {path}: ozaki.accuracy must be one of warn, strict, got {got}"]


def test_job_key_accuracy_and_the_command_line_override(jobdir):
    path = write_job(jobdir, 'accuracy = "strict"')
    assert load_job(path).accuracy == "strict"
    assert load_job(path, accuracy=None).accuracy == "strict"
    assert load_job(path, accuracy="warn").accuracy == "warn"
    assert load_job(write_job(jobdir, "", "plain.toml")).accuracy == "warn"


# ------------------------------------------------------------------ runner, with a patched certificate

def patch_certificate(monkeypatch, certified, uncertified=0, worst=0.0, widths=()):
    """Make every product report this certificate (until the real one is wired in, and to reach
    each branch with any data)."""
    real = Product.info

    def info(self, seconds=None):
        return replace(real(self, seconds), certified=certified, uncertified=uncertified,
                       worst_ratio=worst, widths=[list(w) for w in widths])
    monkeypatch.setattr(Product, "info", info)


@pytest.fixture
def uncertified(monkeypatch):
    patch_certificate(monkeypatch, False, 7, 3.5, [(55, 9, 1e15), (100, 7, 3.5)])


@pytest.fixture
def inputs(tmp_path):
    src = tmp_path / "in.h5"
    with h5py.File(src, "w") as f:
        f["A"] = standard_matrix(24, 17, 0.5, 1)
        f["B"] = standard_matrix(17, 9, 0.5, 2)
    return src


def gemm_args(inputs, out, *extra):
    return ["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C", "--engine", "numpy",
            "--progress", "off", *map(str, extra)]


def existing_output(path):
    """An output file that already holds /C (replaced only by a run that writes)."""
    with h5py.File(path, "w") as f:
        f["C"] = np.full((24, 9), 7.0)
        f["other"] = np.arange(5.0)
    return sha256_file(path)


def test_strict_exits_3_with_one_line_and_writes_nothing(uncertified, inputs, tmp_path, capsys):
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    before = existing_output(out)
    listing = sorted(os.listdir(tmp_path))
    code = cli.main(gemm_args(inputs, out, "--accuracy", "strict", "--force", "--report", report), comm=COMM)
    captured = capsys.readouterr()
    assert code == cli.EXIT_ACCURACY == 3
    (line,) = captured.err.splitlines()
    assert re.fullmatch(r"ozhpc gemm: error: 7 of 216 entries of C are not certified to the guarantee 'dgemm', "
                        r"k\*u\*\(\|A\|\|B\|\)_ij \(worst bound 3\.5 times it\), even with \d+ bits, the widest "
                        r"plan of scheme ozaki2; nothing was written \(--accuracy strict\)", line), line
    assert captured.out == ""
    assert sha256_file(out) == before, "the output file keeps its bytes"
    assert sorted(os.listdir(tmp_path)) == listing, "no report, no temporary, no lock file"


def test_strict_from_the_job_file_names_its_key(uncertified, jobdir, capsys):
    path = write_job(jobdir, 'accuracy = "strict"')
    assert cli.main(["run", str(path)], comm=COMM) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].endswith('; nothing was written (ozaki.accuracy = "strict")'), err
    assert cli.main(["run", str(path), "--accuracy", "strict"], comm=COMM) == 3
    assert capsys.readouterr().err.endswith("; nothing was written (--accuracy strict)\n")
    assert not (jobdir / "out.h5").exists() and not (jobdir / "run.json").exists()
    assert cli.main(["run", str(path), "--accuracy", "warn"], comm=COMM) == 0
    assert (jobdir / "out.h5").exists() and json.loads((jobdir / "run.json").read_text())["certified"] is False


def test_warn_prints_one_line_and_writes_c_with_the_certificate(uncertified, inputs, tmp_path, capsys):
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    code = cli.main(gemm_args(inputs, out, "--report", report), comm=COMM)  # warn is the default
    captured = capsys.readouterr()
    assert code == 0
    (line,) = captured.err.splitlines()
    assert re.fullmatch(r"ozhpc gemm: warning: 7 of 216 entries of C are not certified to the guarantee 'dgemm', "
                        r"k\*u\*\(\|A\|\|B\|\)_ij \(worst bound 3\.5 times it\), even with \d+ bits, the widest "
                        r"plan of scheme ozaki2", line), line
    assert "  certified: NO, guarantee dgemm: 7 entries (worst bound ratio 3.5)" in captured.out.splitlines()
    attrs = attrs_of(out)
    assert attrs["ozhpc_certified"] == False  # noqa: E712 -- a numpy bool
    assert attrs["ozhpc_uncertified"] == 7 and attrs["ozhpc_worst_ratio"] == 3.5
    rep = json.loads(report.read_text())
    assert (rep["certified"], rep["uncertified"], rep["worst_ratio"]) == (False, 7, 3.5)
    assert rep["widths"] == [[55, 9, 1e15], [100, 7, 3.5]]
    assert rep["config"]["accuracy"] == "warn"
    # Readers of the attributes still work on it.
    assert cli.main(["fingerprint", f"{out}:/C"], comm=COMM) == 0
    assert cli.main(["check", f"{out}:/C", "--a", f"{inputs}:/A", "--b", f"{inputs}:/B", "--fingerprint"],
                    comm=COMM) == 0
    assert "matches its attribute" in capsys.readouterr().out


def test_runner_api_warns_and_raises_like_gemm(uncertified, inputs, tmp_path):
    def cfg(name, accuracy):
        return RunConfig(a=DatasetRef(str(inputs), "/A"), b=DatasetRef(str(inputs), "/B"),
                         out=DatasetRef(str(tmp_path / name), "/C"), engine="numpy", progress="off",
                         accuracy=accuracy)
    with pytest.raises(AccuracyError) as info:
        execute(cfg("strict.h5", "strict"), comm=COMM)
    assert info.value.info.certified is False and not (tmp_path / "strict.h5").exists()
    with pytest.warns(AccuracyWarning, match="7 of 216 entries"):
        report = execute(cfg("warn.h5", "warn"), comm=COMM)
    assert report["certified"] is False and (tmp_path / "warn.h5").exists()


def test_certified_run_reports_and_stores_it(monkeypatch, inputs, tmp_path, capsys):
    patch_certificate(monkeypatch, True, 0, 0.31, [(56, 0, 0.31)])
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        assert cli.main(gemm_args(inputs, out, "--accuracy", "strict", "--report", report), comm=COMM) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "  certified: yes, guarantee dgemm (worst bound ratio 0.31)" in captured.out.splitlines()
    rep = json.loads(report.read_text())
    assert (rep["certified"], rep["uncertified"], rep["worst_ratio"], rep["widths"]) == (True, 0, 0.31, [[56, 0, 0.31]])
    attrs = attrs_of(out)
    assert attrs["ozhpc_certified"] == True and attrs["ozhpc_uncertified"] == 0  # noqa: E712


@pytest.mark.parametrize("fixed, option", [(["--slices", "6"], "--slices"),
                                           (["--scheme", "ozaki2", "--bits", "40"], "--bits")])
def test_fixed_accuracy_is_not_checked(inputs, tmp_path, capsys, fixed, option):
    """Fixed slices / bits: certified null, no certificate attributes, even with --accuracy strict."""
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    assert cli.main(gemm_args(inputs, out, *fixed, "--accuracy", "strict", "--report", report), comm=COMM) == 0
    captured = capsys.readouterr()
    assert f"  certified: not checked (fixed {option})" in captured.out.splitlines()
    rep = json.loads(report.read_text())
    assert (rep["certified"], rep["uncertified"], rep["worst_ratio"], rep["widths"]) == (None, None, None, [])
    assert not {"ozhpc_certified", "ozhpc_uncertified", "ozhpc_worst_ratio"} & set(attrs_of(out))


def test_dist_gemm_accuracy(uncertified):
    a, b = standard_matrix(12, 10, 0.5, 1), standard_matrix(10, 8, 0.5, 2)
    with ProcessGrid(COMM) as grid:
        with pytest.raises(AccuracyError, match="7 of 96 entries"):
            dist_gemm(grid, a, b, block=(5, 3), accuracy="strict")
        with pytest.warns(AccuracyWarning, match="7 of 96 entries"):
            c, info = dist_gemm(grid, a, b, block=(5, 3), info=True)
        assert info.certified is False and c.gather(0).shape == (12, 8)
        with pytest.raises(InputError, match="accuracy must be one of warn, strict, got 'bogus'"):
            dist_gemm(grid, a, b, accuracy="bogus")


# ------------------------------------------------------------------ end to end, the real certificate

X = 2.0**-200 * (1 + 2.0**-52)
X_133 = 2.0**-80 * (1 + 2.0**-52)
N_HARD = 72
"""Rows [.., 1, .., x, ..] with x = 2**-200 (1 + 2**-52): C = A I = A needs 253 bits per row, more
than the widest plan of either scheme (scheme II's 100 bits, then scheme I's 24 slices = 168 bits):
N*(N-1) entries x fail. With x = 2**-80 (1 + 2**-52) (133 bits) scheme II continues past its cap
with scheme I's digits and certifies."""


def hard_file(tmp_path, x):
    a = np.full((N_HARD, N_HARD), x)
    np.fill_diagonal(a, 1.0)
    src = tmp_path / "hard.h5"
    with h5py.File(src, "w") as f:
        f["A"], f["I"] = a, np.eye(N_HARD)
    return src, a


@pytest.fixture
def hard(tmp_path):
    return hard_file(tmp_path, X)


NO_LEVELS = ("import sys; from ozhpc.ozaki.policy import Widening; "
             "Widening.refine_or = lambda self, step, *args: step; "
             "from ozhpc.cli import entry_point; sys.argv[0] = 'ozhpc'; entry_point()")
"""``python -m ozhpc`` with the refinement by levels of scales off: every finite input is certified
with it, so the failure paths of --accuracy are reached on data no plan alone certifies."""


def run_without_levels(args, timeout=120):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", NO_LEVELS, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_the_hard_input_is_certified_exactly_by_levels(hard, tmp_path):
    """The input no plan certifies (the docs' example): with levels of scales, strict succeeds and C
    is A itself, bit for bit, the refined entries counted in the report."""
    src, a = hard
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    r = run_cli(hard_args(src, out, "--scheme", "ozaki2", "--accuracy", "strict", "--report", report))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    rep = json.loads(report.read_text())
    assert rep["certified"] is True and rep["refined_entries"] == N_HARD * (N_HARD - 1) and rep["levels"] >= 2
    with h5py.File(out, "r") as f:
        assert f["C"][...].tobytes() == a.tobytes()


def hard_args(src, out, *extra):
    return ["gemm", f"{src}:/A", f"{src}:/I", "-o", f"{out}:/C", "--engine", "numpy", "--progress", "off", *extra]


STRICT_LINE = re.compile(rf"ozhpc gemm: error: \d+ of {N_HARD * N_HARD} entries of C are not certified to the "
                         r"guarantee '(dgemm|tight)', .* nothing was written \(--accuracy strict\)")


def test_scheme2_cannot_certify_strict_exits_3_and_writes_nothing(hard, tmp_path):
    src, _ = hard
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    with h5py.File(out, "w") as f:
        f["C"] = np.zeros((N_HARD, N_HARD))
    before, listing = sha256_file(out), sorted(os.listdir(tmp_path))
    r = run_without_levels(hard_args(src, out, "--scheme", "ozaki2", "--accuracy", "strict", "--force", "--report", report))
    assert r.returncode == 3, r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and STRICT_LINE.fullmatch(lines[0]), r.stderr
    assert r.stdout == ""
    assert sha256_file(out) == before and sorted(os.listdir(tmp_path)) == listing


def test_scheme2_cannot_certify_warn_writes_c_and_says_so(hard, tmp_path):
    src, a = hard
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    r = run_without_levels(hard_args(src, out, "--scheme", "ozaki2", "--accuracy", "warn", "--report", report))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ozhpc gemm: warning: "), r.stderr
    assert f"of {N_HARD * N_HARD} entries of C are not certified" in lines[0]
    attrs = attrs_of(out)
    assert attrs["ozhpc_certified"] == False and attrs["ozhpc_uncertified"] > 0  # noqa: E712
    rep = json.loads(report.read_text())
    assert rep["certified"] is False and rep["uncertified"] == attrs["ozhpc_uncertified"] and rep["widths"]
    assert f"  certified: NO, guarantee dgemm: {rep['uncertified']} entries" in r.stdout
    with h5py.File(out, "r") as f:
        assert f["C"].shape == a.shape


@pytest.mark.parametrize("scheme", ["ozaki1", "ozaki2"])
def test_133_bit_rows_certify_in_either_scheme(tmp_path, scheme):
    src, a = hard_file(tmp_path, X_133)
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    r = run_cli(hard_args(src, out, "--scheme", scheme, "--accuracy", "strict", "--report", report))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    rep = json.loads(report.read_text())
    assert rep["certified"] is True and rep["uncertified"] == 0 and rep["worst_ratio"] <= 1.0 and rep["widths"]
    assert attrs_of(out)["ozhpc_certified"] == True  # noqa: E712
    assert "  certified: yes, guarantee dgemm (worst bound ratio" in r.stdout
    with h5py.File(out, "r") as f:
        c = f["C"][...]
    assert np.all(np.abs(c - a) <= 2.0**-52 * np.abs(a))  # C = A I within the certified bound


@pytest.mark.mpi
def test_strict_under_mpiexec_every_rank_exits_3(hard, tmp_path):
    if MPIEXEC is None:
        pytest.skip("mpiexec not found")
    src, _ = hard
    out = tmp_path / "out.h5"
    with h5py.File(out, "w") as f:
        f["C"] = np.zeros((N_HARD, N_HARD))
    before = sha256_file(out)
    # Each rank records its own exit status (the launcher reports only one).
    script = ('"$PYTHON" -c "$NO_LEVELS" "$@"; code=$?; '
              'echo $code > "$STATUS_DIR/rank.${PMI_RANK:-$OMPI_COMM_WORLD_RANK}"; exit $code')
    (tmp_path / "status").mkdir()
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               STATUS_DIR=str(tmp_path / "status"), PYTHON=sys.executable, NO_LEVELS=NO_LEVELS)
    proc = subprocess.run([MPIEXEC, "-n", "2", "sh", "-c", script, "sh",
                           *hard_args(src, out, "--scheme", "ozaki2", "--accuracy", "strict", "--force",
                                      "--grid", "2x1", "--block", "16")],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and STRICT_LINE.fullmatch(lines[0]), proc.stderr
    statuses = {p.name: p.read_text().strip() for p in (tmp_path / "status").iterdir()}
    assert statuses == {"rank.0": "3", "rank.1": "3"}
    assert sha256_file(out) == before
    assert sorted(os.listdir(tmp_path)) == ["hard.h5", "out.h5", "status"]


def _no_constants(name):
    raise AssertionError(f"non-standard JSON constant {name} in the report")


def test_an_infinite_worst_ratio_is_strict_json(monkeypatch, inputs, tmp_path, capsys):
    """An entry with an error bound but no lower bound has ratio inf: the report stays valid JSON
    (jq and most parsers reject Python's ``Infinity``): the string "inf"."""
    patch_certificate(monkeypatch, False, 1, float("inf"), [(100, 1, float("inf"))])
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    assert cli.main(gemm_args(inputs, out, "--report", report), comm=COMM) == 0
    capsys.readouterr()
    rep = json.loads(report.read_text(), parse_constant=_no_constants)
    assert rep["worst_ratio"] == "inf" and rep["widths"] == [[100, 1, "inf"]]
    assert attrs_of(out)["ozhpc_worst_ratio"] == float("inf")


def test_json_safe_spells_every_non_finite_number():
    from ozhpc.run.report import to_json

    text = to_json({"a": float("-inf"), "b": [float("nan"), 1.5, np.float64(np.inf)], "c": (2, None)})
    assert json.loads(text, parse_constant=_no_constants) == {"a": "-inf", "b": ["nan", 1.5, "inf"], "c": [2, None]}


def test_the_numpy_engine_reports_no_kernel_counts(inputs, tmp_path, capsys):
    """`"kernels"` is for GPU engines (loaded from the kernel store / compiled); null otherwise."""
    out, report = tmp_path / "out.h5", tmp_path / "run.json"
    assert cli.main(gemm_args(inputs, out, "--report", report), comm=COMM) == 0
    assert "GPU kernels" not in capsys.readouterr().out
    assert json.loads(report.read_text())["kernels"] is None


def test_guarantee_tight_from_the_command_line_and_the_job_file(hard, jobdir, tmp_path):
    """--guarantee / ozaki.guarantee reach the certificate: the uncertifiable input names the level
    in its one line (exit 3 under strict); a certified run records it in the report and the
    attributes; a bad value is one line naming the key."""
    src, _ = hard
    r = run_without_levels(hard_args(src, tmp_path / "o.h5", "--guarantee", "tight", "--accuracy", "strict"))
    assert r.returncode == 3 and "guarantee 'tight', u*(|A||B|)_ij" in r.stderr and len(r.stderr.splitlines()) == 1
    path = write_job(jobdir, 'guarantee = "tight"')
    assert load_job(path).guarantee == "tight"
    assert run_cli(["run", path]).returncode == 0
    rep = json.loads((jobdir / "run.json").read_text())
    assert rep["guarantee"] == "tight" and rep["config"]["guarantee"] == "tight" and rep["certified"] is True
    assert attrs_of(jobdir / "out.h5")["ozhpc_guarantee"] == "tight"
    bad = write_job(jobdir, 'guarantee = "loose"', "bad.toml")
    r = run_cli(["run", bad])
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f'ozhpc run: error: {bad}: ozaki.guarantee must be one of "dgemm", "tight", got string "loose"']
