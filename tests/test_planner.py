"""The run planner (ozhpc.commands.plan, ``ozhpc plan``): its bytes equal the transports' counters
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
from ozhpc.commands.plan import DEVICES, best, device_for, predict, traffic
from ozhpc.commands.plan_devices import VERDICT_BYTES
from ozhpc.ozaki.settings import OzakiSettings
from ozhpc.parallel.layout import numroc
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.resources import estimate_memory

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


@pytest.mark.parametrize("complex_entries", [False, True])
@pytest.mark.parametrize("device", ["h200", "b200", "cpu"])
def test_certified_product_counts_its_certificate_and_the_call_set_up(device, complex_entries):
    """Under "auto" the time holds the certificate's passes (a read of the operands, the verdict over
    C) and the call's fixed cost; a fixed plan certifies nothing and holds neither."""
    dev, n, item = DEVICES[device], 2048, 16 if complex_entries else 8
    auto = predict(n, n, n, (1, 1), dev, OzakiSettings("ozaki2"), kb=n, complex_entries=complex_entries)
    fixed = predict(n, n, n, (1, 1), dev, OzakiSettings("ozaki2", bits=54), kb=n, complex_entries=complex_entries)
    passes = (item * 2 * n * n + VERDICT_BYTES[complex_entries] * n * n) / dev.hbm   # one rank: no sharing
    assert auto.certificate_seconds == pytest.approx(passes + dev.call_cost, rel=1e-12)
    assert auto.certificate_seconds > dev.call_cost > 0 and fixed.certificate_seconds == 0
    assert auto.seconds > auto.compute_seconds + auto.certificate_seconds


def test_time_of_the_committed_one_h200_calls():
    """The last committed one-H200 acceptance run (the default and fixed scheme II calls, n = 2048 to
    32768): the model within 30% of every measured call (its error table:
    bench/results/planner_b200_*.md, "One GPU")."""
    text = open(os.path.join(REPO, "bench", "results", "accept_h200_2026-12-04.md")).read()
    text = text[text.index("## Evening state"):]
    calls = re.findall(r"^\| (\d+) \| ozhpc (default|fixed (\d+) bits) \| \d+ \(\d+\) \| ([\d.]+) \|", text, re.M)
    for n, _, bits, wall in calls:
        settings = OzakiSettings("ozaki2", bits=int(bits)) if bits else OzakiSettings("ozaki2")
        model = predict(int(n), int(n), int(n), (1, 1), DEVICES["h200"], settings, kb=min(int(n), 8192), wire="fp64")
        assert abs(model.seconds / float(wall) - 1) < 0.3, (n, bits, wall, model.seconds)
    assert len(calls) >= 8


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
                 "--scheme", "ozaki2"], env=_homes(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("C = 131072x131072 (k = 131072) on 512 x NVIDIA B200")
    assert re.search(r"best: grid \d+x\d+, panel \d+, wire (fp64|planes) .*: ozhpc gemm --grid", lines[1])
    for needle in ("predicted time", "TFLOP/s per GPU", "over NVLink", "over the network", "memory per GPU",
                   "communication hidden", "why: grid:", "why: wire:"):
        assert needle in r.stdout
    r = run_cli(["plan", "--m", "4096", "--n", "4096", "--k", "4096", "--gpus", "8", "--json"], env=_homes(tmp_path))
    out = json.loads(r.stdout)
    model = predict(4096, 4096, 4096, tuple(out["grid"]), DEVICES["h200"], OzakiSettings(), kb=out["kb"],
                    wire=out["wire"])
    assert out["bytes_sent"] == model.bytes_sent and out["seconds"] == model.seconds
    assert os.listdir(tmp_path) == []   # planning writes nothing (only --calibrate does)


@pytest.mark.parametrize("args,message", [
    (["--gpus", "0"], "ozhpc plan: error: --gpus must be an integer from 1 to 4194304, got '0'"),
    (["--gpus", str(2**31)], "ozhpc plan: error: --gpus must be an integer from 1 to 4194304, got '2147483648'"),
    (["--gpus", "2", "--io-rate", "0"], "ozhpc plan: error: --io-rate must be a positive number of GB/s, got '0'"),
    (["--gpus", "2", "--io-rate", "1e308"], "ozhpc plan: error: --io-rate must be from 1e-06 to 1e+06 GB/s, got '1e308'"),
    (["--gpus", "2", "--io-rate", "1e-300"], "ozhpc plan: error: --io-rate must be from 1e-06 to 1e+06 GB/s, got '1e-300'"),
    (["--gpus", "2", "--slices", "99"], "ozhpc plan: error: --slices must be between 1 and 24, got 99"),
    (["--gpus", "2", "--gpu", "a100"], "ozhpc plan: error: argument --gpu: invalid choice: 'a100'"),
])
def test_plan_bad_options_one_line(args, message):
    r = run_cli(["plan", "--m", "10", "--n", "10", "--k", "10", *args])
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(message), r.stderr


def _homes(tmp_path) -> dict:
    """The config directory and the kernel cache of a run, both in ``tmp_path``."""
    return {"XDG_CONFIG_HOME": str(tmp_path), "OZHPC_CACHE_DIR": str(tmp_path / "cache")}


def _plan(*args, tmp_path, timeout=120):
    return run_cli(["plan", *map(str, args)], env=_homes(tmp_path), timeout=timeout)


def _run_wire_and_estimate(settings, m, n, k, ranks, grid, kb, per_node):
    """What a real run decides, without a GPU: Summa's own wire choice (its method, on ranks
    filling nodes of ``per_node``, the cuTile engine) and the resource check's estimate of rank 0."""
    from types import SimpleNamespace

    from ozhpc.parallel.layout import BlockCyclic
    from ozhpc.parallel.summa import Summa
    from ozhpc.run.runner import rank_estimate

    comm = SimpleNamespace(allgather=lambda _: [f"node{r // per_node}" for r in range(ranks)])
    run = SimpleNamespace(settings=settings, k=k, grid=SimpleNamespace(size=ranks, comm=comm, coords=(0, 0)),
                          engine=SimpleNamespace(name="cutile", on_device=True), kb=kb, complex=False,
                          a_layout=BlockCyclic(m, k, 256, kb, *grid), bt_layout=BlockCyclic(n, k, 256, kb, grid[1], grid[0]))
    run.wire = Summa._choose_wire(run, "auto")
    return run.wire.name, rank_estimate(run).device


@pytest.mark.parametrize("scheme,width", [("ozaki2", "auto"), ("ozaki2", 53), ("ozaki2", 54), ("ozaki2", 60),
                                          ("ozaki1", "auto"), ("ozaki1", 7)])
def test_planner_wire_and_memory_are_the_real_runs(scheme, width):
    """The planner, SUMMA and the memory check assume one plan before the data is read: for a
    sweep of bits (slices), k and ranks (one node of 8 GPUs and several), the planner's wire and
    memory per GPU are what a real run picks and checks."""
    settings = OzakiSettings(scheme, **{"bits" if scheme == "ozaki2" else "slices": width})
    for k in (256, 4096, 16384, 131072):
        for ranks, grid in ((2, (1, 2)), (4, (2, 2)), (8, (2, 4)), (16, (4, 4)), (64, (8, 8))):
            m = n = 8192
            kb = min(1024, k // max(grid))
            model = predict(m, n, k, grid, DEVICES["h200"], settings, kb=kb, per_node=8, per_rank=False)
            wire, memory = _run_wire_and_estimate(settings, m, n, k, ranks, grid, kb, per_node=8)
            assert (model.wire, model.memory_bytes) == (wire, memory), (k, ranks)


@pytest.mark.parametrize("grid,per_node", [((1, 1), 8), ((2, 3), 4), ((3, 2), 4), ((4, 4), 8), ((2, 8), 3),
                                           ((5, 3), 7), ((1, 12), 5), ((12, 1), 5), ((3, 3), 100)])
def test_per_rank_bytes_are_counted_rank_by_rank(grid, per_node):
    """The vectorised byte count equals a rank-by-rank count of each root's panel times its
    receivers, split into the ranks of its node and the others."""
    p, q = grid
    m, n, k, kb, block = 1000, 700, 900, 64, (48, 80)
    c = traffic(predict(m, n, k, grid, DEVICES["h200"], OzakiSettings(), kb=kb, block=block, per_rank=False),
                m, n, k, block, per_node)
    entry, sent, near = c.bytes_per_entry, [], []
    for r in range(p * q):
        i, j = divmod(r, q)
        a_out = entry * numroc(m, block[0], i, 0, p) * numroc(k, kb, j, 0, q)
        b_out = entry * numroc(n, block[1], j, 0, q) * numroc(k, kb, i, 0, p)
        sent.append(a_out * (q - 1) + b_out * (p - 1))
        near.append(a_out * sum(1 for x in range(i * q, i * q + q) if x != r and x // per_node == r // per_node)
                    + b_out * sum(1 for x in range(j, p * q, q) if x != r and x // per_node == r // per_node))
    assert c.bytes_sent == sent
    assert (c.nvlink_bytes_max, c.network_bytes_max) == (max(near), max(s - x for s, x in zip(sent, near)))


@pytest.mark.parametrize("gpus,grid", [(16384, "128x128"), (2**20, "1024x1024")])
def test_plan_answers_in_seconds_for_many_gpus(tmp_path, gpus, grid):
    """The grid search walks the divisors and models each layout in closed form: 2^14 and 2^20
    GPUs answer well within the time limit (a hang or a search over every P fails it)."""
    r = _plan("--m", 2**20, "--n", 2**20, "--k", 2**20, "--gpus", gpus, "--gpu", "b200", tmp_path=tmp_path,
              timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"best: grid {grid}," in r.stdout


def test_plan_shows_io_and_start_up(tmp_path):
    """The HDF5 read of A and B and the write of C at --io-rate, and the start-up, each on its own
    line saying what it assumes, and the total adds them to the product."""
    m, n, k = 131072, 131072, 65536
    r = _plan("--m", m, "--n", n, "--k", k, "--gpus", 64, "--gpu", "b200", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    read_gb = 8 * (m * k + k * n) / 1e9
    assert f"read A and B: {read_gb / 3:.3g} s, {read_gb:.3g} GB of HDF5 at 3 GB/s (--io-rate" in r.stdout
    assert f"write C: {8 * m * n / 1e9 / 3:.3g} s, {8 * m * n / 1e9:.3g} GB of HDF5 at the same rate" in r.stdout
    assert "start-up: 2.5 s (one node, warm kernel cache" in r.stdout
    assert re.search(r"one pass of this plan with its certificate and the set-up of the call \([\d.e-]+ s\), wider "
                     "passes not counted", r.stdout)
    fixed = _plan("--m", m, "--n", n, "--k", k, "--gpus", 64, "--gpu", "b200", "--bits", 54, tmp_path=tmp_path)
    assert "one pass of this plan, wider passes not counted" in fixed.stdout
    out = json.loads(_plan("--m", m, "--n", n, "--k", k, "--gpus", 64, "--gpu", "b200", "--io-rate", 40, "--json",
                           tmp_path=tmp_path).stdout)
    assert out["read_bytes"] == 8 * (m * k + k * n) and out["write_bytes"] == 8 * m * n
    assert out["read_seconds"] == out["read_bytes"] / 40e9 and out["write_seconds"] == out["write_bytes"] / 40e9
    assert out["total_seconds"] == pytest.approx(out["startup_seconds"] + out["read_seconds"] + out["seconds"]
                                                 + out["write_seconds"], rel=1e-12)
    assert out["total_seconds"] > out["seconds"] + out["read_seconds"]


def test_why_says_requested_only_for_a_requested_wire(tmp_path):
    """``--wire auto``: the chosen wire is explained by --wire auto's rule or by the model's time,
    never "requested"; ``--wire planes``: "requested"."""
    args = ("--m", 4096, "--n", 4096, "--k", 4096, "--gpus", 8)
    auto = _plan(*args, tmp_path=tmp_path)
    why = [line for line in auto.stdout.splitlines() if "why:" in line]
    assert auto.returncode == 0 and why and not any("requested" in line for line in why), auto.stdout
    assert "why: wire planes: the product is faster with it in this model" in auto.stdout
    assert "which --wire auto picks (" in auto.stdout
    fixed = _plan(*args, "--wire", "fp64", tmp_path=tmp_path)
    assert "why: wire fp64: --wire fp64 requested" in fixed.stdout


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_plan_nothing_fits_is_one_line_and_exit_2(tmp_path, extra):
    """As ``gemm --dry-run`` does for a run that cannot fit: one line naming the need, exit 2."""
    r = _plan("--m", 400000, "--n", 400000, "--k", 400000, "--gpus", 1, *extra, tmp_path=tmp_path)
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("ozhpc plan: error: no layout of C = 400000x400000 (k = 400000) fits 1 GPU(s) "
                               "(NVIDIA H200 SXM): the smallest needs "), r.stderr
    assert r.stderr.endswith("GB per GPU, 140 GB available; use more GPUs\n")


def test_plan_nothing_fits_on_one_cpu_node_says_more_ranks_do_not_help(tmp_path):
    """On one node (--gpu cpu's default) the ranks share its RAM, so "use more ranks" would not help."""
    r = _plan("--m", 400000, "--n", 400000, "--k", 400000, "--gpus", 4, "--gpu", "cpu", tmp_path=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.endswith(" available; the ranks share one node's RAM: spread them over nodes "
                             "(--gpus-per-node), or plan a smaller product\n"), r.stderr
    r = _plan("--m", 400000, "--n", 400000, "--k", 400000, "--gpus", 4, "--gpu", "cpu", "--gpus-per-node", 1,
              tmp_path=tmp_path)
    assert r.returncode == 2 and r.stderr.endswith(" available; use more ranks\n"), r.stderr


def test_plan_for_cpus_speaks_of_ranks(tmp_path):
    """``--gpu cpu``: ranks, shared memory and the node's RAM shared by its ranks; no GPU, no NVLink."""
    r = _plan("--m", 4096, "--n", 4096, "--k", 4096, "--gpus", 4, "--gpu", "cpu", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "GPU" not in r.stdout and "NVLink" not in r.stdout, r.stdout
    assert "on 4 ranks (CPU, NumPy engine)" in r.stdout and "over shared memory" in r.stdout
    assert "memory per rank" in r.stdout and "(the node's RAM shared by 4 rank(s))" in r.stdout


def _gpu_here() -> str:
    from ozhpc.engines import EngineUnavailable, get_engine

    try:
        return get_engine("cutile").describe().get("device", "").lower()
    except EngineUnavailable:
        return ""


@pytest.mark.parametrize("gpu", ["h200", "b200", "gb200"])
def test_calibrate_refuses_a_device_this_node_lacks(tmp_path, gpu):
    """--calibrate measures what --gpu names: without that GPU here, one line and exit 2 before
    any compute, nothing recorded (never this node's CPU under the GPU's name)."""
    if gpu in _gpu_here().replace("-", " ").split():
        pytest.skip(f"this node has an {gpu}")
    r = _plan("--m", 4096, "--n", 4096, "--k", 4096, "--gpus", 8, "--gpu", gpu, "--calibrate", tmp_path=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"ozhpc plan: error: --calibrate --gpu {gpu} measures an {DEVICES[gpu].name}")
    assert "--gpu cpu" in r.stderr or "give the --gpu it has" in r.stderr
    assert not (tmp_path / "ozhpc").exists() and not (tmp_path / "cache").exists()
