"""Nothing lost whatever a file is called and however full its disk: other names of an input, a
trailing '/', a full disk while C is written, the job file as the report, virtual datasets with
missing sources; and the file-opening failures of check / fingerprint. Every refusal: exit status 2, one error line naming the culprit, no
traceback, inputs byte-identical, no leftovers; and the next run on the same file works.

Most cases run one process; a few run under mpiexec (2-3 ranks).
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from h5py import h5d, h5p, h5z

from conftest import run_cli
from ozhpc.errors import InputError
from ozhpc.io import h5out
from ozhpc.io.h5io import DatasetRef, dataset_path
from ozhpc.run.matrices import standard_matrix
from test_output_safety import N, assert_refused, digest, env, gemm, leftovers, run, temp_datasets
from helpers.inputs import square_inputs
from helpers.outputs import write_whole

pytestmark = pytest.mark.mpi

NUMPY = ["--engine", "numpy", "--progress", "off", "--block", "16"]


@pytest.fixture
def d(tmp_path):
    return square_inputs(tmp_path, N)


def one(args, cwd, env_extra=None):
    """One process, no launcher: (CompletedProcess, seconds)."""
    t0 = time.monotonic()
    proc = run_cli(args, cwd=cwd, env=env_extra)
    return proc, time.monotonic() - t0


def assert_next_run_works(d, target="in.h5"):
    """The file still takes a result: a plain product into a new dataset, exit 0, C complete."""
    proc, _ = one(["gemm", "in.h5:/A", "in.h5:/B", "-o", f"{target}:/next", *NUMPY], d)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(d / target, "r") as f, h5py.File(d / "in.h5", "r") as g:
        assert f["next"].shape == g["A"].shape and np.isfinite(f["next"][...]).all()
    assert leftovers(d) == [] and temp_datasets(d / target) == []


def data_of(path) -> dict:
    """Every dataset of a file, by name (the bytes a user has)."""
    out = {}

    def keep(name, obj):  # returns None: visititems goes on
        if isinstance(obj, h5py.Dataset):
            out[name] = obj[...].tobytes()
    with h5py.File(path, "r") as f:
        f.visititems(keep)
    return out


# ---- 1. another spelling of an input ------------------------------------------------------

def _links(d):
    """Other names of in.h5 and of its /A: symlink, hard link, HDF5 hard / soft / external links."""
    os.symlink("in.h5", d / "sym.h5")
    os.link(d / "in.h5", d / "hard.h5")
    with h5py.File(d / "in.h5", "a") as f:
        f["L"] = f["A"]
        f["S"] = h5py.SoftLink("/A")
        f.create_group("G")["up"] = h5py.SoftLink("/")
    with h5py.File(d / "other.h5", "w") as f:
        f["E"] = h5py.ExternalLink("in.h5", "/A")


SPELLINGS = {
    # output -> input A as spelled
    "//A": ("in.h5://A", "in.h5:/A"),
    "/./A": ("in.h5:/./A", "in.h5:/A"),
    "/A/.": ("in.h5:/A/.", "in.h5:/A"),
    "input //A": ("in.h5:/A", "in.h5://A"),
    "./in.h5": ("./in.h5:/A", "in.h5:/A"),
    "absolute file": ("{d}/in.h5:/A", "in.h5:/A"),
    "symlinked file": ("sym.h5:/A", "in.h5:/A"),
    "hard-linked file": ("hard.h5:/A", "in.h5:/A"),
    "HDF5 hard link": ("in.h5:/L", "in.h5:/A"),
    "HDF5 soft link": ("in.h5:/S", "in.h5:/A"),
    "through a soft link to /": ("in.h5:/G/up/A", "in.h5:/A"),
    "HDF5 external link": ("other.h5:/E", "in.h5:/A"),
}


@pytest.mark.parametrize("case", list(SPELLINGS))
def test_other_spelling_of_an_input_is_the_input(d, case):
    _links(d)
    out, a = (s.format(d=d) for s in SPELLINGS[case])
    before = {n: digest(d / n) for n in ("in.h5", "other.h5")}
    proc, seconds = one(["gemm", a, "in.h5:/B", "-o", out, "--force", *NUMPY], d)
    # an output through an external link is refused as such, whatever it leads to
    assert_refused(proc, seconds, "/E is an external link" if "external" in case else "is an input of this run")
    assert {n: digest(d / n) for n in before} == before and leftovers(d) == []


@pytest.mark.parametrize("link,needle", [
    (h5py.SoftLink("/nothing"), "/D is a soft or external link that points to nothing"),
    (h5py.ExternalLink("gone.h5", "/x"), "/D is an external link (to gone.h5:/x)")])
def test_dangling_link_at_the_output_refused_before_the_compute(d, link, needle):
    with h5py.File(d / "in.h5", "a") as f:
        f["D"] = link
    before = digest(d / "in.h5")
    proc, seconds = one(["gemm", "in.h5:/A", "in.h5:/B", "-o", "in.h5:/D", "--force", *NUMPY], d)
    assert_refused(proc, seconds, f"output in.h5:/D: {needle}")
    assert digest(d / "in.h5") == before and leftovers(d) == []


def test_other_spelling_refused_under_mpiexec(d):
    before = digest(d / "in.h5")
    proc, seconds = gemm(3, d, "in.h5://./A", "--force")
    assert_refused(proc, seconds, "output in.h5:/A is an input of this run")
    assert digest(d / "in.h5") == before and leftovers(d) == []
    assert_next_run_works(d)


def test_dataset_names_resolve_as_hdf5_does():
    assert dataset_path("//a///b/./c") == "/a/b/c"
    assert dataset_path("/a/../b") == "/a/../b"  # '..' is an ordinary name in HDF5
    assert DatasetRef("f.h5", "/./x//y") == DatasetRef("f.h5", "/x/y")
    assert str(DatasetRef.parse("f.h5://x")) == "f.h5:/x"
    for bad, why in (("/x/", "must not end with '/'"), ("/.", "is the root group"), ("//", "must not end")):
        with pytest.raises(InputError, match=why):
            DatasetRef.parse(f"f.h5:{bad}", "output")


def test_other_spelling_of_the_output_replaces_it_with_force(d):
    """``-o out.h5://C`` is out.h5:/C: refused without --force, replaced with it (not a second dataset)."""
    proc, _ = one(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", *NUMPY], d)
    assert proc.returncode == 0, proc.stderr
    proc, seconds = one(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5://./C", *NUMPY], d)
    assert_refused(proc, seconds, "output out.h5:/C exists; pass --force")
    proc, _ = one(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5://C", "--force", *NUMPY], d)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(d / "out.h5", "r") as f:
        assert sorted(f) == ["C"]


# ---- 2. a trailing '/' ------------------------------------------------------------------

TRAILING = {
    "existing input, --force": (["gemm", "in.h5:/A", "in.h5:/B", "-o", "in.h5:/A/", "--force", *NUMPY], "in.h5:/A/"),
    "new dataset": (["gemm", "in.h5:/A", "in.h5:/B", "-o", "f.h5:/D/", *NUMPY], "f.h5:/D/"),
    "gen": (["gen", "--shape", "8x8", "in.h5:/A/", "--force"], "in.h5:/A/"),
    "input": (["gemm", "in.h5:/A/", "in.h5:/B", "-o", "out.h5:/C", *NUMPY], "in.h5:/A/"),
}


@pytest.mark.parametrize("case", list(TRAILING))
def test_trailing_slash_is_refused_before_anything(d, case):
    args, name = TRAILING[case]
    before = digest(d / "in.h5")
    proc, seconds = one(args, d)
    assert_refused(proc, seconds, f"'{name}': the dataset name must not end with '/'")
    assert digest(d / "in.h5") == before and sorted(os.listdir(d)) == ["in.h5"]
    assert_next_run_works(d)


def test_trailing_slash_under_mpiexec(d):
    before = digest(d / "in.h5")
    proc, seconds = gemm(2, d, "in.h5:/A/", "--force")
    assert_refused(proc, seconds, "must not end with '/'")
    assert digest(d / "in.h5") == before and sorted(os.listdir(d)) == ["in.h5"]


def test_commit_puts_the_old_dataset_back_when_the_new_one_cannot_take_its_name(d, monkeypatch):
    """The old dataset is renamed aside, never deleted first: a failure to move the new one in
    leaves the old one at its name, whole."""
    from ozhpc.io.h5out import OutputTransaction, new_tag

    before = data_of(d / "in.h5")
    real_move = h5py.Group.move

    def move(self, source, dest):
        if source.startswith("/.ozhpc-tmp-") and not source.endswith("-old"):
            raise ValueError("simulated failure of the rename")
        return real_move(self, source, dest)

    monkeypatch.setattr(h5py.Group, "move", move)
    with pytest.raises(ValueError, match="simulated"):
        with OutputTransaction(DatasetRef(str(d / "in.h5"), "/A"), True, new_tag()) as txn:
            txn.create((N, N))
            txn.commit()
    monkeypatch.undo()
    assert data_of(d / "in.h5") == before and temp_datasets(d / "in.h5") == []


# ---- 3. a full disk while C is written ----------------------------------------------------

PAD = 12 << 20
"""MPI start-up itself writes files of some MiB (shared-memory segments): a file size limit
below that stops mpiexec, not ozhpc. So the target file is made this large first (sparse)."""


def padded(d, n=N):
    """in.h5 with A, B (n x n) and a sparse 12 MiB dataset; returns its size."""
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5d.FILL_TIME_NEVER)
    with h5py.File(d / "in.h5", "w") as f:
        f["A"] = standard_matrix(n, n, 0.5, 1)
        f["B"] = standard_matrix(n, n, 0.5, 2)
        f.create_dataset("pad", shape=(PAD // 8,), dtype="f8", dcpl=dcpl)
    return os.path.getsize(d / "in.h5")


def limited(limit):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def start(ranks, d, out, limit, *extra):
    import shutil

    cmd = [shutil.which("mpiexec"), "-n", str(ranks), sys.executable, "-m", "ozhpc", "gemm", "in.h5:/A",
           "in.h5:/B", "-o", out, *NUMPY, *extra]
    return subprocess.Popen(cmd, cwd=d, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=limited(limit))


def test_file_size_limit_refused_before_the_compute(d):
    size = padded(d)
    before = digest(d / "in.h5")
    job = start(2, d, "in.h5:/C", size + 8 * N * N + h5out.SLACK, "--progress", "log")
    out, err = job.communicate(timeout=120)
    proc = subprocess.CompletedProcess(job.args, job.returncode, out, err)
    assert_refused(proc, 0, "past this process's file size limit")
    assert "panel" not in err, "refused before the compute"
    assert digest(d / "in.h5") == before and leftovers(d) == []
    assert_next_run_works(d)


@pytest.mark.parametrize("ranks", [1, 4])
def test_file_size_limit_too_low_for_mpi_refused_before_it_starts(d, ranks):
    """At ulimit -f 4 MiB MPI_Init cannot write its shared memory in /dev/shm (MPICH aborted the
    job with a page of its and UCX's errors): one line before MPI starts, exit 2."""
    job = start(ranks, d, "out.h5:/C", 4 << 20)
    out, err = job.communicate(timeout=120)
    proc = subprocess.CompletedProcess(job.args, job.returncode, out, err)
    assert_refused(proc, 0, "the file size limit (ulimit -f) of 4194304 bytes is too low for MPI's shared memory")
    assert (out, err.count("\n")) == ("", 1), err
    assert f"({ranks} {'rank' if ranks == 1 else 'ranks'} on this node)" in err
    assert leftovers(d) == []


def test_space_taken_while_computing_gives_one_line_and_an_intact_file(d):
    """Two jobs pass the check and compute; the first result fills the room the limit leaves:
    the second finds no room when it reserves, says so in one line, and the file keeps the first C."""
    from ozhpc.io import filelock

    n = 192  # C (288 KiB) is larger than SLACK: a second C cannot fit where the first did
    size = padded(d, n)
    inputs = data_of(d / "in.h5")
    limit = size + 8 * n * n + 2 * h5out.SLACK
    with filelock.locked(os.path.realpath(d / "in.h5")):  # both compute before either writes
        jobs = [start(2, d, "in.h5:/C", limit, "--progress", "log"),
                start(2, d, "in.h5:/D", limit, "--progress", "log")]
        seen = ["", ""]
        for i, job in enumerate(jobs):
            while "panel" not in seen[i] and job.poll() is None:
                seen[i] += job.stderr.readline()
    results = [(out, seen[i] + err, job.returncode)
               for i, job in enumerate(jobs) for out, err in [job.communicate(timeout=300)]]
    assert sorted(code for *_, code in results) == [0, 2], results
    err = next(err for _, err, code in results if code == 2)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    assert "no room for" in errors[0] and "past this process's file size limit (ulimit -f)" in errors[0], err
    assert "Traceback" not in err
    after = data_of(d / "in.h5")
    assert {k: after[k] for k in inputs} == inputs
    written = sorted(set(after) - set(inputs))
    assert len(written) == 1 and written[0] in ("C", "D"), (written, results)
    assert leftovers(d) == [] and temp_datasets(d / "in.h5") == []
    assert_next_run_works(d)


TESTS = os.path.dirname(os.path.abspath(__file__))
SWEEP = """
import resource, sys
import numpy as np
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.path.insert(0, {tests!r})
from helpers.outputs import write_whole
from ozhpc.errors import InputError
from ozhpc.io import h5io
try:
    write_whole(h5io.DatasetRef("in.h5", sys.argv[2]), np.ones(({n}, {n})), force=True)
    print("written")
except InputError as exc:
    print("refused:", exc)
"""


def test_no_file_size_limit_leaves_a_broken_file(d):
    """Every limit from 'no room at all' to 'just enough' (the write phases: clearing leftovers,
    creating, committing, replacing): either C is written or one InputError, and the file stays
    whole: its datasets readable, no temporaries, and the next write works."""
    size = padded(d)
    inputs = data_of(d / "in.h5")
    need = 8 * N * N + 2 * h5out.SLACK
    seen = set()
    for i, extra in enumerate(np.linspace(0, need + 16384, 9).astype(int)):
        name = "/C" if i % 2 else "/A2"  # new datasets and --force replacements
        proc = subprocess.run([sys.executable, "-c", SWEEP.format(n=N, tests=TESTS), str(size + extra), name], cwd=d,
                              env=env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        seen.add(proc.stdout.split()[0])
        if proc.stdout.startswith("refused"):
            assert "the file was not changed" in proc.stdout, proc.stdout
        after = data_of(d / "in.h5")
        assert {k: after[k] for k in inputs} == inputs
        assert leftovers(d) == [] and temp_datasets(d / "in.h5") == []
        write_whole(DatasetRef(str(d / "in.h5"), "/probe"), np.full((4, 4), i), force=True)
        size = os.path.getsize(d / "in.h5")
    assert seen == {"written", "refused:"}


@pytest.mark.parametrize("room,outcome", [(8 * N * N, "refused:"), (8 * N * N + 2 * h5out.SLACK, "written")])
def test_file_size_limit_on_a_new_file(d, room, outcome):
    """A new output file is built beside its final name: no room leaves neither it nor the temporary."""
    before = sorted(os.listdir(d))
    proc = subprocess.run([sys.executable, "-c", SWEEP.format(n=N, tests=TESTS).replace('"in.h5"', '"new.h5"'),
                           str(room), "/C"], cwd=d, env=env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith(outcome), proc.stdout + proc.stderr
    assert sorted(os.listdir(d)) == sorted(before + (["new.h5"] if outcome == "written" else []))


def test_damaged_output_file_refused_before_the_compute(d):
    """A file cut short (by a full disk under another program): one line before the compute."""
    with h5py.File(d / "out.h5", "w") as f:
        f["C"] = np.zeros((N, N))
    os.truncate(d / "out.h5", os.path.getsize(d / "out.h5") // 2)
    before = digest(d / "in.h5"), digest(d / "out.h5")
    proc, seconds = one(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/X", "--progress", "log",
                         "--engine", "numpy"], d)
    assert_refused(proc, seconds, "output file 'out.h5' is damaged: HDF5 cannot open it")
    assert "panel" not in proc.stderr
    assert (digest(d / "in.h5"), digest(d / "out.h5")) == before and leftovers(d) == []


# ---- 4. the job file is an input ---------------------------------------------------------

JOB = ('[inputs]\na = "in.h5:/A"\nb = "in.h5:/B"\n[output]\nc = "out.h5:/C"\n{report}'
       '[ozaki]\nengine = "numpy"\n[run]\nprogress = "off"\n')


@pytest.mark.parametrize("ranks,report,key", [(2, "job.toml", ""), (1, "./sub/../job.toml", ""),
                                               (1, "link.toml", ""), (1, None, 'report = "job.toml"\n')])
def test_report_is_never_the_job_file(d, ranks, report, key):
    (d / "job.toml").write_text(JOB.format(report=key))
    (d / "sub").mkdir()
    os.symlink("job.toml", d / "link.toml")
    before = digest(d / "job.toml"), digest(d / "in.h5")
    args = ["run", "job.toml", "--force"] + (["--report", report] if report else [])
    proc, seconds = one(args, d) if ranks == 1 else run(ranks, *args, cwd=d)
    assert_refused(proc, seconds, "is this job file; choose another report path")
    assert (digest(d / "job.toml"), digest(d / "in.h5")) == before
    assert sorted(os.listdir(d)) == ["in.h5", "job.toml", "link.toml", "sub"]
    if ranks > 1:  # the job still runs, with another report
        proc, _ = run(ranks, "run", "job.toml", "--report", "r.json", cwd=d)
        assert proc.returncode == 0 and (d / "r.json").exists(), proc.stderr


# ---- 5. virtual datasets with missing sources ----------------------------------------------

def _virtual(d, source_file, source_name="/A"):
    layout = h5py.VirtualLayout(shape=(N, N), dtype="f8")
    layout[: N // 2] = h5py.VirtualSource(source_file, source_name, shape=(N, N))[: N // 2]
    layout[N // 2:] = h5py.VirtualSource("in.h5", "/A", shape=(N, N))[N // 2:]
    with h5py.File(d / "v.h5", "a") as f:
        f.create_virtual_dataset("V", layout, fillvalue=np.nan)


@pytest.mark.parametrize("source,name,needle", [
    ("gone.h5", "/A", "source file 'gone.h5' is missing"),
    ("in.h5", "/nothing", "source in.h5:/nothing is missing"),
])
def test_virtual_dataset_with_a_missing_source_is_refused(d, source, name, needle):
    _virtual(d, source, name)
    before = digest(d / "in.h5"), digest(d / "v.h5")
    for args in (["gemm", "v.h5:/V", "in.h5:/B", "-o", "out.h5:/C", *NUMPY],
                 ["fingerprint", "v.h5:/V"]):
        proc, seconds = one(args, d)
        assert_refused(proc, seconds, f"v.h5:/V is a virtual dataset whose {needle}")
    assert (digest(d / "in.h5"), digest(d / "v.h5")) == before
    assert not (d / "out.h5").exists() and leftovers(d) == []


def test_complete_virtual_dataset_is_read(d):
    """The control: every source present, from another directory too (HDF5 looks beside the file)."""
    _virtual(d, "in.h5")
    (d / "elsewhere").mkdir()
    proc, _ = one(["gemm", f"{d}/v.h5:/V", f"{d}/in.h5:/B", "-o", "out.h5:/C", *NUMPY], d / "elsewhere")
    assert proc.returncode == 0, proc.stderr
    with h5py.File(d / "elsewhere" / "out.h5", "r") as f:
        assert np.isfinite(f["C"][...]).all()


# ---- 6. check / fingerprint: one line, and they wait for a writer ------------------------------

@pytest.fixture
def result(d):
    proc, _ = one(["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", *NUMPY], d)
    assert proc.returncode == 0, proc.stderr
    return d


def _missing_filter(path, name):
    """A chunked dataset whose chunks went through HDF5 filter 32001 (blosc), not installed here."""
    assert not h5z.filter_avail(32001)
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_chunk((N, N))
    dcpl.set_filter(32001, h5z.FLAG_OPTIONAL)
    with h5py.File(path, "a") as f:
        dset = f.create_dataset(name, shape=(N, N), dtype="f8", dcpl=dcpl)
        dset.id.write_direct_chunk((0, 0), np.ones((N, N)).tobytes(), filter_mask=0)


CHECK = ["check", "out.h5:/C", "--a", "in.h5:/A", "--b", "in.h5:/B", "--samples", "8"]


@pytest.mark.parametrize("case", ["filter: check", "filter: fingerprint", "filter: check input",
                                  "alpha not a number", "transa not a boolean"])
def test_check_and_fingerprint_refuse_in_one_line(result, case):
    d = result
    if case.startswith("filter"):
        _missing_filter(d / "out.h5", "F")
        args = {"filter: check": ["check", "out.h5:/F", "--a", "in.h5:/A", "--b", "in.h5:/B"],
                "filter: fingerprint": ["fingerprint", "out.h5:/F"],
                "filter: check input": ["check", "out.h5:/C", "--a", "out.h5:/F", "--b", "in.h5:/B"]}[case]
        needle = "needs HDF5 filter 32001 to be read, which is not installed"
    else:
        key, value = ("alpha", "x") if case.startswith("alpha") else ("transa", "False")
        with h5py.File(d / "out.h5", "a") as f:
            f["C"].attrs[f"ozhpc_{key}"] = value
        args, needle = CHECK, f"has attribute ozhpc_{key} = '{value}', which is not a"
    before = digest(d / "out.h5"), digest(d / "in.h5")
    proc, seconds = one(args, d)
    assert_refused(proc, seconds, needle)
    assert (digest(d / "out.h5"), digest(d / "in.h5")) == before


HOLD = """
import sys, time, h5py
with h5py.File("out.h5", "r+") as f:
    print("open", flush=True)
    time.sleep(float(sys.argv[1]))
"""


@pytest.mark.parametrize("command", [CHECK + ["--fingerprint"], ["fingerprint", "out.h5:/C"]])
def test_check_waits_for_a_writer(result, command):
    """Another process holds the file open for writing (HDF5's lock): check and fingerprint wait
    for it instead of failing with BlockingIOError."""
    d = result
    holder = subprocess.Popen([sys.executable, "-c", HOLD, "3"], cwd=d, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "open"
    proc, seconds = one(command, d)
    holder.wait(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert seconds >= 2.0, "it waited for the writer"
