"""The certificate and the fingerprint on the GPU: their CuPy kernels give the NumPy reference's
bits, and certified "auto" with the cuTile engine gives the NumPy engine's plan, verdict and C,
bit for bit.

Marked ``gpu``; every test skips cleanly when CuPy, cuda.tile or a GPU is missing.
"""
from __future__ import annotations

import numpy as np
import pytest

import ozhpc
from ozhpc.engines import statistics
from ozhpc.engines.digits import magnitude_digits, support_digits
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.ozaki import certificate as cf
from ozhpc.ozaki.plan import ModularPlan, SlicePlan
from ozhpc.ozaki.scales import exponents, row_abs_max

from helpers.guarantee import guarantee_holds, worst_entries
from helpers.inputs import awkward, phi_matrix

pytestmark = pytest.mark.gpu


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.astype(got.dtype).view(np.uint8))


@pytest.mark.parametrize("upper", [False, True])
def test_digit_planes(gpu, upper):
    engine, cp = gpu
    x = awkward(np.random.default_rng(1), 64, 96)
    e = exponents(np, row_abs_max(np, x))
    want = (support_digits if upper else magnitude_digits)(np, x, e)
    same_bits(cp.asnumpy(engine.magnitudes(cp.asarray(x), cp.asarray(e), upper=upper))[0], want)
    same_bits(cp.asnumpy(engine.magnitudes(cp.asarray(x.T.copy()).T, cp.asarray(e), upper=upper))[0], want)


NUMPY = NumpyEngine()


def test_inner_and_row_statistics(gpu):
    engine, cp = gpu
    x = awkward(np.random.default_rng(2), 64, 96, phi=2.0)
    e = exponents(np, row_abs_max(np, x))
    same_bits(cp.asnumpy(engine.inner_stats(cp.asarray(x))), statistics.inner_stats(np, x))
    same_bits(cp.asnumpy(engine.magnitude_stats(cp.asarray(x), cp.asarray(e))), statistics.magnitude_stats(np, x, e))
    for plan in (ModularPlan.for_k(57, 96), ModularPlan.for_k(90, 96), SlicePlan(5, 5), SlicePlan(9, 9)):
        got = cf.operand_stats(engine, cp.asarray(x), cp.asarray(e), plan)
        same_bits(cp.asnumpy(got.delta), cf.operand_stats(NUMPY, x, e, plan).delta)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_row_summaries_match_numpy(gpu, layout):
    """The one-pass kernel (exponents, inf/NaN counts, norms, counts, squares, gaps) against the
    reference, for rows of every kind: zeros, subnormals, entries 1000+ bits below the row's
    largest, near DBL_MAX, inf/NaN; 37 rows (not a multiple of the tile), both operands in one
    copy."""
    engine, cp = gpu
    rng = np.random.default_rng(7)
    x = awkward(rng, 37, 301, phi=2.0)
    x[11] = rng.standard_normal(301) * 2.0**-1040                 # a subnormal row
    x[12, :4] = (1.0, 2.0**-1060, 5e-324, 2.0**-600)               # squares and norms that underflow
    x[13] = (127.5 / 128) * 2.0 ** rng.integers(-30, 30)            # the first digit rounds to 128
    x[14] = 1.7e308 * rng.random(301)
    x[15, 3], x[16, 4] = np.inf, np.nan
    y = phi_matrix(rng, 20, 301, 0.5)
    want_host, _, want_exps = NUMPY.row_summaries((x, y))

    def on_gpu(data):
        d = cp.asarray(data)
        if layout == "F":
            return cp.asfortranarray(d)
        return cp.asarray(np.repeat(data, 2, axis=1))[:, ::2] if layout == "strided" else d

    host, dev, exps = engine.row_summaries((on_gpu(x), on_gpu(y)))
    for got, got_dev, got_e, want, want_e in zip(host, dev, exps, want_host, want_exps):
        same_bits(got, want)
        same_bits(cp.asnumpy(got_dev), want)
        same_bits(cp.asnumpy(got_e), want_e)


@pytest.mark.parametrize("support", [False, True])
def test_entry_verdicts(gpu, support):
    """The one-pass verdict kernel against the NumPy operations: same count, same worst ratio
    (layouts, sums of every dtype, complex C: tests/test_certificate_kernels_gpu.py)."""
    engine, cp = gpu
    rng = np.random.default_rng(3)
    a, b = awkward(rng, 40, 64), awkward(rng, 64, 48).T.copy()
    e, f = exponents(np, row_abs_max(np, a)), exponents(np, row_abs_max(np, b))
    c = a @ b.T
    c[0, 0], c[1, 1], c[2, 2] = np.inf, np.nan, 0.0
    lower = rng.integers(0, 2**20, size=c.shape).astype(np.float64)
    upper = np.where(rng.random(c.shape) < 0.3, 0.0, lower + 5) if support else None
    for bits in (53, 58, 70):
        plan = ModularPlan.for_k(bits, 64)
        stats = [cf.operand_stats(NUMPY, x, ex, plan) for x, ex in ((a, e), (b, f))]
        dev = [cf.OperandStats(*(cp.asarray(v) for v in (s.delta, s.norm, s.nnz))) for s in stats]
        for factor in (1, 64):   # "tight", "dgemm" with k = 64
            want = cf.certify_entries(NUMPY, c, lower, stats, e, f, plan, None, upper, factor=factor)
            got = cf.certify_entries(engine, cp.asarray(c), cp.asarray(lower), dev, cp.asarray(e), cp.asarray(f),
                                     plan, None, None if upper is None else cp.asarray(upper), factor=factor)
            assert (got.uncertified, got.worst) == (want.uncertified, want.worst), (bits, factor)


def structured(name, rng):
    n, k = 24, 40
    a = phi_matrix(rng, n, k, 1.0)
    if name == "k1":
        return phi_matrix(rng, n, 1, 4.0), phi_matrix(rng, 1, n, 4.0)
    if name == "dominant":
        a = phi_matrix(rng, n, k, 0.5) * 2.0**-40
        a[np.arange(n), rng.integers(0, k, n)] = 1.0
        return a, phi_matrix(rng, k, n, 0.5)
    if name == "scaled":
        s = rng.integers(-200, 200, size=k)
        return np.ldexp(a, s.reshape(1, -1)), np.ldexp(phi_matrix(rng, k, n, 1.0), -s.reshape(-1, 1))
    if name == "identity":
        return a, np.eye(k)
    if name == "sparse":
        b = phi_matrix(rng, k, n, 1.0)
        return np.where(rng.random(a.shape) < 0.85, 0.0, a), np.where(rng.random(b.shape) < 0.85, 0.0, b)
    return phi_matrix(rng, n, k, 4.0), phi_matrix(rng, k, n, 4.0)


@pytest.mark.parametrize("scheme", ["ozaki1", "ozaki2"])
@pytest.mark.parametrize("guarantee", ["dgemm", "tight"])
@pytest.mark.parametrize("name", ["scaled", "identity", "sparse", "phi4", "k1", "dominant"])
def test_certified_auto_same_bits_as_numpy(gpu, scheme, guarantee, name):
    """Same plans, verdicts and C as the NumPy engine, and the guarantee against the exact
    product on sampled and worst-case entries."""
    a, b = structured(name, np.random.default_rng(4))
    want, info_np = ozhpc.gemm(a, b, engine="numpy", scheme=scheme, guarantee=guarantee, info=True)
    got, info_gpu = ozhpc.gemm(a, b, engine="cutile", scheme=scheme, guarantee=guarantee, info=True)
    assert info_gpu.certified and info_gpu.widths == info_np.widths
    same_bits(got, want)
    rng = np.random.default_rng(0)
    picks = [(int(i), int(j)) for i, j in zip(rng.integers(0, got.shape[0], 12), rng.integers(0, got.shape[1], 12))]
    for i, j in picks + worst_entries(got, a, b):
        assert guarantee_holds(got, a, b, info_gpu.scheme, i, j, guarantee), (name, scheme, guarantee, i, j)


def test_fingerprint_on_the_gpu_equals_the_host(gpu):
    """C is fingerprinted on the GPU before it is copied back (the runner): same lane sums."""
    from ozhpc.run.fingerprint import lane_sums

    _, cp = gpu
    c = awkward(np.random.default_rng(5), 300, 257)
    c[4, 4], c[5, 5] = np.inf, np.nan
    rows, cols = np.arange(7, 307), np.arange(1000, 1257)
    assert lane_sums(cp.asarray(c), rows, cols) == lane_sums(c, rows, cols)
    assert lane_sums(cp.asarray(c[:, :0]), rows, cols[:0]) == [0, 0, 0, 0]


def test_cli_on_the_gpu_writes_the_numpy_engines_c_and_fingerprint(gpu, tmp_path):
    """``ozhpc gemm --engine cutile`` end to end (certified auto; C fingerprinted on the GPU,
    then copied back and written): the NumPy engine's C, fingerprint and certificate."""
    import h5py

    from ozhpc import cli
    from ozhpc.run.fingerprint import fingerprint_matrix

    rng = np.random.default_rng(6)
    src = tmp_path / "in.h5"
    with h5py.File(src, "w") as f:
        f["A"], f["B"] = phi_matrix(rng, 70, 90, 1.0), phi_matrix(rng, 90, 50, 1.0)
    results = {}
    for engine in ("numpy", "cutile"):
        out = tmp_path / f"{engine}.h5"
        assert cli.main(["gemm", f"{src}:/A", f"{src}:/B", "-o", f"{out}:/C", "--engine", engine,
                         "--progress", "off"]) == 0
        with h5py.File(out, "r") as f:
            results[engine] = (f["C"][...], f["C"].attrs["ozhpc_fingerprint"], bool(f["C"].attrs["ozhpc_certified"]))
    (c_np, fp_np, cert_np), (c_gpu, fp_gpu, cert_gpu) = results["numpy"], results["cutile"]
    same_bits(c_gpu, c_np)
    assert fp_gpu == fp_np == fingerprint_matrix(c_np) and cert_np and cert_gpu
