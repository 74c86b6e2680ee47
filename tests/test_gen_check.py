"""Distributed ``ozhpc gen`` and ``ozhpc check``: the same files and statistics for any rank count."""
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from ozhpc.run.check import EXIT_CHECK
from ozhpc.run.fingerprint import fingerprint_matrix
from ozhpc.run.matrices import ROW_CHUNK, standard_matrix

from conftest import REPO, run_cli

MPIEXEC = shutil.which("mpiexec")


def ozhpc_mpi(ranks, args, timeout=240):
    """``mpiexec -n ranks python -m ozhpc ARGS`` (plain ``python -m ozhpc`` for 0 ranks)."""
    if ranks == 0:
        return run_cli(args, timeout=timeout)
    if MPIEXEC is None:
        pytest.skip("mpiexec not found")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "ozhpc", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def read(path, name):
    with h5py.File(path, "r") as f:
        return f[name][...], dict(f[name].attrs)


@pytest.mark.mpi
def test_gen_writes_the_same_matrix_for_any_rank_count(tmp_path):
    """Each rank draws only its row chunks; 3 chunks over 1-4 ranks (one rank idle at 4)."""
    m, n = 2 * ROW_CHUNK + 188, 33
    want = standard_matrix(m, n, 1.0, 4)
    for ranks in (0, 1, 2, 3, 4):
        out = tmp_path / f"g{ranks}.h5"
        r = ozhpc_mpi(ranks, ["gen", "--shape", f"{m}x{n}", "--phi", "1", "--seed", "4", f"{out}:/X"])
        assert r.returncode == 0, r.stderr
        got, attrs = read(out, "X")
        assert got.tobytes() == want.tobytes(), ranks
        assert attrs["ozhpc_fingerprint"] == fingerprint_matrix(want) and attrs["ozhpc_seed"] == 4
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


@pytest.fixture(scope="module")
def product(tmp_path_factory):
    """Inputs, C = 2 A^T B - C0 made by ozhpc gemm, and the same product stored without attributes."""
    d = tmp_path_factory.mktemp("check")
    a, b, c0 = standard_matrix(23, 17, 1.0, 1), standard_matrix(19, 23, 1.0, 2), standard_matrix(17, 19, 0.5, 3)
    with h5py.File(d / "in.h5", "w") as f:
        f["A"], f["B"], f["C0"] = a, b, c0
    r = run_cli(["gemm", f"{d}/in.h5:/A", f"{d}/in.h5:/B", "-o", f"{d}/out.h5:/C", "--transa", "--transb",
                 "--alpha", "2", "--beta", "-1", "--c", f"{d}/in.h5:/C0", "--block", "5"])
    assert r.returncode == 0, r.stderr
    with h5py.File(d / "out.h5", "a") as f:
        f["bare"] = f["C"][...]           # no ozhpc attributes: nothing says how it was made
        bad = f["C"][...]
        bad[16, 18] *= 1 + 2.0 ** -40      # one entry off in its 40th bit
        f["bad"] = bad
        nan = f["C"][...]
        nan[3, 5] = np.nan                 # NaN where the exact product is finite
        f["nan"] = nan
        f.copy("C", "tampered")            # its attributes (and fingerprint) say it is C ...
        f["tampered"][0, 0] = np.nextafter(f["C"][0, 0], np.inf)   # ... but one entry moved one ulp
    return d


def check(d, ranks, dataset, *extra):
    r = ozhpc_mpi(ranks, ["check", f"{d}/out.h5:{dataset}", "--a", f"{d}/in.h5:/A", "--b", f"{d}/in.h5:/B",
                          "--transa", "--transb", "--json", "--samples", "400", *extra])
    return r, (json.loads(r.stdout) if r.returncode in (0, EXIT_CHECK) else None)


AB = ["--alpha", "2", "--beta", "-1"]


@pytest.mark.mpi
def test_check_is_the_same_for_any_rank_count(product):
    results = []
    for ranks in (0, 1, 2, 3, 4):
        r, stats = check(product, ranks, "/C", *AB, "--c", f"{product}/in.h5:/C0", "--fingerprint")
        assert r.returncode == 0, r.stderr
        results.append(stats)
    assert all(s == results[0] for s in results)
    s = results[0]
    assert s["samples"] == 17 * 19 and s["fingerprint_matches"] is True
    assert s["max_rel_error"] <= s["native_max_rel_error"] and s["max_rel_error"] < 1e-15


def test_check_passes_a_good_result_with_exit_0(product):
    r, s = check(product, 0, "/C", *AB, "--c", f"{product}/in.h5:/C0", "--fingerprint")
    assert r.returncode == 0 and r.stderr == ""
    assert s["outside_bound"] == 0 and s["bound"] == 25 * 2.0 ** -53 / (1 - 25 * 2.0 ** -53)  # k = 23


@pytest.mark.parametrize("ranks", [0, 3])
def test_check_fails_a_wrong_entry_with_exit_4(product, ranks):
    if ranks and MPIEXEC is None:
        pytest.skip("mpiexec not found")
    r, s = check(product, ranks, "/bad", *AB, "--c", f"{product}/in.h5:/C0")
    assert r.returncode == EXIT_CHECK == 4
    assert s["max_rel_error"] > 1e3 * s["native_max_rel_error"] > 0 and s["outside_bound"] == 1
    assert r.stderr == ("ozhpc check: FAILED: 1 of 323 sampled entries are outside the bound (worst error "
                        f"{s['max_rel_error']:.3g}; inf: C is inf/NaN where the exact product is finite, or "
                        "not IEEE's value where the inputs are not)\n")


def test_check_fails_a_nan_where_the_product_has_none(product):
    r = run_cli(["check", f"{product}/out.h5:/nan", "--a", f"{product}/in.h5:/A", "--b", f"{product}/in.h5:/B",
                 "--transa", "--transb", *AB, "--c", f"{product}/in.h5:/C0", "--samples", "400"])
    assert r.returncode == EXIT_CHECK
    assert "ozhpc : max inf" in r.stdout and "322 of 323 entries within" in r.stdout
    assert r.stderr.startswith("ozhpc check: FAILED: 1 of 323 sampled entries are outside the bound (worst error inf;")


def test_check_fails_a_fingerprint_that_differs(product):
    """One ulp off in one entry: inside the bound, but not the C that was written."""
    r, s = check(product, 0, "/tampered", *AB, "--c", f"{product}/in.h5:/C0", "--fingerprint")
    assert r.returncode == EXIT_CHECK and s["outside_bound"] == 0 and s["fingerprint_matches"] is False
    assert r.stderr == ("ozhpc check: FAILED: C's fingerprint differs from its ozhpc_fingerprint attribute: "
                        "C changed after it was written\n")
    r, s = check(product, 0, "/tampered", *AB, "--c", f"{product}/in.h5:/C0")
    assert r.returncode == 0 and r.stderr == ""   # without --fingerprint nothing is compared


def test_check_refuses_options_the_result_was_not_made_with(product):
    for extra in ([], ["--alpha", "2", "--beta", "1", "--c", f"{product}/in.h5:/C0"], AB[:2]):
        r, _ = check(product, 0, "/C", *extra)
        assert r.returncode == 2 and "was computed with" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r, _ = check(product, 0, "/C", *AB)
    assert r.returncode == 2 and "--beta is not 0: pass the input C" in r.stderr


def test_check_without_attributes_sees_a_wrong_alpha_beta(product):
    """Nothing to compare against: the wrong alpha/beta shows as a large error, never as accurate."""
    ok, s_ok = check(product, 0, "/bare", *AB, "--c", f"{product}/in.h5:/C0")
    wrong, s_wrong = check(product, 0, "/bare")
    assert ok.returncode == 0 and wrong.returncode == EXIT_CHECK
    assert s_ok["max_rel_error"] < 1e-15 and s_wrong["max_rel_error"] > 0.1
    _, s_fp = check(product, 0, "/bare", *AB, "--c", f"{product}/in.h5:/C0", "--fingerprint")
    assert s_fp["fingerprint_matches"] is None and s_fp["fingerprint"] == fingerprint_matrix(read(product / "out.h5", "bare")[0])
