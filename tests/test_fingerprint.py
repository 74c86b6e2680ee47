"""The result fingerprint: grid-independent, exact to combine, sensitive to any change of C."""
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from ozhpc.run.fingerprint import add_sums, finish, fingerprint_dataset, fingerprint_matrix, lane_sums
from ozhpc.run.matrices import standard_matrix

from conftest import REPO, run_cli

WORKER = os.path.join(os.path.dirname(__file__), "helpers", "dist_worker.py")


@pytest.fixture
def c():
    x = standard_matrix(67, 45, 1.5, 9)
    x[1, 2], x[3, 3], x[5, 0] = np.inf, np.nan, -0.0
    return x


def test_any_partition_gives_the_whole_matrix_fingerprint(c, rng):
    """Sums over blocks in any order and any cut (threads or not) add up to the whole's."""
    want = fingerprint_matrix(c)
    assert len(want) == 64 and int(want, 16) > 0
    rows, cols = rng.permutation(67), rng.permutation(45)
    parts = [lane_sums(c[np.ix_(r, k)], r, k, threads=t)
             for t, r in enumerate(np.array_split(rows, 5), 1) for k in np.array_split(cols, 3)]
    assert finish(add_sums(*parts[::-1]), c.shape) == want


def test_one_bit_a_swap_or_the_shape_changes_it(c):
    want = fingerprint_matrix(c)
    seen = {want}
    for i, j, bit in ((0, 0, 0), (66, 44, 63), (10, 20, 31)):
        d = c.copy()
        d.view(np.uint64)[i, j] ^= np.uint64(1) << np.uint64(bit)
        seen.add(fingerprint_matrix(d))
    d = c.copy()
    d[4, 7], d[7, 4] = c[7, 4], c[4, 7]                # two entries swapped
    seen.add(fingerprint_matrix(d))
    d = c.copy()
    d[[8, 9]] = c[[9, 8]]                              # two rows swapped
    seen.add(fingerprint_matrix(d))
    seen.add(fingerprint_matrix(np.where(c == 0, 0.0, c)))  # -0.0 -> +0.0
    z = np.zeros((6, 4))
    seen |= {fingerprint_matrix(z), fingerprint_matrix(z.reshape(4, 6)), fingerprint_matrix(z[:5])}
    assert len(seen) == 10


def test_dataset_read_in_chunks_equals_matrix(c, tmp_path):
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f["C"] = c
        f["C32"] = c.astype(np.float32)
    assert fingerprint_dataset(str(tmp_path / "c.h5"), "/C", chunk_bytes=8 * 45 * 4) == fingerprint_matrix(c)
    assert fingerprint_dataset(str(tmp_path / "c.h5"), "/C32") == fingerprint_matrix(c.astype(np.float32).astype(float))
    r = run_cli(["fingerprint", f"{tmp_path / 'c.h5'}:/C"])
    assert r.returncode == 0 and r.stdout.split()[0] == fingerprint_matrix(c), r.stderr


def test_gemm_report_and_attribute_hold_the_fingerprint(tmp_path):
    src, out = tmp_path / "in.h5", tmp_path / "out.h5"
    for name, shape, seed in (("A", "33x21", 1), ("B", "21x17", 2)):
        assert run_cli(["gen", "--shape", shape, "--seed", seed, f"{src}:/{name}"]).returncode == 0
    r = run_cli(["gemm", f"{src}:/A", f"{src}:/B", "-o", f"{out}:/C", "--block", "5", "--report", tmp_path / "r.json"])
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    with h5py.File(out, "r") as f:
        got, attr = f["C"][...], f["C"].attrs["ozhpc_fingerprint"]
    assert rep["fingerprint"] == attr == fingerprint_matrix(got)
    assert rep["seconds"]["fingerprint"] >= 0 and rep["fingerprint"] in r.stdout


def worker(ranks, *args) -> dict:
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec not found")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, WORKER, *map(str, args)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_same_fingerprint_for_every_grid_block_and_rank_count(ranks):
    result = worker(ranks, "fingerprint")
    c = standard_matrix(157, 96, 2.0, 5)
    c[3, 4], c[10, 0] = np.nan, -0.0
    assert result["failures"] == [] and result["cases"] >= 5
    assert result["fingerprint"] == fingerprint_matrix(c)


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_gemm_reports_the_same_fingerprint_on_every_grid(ranks, tmp_path):
    result = worker(ranks, "gemm", tmp_path)
    assert result["failures"] == [] and result["cases"] >= 2


@pytest.mark.mpi
def test_fingerprint_command_under_mpiexec_prints_once(c, tmp_path):
    """Three ranks each read a share of the rows; rank 0 prints the one line, as one process does."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec not found")
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f["C"] = c
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([mpiexec, "-n", "3", sys.executable, "-m", "ozhpc", "fingerprint", f"{tmp_path}/c.h5:/C"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{fingerprint_matrix(c)}  {tmp_path}/c.h5:/C\n"
    assert proc.stdout == run_cli(["fingerprint", f"{tmp_path}/c.h5:/C"]).stdout


def test_fingerprint_command_names_a_bad_dataset_once(tmp_path):
    """A missing file, dataset or a group: one line that says "input" once (not "dataset dataset")."""
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.create_group("g")
    cases = {"f.h5:/nope": "input dataset '/nope' not found in 'f.h5'",
             "none.h5:/C": "input file 'none.h5' does not exist",
             "f.h5:/g": "input f.h5:/g is a group, not a dataset"}
    for ref, message in cases.items():
        r = run_cli(["fingerprint", ref], cwd=tmp_path)
        assert (r.returncode, r.stdout, r.stderr) == (2, "", f"ozhpc fingerprint: error: {message}\n")
