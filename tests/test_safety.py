"""Nothing a user has is lost (issue 17): outputs, reports, locks, pre-compute checks, under mpiexec.

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
from ozhpc.matrices import standard_matrix

pytestmark = pytest.mark.mpi

MPIEXEC = shutil.which("mpiexec")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 64

if MPIEXEC is None:
    pytest.skip("mpiexec not found (pip install mpich)", allow_module_level=True)


def env(extra=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
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
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"] = standard_matrix(N, N, 0.5, 1)
        f["B"] = standard_matrix(N, N, 0.5, 2)
    return tmp_path


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
    proc, seconds = gemm(2, d, out, *extra)
    assert_refused(proc, seconds, needle)
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
    from ozhpc import resources
    from ozhpc.errors import InputError

    class Full:
        f_bavail, f_frsize = 1000, 4096  # 4 MB free
    monkeypatch.setattr(resources.os, "statvfs", lambda path: Full)
    with pytest.raises(InputError, match="not enough disk space for output file"):
        resources.check_disk(str(tmp_path / "out.h5"), 1000, 1000)
    resources.check_disk(str(tmp_path / "out.h5"), 10, 10)
