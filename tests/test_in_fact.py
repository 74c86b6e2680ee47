"""Accuracy in fact: certified "auto" (both schemes, guarantee "dgemm") is no worse than NumPy's
``A @ B`` on dense, sparse, banded, triangular, integer and Hilbert-like data, measured on EVERY
entry against the exact residual (each dot product with ``-C_ij`` appended, summed exactly, rounded
once; bench/accuracy/distributions.py prints the whole table). Sparse, banded and triangular
operands hold entries of C that sum a few products far below their row's and column's scales:
there the default also meets the in-fact bound (``plan.IN_FACT_RATIO``); dense operands keep the
mean-gap rule's plan, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import ozhpc
from ozhpc.engines import superacc
from ozhpc.ozaki.certificate import Certificate
from ozhpc.ozaki.plan import IN_FACT_RATIO, ModularPlan
from ozhpc.ozaki.policy import NextPass, Widening
from ozhpc.ozaki.settings import OzakiSettings
from ozhpc.run.matrices import standard_matrix


def worst_error(c, a, b) -> float:
    m, n = c.shape
    rows, cols = np.repeat(np.arange(m), n), np.tile(np.arange(n), m)
    a_ext = np.concatenate([a[rows], -c.reshape(-1, 1)], axis=1)
    b_ext = np.concatenate([b.T[cols], np.ones((m * n, 1))], axis=1)
    res = superacc.exact_dots(np, a_ext, b_ext, np.arange(m * n), np.arange(m * n)).reshape(m, n)
    den = np.abs(a) @ np.abs(b)
    assert np.all((den > 0) | (res == 0))
    return float(np.max(np.abs(res) / np.where(den > 0, den, 1.0)))


def sparse(rng, shape, density):
    x = rng.standard_normal(shape) * np.exp(rng.standard_normal(shape))
    return np.where(rng.random(shape) < density, x, 0.0)


def banded(rng, n, width):
    i, j = np.indices((n, n))
    return np.where(np.abs(i - j) <= width, rng.standard_normal((n, n)), 0.0)


def data(name):
    rng = np.random.default_rng(3)
    i = np.arange(96)
    if name.startswith("phi"):
        phi = float(name.split()[1])
        return standard_matrix(32, 256, phi, 5), standard_matrix(256, 32, phi, 6)
    if name == "triangular":
        return np.tril(rng.standard_normal((96, 96))) + 96 * np.eye(96), np.triu(rng.standard_normal((96, 96)))
    if name == "sparse 0.02, k 4096":
        return sparse(rng, (24, 4096), 0.02), sparse(rng, (4096, 24), 0.02)
    if name == "sparse 0.05":
        return sparse(rng, (48, 512), 0.05), sparse(rng, (512, 48), 0.05)
    if name == "banded x banded":
        return banded(rng, 128, 3), banded(rng, 128, 3)
    if name == "integer":
        return rng.integers(-1000, 1001, (32, 256)).astype(float), rng.integers(-1000, 1001, (256, 32)).astype(float)
    hilbert = 1.0 / (i.reshape(-1, 1) + i.reshape(1, -1) + 1)
    return hilbert, hilbert[::-1].copy()


NAMES = ("phi 0.5", "phi 4", "triangular", "sparse 0.02, k 4096", "sparse 0.05", "banded x banded", "integer",
         "hilbert")


@pytest.mark.parametrize("scheme", ("ozaki1", "ozaki2"))
@pytest.mark.parametrize("name", NAMES)
def test_auto_is_no_worse_than_numpy(name, scheme):
    a, b = data(name)
    c, info = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, accuracy="strict", info=True)
    assert info.certified
    ours, native = worst_error(c, a, b), worst_error(a @ b, a, b)
    assert ours <= native, (ours, native, info.widths)


@pytest.mark.parametrize("name", ("phi 0.5", "phi 2", "integer", "hilbert"))
def test_dense_operands_keep_the_mean_gap_plan(name):
    """No row more than half empty: the first plan is the mean-gap rule's and the only pass (the
    in-fact check costs dense data nothing)."""
    a, b = data(name) if name != "phi 2" else (standard_matrix(32, 256, 2.0, 5), standard_matrix(256, 32, 2.0, 6))
    _, info = ozhpc.gemm(a, b, engine="numpy", info=True)
    assert len(info.widths) == 1 and info.widths[0][1] == 0


def test_in_fact_bound_met_where_entries_sum_few_products():
    """Sparse operands: the default's last pass meets ``E <= IN_FACT_RATIO u L`` on every entry (the
    certificate's worst ratio times k), and it took a wider plan than its first to get there."""
    a, b = data("sparse 0.02, k 4096")
    _, info = ozhpc.gemm(a, b, engine="numpy", info=True)
    bits, failing, worst = info.widths[-1]
    assert failing == 0 and worst * a.shape[1] <= IN_FACT_RATIO
    assert bits > info.widths[0][0]


@pytest.mark.gpu
@pytest.mark.parametrize("scheme", ("ozaki1", "ozaki2"))
@pytest.mark.parametrize("name", ("sparse 0.02, k 4096", "banded x banded", "triangular", "phi 0.5"))
def test_cutile_takes_the_same_in_fact_passes(gpu, name, scheme):
    """The in-fact check reads the certificate's global worst ratio (the GPU's fused verdicts
    included): the cuTile engine runs the same plans and gives the NumPy engine's C, bit for bit."""
    a, b = data(name)
    want, ref = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, info=True)
    got, info = ozhpc.gemm(a, b, engine="cutile", scheme=scheme, info=True)
    assert [w[:2] for w in info.widths] == [w[:2] for w in ref.widths]
    assert got.tobytes() == want.tobytes()


def test_policy_checks_in_fact_only_where_asked():
    """A certified pass (worst ratio 0.5 of k u L, i.e. E = 32 u L at k = 64): done without the check;
    with it, the certificate's sharper bounds first, then a plan wider by log2(32) + 1 bits; done once
    ``E <= IN_FACT_RATIO u L``, or at the widest plan."""
    certified = Certificate(None, 0, 0.5)
    plan = ModularPlan.for_k(56, 64)
    assert Widening(OzakiSettings()).after(certified, plan, sampled=True, support=False) is None
    policy = Widening(OzakiSettings())
    policy.in_fact = 64
    assert policy.after(certified, plan, sampled=True, support=False) == NextPass(bounds=("lower", "support"))
    step = policy.after(certified, plan, sampled=False, support=True)
    assert step.settings is not None and step.width == 56 + 6
    assert policy.after(Certificate(None, 0, IN_FACT_RATIO / 64), plan, sampled=False, support=True) is None
    widest = ModularPlan.for_k(ModularPlan.max_width, 64)
    assert policy.after(certified, widest, sampled=False, support=True) is None


def test_a_failed_pass_widens_to_the_in_fact_bound_at_once():
    """Where the check is on, the plan after a failed pass closes ``E <= u L``, not only ``E <= k u L``."""
    failed = Certificate(None, 3, 2.0**5.5)
    plain, checked = Widening(OzakiSettings()), Widening(OzakiSettings())
    for policy in (plain, checked):
        policy.equilibrated = True
    checked.in_fact = 64
    plan = ModularPlan.for_k(56, 64)
    assert plain.after(failed, plan, sampled=False, support=True).width == 56 + 7
    assert checked.after(failed, plan, sampled=False, support=True).width == 56 + 13
