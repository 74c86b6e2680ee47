"""The operands' squared row norms summed over a whole operand ("auto"'s range bumps read the
total): exact past 2**63, whatever the split of the rows over ranks, at the statistics of
2**17 x 2**17 and 2**16 x 2**16 operands (fed to the product directly, no matrix allocated)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ozhpc.engines import get_engine
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.engines.statistics import NORM
from ozhpc.ozaki import certificate, operands as operands_module
from ozhpc.ozaki.product import Product
from ozhpc.ozaki.scales import RANGE_BUMP_MAX, join_words, range_bumps, word_sums
from ozhpc.ozaki.settings import OzakiSettings

UNIT = 2**32
"""``sq`` is in units of 2**-32 (certificate.NORM_BITS)."""


def uniform_stats(rows: int, k: int, outlier: int | None = None):
    """``(norm, nnz, sq, gaps)`` per row as :func:`ozhpc.engines.statistics.magnitude_stats` gives them for a
    uniform(0, 1) operand with row scale 1 (E x = 1/2, E x**2 = 1/3, a mean gap of one bit); the
    ``outlier`` row holds entries at their scale (x**2 ~ 1)."""
    nnz = np.full(rows, k, dtype=np.int64)
    norm = nnz * (UNIT // 2) + nnz
    sq = nnz * (UNIT // 3) + nnz
    if outlier is not None:
        sq[outlier] = k * UNIT
    return norm, nnz, sq, nnz.copy()


def test_word_sums_are_exact_in_any_split_and_order(rng):
    """The (high, low) words of any pieces of the rows, summed as int64 in any order, join to the
    exact total: 131072 rows of 131072 uniform entries give 2.46e19, past 2**63."""
    sq = uniform_stats(131072, 131072)[2]
    exact = sum(int(v) for v in sq)
    assert exact > 2**63 and abs(exact - 131072**2 * UNIT / 3) < 1e-6 * exact
    assert int(sq.sum()) != exact   # what an int64 sum gives
    for parts in (1, 3, 64):
        cuts = np.sort(rng.choice(np.arange(1, sq.size), parts - 1, replace=False))
        words = [np.array(word_sums(np, piece), dtype=np.int64) for piece in np.split(sq, cuts)]
        for order in (words, words[::-1]):
            assert join_words(np.sum(order, axis=0)) == exact
    negative = np.array([-5, 2**62, -(2**40) + 3], dtype=np.int64)
    assert join_words(word_sums(np, negative)) == sum(int(v) for v in negative)


@pytest.mark.parametrize("rows,k,outlier,total_sign", [(131072, 131072, 77, 1), (65536, 65536, None, -1)])
def test_range_bumps_read_the_exact_total(monkeypatch, rows, k, outlier, total_sign):
    """Fed the statistics of a rows x k uniform(0, 1) op(A) (one row of entries at their scale), the
    product hands range_bumps the exact total (where an int64 sum wraps: 6.1e18 instead of 2.46e19,
    or negative at 65536**2 entries near their scale) and bumps that one row only."""
    a_stats = uniform_stats(rows, k, outlier)
    if outlier is None:   # entries near their scale: 2**64 - rows in all, a negative int64 sum
        a_stats = (a_stats[0], a_stats[1], np.full(rows, k * UNIT - 1, dtype=np.int64), a_stats[3])
    exact = sum(int(v) for v in a_stats[2])
    assert np.sign(int(a_stats[2].sum())) == total_sign and exact > 2**63

    class Injected(NumpyEngine):
        """The reference engine, whose op(A) row sizes are ``a_stats``."""

        def row_summaries(self, operands):
            host, dev, exps = super().row_summaries(operands)
            host[0] = host[0].copy()
            host[0][NORM:] = np.stack(a_stats)
            dev[0] = host[0]
            return host, dev, exps

    seen = []
    monkeypatch.setattr(operands_module, "range_bumps",
                        lambda sq, nnz, total, *rest: seen.append(total) or range_bumps(sq, nnz, total, *rest))
    a_rows, b_rows = np.full((rows, 1), 0.5), np.full((1, 1), 0.5)
    prod = Product(OzakiSettings("ozaki2"), Injected(), a_rows, b_rows)
    assert seen[0] == exact
    bumped = np.flatnonzero(prod.ops.row_exps != 0)
    assert bumped.tolist() == ([] if outlier is None else [outlier])


def test_a_certified_product_longer_than_its_exact_sums_is_refused():
    """Past k = 2**30 - 1 the certificate's int64 norm sums could wrap and read a bound too small:
    such an "auto" product is one InputError when the product is set up, before any work (a
    Product of that k would allocate k-long statistics); k = 2**30 - 1 itself is taken."""
    from ozhpc.errors import InputError
    from ozhpc.ozaki.certificate import MAX_CERTIFIED_K, check_k

    a, b = np.ones((2, 3)), np.ones((2, 3))
    with pytest.raises(InputError, match=r"^k = 1073741824 is longer than the certified \("):
        Product(OzakiSettings(), get_engine("numpy"), a, b, k=MAX_CERTIFIED_K + 1)
    check_k(MAX_CERTIFIED_K)
    assert MAX_CERTIFIED_K * 2 * 2**certificate.NORM_BITS < 2**63   # a row's and a column's norm sum
    # complex rows are summed as real rows of length 2k: half the k
    z = np.ones((2, 3), dtype=complex)
    with pytest.raises(InputError, match=r"^k = 536870912 is longer than the certified \(.auto.\) product of "
                                         r"complex operands takes \(at most 536870911 = \(2\*\*30 - 1\) // 2,"):
        Product(OzakiSettings(), get_engine("numpy"), z, z, k=MAX_CERTIFIED_K // 2 + 1)
    check_k(MAX_CERTIFIED_K // 2, 2)


def test_relieved_rows_reach_the_device_in_one_copy():
    """Rows of op(A) and columns of op(B) whose entries sit at their scale are relieved (their
    exponents raised), both operands' moved statistics and exponents uploaded in ONE copy (it runs
    while the device waits for the plan), and the moved rows are those and only those."""
    from ozhpc.run.matrices import standard_matrix

    rng = np.random.default_rng(0)
    a, b = standard_matrix(64, 2048, 2.0, seed=1), standard_matrix(2048, 48, 2.0, seed=2)
    a[5], b[:, 7] = rng.uniform(0.9, 1.0, 2048), rng.uniform(0.9, 1.0, 2048)

    class Uploads(NumpyEngine):
        uploads = 0

        def asarray(self, x):
            self.uploads += isinstance(x, np.ndarray)
            return super().asarray(x)

    eng = Uploads()
    prod = Product(OzakiSettings(), eng, a, b.T)
    plain = [np.ceil(np.log2(np.abs(x).max(axis=1))).astype(np.int64) for x in (a, b.T)]
    assert np.flatnonzero(prod.ops.row_exps != plain[0]).tolist() == [5]
    assert np.flatnonzero(prod.ops.col_exps != plain[1]).tolist() == [7]
    assert eng.uploads == 1
    assert prod.ops.row_exps.dtype == np.int32 and prod.ops.mags[0][0].dtype == np.int64


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**20)), min_size=1, max_size=40),
       st.integers(0, 2**70), st.integers(0, 2**40), st.integers(1, 2**40), st.floats(0.25, 4**9))
def test_range_bumps_count_the_thresholds_each_row_passes(rows, sq_total, nnz_total, k, scale):
    """Each row's bump is the number of t < RANGE_BUMP_MAX with ``ratio > 4**t`` for rows large
    enough to set the range, else 0, as the rule reads (ratios exactly at a power of four, 0, and
    past the last threshold included: ``scale`` puts a row's ratio anywhere up to 4**9)."""
    sq = np.array([s for s, _ in rows], dtype=np.int64)
    nnz = np.array([n for _, n in rows], dtype=np.int64)
    mean = float(sq_total) / max(float(nnz_total), 1.0)
    if mean > 0:   # one row exactly at the ratio `scale` (a power of four when hypothesis picks one)
        sq[0] = min(int(scale * 2.0 * mean * max(float(nnz[0]), 1.0)), 2**62)
    got = range_bumps(sq, nnz, sq_total, nnz_total, k)
    for i in range(len(rows)):
        ratio = float(sq[i]) / (2.0 * mean * max(float(nnz[i]), 1.0)) if mean > 0 else 0.0
        matters = mean > 0 and float(sq[i]) > mean * k / 2
        want = sum(ratio > 4.0**t for t in range(RANGE_BUMP_MAX)) if matters else 0
        assert got[i] == want, (i, ratio, matters)
    assert got.dtype == np.int64


def test_range_bumps_at_each_threshold_exactly():
    """A ratio exactly 4**t passes t thresholds, a hair above it t + 1 (mean 1 per entry: sq_total = nnz_total)."""
    t = np.arange(RANGE_BUMP_MAX + 1)
    sq = np.concatenate([2 * 4**t, 2 * 4**t + 1])          # one entry per row: ratio = sq / 2
    nnz = np.ones_like(sq)
    got = range_bumps(sq, nnz, 10, 10, 1)
    assert got.tolist() == t.tolist() + np.minimum(t + 1, RANGE_BUMP_MAX).tolist()
