"""The long accumulator's per-entry steps (:mod:`ozhpc.engines.superacc`) as single CuPy kernels.

The array code of :mod:`~ozhpc.engines.superacc` carries a limb at a time (three kernels per limb,
some hundred launches per carry of a 30-limb window) and rounds in some forty more: on a GPU a
refinement of a few rows is then launches, not work. Here one thread per entry walks that entry's
limbs: :func:`normalise` (the carries), :func:`deposit_unique` (a level product's parts, one per
entry, added and carried), :func:`round_nearest` (the correctly rounded FP64). Integer steps
only, and one exact ``ldexp`` at the end: the limbs are the unique normalised digits of the same
exact sum, and the rounded value is the one FP64 nearest to it, so the bits are NumPy's.
"""
from __future__ import annotations

_CARRY = r"""
__device__ void ozhpc_carry(long long* row, const long long limbs) {
    long long carry = 0;
    for (long long t = 0; t < limbs - 1; ++t) {
        const long long v = row[t] + carry;
        carry = v >> LIMB_BITS;
        row[t] = v - (carry << LIMB_BITS);
    }
    row[limbs - 1] += carry;
}
"""

_NORMALISE = "ozhpc_carry(&acc[i * limbs], limbs);"

_DEPOSIT = r"""
if (m != 0) {   /* a zero part adds nothing (and its exponent may lie outside the window) */
const long long mag = m < 0 ? -m : m;
const long long mask = (1LL << LIMB_BITS) - 1;
const long long chunk[3] = {mag & mask, (mag >> LIMB_BITS) & mask, mag >> (2 * LIMB_BITS)};
const long long pos = q - low;
long long first = pos / LIMB_BITS, off = pos % LIMB_BITS;
if (off < 0) { off += LIMB_BITS; first -= 1; }
long long piece[5] = {0, 0, 0, 0, 0};
for (int s = 0; s < 3; ++s) {
    const long long v = chunk[s] << off;
    piece[s] += v & mask;
    piece[s + 1] += (v >> LIMB_BITS) & mask;
    piece[s + 2] += v >> (2 * LIMB_BITS);
}
long long* row = &acc[entry * limbs];
for (int s = 0; s < 5; ++s) row[first + s] += m < 0 ? -piece[s] : piece[s];
ozhpc_carry(row, limbs);
}
"""

_ROUND = r"""
long long* row = &work[i * limbs];
ozhpc_carry(row, limbs);
const bool negative = row[limbs - 1] < 0;
if (negative) {
    for (long long t = 0; t < limbs; ++t) row[t] = -row[t];
    ozhpc_carry(row, limbs);
}
long long top = -1;
for (long long t = limbs - 1; t >= 0; --t) { if (row[t] != 0) { top = t; break; } }
if (top < 0) {
    out = 0.0;
} else {
    const long long width = 64 - __clzll(row[top]);
    const long long lead = low + LIMB_BITS * top + width - 1;
    const long long keep = max(lead - 52, (long long)MIN_EXP);
    const long long p = max(keep - low, 0LL);
    const long long t0 = p / LIMB_BITS, o = p % LIMB_BITS;
    long long n = (t0 < limbs ? row[t0] : 0) >> o;
    for (long long r = 1; r <= 4; ++r) {
        const long long shift = LIMB_BITS * r - o;
        const long long d = t0 + r < limbs ? row[t0 + r] : 0;
        if (shift < 63) n += d << shift;
    }
    const long long below = max(p - 1, 0LL);
    const long long t1 = below / LIMB_BITS, b1 = below % LIMB_BITS;
    const long long d1 = t1 < limbs ? row[t1] : 0;
    const bool round_bit = p > 0 && ((d1 >> b1) & 1) == 1;
    bool sticky = (d1 & ((1LL << b1) - 1)) != 0;
    for (long long t = 0; t < t1 && t < limbs && !sticky; ++t) sticky = row[t] != 0;
    if (round_bit && (sticky || (n & 1) == 1)) n += 1;
    const double v = ldexp((double)n, (int)(low + p));
    out = (negative ? -v : v) + 0.0;
}
"""

_KERNELS: dict = {}


def _kernel(name: str, layout: tuple[int, int]):
    """The kernel ``name`` for ``layout`` = (bits per limb, FP64's lowest exponent)."""
    import cupy as cp

    key = (name, layout)
    if key not in _KERNELS:
        preamble = f"#define LIMB_BITS {layout[0]}LL\n#define MIN_EXP {layout[1]}LL\n" + _CARRY
        _KERNELS[key] = {
            "normalise": lambda: cp.ElementwiseKernel("int64 limbs", "raw int64 acc", _NORMALISE,
                                                      "ozhpc_superacc_normalise", preamble=preamble),
            "deposit": lambda: cp.ElementwiseKernel("int64 entry, int64 m, int64 q, int64 low, int64 limbs",
                                                    "raw int64 acc", _DEPOSIT, "ozhpc_superacc_deposit",
                                                    preamble=preamble),
            "round": lambda: cp.ElementwiseKernel("int64 low, int64 limbs", "raw int64 work, float64 out",
                                                  _ROUND, "ozhpc_superacc_round", preamble=preamble),
        }[name]()
    return _KERNELS[key]


def _flat(acc):
    """The limbs as one C-ordered vector (a view: the kernels write through it)."""
    if not acc.flags.c_contiguous:
        raise ValueError("a long accumulator must be C-contiguous")
    return acc.reshape(-1)


def normalise(acc, layout: tuple[int, int]) -> None:
    """:func:`ozhpc.engines.superacc.normalise` of a C-contiguous CuPy accumulator, in place
    (``layout``: bits per limb, FP64's lowest exponent)."""
    entries, limbs = acc.shape
    if entries:
        _kernel("normalise", layout)(limbs, _flat(acc), size=entries)


def deposit_unique(cp, acc, layout: tuple[int, int], low: int, entry, m, q) -> None:
    """``m 2**q`` added to ``acc[entry]`` (no entry twice; ``low`` the window's), then the
    touched accumulators carried: :func:`ozhpc.engines.superacc.deposit_values` with ``unique``."""
    if entry.shape[0]:
        _kernel("deposit", layout)(entry.astype(cp.int64), m, q, low, acc.shape[1], _flat(acc))


def round_nearest(cp, acc, layout: tuple[int, int], low: int):
    """:func:`ozhpc.engines.superacc.round_nearest` (``low`` the window's; ``acc`` unchanged)."""
    work = cp.ascontiguousarray(acc).copy().reshape(-1)
    out = cp.empty(acc.shape[0], dtype=cp.float64)
    if acc.shape[0]:
        _kernel("round", layout)(low, acc.shape[1], work, out)
    return out
