"""Nothing a user has is lost: outputs, reports, locks, pre-compute checks, under mpiexec.

Every failure case asserts: exit status 2, exactly one error line naming the culprit, no
traceback, a fast failure, inputs byte-identical, and no temporaries left beside the files.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from ozhpc.io import filelock
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.report import sha256_of_matrix
from helpers.inputs import square_inputs

pytestmark = pytest.mark.mpi

MPIEXEC = shutil.which("mpiexec")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 64

if MPIEXEC is None:
    pytest.skip("mpiexec not found (pip install mpich)", allow_module_level=True)


def env(extra=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    # One BLAS thread per rank: up to 4 ranks share 2 cores here, and oversubscribed BLAS threads
    # delay the moment a rank notes a signal (every rank must leave at the same moment).
    e.setdefault("OPENBLAS_NUM_THREADS", "1")
    e.setdefault("OMP_NUM_THREADS", "1")
    e.update(extra or {})
    return e


def command(ranks, *args):
    return [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "ozhpc", *map(str, args)]


def run(ranks, *args, cwd, timeout=120):
    t0 = time.monotonic()
    proc = subprocess.run(command(ranks, *args), capture_output=True, text=True, timeout=timeout,
                          env=env(), cwd=cwd)
    return proc, time.monotonic() - t0


def gemm(ranks, d, out, *extra, timeout=120):
    return run(ranks, "gemm", "in.h5:/A", "in.h5:/B", "-o", out, "--engine", "numpy", "--progress", "off",
               "--block", "16", *extra, cwd=d, timeout=timeout)


def digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def leftovers(d) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith((".tmp", ".ozhpc-lock")))


def temp_datasets(path) -> list[str]:
    with h5py.File(path, "r") as f:
        return [n for n in f if n.startswith(".ozhpc-tmp-")]


def assert_refused(proc, seconds, needle):
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(errors) == 1, proc.stderr
    assert needle in errors[0], errors[0]
    assert "Traceback" not in proc.stderr
    assert seconds < 30


@pytest.fixture
def d(tmp_path):
    return square_inputs(tmp_path, N)


REFUSED = {
    # name: (output, extra options, files made first, error needle)
    "report is the input file": ("out.h5:/C", ["--report", "in.h5"], {}, "report 'in.h5' is the run's HDF5 file"),
    "report is the output file": ("out.h5:/C2", ["--report", "out.h5"], {"out.h5": "h5"},
                                  "report 'out.h5' is the run's HDF5 file"),
    "report is a new output file": ("new.h5:/C", ["--report", "new.h5"], {}, "report 'new.h5' is the run's"),
    "report exists": ("out.h5:/C", ["--report", "r.json"], {"r.json": "{}"}, "report 'r.json' exists; pass --force"),
    "report dir missing": ("out.h5:/C", ["--report", "nodir/r.json"], {}, "report directory"),
    "report is a directory": ("out.h5:/C", ["--report", "rdir"], {"rdir": "dir"}, "report 'rdir' is a directory"),
    "report dir read-only": ("out.h5:/C", ["--report", "ro/r.json"], {"ro": "rodir"}, "is not writable"),
    "output under a dataset": ("out.h5:/C/sub", ["--force"], {"out.h5": "h5"},
                               "/C is a dataset and cannot hold /C/sub"),
    "output is a group": ("out.h5:/G", [], {"out.h5": "h5"}, "out.h5:/G is a group; ozhpc never replaces a group"),
    "output is a group, --force": ("out.h5:/G", ["--force"], {"out.h5": "h5"}, "never replaces a group, even with"),
    "output is an input": ("in.h5:/A", ["--force"], {}, "output in.h5:/A is an input of this run"),
    "output file read-only": ("out.h5:/C2", [], {"out.h5": "h5ro"}, "is read-only"),
    "output file read-only, --force": ("out.h5:/C", ["--force"], {"out.h5": "h5ro"}, "even with --force"),
    "output file not HDF5": ("out.h5:/C", [], {"out.h5": "text"}, "exists and is not an HDF5 file"),
    "output dir read-only": ("ro/out.h5:/C", [], {"ro": "rodir"}, "output directory"),
    "output named like a temporary": ("out.h5:/.ozhpc-tmp-1", [], {}, "are ozhpc's temporaries"),
}


def make(d, files):
    for name, kind in files.items():
        path = d / name
        if kind == "dir":
            path.mkdir()
        elif kind == "rodir":
            path.mkdir()
            path.chmod(0o555)
        elif kind in ("h5", "h5ro"):
            with h5py.File(path, "w") as f:
                f["C"] = np.zeros((N, N))
                f.create_group("G")["x"] = np.ones(3)
            if kind == "h5ro":
                path.chmod(0o444)
        else:
            path.write_text(kind)


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_before_compute(d, case):
    out, extra, files, needle = REFUSED[case]
    make(d, files)
    before = {n: digest(d / n) for n in os.listdir(d) if (d / n).is_file()}
    proc, seconds = gemm(2, d, out, *extra, "--progress", "log")
    assert_refused(proc, seconds, needle)
    assert "panel" not in proc.stderr, "refused before the compute, not after it"
    assert {n: digest(d / n) for n in os.listdir(d) if (d / n).is_file()} == before
    assert sorted(os.listdir(d)) == sorted(["in.h5", *files])


def test_existing_report_replaced_with_force_keeps_mode(d):
    (d / "r.json").write_text("{}")
    (d / "r.json").chmod(0o600)
    proc, _ = gemm(2, d, "out.h5:/C", "--report", "r.json", "--force")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((d / "r.json").read_text())["ranks"] == 2
    assert stat.S_IMODE(os.stat(d / "r.json").st_mode) == 0o600
    assert leftovers(d) == [] and not [n for n in os.listdir(d) if n.startswith(".")]


def test_huge_declared_shape_fails_before_allocating(d):
    with h5py.File(d / "huge.h5", "w") as f:
        f.create_dataset("H", shape=(2_000_000, 2_000_000), chunks=(1000, 1000), dtype="f8")
    proc, seconds = run(4, "gemm", "huge.h5:/H", "huge.h5:/H", "-o", "out.h5:/C", "--engine", "numpy",
                        cwd=d, timeout=60)
    assert_refused(proc, seconds, "not enough memory")
    assert not (d / "out.h5").exists() and leftovers(d) == []


def test_not_enough_disk(monkeypatch, tmp_path):
    from ozhpc.errors import InputError
    from ozhpc.run import resources

    class Full:
        f_bavail, f_frsize = 1000, 4096  # 4 MB free
    monkeypatch.setattr(resources.os, "statvfs", lambda path: Full)
    with pytest.raises(InputError, match="not enough disk space for output file"):
        resources.check_disk(str(tmp_path / "out.h5"), 1000, 1000)
    resources.check_disk(str(tmp_path / "out.h5"), 10, 10)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a rank with a private mount needs root and unshare")
@pytest.mark.parametrize("existing", [False, True])
def test_output_not_shared_between_ranks(d, existing):
    """The output directory is node-local: ranks 1 and 2 see an empty directory of their own
    (a private mount) where rank 0 writes. Every rank exits 2 with one line naming the output and
    the cause; nothing is left in rank 0's directory (an existing file keeps its datasets)."""
    out = d / "out"
    out.mkdir()
    if existing:
        with h5py.File(out / "x.h5", "w") as f:
            f["keep"] = np.ones(3)
    args = [sys.executable, "-m", "ozhpc", "gemm", "in.h5:/A", "in.h5:/B", "-o", f"{out}/x.h5:/C",
            "--engine", "numpy", "--progress", "off", "--block", "16"]
    line = " ".join(args)
    cmd = [MPIEXEC, "-n", "1", *args, ":", "-n", "2", "unshare", "-m", "sh", "-c",
           f"mount -t tmpfs tmpfs {out} && exec {line}"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env(), cwd=d)
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert_refused(proc, time.monotonic() - t0, f"that rank 0 is writing C into: the output '{out}/x.h5' "
                                               "must be on a file system every rank shares")
    assert errors[0].startswith("ozhpc gemm: error: rank 1 cannot see the file ")
    assert os.listdir(out) == (["x.h5"] if existing else [])
    if existing:
        with h5py.File(out / "x.h5", "r") as f:
            assert list(f) == ["keep"]


def c_of(path, name="C"):
    with h5py.File(path, "r") as f:
        return f[name][...], f[name].attrs["ozhpc_sha256"]


@pytest.mark.parametrize("ranks", [1, 3])
def test_file_kept_mode_links_and_other_datasets(d, ranks):
    """The output file is written in place: mode, hard link, symlink (its target) and other data stay."""
    make(d, {"out.h5": "h5"})
    os.chmod(d / "out.h5", 0o600)
    os.link(d / "out.h5", d / "hard.h5")
    os.symlink("out.h5", d / "sym.h5")
    inode = os.stat(d / "out.h5").st_ino
    proc, _ = gemm(ranks, d, "sym.h5:/C", "--force")
    assert proc.returncode == 0, proc.stderr
    assert os.path.islink(d / "sym.h5") and os.stat(d / "out.h5").st_ino == inode
    assert os.stat(d / "out.h5").st_nlink == 2 and stat.S_IMODE(os.stat(d / "out.h5").st_mode) == 0o600
    c, sha = c_of(d / "hard.h5")
    assert sha == sha256_of_matrix(c) and np.any(c)
    with h5py.File(d / "hard.h5", "r") as f:
        assert f["G/x"][...].tolist() == [1, 1, 1] and sorted(f) == ["C", "G"]
    assert leftovers(d) == [] and temp_datasets(d / "out.h5") == []


def test_force_reruns_do_not_grow_the_file(d):
    """Rewriting C with --force reuses the space of the result it replaces (at most two results' worth)."""
    sizes = []
    for i in range(5):
        proc, _ = gemm(1, d, "out.h5:/C", "--force")
        assert proc.returncode == 0, proc.stderr
        sizes.append(os.path.getsize(d / "out.h5"))
    assert max(sizes) < 2 * 8 * N * N + 64 * 1024, sizes
    assert c_of(d / "out.h5")[0].shape == (N, N)


def test_leftovers_of_killed_jobs_are_removed(d):
    """A temporary dataset, a temporary file and a lock file left by killed jobs: the next write removes them."""
    make(d, {"out.h5": "h5"})
    with h5py.File(d / "out.h5", "a") as f:
        f[".ozhpc-tmp-999-dead"] = np.zeros((N, N))
    (d / ".out.h5.ozhpc-999-dead.tmp").write_bytes(b"partial")
    (d / ".out.h5.ozhpc-lock").write_bytes(b"")
    proc, _ = gemm(2, d, "out.h5:/C2")
    assert proc.returncode == 0, proc.stderr
    assert leftovers(d) == [] and temp_datasets(d / "out.h5") == []
    with h5py.File(d / "out.h5", "r") as f:
        assert sorted(f) == ["C", "C2", "G"]


def _start(ranks, d, out, *extra):
    return subprocess.Popen(command(ranks, "gemm", "in.h5:/A", "in.h5:/B", "-o", out, "--engine", "numpy",
                                    "--progress", "off", "--block", "16", "--panel", "16", *extra),
                            cwd=d, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_lock(d):
    """The jobs have computed and wait for the lock we hold (they created no file meanwhile)."""
    time.sleep(8)


@pytest.mark.parametrize("same", [False, True])
def test_concurrent_jobs_serialise_on_the_lock(d, same):
    """Two jobs writing into one file: both datasets present, or (same new dataset) one clear refusal."""
    make(d, {"out.h5": "h5"})
    outs = ["out.h5:/X", "out.h5:/X"] if same else ["out.h5:/X", "out.h5:/Y"]
    with filelock.locked(os.path.realpath(d / "out.h5")):
        jobs = [_start(2, d, outs[0]), _start(2, d, outs[1])]
        _wait_for_lock(d)
        assert all(job.poll() is None for job in jobs), "the jobs must wait for the lock"
        with h5py.File(d / "out.h5", "r") as f:
            assert sorted(f) == ["C", "G"]
    results = [job.communicate(timeout=120) + (job.returncode,) for job in jobs]
    codes = sorted(code for _, _, code in results)
    with h5py.File(d / "out.h5", "r") as f:
        names = sorted(f)
    if same:
        assert codes == [0, 2], results
        errors = [line for _, err, code in results if code == 2 for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1 and "out.h5:/X exists; pass --force" in errors[0]
        assert names == ["C", "G", "X"]
    else:
        assert codes == [0, 0], results
        assert names == ["C", "G", "X", "Y"]
    assert leftovers(d) == [] and temp_datasets(d / "out.h5") == []


def test_concurrent_new_file(d):
    """Two jobs creating one new file at the same time: both datasets end up in it."""
    jobs = [_start(2, d, "new.h5:/X"), _start(2, d, "new.h5:/Y")]
    results = [job.communicate(timeout=120) + (job.returncode,) for job in jobs]
    assert [code for _, _, code in results] == [0, 0], results
    with h5py.File(d / "new.h5", "r") as f:
        assert sorted(f) == ["X", "Y"]
    assert leftovers(d) == []


def _interrupt(job, sig, after):
    time.sleep(after)
    t0 = time.monotonic()
    job.send_signal(sig)
    out, err = job.communicate(timeout=60)
    return job.returncode, out, err, time.monotonic() - t0


@pytest.mark.parametrize("ranks,sig", [(2, "SIGINT"), (4, "SIGTERM"), (3, "SIGINT")])
def test_signal_during_compute(tmp_path, ranks, sig):
    """Ctrl-C / SIGTERM to mpiexec mid-compute: exit 130/143, one line, no traceback, no output."""
    import signal

    n = 1024  # scheme I's 55 pair products with panels of 16 outlast the 3 s before the signal, on 2-4 ranks
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = standard_matrix(n, n, 0.5, 1), standard_matrix(n, n, 0.5, 2)
    before = digest(tmp_path / "in.h5")
    job = _start(ranks, tmp_path, "out.h5:/C", "--slices", "10")
    code, out, err, seconds = _interrupt(job, getattr(signal, sig), 3.0)
    assert code == 128 + getattr(signal, sig), out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [f"ozhpc gemm: interrupted ({sig})"], err
    assert seconds < 10
    assert digest(tmp_path / "in.h5") == before
    assert sorted(os.listdir(tmp_path)) == ["in.h5"]


def test_signal_while_waiting_for_the_lock(d):
    """A job interrupted while it waits for another writer: no temporaries, the file untouched."""
    import signal

    make(d, {"out.h5": "h5"})
    before = digest(d / "out.h5")
    with filelock.locked(os.path.realpath(d / "out.h5")):
        job = _start(2, d, "out.h5:/X")
        code, out, err, _ = _interrupt(job, signal.SIGINT, 6.0)
    assert code == 130, out + err
    assert "Traceback" not in err and "ozhpc gemm: interrupted (SIGINT)" in err
    assert digest(d / "out.h5") == before and leftovers(d) == []


@pytest.mark.parametrize("new_file", [True, False])
def test_interrupted_transaction_removes_its_temporary(tmp_path, new_file):
    from ozhpc.io.h5io import DatasetRef
    from ozhpc.io.h5out import OutputTransaction, new_tag
    from ozhpc.signals import Interrupted

    if not new_file:
        make(tmp_path, {"out.h5": "h5"})
    with pytest.raises(Interrupted):
        with OutputTransaction(DatasetRef(str(tmp_path / "out.h5"), "/X"), False, new_tag()) as txn:
            txn.create((4, 4))
            raise Interrupted(2)
    assert leftovers(tmp_path) == []
    assert os.path.exists(tmp_path / "out.h5") != new_file
    if not new_file:
        assert temp_datasets(tmp_path / "out.h5") == []


def test_closed_stdout_is_not_an_error(d):
    """`ozhpc ... | true`: the reader is gone before ozhpc writes; exit 0, no BrokenPipeError."""
    for args in (["info"], ["gen", "--shape", "8x8", "g.h5:/A"]):
        proc = subprocess.run(f"{sys.executable} -m ozhpc {' '.join(args)} | true; "
                              "echo \" ${PIPESTATUS[0]}\"", shell=True, executable="bash",
                              capture_output=True, text=True, cwd=d, env=env(), timeout=120)
        assert proc.stdout.endswith(" 0\n"), proc.stdout + proc.stderr
        assert "Error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    proc = subprocess.run(f"{MPIEXEC} -n 2 {sys.executable} -m ozhpc gemm in.h5:/A in.h5:/B -o o.h5:/C "
                          "--engine numpy --progress off | true; echo \" ${PIPESTATUS[0]}\"", shell=True,
                          executable="bash", capture_output=True, text=True, cwd=d, env=env(), timeout=120)
    # mpiexec itself forwards the output: it may die of SIGPIPE (141); the ranks must not fail.
    assert proc.stdout.strip() in ("0", "141") and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert c_of(d / "o.h5")[0].shape == (N, N)


@pytest.mark.parametrize("ranks", [1, 2])
def test_option_typo_gets_a_suggestion(d, ranks):
    proc, seconds = gemm(ranks, d, "out.h5:/C", "--trnasb")
    assert_refused(proc, seconds, "ozhpc gemm: error: unrecognized arguments: --trnasb (did you mean --transb?)")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sorted(os.listdir(d)) == ["in.h5"]


def test_verbose_after_the_command(d):
    base = ["gemm", "in.h5:/A", "in.h5:/B", "--progress", "off", "--engine", "auto"]  # auto logs its choice
    quiet, _ = run(1, *base, "-o", "out.h5:/C", cwd=d)
    loud, _ = run(1, *base, "-o", "out.h5:/C2", "-v", cwd=d)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr + loud.stderr
    assert "ozhpc: " not in quiet.stderr and "ozhpc: " in loud.stderr, loud.stderr


def test_job_file_report_is_refused_like_the_option(d):
    """Job key output.report naming the input file: refused before the compute."""
    (d / "job.toml").write_text('[inputs]\na = "in.h5:/A"\nb = "in.h5:/B"\n[output]\nc = "out.h5:/C"\n'
                                'report = "in.h5"\n[ozaki]\nengine = "numpy"\n[run]\nprogress = "off"\n')
    before = digest(d / "in.h5")
    proc, seconds = run(2, "run", "job.toml", cwd=d)
    assert_refused(proc, seconds, "is the run's HDF5 file")
    assert digest(d / "in.h5") == before and sorted(os.listdir(d)) == ["in.h5", "job.toml"]


def test_gen_huge_shape_fails_before_generating(tmp_path):
    proc, seconds = run(1, "gen", "--shape", "2000000x2000000", "g.h5:/A", cwd=tmp_path, timeout=60)
    assert_refused(proc, seconds, "not enough memory for a 2000000x2000000 matrix")
    assert os.listdir(tmp_path) == []


def test_lock_without_flock_falls_back(monkeypatch, tmp_path):
    """A file system without flock: lockf; without either: a warning, and the write goes on."""
    import errno
    import fcntl

    def unsupported(fd, op):
        raise OSError(errno.ENOSYS, "Function not implemented")
    monkeypatch.setattr(fcntl, "flock", unsupported)
    target = str(tmp_path / "out.h5")
    with filelock.locked(target):
        assert os.path.exists(filelock.lock_path(target))
    monkeypatch.setattr(fcntl, "lockf", unsupported)
    with filelock.locked(target):
        pass
    assert os.listdir(tmp_path) == []


def test_concurrent_force_rewrites_of_one_dataset(d):
    """Two --force jobs replacing one dataset at once: both succeed, one complete result remains."""
    make(d, {"out.h5": "h5"})
    jobs = [_start(2, d, "out.h5:/C", "--force"), _start(3, d, "out.h5:/C", "--force")]
    results = [job.communicate(timeout=120) + (job.returncode,) for job in jobs]
    assert [code for _, _, code in results] == [0, 0], results
    c, sha = c_of(d / "out.h5")
    assert sha == sha256_of_matrix(c) and sha in results[0][0] and sha in results[1][0]
    assert leftovers(d) == [] and temp_datasets(d / "out.h5") == []
