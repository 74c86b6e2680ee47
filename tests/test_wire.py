"""The wire format (FP64 panels split on arrival, or int8 planes) never changes a bit of C, and the
FP64 wire builds no whole-operand planes (one rank here; 1-4 ranks under mpiexec in tests/test_mpi.py)."""
from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
from mpi4py import MPI

import ozhpc
from ozhpc.parallel import ProcessGrid, dist_gemm
from ozhpc.parallel.wire import Wire, choose_wire, wire_cost
from test_certificate_pipeline import structured_cases


def same_bits(x, y) -> bool:
    return x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("scheme", ["ozaki1", "ozaki2"])
@pytest.mark.parametrize("case", ["scaled", "identity", "sparse", "dominant", "hard"])
def test_both_wires_give_gemms_bits_through_every_pass(scheme, case):
    """Certified "auto" with its extra passes (equilibrated operands: "scaled"; support digits:
    "sparse"; wider plans: "hard") and the same certificate, whatever the wire."""
    a, b = structured_cases()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ozhpc.AccuracyWarning)
        want, info = ozhpc.gemm(a, b, scheme=scheme, engine="numpy", info=True)
        with ProcessGrid(MPI.COMM_SELF) as grid:
            for wire in ("fp64", "planes"):
                c, meta = dist_gemm(grid, a, b, block=(5, 13), kb=7, scheme=scheme, wire=wire, info=True)
                assert same_bits(c.gather(0), want), wire
                assert (meta.certified, meta.widths) == (info.certified, info.widths)
                assert meta.wire == wire
                assert meta.pass_bytes == ([8] * len(meta.pass_planes) if wire == "fp64" else meta.pass_planes)
    assert len(info.widths) > 1 or case in ("identity", "dominant")   # the cases that need more passes have them


@pytest.mark.parametrize("scheme", ["ozaki1", "ozaki2"])
def test_fp64_wire_with_inf_nan_and_fixed_plans(scheme):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((30, 41)), rng.standard_normal((41, 19))
    a[2, 5], a[7, 40], b[0, 3], b[11, 11] = np.inf, np.nan, -np.inf, np.inf
    fixed = {"slices": 5} if scheme == "ozaki1" else {"bits": 40}
    for kw in ({}, fixed):
        want = ozhpc.gemm(a, b, scheme=scheme, engine="numpy", **kw)
        with ProcessGrid(MPI.COMM_SELF) as grid:
            for wire in ("fp64", "planes"):
                c = dist_gemm(grid, a, b, block=(4, 6), kb=5, scheme=scheme, wire=wire, **kw)
                assert same_bits(c.gather(0), want), (wire, kw)


def test_fp64_wire_makes_no_whole_operand_planes(monkeypatch):
    """Only panels are split: every split the product asks for is one panel wide."""
    from ozhpc.engines.numpy_engine import NumpyEngine

    widths = []
    split = NumpyEngine.residues
    monkeypatch.setattr(NumpyEngine, "residues", lambda self, x, exps, t: widths.append(x.shape[1]) or
                        split(self, x, exps, t))
    a, b = np.random.default_rng(1).standard_normal((20, 50)), np.random.default_rng(2).standard_normal((50, 9))
    with ProcessGrid(MPI.COMM_SELF) as grid:
        dist_gemm(grid, a, b, kb=16, scheme="ozaki2", wire="fp64")
        assert widths and set(widths) == {16, 2}
        widths.clear()
        dist_gemm(grid, a, b, kb=16, scheme="ozaki2", wire="planes")
        assert set(widths) == {50}


def test_auto_wire_rule():
    # one rank: nothing moves, so no whole-operand planes
    assert choose_wire("auto", 18, ranks=1).name == "fp64"
    # 18 planes (scheme II + certificate) between H200s over NVLink, 8 (scheme I, 7 slices) too
    assert choose_wire("auto", 18, ranks=2, engine="cutile").name == "fp64"
    assert choose_wire("auto", 8, ranks=2, engine="cutile").name == "planes"
    assert choose_wire("auto", 10, ranks=8, engine="cutile", one_node=False).name == "fp64"
    # the NumPy engine splits ~15 M entries/s: moving planes is always cheaper than splitting again
    chosen = choose_wire("auto", 19, ranks=4)
    assert chosen.name == "planes" and chosen.reason.startswith("auto: 19 planes per entry cost")
    assert choose_wire("planes", 19, ranks=1) == Wire("planes", "requested")
    planes, fp64 = wire_cost(16, split_rate=1e9, link_rate=8e9)
    assert planes == 2e-9 and fp64 == 2e-9
    with pytest.raises(ValueError, match="unknown wire format 'int4'"):
        choose_wire("int4", 8, ranks=2)


def test_wire_option_in_job_files_cli_and_config(tmp_path):
    from helpers.inputs import JOB_FILES

    from conftest import run_cli
    from ozhpc.errors import InputError
    from ozhpc.io.h5io import DatasetRef
    from ozhpc.run.config import RunConfig
    from ozhpc.run.jobfile import parse_job

    assert parse_job(JOB_FILES + '[summa]\nwire = "fp64"\n')["wire"] == "fp64"
    with pytest.raises(InputError, match=r'summa.wire must be one of "auto", "fp64", "planes"'):
        parse_job(JOB_FILES + '[summa]\nwire = "int4"\n', "job.toml")
    ref = DatasetRef.parse(f"{tmp_path}/x.h5:/A")
    assert RunConfig(a=ref, b=ref, out=ref, wire="planes").describe()["wire"] == "planes"
    with pytest.raises(InputError, match="^wire must be one of auto, fp64, planes, got 'int4'"):
        RunConfig(a=ref, b=ref, out=ref, wire="int4")
    r = run_cli(["gemm", "x.h5:/A", "x.h5:/B", "-o", "y.h5:/C", "--wire", "int4"], cwd=tmp_path)
    assert r.returncode == 2 and "argument --wire: invalid choice: 'int4'" in r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("wire", ["fp64", "planes"])
def test_report_and_dry_run_name_the_wire(tmp_path, wire):
    import h5py

    from conftest import run_cli
    from ozhpc.run.matrices import standard_matrix

    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"], f["B"] = standard_matrix(30, 20, 0.5, 1), standard_matrix(20, 10, 0.5, 2)
    args = ["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", "--engine", "numpy", "--wire", wire,
            "--progress", "off"]
    r = run_cli(args + ["--dry-run"], cwd=tmp_path)
    assert r.returncode == 0 and f"wire {wire}" in r.stdout.splitlines()[0]
    r = run_cli(args + ["--report", "run.json"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "run.json").read_text())
    assert report["wire"] == wire and report["wire_reason"] == "requested"
    assert report["config"]["wire"] == wire
