"""The run planner (ozhpc.planner, ``ozhpc plan``): its bytes equal the transports' counters
exactly (real mpiexec runs, both wires, committed 2 x H200 runs), its memory is the resources
model's and within 25% of a measured multi-rank peak, and the command's output and errors."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import pytest

from conftest import run_cli
from ozhpc.matrices import standard_matrix
from ozhpc.ozaki.settings import OzakiSettings
from ozhpc.parallel.layout import numroc
from ozhpc.planner import DEVICES, best, device_for, predict
from ozhpc.resources import estimate_memory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIEXEC = shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install mpich)")
CHILD = ("import os, resource, sys\nfrom ozhpc.cli import main\ncode = main(sys.argv[1:])\n"
         "rank = os.environ.get('PMI_RANK') or os.environ['OMPI_COMM_WORLD_RANK']\n"
         "with open('peak' + rank, 'w') as f:\n"
         "    f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))\n")
"""``ozhpc ARGS`` that leaves its rank's peak RSS in ``peakRANK`` (the rank from MPICH's or Open MPI's mpiexec)."""


def mpiexec(ranks, args, cwd):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    return subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    with h5py.File(d / "in.h5", "w") as f:
        f["A"], f["B"] = standard_matrix(53, 70, 0.5, 1), standard_matrix(70, 37, 0.5, 2)
    return d


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("ranks,grid", [(2, "1x2"), (3, "3x1"), (4, "2x2")])
@pytest.mark.parametrize("scheme,fixed,wire", [("ozaki1", ["--slices", "5"], "planes"),
                                               ("ozaki2", ["--bits", "30"], "fp64"),
                                               ("ozaki1", [], "planes")])
def test_bytes_equal_the_transports_counters(inputs, tmp_path, ranks, grid, scheme, fixed, wire):
    """Every rank's bytes sent, as the run's report has them, equal the planner's (one pass: fixed
    slices / bits; "auto" adds the certificate's plane, also one pass for these inputs)."""
    proc = mpiexec(ranks, ["-m", "ozhpc", "gemm", f"{inputs}/in.h5:/A", f"{inputs}/in.h5:/B", "-o",
                           f"{tmp_path}/out.h5:/C", "--engine", "numpy", "--grid", grid, "--block", "8",
                           "--panel", "16", "--scheme", scheme, "--wire", wire, "--progress", "off",
                           "--report", "run.json", *fixed], tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["wire"] == wire and len(run["widths"]) <= 1
    settings = OzakiSettings(scheme, **{o.lstrip("-"): int(v) for o, v in zip(fixed[::2], fixed[1::2])})
    model = predict(53, 37, 70, tuple(run["grid"]), DEVICES["cpu"], settings, kb=16, wire=wire, block=(8, 8))
    assert run["bytes_sent"]["per_rank"] == model.bytes_sent
    assert run["bytes_received"]["total"] == sum(model.bytes_received) == run["bytes_sent"]["total"]
    assert run["bytes_model_total"] == sum(model.bytes_sent)


def test_bytes_of_the_committed_two_h200_runs():
    """The committed 2 x H200 table (7 slices, block 1024, panels of 4096): bytes sent = the planner's."""
    rows = 0
    for name in ("multi_gpu_h200x2_2026-11-30.md", "multi_gpu_h200x2_2026-12-01.md"):
        text = open(os.path.join(REPO, "bench", "results", name)).read()
        pattern = r"^\| (\d+) \| (\dx\d) \| \d \| \S+ \| \d+ x (\d+) \|.*\| ([\d,]+) \(=\) \|"
        for n, grid, kb, sent in re.findall(pattern, text, re.M):
            p, q = map(int, grid.split("x"))
            model = predict(int(n), int(n), int(n), (p, q), DEVICES["h200"], OzakiSettings("ozaki1", slices=7),
                            kb=int(kb), wire="planes", block=(1024, 1024))
            assert sum(model.bytes_sent) == int(sent.replace(",", "")), (name, n, grid)
            rows += 1
    assert rows >= 10


def test_memory_is_the_resources_model_of_the_largest_rank():
    settings = OzakiSettings("ozaki2")
    for wire in ("fp64", "planes"):
        model = predict(10000, 9000, 8000, (2, 3), DEVICES["h200"], settings, kb=1024, wire=wire)
        want = estimate_memory((numroc(10000, 256, 0, 0, 2), numroc(8000, 1024, 0, 0, 3)),
                               (numroc(9000, 256, 0, 0, 3), numroc(8000, 1024, 0, 0, 2)), 1024, 8000, settings,
                               on_device=True, wire=wire)
        assert model.memory_bytes == want.device
    fp64, planes = (predict(32768, 32768, 32768, (1, 1), DEVICES["h200"], settings, kb=4096, wire=w).memory_bytes
                    for w in ("fp64", "planes"))
    assert fp64 < planes   # no whole-operand residues


@pytest.mark.mpi
@needs_mpi
@pytest.mark.parametrize("wire", ["fp64", "planes"])
def test_memory_within_25_percent_of_the_measured_peak_on_two_ranks(tmp_path, wire):
    n = 1400
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = standard_matrix(n, n, 0.5, 1), standard_matrix(n, n, 0.5, 2)
    proc = mpiexec(2, ["-c", CHILD, "gemm", f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B", "-o",
                       f"{tmp_path}/out.h5:/C", "--engine", "numpy", "--scheme", "ozaki2", "--grid", "1x2",
                       "--wire", wire, "--progress", "off", "--report", "run.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    peak = max(int((tmp_path / f"peak{rank}").read_text()) for rank in range(2))
    run = json.loads((tmp_path / "run.json").read_text())
    model = predict(n, n, n, (1, 2), DEVICES["cpu"], OzakiSettings("ozaki2"), kb=run["kb"], wire=wire)
    assert 0.75 * peak <= model.memory_bytes <= 1.25 * peak, (model.memory_bytes / 2**20, peak / 2**20)


def test_best_layout_and_why():
    settings = OzakiSettings("ozaki2")
    chosen, candidates = best(131072, 131072, 131072, 64, DEVICES["b200"], settings)
    assert chosen.fits and chosen.seconds == min(c.seconds for c in candidates if c.fits)
    assert {c.grid for c in candidates} == {(p, 64 // p) for p in (1, 2, 4, 8, 16, 32, 64)}
    assert {c.wire for c in candidates} == {"fp64", "planes"}
    # 64 B200s over 8 nodes: the broadcasts of one axis cross nodes
    assert chosen.network_bytes_max > 0 and chosen.nvlink_bytes_max > 0
    # nothing fits: the layout needing the least memory, marked
    tight = best(400000, 400000, 400000, 1, DEVICES["h200"], settings)[0]
    assert not tight.fits


def test_calibration_replaces_the_table_rates():
    calibration = {"cpu": {"pair_ops": 1.0, "split_rate": 2.0, "host": "n1", "date": "d",
                           "by_scheme": {"ozaki2": {"pair_ops": 3.0, "split_rate": 4.0}}}}
    assert (device_for("cpu", calibration, "ozaki1").pair_ops, device_for("cpu", calibration, "ozaki1").split_rate) == (1.0, 2.0)
    assert device_for("cpu", calibration).pair_ops == 3.0   # the default scheme II's own rates
    assert device_for("h200", calibration) == DEVICES["h200"]
    assert device_for("cpu", calibration).source.startswith("calibrated on n1 d")


def test_plan_command(tmp_path):
    r = run_cli(["plan", "--m", "131072", "--n", "131072", "--k", "131072", "--gpus", "512", "--gpu", "b200",
                 "--scheme", "ozaki2"], env={"OZHPC_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("C = 131072x131072 (k = 131072) on 512 x NVIDIA B200")
    assert re.search(r"best: grid \d+x\d+, panel \d+, wire (fp64|planes) .*: ozhpc gemm --grid", lines[1])
    for needle in ("predicted time", "TFLOP/s per GPU", "over NVLink", "over the network", "memory per GPU",
                   "communication hidden", "why: grid:", "why: wire:"):
        assert needle in r.stdout
    r = run_cli(["plan", "--m", "4096", "--n", "4096", "--k", "4096", "--gpus", "8", "--json"],
                env={"OZHPC_CACHE_DIR": str(tmp_path)})
    out = json.loads(r.stdout)
    model = predict(4096, 4096, 4096, tuple(out["grid"]), DEVICES["h200"], OzakiSettings(), kb=out["kb"],
                    wire=out["wire"])
    assert out["bytes_sent"] == model.bytes_sent and out["seconds"] == model.seconds
    assert os.listdir(tmp_path) == []   # planning writes nothing (only --calibrate does)


@pytest.mark.parametrize("args,message", [
    (["--gpus", "0"], "ozhpc plan: error: --gpus: must be a positive integer, got '0'"),
    (["--gpus", "2", "--slices", "99"], "ozhpc plan: error: --slices must be between 1 and 24, got 99"),
    (["--gpus", "2", "--gpu", "a100"], "ozhpc plan: error: argument --gpu: invalid choice: 'a100'"),
])
def test_plan_bad_options_one_line(args, message):
    r = run_cli(["plan", "--m", "10", "--n", "10", "--k", "10", *args])
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(message), r.stderr
