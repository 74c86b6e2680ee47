"""The memory model and the planner for complex products: 16 bytes an operand entry and of C, the
complex plan's planes, the measured peak of a complex CLI run within 25% of the model, and a complex
product that cannot fit refused before the compute (one line, exit 2) where the real one of the
same shape runs."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import REPO, run_cli
from ozhpc.commands.plan import DEVICES, predict
from ozhpc.ozaki.certificate import CERTIFY_CHUNK
from ozhpc.ozaki.complex_plan import GaussianPlan
from ozhpc.ozaki.domain import COMPLEX
from ozhpc.ozaki.plan import assumed_plan
from ozhpc.ozaki.settings import OzakiSettings
from ozhpc.parallel.layout import numroc
from ozhpc.run.resources import BASE_BYTES, estimate_memory

CHILD = """
import resource, sys
from ozhpc.cli import main
code = main(sys.argv[1:])
print("MAXRSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, code)
"""


def _complex(rng, shape):
    return (rng.random(shape) - 0.5) * np.exp(0.5 * rng.standard_normal(shape)) \
        + 1j * (rng.random(shape) - 0.5) * np.exp(0.5 * rng.standard_normal(shape))


def _env():
    return dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
                OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def test_complex_counts_sixteen_bytes_and_the_complex_plan():
    settings = OzakiSettings("ozaki2", bits=54)
    m, n, k = 3000, 2000, 1000
    plan = assumed_plan(settings, k, COMPLEX.forms)
    assert isinstance(plan, GaussianPlan)
    assert plan.planes == 2 * 16   # 16 split moduli at 54 bits: two planes each
    real = estimate_memory((m, k), (n, k), k, k, settings, on_device=True)
    cplx = estimate_memory((m, k), (n, k), k, k, settings, on_device=True, complex_entries=True)
    a, b, c = m * k, n * k, m * n
    w = k
    # fixed bits: the panel loop's operands (16 bytes), whole-operand planes, panels and one int8
    # residue plane per product is the peak (the combine holds residues and C, the planes gone)
    assert cplx.device == 16 * (a + b) + plan.planes * (a + b) + 2 * plan.planes * (m + n) * w + plan.planes * c
    auto = OzakiSettings("ozaki2")
    fp64 = estimate_memory((m, k), (n, k), k, k, auto, on_device=True, complex_entries=True, wire="fp64")
    plan = assumed_plan(auto, k, COMPLEX.forms)
    loop = 16 * (a + b) + 2 * 16 * (m + n) * w + 2 * plan.planes * (m + n) * w + plan.planes * c + 12 * c
    combine = 16 * (a + b) + plan.planes * c + 16 * c + 12 * c
    certificate = 16 * (a + b) + 16 * c + 12 * c + 16 * c
    assert fp64.device == max(loop, combine, certificate)
    assert cplx.host == BASE_BYTES + 16 * (a + b) + 2 * 16 * c
    assert cplx.planes == plan.planes and "complex" in cplx.note
    assert real.host == BASE_BYTES + 8 * (a + b) + 2 * 8 * c
    with_c = estimate_memory((m, k), (n, k), k, k, settings, on_device=True, with_c=True, complex_entries=True)
    assert with_c.device - cplx.device == 16 * c


def test_complex_certificate_counts_both_parts_digits():
    auto, fixed = OzakiSettings("ozaki2"), OzakiSettings("ozaki2", bits=54)
    m = n = k = 2000
    plain = estimate_memory((m, k), (n, k), k, k, fixed, complex_entries=True, wire="planes")
    certified = estimate_memory((m, k), (n, k), k, k, auto, complex_entries=True, wire="planes")
    real = estimate_memory((m, k), (n, k), k, k, auto, wire="planes")
    real_plain = estimate_memory((m, k), (n, k), k, k, fixed, wire="planes")
    # real: 8 m n of digit sums + one digit plane per operand entry (and two panels' worth);
    # complex: three groups and the two components' sums (5 x 8 m n), twice the digit planes
    # (or, after the products, the verdict and the check's row chunks, whichever is larger)
    digits, check = (m * k + n * k) + 2 * (m + n) * k, m * n + 6 * 8 * min(m * n, CERTIFY_CHUNK)
    assert real.host - real_plain.host == 8 * m * n + max(digits, check)
    assert certified.host - plain.host == 5 * 8 * m * n + max(2 * digits, check)


@pytest.mark.parametrize("wire", ["planes", "fp64"])
def test_complex_estimate_within_25_percent_of_the_measured_peak(tmp_path, wire):
    n = 900
    rng = np.random.default_rng(9)
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = _complex(rng, (n, n)), _complex(rng, (n, n))
    report = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-c", CHILD, "gemm", f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/B",
                           "-o", f"{tmp_path}/out.h5:/C", "--engine", "numpy", "--progress", "off",
                           "--report", str(report), "--wire", wire], capture_output=True, text=True, timeout=300,
                          env=_env())
    assert proc.returncode == 0, proc.stderr
    measured = int(next(line for line in proc.stdout.splitlines() if line.startswith("MAXRSS")).split()[1])
    run = json.loads(report.read_text())
    assert run["wire"] == wire and run["complex"] is True
    model = estimate_memory((n, n), (n, n), run["kb"], n, OzakiSettings("ozaki2"), wire=wire, complex_entries=True)
    assert 0.75 * measured <= model.host <= 1.25 * measured, (model.host / 2**20, measured / 2**20)


def test_a_complex_product_that_cannot_fit_is_refused_before_the_compute(tmp_path):
    """Under an address-space limit between the real and the complex estimate of the same shape:
    the real product runs, the complex one is refused with one line and exit 2, nothing written."""
    n = 1200
    rng = np.random.default_rng(4)
    with h5py.File(tmp_path / "in.h5", "w") as f:
        z = _complex(rng, (n, n))
        f["A"], f["B"], f["Ar"], f["Br"] = z, z.T.copy(), z.real.copy(), z.imag.copy()
    settings = OzakiSettings("ozaki2")
    real = estimate_memory((n, n), (n, n), n, n, settings, wire="fp64").host
    cplx = estimate_memory((n, n), (n, n), n, n, settings, wire="fp64", complex_entries=True).host
    assert cplx > 1.5 * real
    # the limit is on the address space, which the interpreter's libraries already take part of
    probe = subprocess.run([sys.executable, "-c", "import ozhpc.cli, h5py, numpy, mpi4py; "
                            "print(open('/proc/self/status').read())"], capture_output=True, text=True, env=_env())
    vm = int(next(line for line in probe.stdout.splitlines() if line.startswith("VmSize")).split()[1]) * 1024
    limit = vm + (real + cplx) // 2

    def run(a, b):
        return subprocess.run([sys.executable, "-m", "ozhpc", "gemm", f"in.h5:/{a}", f"in.h5:/{b}", "-o",
                               f"out_{a}.h5:/C", "--engine", "numpy", "--progress", "off", "--wire", "fp64"],
                              cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))

    r = run("A", "B")
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and r.stdout == "" and len(lines) == 1, r.stderr
    assert lines[0].startswith("ozhpc gemm: error: not enough memory: peak per rank: host "), lines
    assert "complex" in lines[0] and "available under ulimit -v (RLIMIT_AS)" in lines[0], lines
    assert not (tmp_path / "out_A.h5").exists()
    r = run("Ar", "Br")
    assert r.returncode == 0, r.stderr


def test_planner_counts_complex_entries():
    settings = OzakiSettings("ozaki2")
    m, n, k = 10000, 9000, 8000
    for wire in ("fp64", "planes"):
        model = predict(m, n, k, (2, 3), DEVICES["h200"], settings, kb=1024, wire=wire, complex_entries=True)
        want = estimate_memory((numroc(m, 256, 0, 0, 2), numroc(k, 1024, 0, 0, 3)),
                               (numroc(n, 256, 0, 0, 3), numroc(k, 1024, 0, 0, 2)), 1024, k, settings,
                               on_device=True, wire=wire, complex_entries=True)
        assert model.memory_bytes == want.device
        assert (model.read_bytes, model.write_bytes) == (16 * (m * k + k * n), 16 * m * n)
        assert "complex" in model.plan
    fp64 = predict(m, n, k, (2, 3), DEVICES["h200"], settings, kb=1024, wire="fp64", complex_entries=True)
    assert fp64.bytes_per_entry == 16
    real = predict(m, n, k, (2, 3), DEVICES["h200"], settings, kb=1024, wire="fp64")
    assert real.bytes_per_entry == 8 and real.seconds < fp64.seconds


def test_plan_command_refuses_a_complex_product_that_does_not_fit(tmp_path):
    """n = 40000 complex (16 bytes an entry, 34 planes) does not fit one H200: refused in one line,
    exit 2; on 4 GPUs it fits. n = 32768 complex fits one (FP64 panels, no whole-operand planes)."""
    r = run_cli(["plan", "--m", 40000, "--n", 40000, "--k", 40000, "--gpus", 1, "--complex"], cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("ozhpc plan: error: no layout of complex C = 40000x40000 (k = 40000) fits 1 GPU(s) "
                               "(NVIDIA H200 SXM): the smallest needs "), r.stderr
    r = run_cli(["plan", "--m", 40000, "--n", 40000, "--k", 40000, "--gpus", 4, "--complex"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "scheme ozaki2, complex" in r.stdout
    r = run_cli(["plan", "--m", 32768, "--n", 32768, "--k", 32768, "--gpus", 1, "--complex", "--json"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["memory_bytes"] <= 140e9 and json.loads(r.stdout)["wire"] == "fp64"
