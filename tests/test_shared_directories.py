"""Another user of the node or of a shared directory: lock files,
reports on special files, HDF5 external links and virtual datasets that lead back into an input
or the output, and a dead temporary after a full disk.

The other user is uid 2001 (``setpriv --reuid``). The victim is this process's uid 0 stripped of
every capability (``setpriv --bounding-set=-all``): an ordinary user for the kernel, who may open
only what the mode bits allow, yet can still run this Python. Tests that need either skip with a
reason where they cannot (not root, no setpriv); CI runs them as root.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import pytest

from test_output_safety import MPIEXEC, assert_refused, digest, env
from ozhpc.run.matrices import standard_matrix

N = 32
OTHER = 2001
SETPRIV = shutil.which("setpriv")
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

needs_users = pytest.mark.skipif(not (ROOT and SETPRIV), reason="needs root and setpriv to act as two users")
UNPRIVILEGED = [SETPRIV or "setpriv", "--bounding-set=-all", "--inh-caps=-all"]
"""The victim: uid 0 without capabilities (the mode bits of other users' files apply to it)."""


def as_other(*cmd: str) -> list[str]:
    return [SETPRIV or "setpriv", f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups", *cmd]


def victim(*args, cwd, prefix=UNPRIVILEGED, timeout=120):
    """``ozhpc ARGS`` as the victim: (CompletedProcess, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.run([*prefix, sys.executable, "-m", "ozhpc", *map(str, args)], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - t0


def gemm(d, out, *extra, prefix=UNPRIVILEGED):
    return victim("gemm", "in.h5:/A", "in.h5:/B", "-o", out, "--engine", "numpy", "--progress", "log", *extra,
                  cwd=d, prefix=prefix)


@pytest.fixture(params=["1777", "2777"])
def shared(request):
    """A directory every user may write (sticky like /tmp, or setgid like a project directory),
    owned by a third uid, reachable by uid 2001; holds in.h5 (A, B), readable by all."""
    d = tempfile.mkdtemp(prefix="ozhpc-shared-", dir="/tmp")
    os.chmod(d, int(request.param, 8))
    if ROOT:
        os.chown(d, 2002, 2002)
    with h5py.File(os.path.join(d, "in.h5"), "w") as f:
        f["A"] = standard_matrix(N, N, 0.5, 1)
        f["B"] = standard_matrix(N, N, 0.5, 2)
    os.chmod(os.path.join(d, "in.h5"), 0o644)
    from pathlib import Path
    yield Path(d)
    shutil.rmtree(d)


LOCK = ".out.h5.ozhpc-lock"


def assert_written(proc, d, name="C"):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with h5py.File(d / "out.h5", "r") as f:
        assert f[name].shape == (N, N) and np.isfinite(f[name][...]).all()


# ---- locks ----------------------------------------------------------------------------------

@needs_users
def test_stale_lock_of_another_user_is_taken_over(shared):
    """A 0644 lock file that another user's killed job left: the run (and its dry run) works."""
    subprocess.run(as_other("sh", "-c", f"umask 022; : > {LOCK}"), cwd=shared, check=True)
    assert os.stat(shared / LOCK).st_uid == OTHER
    proc, _ = gemm(shared, "out.h5:/C", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    proc, _ = gemm(shared, "out.h5:/C")
    assert_written(proc, shared)
    # a group directory: removed under a shared lock, and our own sidecar locked (NFS locks
    # exclusively only what is open for writing); a sticky one: kept, and locked read-only
    sticky = shared.stat().st_mode & stat.S_ISVTX
    assert sorted(os.listdir(shared)) == sorted(["in.h5", "out.h5", *([LOCK] if sticky else [])])


@pytest.fixture
def held_lock(shared):
    """Another user's job holding the lock of out.h5 (flock(1) on a 0644 file it created)."""
    job = subprocess.Popen(as_other("flock", "-x", LOCK, "sleep", "60"), cwd=shared, start_new_session=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            fd = os.open(shared / LOCK, os.O_RDONLY)
        except FileNotFoundError:
            time.sleep(0.05)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            time.sleep(0.05)
        except BlockingIOError:
            break
        finally:
            os.close(fd)
    yield shared
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()


@needs_users
@pytest.mark.parametrize("dry", [False, True])
def test_lock_held_by_another_users_job_refused_before_the_compute(held_lock, dry):
    d = held_lock
    proc, seconds = gemm(d, "out.h5:/C", *(["--dry-run"] if dry else []))
    assert_refused(proc, seconds, f"output file 'out.h5' is being written by another user's job (its lock file "
                                  f"'{d / LOCK}', owned by uid {OTHER}, is held)")
    assert "panel" not in proc.stderr, "refused before the compute"
    assert sorted(os.listdir(d)) == sorted(["in.h5", LOCK])


@needs_users
def test_lock_path_planted_as_a_symlink_is_not_followed(shared):
    """A symlink at the lock's name (fs.protected_symlinks = 0 on some nodes) would make the run
    create the file it points to: refused before the compute, nothing created there."""
    private = tempfile.mkdtemp(prefix="ozhpc-victim-", dir="/tmp")
    try:
        subprocess.run(as_other("ln", "-s", os.path.join(private, "planted"), LOCK), cwd=shared, check=True)
        proc, seconds = gemm(shared, "out.h5:/C")
        assert_refused(proc, seconds, "a symbolic link, which ozhpc never follows there")
        assert "panel" not in proc.stderr
        assert os.listdir(private) == [] and not (shared / "out.h5").exists()
    finally:
        shutil.rmtree(private)



@pytest.fixture
def private():
    """A directory of the victim's (0700) holding precious.txt and private.h5:/C."""
    d = tempfile.mkdtemp(prefix="ozhpc-victim-", dir="/tmp")
    from pathlib import Path
    d = Path(d)
    (d / "precious.txt").write_text("precious\n")
    with h5py.File(d / "private.h5", "w") as f:
        f["C"] = np.arange(4.0)
    yield d
    shutil.rmtree(d)


@needs_users
@pytest.mark.parametrize("shared", ["1777"], indirect=True)  # sticky: where the kernel's rule applies
@pytest.mark.parametrize("what", ["report", "output"])
def test_symlink_planted_by_another_user_is_not_written_through(shared, private, what):
    """With fs.protected_symlinks = 0, another user's symlink in a sticky directory at the name
    of your report or output file made a --force run overwrite the file it points to."""
    if what == "report":
        name, args, victim_file = "run.json", ["out.h5:/C", "--report", "run.json"], private / "precious.txt"
    else:
        name, args, victim_file = "out.h5", ["out.h5:/C"], private / "private.h5"
    subprocess.run(as_other("ln", "-s", str(victim_file), name), cwd=shared, check=True)
    before = digest(victim_file)
    proc, seconds = gemm(shared, *args, "--force")
    assert_refused(proc, seconds, f"{what} {name!r} goes through the symlink '{shared / name}' of uid {OTHER} "
                                  "in a world-writable sticky directory; ozhpc never writes through another user's")
    assert "panel" not in proc.stderr
    assert digest(victim_file) == before



@needs_users
@pytest.mark.parametrize("shared", ["1777"], indirect=True)
def test_temporary_of_another_user_that_cannot_be_removed_is_left(shared):
    """A dead job's temporary file of another user in a sticky directory: the write removes
    temporaries it finds, and failed on this one after the compute."""
    planted = ".out.h5.ozhpc-1-dead.tmp"
    subprocess.run(as_other("sh", "-c", f"umask 022; echo x > {planted}"), cwd=shared, check=True)
    proc, _ = gemm(shared, "out.h5:/C")
    assert_written(proc, shared)
    assert f"cannot remove {shared / planted}, left by a job that was killed" in proc.stderr
    assert sorted(os.listdir(shared)) == sorted(["in.h5", "out.h5", planted])


# ---- special files --------------------------------------------------------------------------

def special(d, name, kind):
    """A FIFO, a character device (a private /dev/null: mknod needs root) or a socket at d/name."""
    path = str(d / name)
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "character device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod needs root")
    else:
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path)
        sock.close()
    return os.stat(path)


KINDS = ["FIFO", "character device", "socket"]


@pytest.mark.parametrize("kind", KINDS)
def test_report_on_a_special_file_is_refused_even_with_force(tmp_path, kind):
    """``--report /dev/null --force`` as root would have replaced /dev/null by a regular file."""
    from helpers.inputs import square_inputs

    d = square_inputs(tmp_path, N)
    before = special(d, "r.json", kind)
    proc, seconds = gemm(d, "out.h5:/C", "--report", "r.json", "--force", prefix=[])
    assert_refused(proc, seconds, f"report 'r.json' is a {kind}, not a regular file; ozhpc reads and writes only "
                                  "regular files and never replaces anything else, even with --force")
    assert "panel" not in proc.stderr
    after = os.lstat(d / "r.json")
    assert (after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev)
    assert not (d / "out.h5").exists()


def test_report_that_became_a_fifo_during_the_run_is_not_replaced(tmp_path):
    from ozhpc.run.report import write_report

    os.mkfifo(tmp_path / "r.json")
    with pytest.raises(OSError, match="it is a FIFO now, not a regular file, and was not replaced"):
        write_report(str(tmp_path / "r.json"), {"x": 1})
    assert stat.S_ISFIFO(os.lstat(tmp_path / "r.json").st_mode) and os.listdir(tmp_path) == ["r.json"]


@pytest.mark.parametrize("role", ["input", "output"])
def test_fifo_as_an_hdf5_file_is_refused_not_waited_on(tmp_path, role):
    """Opening a FIFO waits for a writer: the run hung before the compute."""
    from helpers.inputs import square_inputs

    d = square_inputs(tmp_path, N)
    special(d, "f.h5", "FIFO")
    a, out = ("f.h5:/A", "out.h5:/C") if role == "input" else ("in.h5:/A", "f.h5:/C")
    proc, seconds = victim("gemm", a, "in.h5:/B", "-o", out, "--engine", "numpy", cwd=d, prefix=[], timeout=30)
    assert_refused(proc, seconds, f"{'input A' if role == 'input' else 'output'} file 'f.h5' is a FIFO, "
                                  "not a regular file")


# ---- HDF5 links and virtual datasets that lead into an input ---------------------------------

def inputs_kept_free_space(d):
    """in.h5 as ``ozhpc gen`` makes it (a persistent free-space map, rewritten whenever the file
    is opened read-write), with an empty group /G; returns its SHA-256."""
    with h5py.File(d / "in.h5", "w", fs_strategy="fsm", fs_persist=True, fs_threshold=1) as f:
        f["A"] = standard_matrix(N, N, 0.5, 1)
        f["B"] = standard_matrix(N, N, 0.5, 2)
        f.create_group("G")
    return digest(d / "in.h5")


@pytest.mark.parametrize("out", ["out.h5:/EG/NEW", "out.h5:/S/NEW", "out.h5:/SS/G/NEW"])
def test_output_through_an_external_link_is_refused_and_the_input_unchanged(tmp_path, out):
    """/EG in out.h5 is an external link to in.h5:/G (/S a soft link to it, /SS one to the root
    whose /G is external): the write went through it into the input file, read-write, changed it
    and failed after the compute with a traceback."""
    before = inputs_kept_free_space(tmp_path)
    with h5py.File(tmp_path / "out.h5", "w") as f:
        f["EG"] = h5py.ExternalLink("in.h5", "/G")
        f["S"] = h5py.SoftLink("/EG")
        f["SS"] = h5py.SoftLink("/")
        f["G"] = h5py.ExternalLink("in.h5", "/G")
    out_before = digest(tmp_path / "out.h5")
    proc, seconds = gemm(tmp_path, out, prefix=[])
    link = "/G" if "SS" in out else "/EG"
    assert_refused(proc, seconds, f"output {out}: {link} is an external link (to in.h5:/G); ozhpc writes only "
                                  "into the file named")
    assert "panel" not in proc.stderr
    assert (digest(tmp_path / "in.h5"), digest(tmp_path / "out.h5")) == (before, out_before)


def test_soft_link_loop_on_the_output_path_is_one_line(tmp_path):
    inputs_kept_free_space(tmp_path)
    with h5py.File(tmp_path / "out.h5", "w") as f:
        f["L1"] = h5py.SoftLink("/L2")
        f["L2"] = h5py.SoftLink("/L1")
    proc, seconds = gemm(tmp_path, "out.h5:/L1/C", prefix=[])
    assert_refused(proc, seconds, "output out.h5:/L1/C: more than 16 soft links on the way (a loop?)")


def test_output_through_a_soft_link_within_the_file_is_written(tmp_path):
    inputs_kept_free_space(tmp_path)
    with h5py.File(tmp_path / "out.h5", "w") as f:
        f.create_group("R")
        f["SR"] = h5py.SoftLink("R")
    proc, _ = gemm(tmp_path, "out.h5:/SR/C", prefix=[])
    assert proc.returncode == 0, proc.stderr
    with h5py.File(tmp_path / "out.h5", "r") as f:
        assert f["R/C"].shape == (N, N)


def virtual(path, name, source_file, source_name):
    layout = h5py.VirtualLayout(shape=(N, N), dtype="f8")
    layout[...] = h5py.VirtualSource(source_file, source_name, shape=(N, N))
    with h5py.File(path, "a") as f:
        f.create_virtual_dataset(name, layout)


VDS = {
    # name: (input A, output, the source as the message names it)
    "source is the output": ("vds.h5:/V", "res.h5:/C", "vds.h5:/V, a virtual dataset that reads res.h5:/C"),
    "through a virtual dataset of virtual datasets": ("vds2.h5:/W", "res.h5:/C",
                                                     "vds2.h5:/W, a virtual dataset that reads res.h5:/C"),
    "another name of the source": ("vds.h5:/V", "alias.h5:/HL",
                                   "vds.h5:/V, a virtual dataset that reads res.h5:/C, the same HDF5 object"),
    "source in the same file": ("res.h5:/V", "res.h5:/C", "res.h5:/V, a virtual dataset that reads res.h5:/C"),
}


@pytest.mark.parametrize("case", list(VDS))
def test_virtual_dataset_input_whose_source_is_the_output_is_refused(tmp_path, case):
    """The run replaced res.h5:/C (--force) and the input then read the new C."""
    from helpers.inputs import square_inputs

    d = square_inputs(tmp_path, N)
    with h5py.File(d / "res.h5", "w") as f:
        f["C"] = standard_matrix(N, N, 0.5, 3)
        f["HL"] = f["C"]
    virtual(d / "vds.h5", "V", "res.h5", "/C")
    virtual(d / "vds2.h5", "W", "vds.h5", "/V")
    virtual(d / "res.h5", "V", ".", "/C")
    os.symlink("res.h5", d / "alias.h5")
    a, out, named = VDS[case]
    before = digest(d / "res.h5")
    proc, seconds = victim("gemm", a, "in.h5:/B", "-o", out, "--force", "--engine", "numpy", "--progress", "log",
                           cwd=d, prefix=[])
    assert_refused(proc, seconds, f"output {out} is an input of this run ({named}")
    assert "panel" not in proc.stderr
    assert digest(d / "res.h5") == before


# ---- after a full disk ------------------------------------------------------------------------

MiB = 1 << 20
DEAD = """
import os, sys
from ozhpc.errors import InputError
from ozhpc.io import h5io, h5out
txn = h5out.OutputTransaction(h5io.DatasetRef("out.h5", "/D"), False, "dead-1")
with txn:
    txn.create((512, 512))
    with txn.open() as f:
        f[txn.tmp_name][...] = 2.0
    st = os.statvfs(".")
    with open("filler", "wb") as g:  # another job takes every byte left
        os.posix_fallocate(g.fileno(), 0, st.f_bavail * st.f_frsize)
    try:
        txn.commit()
    except InputError as exc:
        print(exc)
"""


@pytest.fixture
def small_disk(tmp_path):
    """An 8 MiB file system of its own (tmpfs: mount needs root)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True)
    if proc.returncode:
        pytest.skip(f"cannot mount a small tmpfs to fill ({proc.stderr.decode().strip()})")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_rerun_after_a_full_disk_works(tmp_path, small_disk):
    """A full disk during the commit leaves this run's temporary (2 MiB, C's bytes) in the file
    when not even removing it fits. Once some room is back (1.5 MiB, not enough for a new C
    beside the temporary), the next run must work, as the docs say: the pre-compute disk check
    refused every rerun, even into a new dataset, before the write could remove the temporary."""
    d = small_disk
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"] = standard_matrix(512, 8, 0.5, 1)
        f["B"] = standard_matrix(8, 512, 0.5, 2)
    args = [f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B", "--engine", "numpy", "--progress", "off"]
    proc, _ = victim("gemm", *args, "-o", "out.h5:/C", cwd=d, prefix=[])
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-c", DEAD], cwd=d, env=env(), capture_output=True, text=True,
                          timeout=60)
    assert "no room for" in proc.stdout and "the next write removes it" in proc.stderr, proc.stdout + proc.stderr
    with h5py.File(d / "out.h5", "r") as f:
        assert sorted(f) == [".ozhpc-tmp-dead-1", "C"] and f["C"][0, 0] != 2.0
    os.remove(d / "filler")
    st = os.statvfs(d)
    with open(d / "filler", "wb") as g:
        os.posix_fallocate(g.fileno(), 0, st.f_bavail * st.f_frsize - 3 * MiB // 2)
    proc, _ = victim("gemm", *args, "-o", "out.h5:/next", "--dry-run", cwd=d, prefix=[])
    assert proc.returncode == 0, proc.stderr
    proc, _ = victim("gemm", *args, "-o", "out.h5:/next", cwd=d, prefix=[MPIEXEC, "-n", "2"])
    assert proc.returncode == 0, proc.stderr
    with h5py.File(d / "out.h5", "r") as f:
        assert sorted(f) == ["C", "next"] and np.array_equal(f["C"][...], f["next"][...])
    assert sorted(os.listdir(d)) == ["filler", "out.h5"]
