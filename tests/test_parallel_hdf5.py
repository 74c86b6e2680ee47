"""Parallel HDF5 (h5py built with MPI, driver="mpio") against the serial path, bit for bit.

Skipped unless ``h5py.get_config().mpi``: PyPI's h5py is serial. CI builds a consistent
MPICH + parallel HDF5 + mpi4py + h5py stack in its own venv and runs this file there
(.ci/parallel_hdf5.sh, which sets OZHPC_REQUIRE_PARALLEL_HDF5=1 so a skip fails instead).

The same product is written by the same ranks and grid twice: once through parallel HDF5
(collective create, independent block writes on one mpio file) and once through the
serial fallback (token-ring writes), chosen by setting ``ozhpc.io.distio.PARALLEL_HDF5``
in a small launcher; plus once on one process. The C datasets (raw little-endian bytes,
shape, dtype, ozhpc attributes) and the reports' SHA-256 must be identical. Whole-file
bytes are not compared: HDF5's free-space layout and timestamps may legitimately differ
between the mpio and sec2 drivers.
"""
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import REPO

pytestmark = pytest.mark.mpi

if not h5py.get_config().mpi:
    if os.environ.get("OZHPC_REQUIRE_PARALLEL_HDF5") == "1":
        raise RuntimeError("OZHPC_REQUIRE_PARALLEL_HDF5=1 but this h5py was built without MPI")
    pytest.skip("h5py was built without MPI (parallel HDF5); see .ci/parallel_hdf5.sh",
                allow_module_level=True)

LAUNCHER = """\
import sys
import ozhpc.io.distio as distio
distio.PARALLEL_HDF5 = sys.argv[1] == "parallel"
from ozhpc.cli import main
sys.exit(main(sys.argv[2:]))
"""


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    return e


def ozhpc(tmp_path, ranks, path_kind, args, timeout=300):
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER)
    cmd = [sys.executable, str(launcher), path_kind, *map(str, args)]
    if ranks > 1:
        cmd = [shutil.which("mpiexec"), "-n", str(ranks), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env())
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return proc


def dataset(path, name="/C"):
    with h5py.File(path, "r") as f:
        d = f[name]
        attrs = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.attrs.items()}
        return d.shape, d.dtype.str, np.ascontiguousarray(d[...], dtype="<f8").tobytes(), attrs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("phdf5")
    for name, shape, seed in (("A", "37x29", 1), ("B", "29x23", 2), ("C0", "37x23", 3), ("AT", "29x37", 4)):
        proc = subprocess.run([sys.executable, "-m", "ozhpc", "gen", "--shape", shape, "--seed", str(seed),
                               "--phi", "1", f"{d}/in.h5:/{name}"], capture_output=True, text=True, env=env())
        assert proc.returncode == 0, proc.stderr
    return d


def test_this_stack_really_is_parallel():
    from mpi4py import MPI

    import ozhpc.io.distio as distio

    assert distio.PARALLEL_HDF5
    # one MPI library in this process: mpi4py's must be the one h5py's HDF5 links
    assert "MPICH" in MPI.Get_library_version()


@pytest.mark.parametrize("ranks, grid, block, extra", [
    (4, "2x2", "5", []),
    (3, "3x1", "4x7", ["--transa"]),
    (2, "1x2", "16", ["--alpha", "0.5", "--beta", "-2", "--c", "{d}/in.h5:/C0"]),
])
def test_parallel_and_serial_paths_write_the_same_bits(inputs, tmp_path, ranks, grid, block, extra):
    d = inputs
    a = f"{d}/in.h5:/AT" if "--transa" in extra else f"{d}/in.h5:/A"
    extra = [x.format(d=d) for x in extra]
    results = {}
    for kind, n in (("parallel", ranks), ("serial", ranks), ("one", 1)):
        out = tmp_path / f"{kind}.h5"
        ozhpc(tmp_path, n, "parallel" if kind == "parallel" else "serial",
              ["gemm", a, f"{d}/in.h5:/B", "-o", f"{out}:/C", "--grid", grid if n > 1 else "1x1",
               "--block", block, "--engine", "numpy", "--progress", "off",
               "--report", tmp_path / f"{kind}.json", *extra])
        results[kind] = (dataset(out), json.loads((tmp_path / f"{kind}.json").read_text()))
    (shape_p, dtype_p, bytes_p, attrs_p), rep_p = results["parallel"]
    for kind in ("serial", "one"):
        (shape, dtype, data, attrs), rep = results[kind]
        assert (shape, dtype) == (shape_p, dtype_p) == ((37, 23), "<f8")
        assert data == bytes_p, f"{kind} C differs from the parallel-HDF5 C"
        assert attrs == attrs_p
        assert rep["sha256"] == rep_p["sha256"]
    assert rep_p["ranks"] == ranks


def test_job_file_through_parallel_hdf5(inputs, tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(f"""
[inputs]
a = "{inputs}/in.h5:/A"
b = "{inputs}/in.h5:/B"
[output]
c = "out.h5:/C"
report = "run.json"
[layout]
grid = "2x2"
block = 6
[ozaki]
engine = "numpy"
""")
    ozhpc(tmp_path, 4, "parallel", ["run", job])
    ozhpc(tmp_path, 1, "serial", ["gemm", f"{inputs}/in.h5:/A", f"{inputs}/in.h5:/B", "-o", f"{tmp_path}/one.h5:/C",
                                  "--engine", "numpy"])
    assert dataset(tmp_path / "out.h5")[2] == dataset(tmp_path / "one.h5")[2]
    report = json.loads((tmp_path / "run.json").read_text())
    assert report["ranks"] == 4 and report["grid"] == [2, 2]
