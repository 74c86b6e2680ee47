"""Exact sums of FP64 products in a long fixed-point accumulator, rounded once (correctly).

What the certified product falls back on for the entries no plan can reach (an entry far below
its row's and column's scales, a sum that cancels to almost nothing), and how the level products
of :mod:`ozhpc.ozaki.levels` are added up: every input is an exact binary number, the sum is kept
exactly, and the result is the FP64 value nearest to it (ties to even, subnormals and overflow as
IEEE rounds them). The result depends on the exact sum alone, so it is the same for any order of
the terms, any split of k over panels or ranks, and any engine.

Representation (ExBLAS / Kulisch style, integer limbs): an accumulator is one row of ``limbs``
int64 per entry; limb ``t`` weighs ``2**(low + LIMB_BITS t)`` (:class:`Window`). A finite FP64
``x`` is ``m 2**q`` with ``m`` an integer, ``|m| < 2**53`` (:func:`mantissas`); a product of two is
``m_a m_b 2**(q_a + q_b)``, whose 106-bit integer is cut into three 18-bit chunks per factor:
``m_a m_b = sum_s c_s 2**(18 s)``, ``c_s < 3 * 2**36``. Limbs hold 18 bits too, so each ``c_s``,
shifted to the product's bit offset in its first limb (``< 2**55``), lands as three 18-bit pieces
on limbs ``s, s+1, s+2`` from that one: seven pieces per product (:func:`deposit`). The pieces are
added by a weighted ``bincount`` (FP64 sums of integers below ``2**20``: exact up to
:data:`MAX_DEPOSITS` per limb), then carried into the int64 limbs (:func:`normalise`). Nothing
rounds until :func:`round_nearest`.

Written once against the array module ``xp`` (NumPy, or CuPy on a GPU): integer and exact FP64
operations only, so both give the same limbs, hence the same bits. On CuPy the per-entry steps
(carries, a level's parts, the rounding) run as one kernel each
(:mod:`ozhpc.engines.superacc_kernels`): the same integer steps, one thread per entry.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import superacc_kernels

LIMB_BITS = 18
LIMB_MASK = (1 << LIMB_BITS) - 1
CHUNK_BITS = 18
"""A 53-bit mantissa as three 18-bit chunks: their products are below 2**36."""
MAX_DEPOSITS = 1 << 32
"""Pieces added to one limb by one ``bincount`` before the limbs are carried: each is below
``2**20``, so their FP64 sum stays an exact integer below ``2**52``."""
TERMS_PER_BATCH = 1 << 17
"""Products deposited per batch (each makes 7 pieces: some 20 MiB of temporaries)."""
MIN_EXP, MAX_EXP = -1074, 1024
"""FP64's lowest bit and the first power of two it cannot hold."""
LAYOUT = (LIMB_BITS, MIN_EXP)
"""What the CuPy kernels are compiled for."""


HEADROOM_LIMBS = 8
"""Limbs above the largest sum: the sign, and the seven pieces of a deposit, whose top ones may be
zero above the value's own bits."""


@dataclass(frozen=True)
class Window:
    """The bits an accumulator holds: limb ``t`` weighs ``2**(low + LIMB_BITS t)``. The top limb
    keeps the sign (two's complement carries), so ``limbs`` covers the largest sum with one limb
    to spare."""

    low: int
    limbs: int

    @classmethod
    def covering(cls, low: int, high: int) -> "Window":
        """A window for sums of terms that are multiples of ``2**low`` whose total is below
        ``2**high`` in magnitude."""
        return cls(int(low), max(2, -(-(int(high) - int(low)) // LIMB_BITS) + HEADROOM_LIMBS))


def mantissas(xp, x):
    """``(m, q)``: int64 ``m`` with ``|m| < 2**53`` and ``q`` with ``x = m 2**q`` exactly, for finite
    FP64 ``x`` (``m = 0`` for zeros; subnormals included: frexp's fraction times 2**53 is an
    integer for every finite double)."""
    frac, ex = xp.frexp(x)
    return xp.ldexp(frac, 53).astype(xp.int64), ex.astype(xp.int64) - 53


def window_for_products(qa_min: int, qa_max: int, qb_min: int, qb_max: int, terms: int) -> Window:
    """The window of sums of at most ``terms`` products ``m_a m_b 2**(q_a + q_b)`` with ``q`` in the
    given ranges (each product below ``2**(q_a + q_b + 106)``)."""
    return Window.covering(qa_min + qb_min, qa_max + qb_max + 106 + max(int(terms), 1).bit_length() + 1)


def _on_gpu(xp) -> bool:
    """CuPy arrays: the per-entry steps run as one kernel each (:mod:`ozhpc.engines.superacc_kernels`)."""
    return xp.__name__ == "cupy"


def zeros(xp, entries: int, window: Window):
    return xp.zeros((entries, window.limbs), dtype=xp.int64)


def _chunks(xp, m):
    """``|m|`` as three CHUNK_BITS-bit chunks (low first)."""
    mag = xp.abs(m)
    mask = (1 << CHUNK_BITS) - 1
    return mag & mask, (mag >> CHUNK_BITS) & mask, mag >> (2 * CHUNK_BITS)


def _pieces(xp, ma, qa, mb, qb, window: Window):
    """(first limb, signed pieces) of the products ``m_a m_b 2**(q_a + q_b)`` (flat arrays of one
    length): the product's bits from its first limb's boundary on, as 7 pieces on 7 consecutive
    limbs, each below ``3 * 2**18`` in magnitude."""
    a0, a1, a2 = _chunks(xp, ma)
    b0, b1, b2 = _chunks(xp, mb)
    coeffs = (a0 * b0, a0 * b1 + a1 * b0, a0 * b2 + a1 * b1 + a2 * b0, a1 * b2 + a2 * b1, a2 * b2)
    pos = qa + qb - window.low
    first, off = pos // LIMB_BITS, pos % LIMB_BITS
    sums = [0] * 7
    for s, c in enumerate(coeffs):      # chunk s sits CHUNK_BITS = LIMB_BITS above chunk s - 1
        v = c << off                    # < 3 * 2**36 * 2**17 < 2**55
        sums[s] = sums[s] + (v & LIMB_MASK)
        sums[s + 1] = sums[s + 1] + ((v >> LIMB_BITS) & LIMB_MASK)
        sums[s + 2] = sums[s + 2] + (v >> (2 * LIMB_BITS))
    negative = (ma < 0) != (mb < 0)
    value = xp.stack(sums)
    return first, xp.where(negative.reshape(1, -1), -value, value)


def deposit(xp, acc, window: Window, entry, ma, qa, mb, qb) -> None:
    """Add the products ``m_a m_b 2**(q_a + q_b)`` to the accumulators ``acc[entry]`` (flat arrays
    of one length; zero products may be among them), exactly, in batches."""
    entries, limbs = acc.shape
    for t0 in range(0, int(entry.shape[0]), TERMS_PER_BATCH):
        part = slice(t0, t0 + TERMS_PER_BATCH)
        first, value = _pieces(xp, ma[part], qa[part], mb[part], qb[part], window)
        flat = ((entry[part] * limbs + first).reshape(1, -1) + xp.arange(7, dtype=xp.int64).reshape(-1, 1)).reshape(-1)
        sums = xp.bincount(flat, weights=value.reshape(-1).astype(xp.float64), minlength=entries * limbs)
        acc += sums.reshape(entries, limbs).astype(xp.int64)
        normalise(xp, acc)


def deposit_values(xp, acc, window: Window, entry, values, shifts, unique: bool = False) -> None:
    """Add ``values * 2**shifts`` (FP64 ``values``, exact; int ``shifts`` may take the sum far
    outside FP64's range) to ``acc[entry]``, exactly. ``unique``: no entry appears twice (a level
    product's part, one value per entry of C): the pieces go straight to their limbs, with no
    ``bincount`` over the whole accumulator (the same sum, so the same limbs); zero values are
    skipped (their exponents may lie outside the window)."""
    m, q = mantissas(xp, values)
    q = q + xp.asarray(shifts).astype(xp.int64)
    if unique and _on_gpu(xp):   # the kernel skips the zeros
        superacc_kernels.deposit_unique(xp, acc, LAYOUT, window.low, xp.asarray(entry), m, q)
        return
    if unique:
        live = m != 0
        entry, m, q = xp.asarray(entry)[live], m[live], q[live]
    if not unique:
        deposit(xp, acc, window, entry, m, q, xp.ones_like(m), xp.zeros_like(q))
        return
    first, value = _pieces(xp, m, q, xp.ones_like(m), xp.zeros_like(q), window)
    for s in range(7):   # entries unique: each (entry, limb) is written once per s
        acc[entry, first + s] += value[s]
    normalise(xp, acc)


def normalise(xp, acc) -> None:
    """Carry every limb but the top one into ``[0, 2**LIMB_BITS)``, in place (the value is unchanged; the
    top limb keeps the sign). Exact int64 shifts: each limb is below 2**62 in magnitude."""
    if _on_gpu(xp):
        superacc_kernels.normalise(acc, LAYOUT)
        return
    for t in range(acc.shape[1] - 1):
        carry = acc[:, t] >> LIMB_BITS
        acc[:, t] -= carry << LIMB_BITS
        acc[:, t + 1] += carry


def _gather(xp, digits, index):
    return xp.take_along_axis(digits, index.reshape(-1, 1), axis=1)[:, 0]


def round_nearest(xp, acc, window: Window):
    """The FP64 nearest to each accumulator's exact value (ties to even; below half the smallest
    subnormal: +0.0; from ``2**1024 (1 - 2**-54)`` on: +-inf), as IEEE rounds an exact sum once.
    A zero sum is +0.0, as a BLAS that sums from +0.0 gives."""
    if _on_gpu(xp):
        return superacc_kernels.round_nearest(xp, acc, LAYOUT, window.low)
    acc = acc.copy()
    normalise(xp, acc)
    negative = acc[:, -1] < 0
    acc = xp.where(negative.reshape(-1, 1), -acc, acc)
    normalise(xp, acc)                                  # now every limb in [0, 2**18): the magnitude
    entries, limbs = acc.shape
    nonzero = acc != 0
    top = limbs - 1 - xp.argmax(nonzero[:, ::-1], axis=1).astype(xp.int64)
    _, width = xp.frexp(_gather(xp, acc, top).astype(xp.float64))   # bit length of the top limb
    lead = window.low + LIMB_BITS * top + width.astype(xp.int64) - 1  # exponent of the leading bit
    keep = xp.maximum(lead - 52, MIN_EXP)                # exponent of the last bit the result keeps
    p = xp.maximum(keep - window.low, 0)                 # ... as a bit index of the window
    t0, o = p // LIMB_BITS, p % LIMB_BITS
    # a sum below the subnormals keeps its last bit above the window: zero limbs up there
    pad = max(5, int(t0.max()) + 6 - limbs) if entries else 5
    digits = xp.concatenate([acc, xp.zeros((entries, pad), dtype=xp.int64)], axis=1)
    n = _gather(xp, digits, t0) >> o
    for r in (1, 2, 3, 4):                               # the kept integer is below 2**54: no overflow
        shift = LIMB_BITS * r - o
        fits = shift < 63
        n = n + xp.where(fits, _gather(xp, digits, t0 + r) << xp.where(fits, shift, 0), 0)
    below = xp.maximum(p - 1, 0)                         # the round bit, and every bit under it
    t1, b1 = below // LIMB_BITS, below % LIMB_BITS
    d1 = _gather(xp, digits, t1)
    round_bit = (p > 0) & (((d1 >> b1) & 1) == 1)
    seen = xp.cumsum(nonzero.astype(xp.int64), axis=1)
    lower = xp.where(t1 > 0, _gather(xp, seen, xp.clip(t1 - 1, 0, limbs - 1)), 0) > 0
    sticky = ((d1 & ((xp.ones_like(b1) << b1) - 1)) != 0) | lower
    n = n + (round_bit & (sticky | ((n & 1) == 1))).astype(xp.int64)
    import numpy as np

    with np.errstate(over="ignore"):
        out = xp.ldexp(n.astype(xp.float64), (window.low + p).astype(xp.int32))
    out = xp.where(nonzero.any(axis=1), out, 0.0)
    return xp.where(negative, -out, out) + 0.0


def exact_dots(xp, a_rows, b_rows, rows, cols, shift: int = 0):
    """``fl(2**-shift sum_t a_rows[rows[e], t] * b_rows[cols[e], t])`` for every entry e, correctly
    rounded (finite inputs; ``a_rows`` m x k, ``b_rows`` n x k; ``shift``: the sum's total below a
    power of two, as the rounding of the same limbs read ``shift`` bits lower). Entries are taken a
    few at a time so the gathered rows stay near :data:`TERMS_PER_BATCH` products."""
    rows, cols = xp.asarray(rows).astype(xp.int64), xp.asarray(cols).astype(xp.int64)
    count, k = int(rows.shape[0]), int(a_rows.shape[1])
    out = xp.zeros(count, dtype=xp.float64)
    if count == 0 or k == 0:
        return out
    ma, qa = mantissas(xp, a_rows)
    mb, qb = mantissas(xp, b_rows)
    window = window_for_products(int(qa.min()), int(qa.max()), int(qb.min()), int(qb.max()), k)
    step = max(1, TERMS_PER_BATCH // k)
    for e0 in range(0, count, step):
        r, c = rows[e0:e0 + step], cols[e0:e0 + step]
        fa, fb = ma[r], mb[c]
        live = (fa != 0) & (fb != 0)
        entry = xp.broadcast_to(xp.arange(r.shape[0], dtype=xp.int64).reshape(-1, 1), fa.shape)
        acc = zeros(xp, int(r.shape[0]), window)
        deposit(xp, acc, window, entry[live], fa[live], qa[r][live], fb[live], qb[c][live])
        out[e0:e0 + step] = round_nearest(xp, acc, Window(window.low - shift, window.limbs))
    return out
