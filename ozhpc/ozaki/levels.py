"""Levels of scales: the entries one power of two per row cannot reach, reached exactly.

One scale per row (``e_i``) and per column (``f_j``) puts every operand on a grid of ``w`` bits
below its row's largest entry; an entry far below that grid is dropped, and where such entries
make up an entry of C (``I @ B`` with tiny entries in B's columns, a block matrix whose
off-diagonal blocks sit 200 bits below the diagonal), no width reaches it. Here the operand is a
sum of levels, each on its own grid (docs/numerics.md, "Levels of scales")::

    X^(1) = X,   X_l = repr_w(X^(l)) (towards zero) at the row scales e^(l) of X^(l),   X^(l+1) = X^(l) - X_l  (exact)

so ``X = X_1 + ... + X_L + X^(L+1)``: ``X_1`` is what the first pass's planes hold, ``X_2`` exactly
what they dropped, under its own row scales, and so on. The product to depth ``L`` keeps the level
pairs ``l + m <= L + 1`` (the staircase, as scheme I keeps its digit triangle)::

    P_L = sum_{l + m <= L + 1} A_l B_m,
    AB - P_L = A^(L+1) B + sum_{l=1..L} A_l B^(L+2-l),

each pair an exact integer product (:func:`ozhpc.ozaki.plan.exact_plan`), every pair's exact value
added to a long accumulator (:mod:`ozhpc.engines.superacc`) and rounded once. The bound
(:meth:`Staircase.bound`) is the certificate's separable one per level; it shrinks by ``2**-w`` or
more per level, and vanishes where the remainders do (a level that holds its row exactly).

A :class:`Staircase` works on the rows of op(A) and op(B)^T that hold a failing entry (the failing
block), so its products cost that block's share of a pass. Every value that decides a bit is
exact (remainders, MAX of row maxima, integer norms, the accumulator), so the bits are the same on
every engine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..engines import statistics, superacc
from ..engines.base import DBL_MAX, ldexp_by
from . import certificate
from .plan import exact_plan
from .scales import exponents, row_abs_max

UP = certificate.UP
MAX_LEVELS = 8
"""Levels a staircase goes down at most; entries still failing then get exact dot products."""


def _same(x):
    return x


def remainder(xp, x, exps, bits: int):
    """``x - repr_w(x)`` exactly (finite ``x``; ``w = bits``): ``repr_w(x) = trunc(x 2**(w - e)) 2**(e - w)``,
    the row's grid point towards zero (never above ``|x|``: the nearest one could be ``2**1024`` in a
    row at DBL_MAX's scale). The subtraction is exact: the difference is made of ``x``'s own low
    bits (an entry whose scaling underflows truncates to 0 and is left whole). Any grid point does:
    the level products recompute the first level exactly, whatever the first pass held."""
    e = xp.asarray(exps).astype(xp.int64).reshape(-1, 1)
    grid = ldexp_by(xp, xp.trunc(ldexp_by(xp, x, bits - e)), e - bits)
    return x - grid


def _tracked(xp, value, exp):
    """``value * 2**exp`` as ``(fraction in [1/2, 1) or 0, exponent)``: frexp, exact."""
    frac, ex = xp.frexp(value)
    return frac, xp.asarray(exp).astype(xp.int64) + ex.astype(xp.int64)


def _times(a, b):
    """The product of two tracked values, rounded up."""
    return a[0] * b[0] * UP, a[1] + b[1]


def _plus(xp, a, b):
    """The sum of two tracked values, rounded up (an addend far below the other adds one unit of
    the smallest subnormal instead of vanishing)."""
    top = xp.where(a[0] > 0, a[1], b[1])
    top = xp.where(b[0] > 0, xp.maximum(top, b[1]), top)
    total = ((_down_to(xp, a, top) + _down_to(xp, b, top)) * UP)
    return _tracked(xp, total, top)


def _down_to(xp, a, top):
    """``a / 2**top`` rounded up (``a <= 2**top``), as FP64."""
    shift = xp.clip(a[1] - top, -2200, 0).astype(xp.int32)
    return xp.where(a[0] > 0, xp.ldexp(a[0], shift) + 2.0**-1074, 0.0)


@dataclass
class OperandLevels:
    """One operand's rows (op(A), or op(B)^T) as levels: ``exps[l]`` the row scales of ``X^(l+1)``
    (0 for a row with nothing left), ``grids[l]`` = ``X_(l+1)``, ``rest`` = ``X^(L+1)``; per level
    the bound's statistics: ``left[l]`` = ``max_t |X^(l+2)_t|`` (FP64, exact: what level l+1 left),
    ``norms[l]`` = an upper bound of ``sum_t |X^(l+1)_t|`` (tracked), ``nnz[l]``."""

    bits: int
    reduce_max: object = _same
    reduce_sum: object = _same
    exps: list = field(default_factory=list)
    grids: list = field(default_factory=list)
    left: list = field(default_factory=list)
    norms: list = field(default_factory=list)
    nnz: list = field(default_factory=list)
    rest: object = None

    @classmethod
    def start(cls, xp, rows, exps, bits: int, reduce_max=_same, reduce_sum=_same) -> "OperandLevels":
        """Level 1 at the given (global) scales: the first pass's grid."""
        out = cls(bits, reduce_max, reduce_sum, rest=rows)
        out._push(xp, xp.asarray(exps))
        return out

    def deepen(self, xp) -> None:
        """One more level, at the row scales of what is left (MAX over the pieces of a row)."""
        self._push(xp, exponents(xp, self.reduce_max(row_abs_max(xp, self.rest))))

    def _push(self, xp, exps) -> None:
        x = self.rest
        rest = remainder(xp, x, exps, self.bits)
        sizes = statistics.magnitude_stats(xp, x, exps)
        norm, nnz = self.reduce_sum(sizes[0]), self.reduce_sum(sizes[1])
        self.exps.append(exps)
        self.grids.append(x - rest)
        self.norms.append(_tracked(xp, norm.astype(xp.float64) * UP, xp.asarray(exps).astype(xp.int64)
                                   - certificate.NORM_BITS))
        self.nnz.append(nnz)
        self.left.append(self.reduce_max(row_abs_max(xp, rest)))
        self.rest = rest

    @property
    def depth(self) -> int:
        return len(self.grids)

    def exhausted(self, xp) -> bool:
        """Whether the levels hold every row exactly (nothing left anywhere)."""
        return not bool((self.left[-1] > 0).any())


class Staircase:
    """The failing block's product by levels, exact, to any depth: ``a`` / ``b`` the block's rows
    of op(A) / op(B)^T (full k), at the first pass's scales ``e`` / ``f`` and grid bits; ``k`` the
    global inner dimension. :meth:`deepen` adds the next diagonal of level pairs; :meth:`values`
    rounds the exact sum once; :meth:`bound` bounds ``|P_L - AB|`` per entry."""

    def __init__(self, engine, a, b, e, f, bits: int, k: int):
        xp = self.xp = engine.xp
        self.engine, self.bits, self.k = engine, int(bits), int(k)
        self._rows = (a, b)
        self.a = OperandLevels.start(xp, a, e, self.bits)
        self.b = OperandLevels.start(xp, b, f, self.bits)
        self.window = _window(xp, a, b, e, f, self.k)
        self.acc = superacc.zeros(xp, int(a.shape[0]) * int(b.shape[0]), self.window)
        self.depth = 0
        self.deepen()

    @property
    def shape(self):
        return self.a.grids[0].shape[0], self.b.grids[0].shape[0]

    def deepen(self) -> None:
        """Depth L -> L + 1: the next level of each operand (when L >= 1) and the pairs
        ``l + m = L + 2`` (1-based), each only on the rows and columns where both levels hold
        something."""
        xp = self.xp
        if self.depth:
            self.a.deepen(xp)
            self.b.deepen(xp)
        self.depth += 1
        for l in range(self.depth):
            self._add_pair(l, self.depth - 1 - l)

    def _add_pair(self, l: int, m: int) -> None:
        """``A_l B_m`` (0-based levels) added exactly to the accumulators, on the rows, columns and k
        indices where both levels hold something (an exact plan for the k indices left: any exact
        plan gives the same value)."""
        xp = self.xp
        xa, xb = self.a.grids[l], self.b.grids[m]
        rows = xp.flatnonzero((xa != 0).any(axis=1)) if xa.shape[1] else xp.zeros(0, dtype=xp.int64)
        cols = xp.flatnonzero((xb != 0).any(axis=1)) if xb.shape[1] else xp.zeros(0, dtype=xp.int64)
        if rows.size == 0 or cols.size == 0:
            return
        eng = self.engine
        xa, xb = xa[rows], xb[cols]
        inner = xp.flatnonzero((xa != 0).any(axis=0) & (xb != 0).any(axis=0))
        if inner.size == 0:
            return
        if inner.size < xa.shape[1]:   # only the k indices where both levels hold something
            xa, xb = xa[:, inner], xb[:, inner]
        k = int(inner.size)
        plan = exact_plan(self.bits, k)
        ea, eb = xp.asarray(self.a.exps[l])[rows], xp.asarray(self.b.exps[m])[cols]
        acc = plan.zeros(eng, int(rows.size), int(cols.size), k)
        plan.accumulate(eng, acc, plan.split(eng, xa, ea), plan.split(eng, xb, eb))
        values, shifts = plan.exact_parts(xp, acc)
        base = ea.astype(xp.int64).reshape(-1, 1) + eb.astype(xp.int64).reshape(1, -1)
        entry = (rows.reshape(-1, 1) * self.shape[1] + cols.reshape(1, -1)).reshape(-1)
        for part, shift in zip(values, shifts):
            superacc.deposit_values(xp, self.acc, self.window, entry, part.reshape(-1), (base + shift).reshape(-1),
                                    unique=True)

    def values(self):
        """``fl(P_L)`` per entry of the block (m_f x n_f), rounded once."""
        return superacc.round_nearest(self.xp, self.acc, self.window).reshape(self.shape)

    def exact(self) -> bool:
        """Whether ``P_L = AB`` exactly for every entry: the bound is 0 (A held whole by ``L_A``
        levels and B by ``L_B`` makes it 0 from depth ``L_A + L_B - 1`` on)."""
        return not bool(self.bound()[0].any())

    def bound(self):
        """A tracked upper bound ``(fraction, exponent)`` per entry of ``|P_L - AB|``:
        ``max|A^(L+1)_i| |B_j|_1 + sum_l (|A^(l)_i|_1 + nnz max|A^(l+1)_i|) max|B^(L+2-l)_j|``
        (``|A_l| <= |A^(l)| + |A^(l+1)|``); 0 exactly where every remainder it reads is 0."""
        xp, a, b, depth = self.xp, self.a, self.b, self.depth
        col = lambda v: (v[0].reshape(1, -1), v[1].reshape(1, -1))   # noqa: E731
        row = lambda v: (v[0].reshape(-1, 1), v[1].reshape(-1, 1))   # noqa: E731
        total = _times(row(_tracked(xp, a.left[depth - 1], 0)), col(b.norms[0]))
        for l in range(depth):
            size = _plus(xp, a.norms[l], _tracked(xp, a.nnz[l].astype(xp.float64) * a.left[l] * UP, 0))
            total = _plus(xp, total, _times(row(size), col(_tracked(xp, b.left[depth - 1 - l], 0))))
        return total


    def verdicts(self, factor: int = 1, abs_sums=None, in_fact: bool = True):
        """``(values, passed, ratio)`` per entry of the block: ``fl(P_L)`` and the certificate's
        :func:`~ozhpc.ozaki.certificate.verdicts` with ``E`` = :meth:`bound` (rho = 1: C is rounded
        once); with ``in_fact``, an entry passes only where also ``E <= u |fl(P_L)|`` (a lower bound
        of it): within about one ulp of the exact entry, as accurate as DGEMM's best case, whatever
        the cancellation (a zero entry: only once exact). The lower bound of ``(|A||B|)_ij`` is the free one, ``|P_L| - E``, or where given
        (``abs_sums``, finite; NaN elsewhere) the exact sums ``sum_t |a_it||b_tj|`` rounded to nearest
        (:func:`abs_sums`: O(k) per entry, for a few entries)."""
        xp = self.xp
        frac, top = self.bound()
        c = self.values()
        # normalise by the bound's power of two, or by |C|'s less 960 bits where C is far above it
        # (then the bound rounds up to its smallest subnormal, and |C| does not overflow)
        exp_c = xp.frexp(xp.where(xp.isfinite(c), c, 1.0))[1].astype(xp.int64)
        lifted = xp.maximum(top, exp_c - 960)
        frac = xp.where(lifted > top, _down_to(xp, (frac, top), lifted), frac)
        top = lifted
        c_lo, c_up, sub = _normalised(xp, c, top)
        import numpy as np

        with np.errstate(invalid="ignore"):
            lower = certificate.free_lower_bound(xp, c_lo, c_up, frac, 1, sub)
        lower = xp.where(xp.isnan(lower), 0.0, lower)
        if abs_sums is not None:
            lower = xp.maximum(lower, _lower_of_sums(xp, abs_sums, top))
        with np.errstate(over="ignore"):   # a ratio over a tiny lower bound is inf: it fails
            passed, ratio = certificate.verdicts(xp, frac, lower, factor=factor)
        if in_fact:
            passed = passed & (frac * UP <= c_lo * 2.0**-53)
        # fl(P_L) = +-inf is right only where the exact value rounds there too: P_L within E of a
        # sum below 2**1024 - 2**970 rounds to DBL_MAX (read as |C| = inf, every bound passed it)
        passed = passed & (xp.isfinite(c) | (frac == 0))
        return c, passed, ratio


def _normalised(xp, c, top):
    """``(lo, up, sub)``: bounds of ``|C| 2**-top`` (the ldexp may round), and the smallest subnormal
    over ``2**top`` rounded up (inf where that overflows: the free bound is then 0)."""
    import numpy as np

    with np.errstate(over="ignore"):
        mag = xp.ldexp(xp.abs(c), xp.clip(-top, -2200, 2200).astype(xp.int32))
        sub = xp.ldexp(xp.ones(c.shape), xp.clip(-1074 - top, -2200, 2200).astype(xp.int32)) + 2.0**-1074
    return xp.maximum(mag * certificate.DOWN - 2.0**-1074, 0.0), mag * UP + 2.0**-1074, sub


def abs_sums(xp, a, b, rows, cols):
    """``fl(sum_t |a_it||b_jt|)`` for the entries ``(rows[e], cols[e])`` (``a``, ``b`` rows along k,
    finite), correctly rounded (:func:`ozhpc.engines.superacc.exact_dots`)."""
    return superacc.exact_dots(xp, xp.abs(a), xp.abs(b), rows, cols)


def _lower_of_sums(xp, sums, top):
    """``sums`` (correctly rounded, NaN: none) as a lower bound of the exact sums over ``2**top``:
    one unit of rounding and one subnormal off before the scaling, one after (it may round). A sum
    that rounded to inf is at least DBL_MAX, not infinite: read as inf, it would pass any bound."""
    import numpy as np

    known = ~xp.isnan(sums)
    sums = xp.where(xp.isinf(sums), DBL_MAX, sums)
    low = xp.maximum(xp.where(known, sums, 0.0) * certificate.DOWN - 2.0**-1074, 0.0)
    with np.errstate(over="ignore"):
        scaled = xp.ldexp(low, xp.clip(-top, -2200, 2200).astype(xp.int32))
    return xp.maximum(scaled * certificate.DOWN - 2.0**-1074, 0.0)


def _window(xp, a, b, e, f, k: int) -> superacc.Window:
    """An accumulator window for every level pair of the block: each pair's exact value is a multiple
    of ``2**(lowA + lowB)`` (the lowest bit any entry of the block holds), below ``2**(max e + max f +
    log2 k + 2)``; 53 bits of room under the lowest for the parts' own exponents."""
    low = 0
    for x in (a, b):
        mag = xp.abs(x)
        least = float(xp.where(mag > 0, mag, xp.inf).min()) if mag.size else math.inf
        low += int(max(math.frexp(least)[1] - 53, -1074)) if math.isfinite(least) else 0
    high = sum(int(v.max()) if v.size else 0 for v in (xp.asarray(e), xp.asarray(f))) + max(k, 1).bit_length() + 8
    return superacc.Window.covering(low - 54, max(high, low + 1))
