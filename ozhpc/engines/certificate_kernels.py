"""The certificate's element-wise steps as CuPy kernels, bitwise equal to the NumPy reference
(:mod:`ozhpc.engines.statistics`, and the array code of :mod:`ozhpc.ozaki.certificate`); the cuTile
engine runs them behind :class:`ozhpc.engines.base.Engine`'s statistics methods.

:func:`ozhpc.ozaki.certificate.certify_entries` on CuPy arrays would run some forty element-wise
kernels over m x n (0.13 s at n = 16384 on an H200, more than the product's certificate budget).
:func:`entry_verdicts` does the same operations in the same order in one pass (where the CRT kernel
does not already answer them as it writes C: a pass without products, the support digits). Every operation is written
with an explicitly rounded intrinsic (``__dmul_rn``, ``__dadd_rn``, ...), which the compiler
never contracts into an FMA, so each rounds exactly like NumPy's separate operations and the
verdicts -- hence the plan "auto" ends at, hence C -- are the same on every engine.
The per-entry step is scheme II's only (its combine bound is a formula of |C|; scheme I's comes
from its group sums and stays with the NumPy-style path); the per-k and per-row statistics
(:func:`inner_stats`, :func:`row_stats`) serve both. All integer results (exponents, sums of
integers) are exact; the one float statistic, the representation error, is a max of exactly
rounded values.
"""
from __future__ import annotations

_SOURCE = r"""
__device__ double ozhpc_ratio(double cv, long long ei, long long fj, double da, long long na_i, long long nza_i,
                              double db, long long nb_i, long long nzb_i, LTYPE lsum, UTYPE usum) {
const double c = cv;
const double na = __dmul_rn((double)na_i, NORM_UNIT), nb = __dmul_rn((double)nb_i, NORM_UNIT);
const double nza = (double)nza_i, nzb = (double)nzb_i;
long long s = -(ei + fj);
s = s < -2200 ? -2200 : (s > 2200 ? 2200 : s);
const double mag = ldexp(fabs(c), (int)s);
const double c_lo = fmax(__dsub_rn(__dmul_rn(mag, DOWN), TINYSUB), 0.0);
const double c_up = __dadd_rn(__dmul_rn(mag, UP), TINYSUB);
double comb = __dadd_rn(COMB0, __dmul_rn(c_up, COMB1));
const double cross = fmin(nza, nzb);
double bound = __dmul_rn(__dadd_rn(__dmul_rn(da, nb), __dmul_rn(na, db)), PW);
bound = __dadd_rn(bound, __dmul_rn(__dmul_rn(__dmul_rn(da, db), cross), P2W));
bound = __dadd_rn(__dmul_rn(bound, UP), (da > 0.0 || db > 0.0) ? FLOOR : 0.0);
if (HAS_U) {
    const double u = (double)usum;
    const double per = __dadd_rn(__dadd_rn(__dmul_rn(__dadd_rn(da, db), SUW),
                                           __dmul_rn(__dmul_rn(da, db), P2W)), TAU);
    const double sup = u > 0.0 ? __dadd_rn(__dmul_rn(__dmul_rn(per, u), UP), FLOOR) : 0.0;
    bound = fmin(bound, sup);
    if (!(u > 0.0)) comb = 0.0;
}
bound = __dadd_rn(bound, comb);
if (!(na > 0.0) || !(nb > 0.0)) bound = 0.0;   /* a zero row or column: C_ij is exactly 0 */
long long t = -1074 - (ei + fj);
t = t < -2200 ? -2200 : (t > 2200 ? 2200 : t);
const double sub = __dadd_rn(ldexp(1.0, (int)t), TINYSUB);
const double fin = __dadd_rn(__dmul_rn(__dmul_rn(RHOU, c_up), UP), sub);
const double raw = __dsub_rn(__dsub_rn(c_lo, bound), fin);
const double slack = __dmul_rn(FOURU, __dadd_rn(__dadd_rn(c_up, bound), fin));
double lower = __dmul_rn(fmax(__dsub_rn(raw, slack), 0.0), DOWN);
if (HAS_L) lower = fmax(lower, __dmul_rn((double)lsum, MAGUNIT));
double scaled = __dmul_rn(bound, 9007199254740992.0);
if (FACTOR != 1.0) scaled = __dmul_rn(__ddiv_rn(scaled, FACTOR), UP);
const bool passed = scaled <= lower;
double r = (lower > 0.0) ? __ddiv_rn(scaled, lower) : CUDART_INF;
r = (scaled > 0.0) ? r : 0.0;
return !isfinite(c) ? 0.0 : (passed ? fmin(r, 1.0) : fmax(r, FAIL_MIN));
}
"""
_PARAMS = ("float64 q_c, I q_ei, J q_fj, float64 q_da, int64 q_na, int64 q_nza, float64 q_db, int64 q_nb, "
           "int64 q_nzb, L q_lsum, U q_usum")
_CALL = "ozhpc_ratio(q_c, q_ei, q_fj, q_da, q_na, q_nza, q_db, q_nb, q_nzb, q_lsum, q_usum)"
# Parameter names are distinctive ("q_..."): CuPy renames them in the map expression by plain text
# substitution (see _INNER_MAP).
_C_TYPES = {"float64": "double", "int32": "int", "int64": "long long"}

_KERNELS: dict = {}


def _kernel(has_l: bool, has_u: bool, l_type: str, u_type: str, constants: dict, norm_bits: int, reduce: bool):
    """The verdict's ratio per entry (``reduce`` False: an element-wise kernel writing every ratio)
    or their maxima (``reduce``: a reduction, no m x n array)."""
    import cupy as cp

    key = (has_l, has_u, l_type, u_type, tuple(sorted(constants.items())), norm_bits, reduce)
    if key not in _KERNELS:
        defines = "".join(f"#define {name} {value!r}\n" for name, value in constants.items())
        defines += (f"#define HAS_L {int(has_l)}\n#define HAS_U {int(has_u)}\n"
                    f"#define LTYPE {_C_TYPES[l_type]}\n#define UTYPE {_C_TYPES[u_type]}\n"
                    f"#define NORM_UNIT {2.0**-norm_bits!r}\n"
                    "#define CUDART_INF __longlong_as_double(0x7ff0000000000000LL)\n")
        if reduce:   # the max propagates NaN as cupy.max does (a ratio is never NaN: kept for parity)
            _KERNELS[key] = cp.ReductionKernel(_PARAMS, "float64 q_worst", _CALL, "(a != a || a > b) ? a : b",
                                               "q_worst = a", "0.0", "ozhpc_worst_ratio", preamble=defines + _SOURCE)
        else:
            _KERNELS[key] = cp.ElementwiseKernel(_PARAMS, "float64 q_ratio", f"q_ratio = {_CALL}",
                                                 "ozhpc_certify_entries", preamble=defines + _SOURCE)
    return _KERNELS[key]


ROWWISE_ENTRIES = 2**28
"""From this many entries of C the verdict reduces per row instead of writing every ratio: at n = 16384
on the H200 3.1 ms against 3.8-4.0 (ratios and their max), at 2048 and 4096 0.15 / 0.29 ms against
0.06 / 0.22 (``bench/results/fixed_costs_h200_2026-12-04.md``)."""


def entry_verdicts(cp, c, e, f, row, col, lower_sums, support_sums, constants: dict, to_host=None,
                   norm_bits: int = 32):
    """``(failed, worst)`` over this block of C: how many entries have a ratio ``E / (c u L)``
    (:func:`ozhpc.ozaki.certificate.entry_ratio`) above 1 (they fail), and the largest ratio (0 for
    inf/NaN entries). One pass and a max (past :data:`ROWWISE_ENTRIES`, a reduction to the row
    maxima: nothing m x n is written); a second pass counts only when some entry fails. ``row`` /
    ``col``: the per-row ``(delta, norm, nnz)`` of op(A) and per-column of op(B): float64 deltas,
    int64 norms in units of ``2**-norm_bits`` and counts, converted in the kernel as NumPy converts
    them; ``e`` / ``f``: the integer exponents; ``to_host``: the engine's copy, one per number read."""
    get = to_host or (lambda x: x.get())
    if c.size == 0:
        return 0, 0.0
    zero = cp.zeros((), dtype=cp.float64)
    lsum = zero if lower_sums is None else lower_sums
    usum = zero if support_sums is None else support_sums
    args = (c, cp.asarray(e).reshape(-1, 1), cp.asarray(f).reshape(1, -1),
            *(v.reshape(-1, 1) for v in row), *(v.reshape(1, -1) for v in col), lsum, usum)
    kind = (lower_sums is not None, support_sums is not None, _ctype(lsum), _ctype(usum), constants, norm_bits)
    if c.size < ROWWISE_ENTRIES:   # the ratios written, then their max
        ratio = _kernel(*kind, reduce=False)(*args)
        worst = float(get(ratio.max()))
    else:   # per row, then the max of m values (a full reduction of broadcast inputs runs in very few
        # blocks: 449 ms at n = 16384; one row per output keeps the grid full)
        ratio, worst = None, float(get(_kernel(*kind, reduce=True)(*args, axis=1).max()))
    if not worst > 1.0:
        return 0, worst
    if ratio is None:
        ratio = _kernel(*kind, reduce=False)(*args)
    return int(get(cp.count_nonzero(ratio > 1.0))), worst


def _ctype(x) -> str:
    return {"float64": "float64", "int32": "int32", "int64": "int64"}[str(x.dtype)]


_INNER_MAP = r"""
(isfinite(qv) && qv != 0.0) ? (HIGH ? ilogb(qv) + 1 : -max(ilogb(qv) + 1 - 53, -1074)) : NONE_EXP
"""
# Parameter names of the reduction kernels are distinctive ("qv", "qe"): CuPy renames them in
# map expressions by plain text substitution ("x" would also rename the x of "max").


def inner_stats(cp, rows, none_exp: int):
    """:func:`ozhpc.engines.statistics.inner_stats` (int32 (2, k)): per column the largest frexp
    exponent of a nonzero finite entry, and minus the lowest bit any can hold."""
    out = []
    for high in (1, 0):
        key = ("inner", high, none_exp)
        if key not in _KERNELS:
            _KERNELS[key] = cp.ReductionKernel(
                "float64 qv", "int32 y", _INNER_MAP, "max(a, b)", "y = a", str(none_exp), f"ozhpc_inner_{high}",
                preamble=f"#define HIGH {high}\n#define NONE_EXP {none_exp}\n")
        out.append(_KERNELS[key](rows, axis=0))
    return cp.stack(out)


_DELTA = r"""
__device__ double ozhpc_delta(double x, long long e) {
    double y = ldexp(x, (int)(SHIFT - e));
    const bool underflow = y == 0.0;
    double err;
    if (SLICES == 0) {
        err = fabs(__dsub_rn(y, rint(y)));
    } else {
        for (int p = 0; p < SLICES; ++p) { y = __dmul_rn(y, 128.0); y = __dsub_rn(y, rint(y)); }
        err = fabs(y);
    }
    return (x != 0.0 && (err > 0.0 || underflow)) ? __dadd_rn(err, TINY) : err;
}
"""


def representation_error_max(cp, x, exps, shift: int, slices: int, tiny: float):
    """Row maxima of :func:`ozhpc.engines.statistics.representation_error` (scheme II: ``slices``
    0 and ``shift`` = bits; scheme I: the slices and ``shift`` 0)."""
    key = ("delta", shift, slices, tiny)
    if key not in _KERNELS:
        _KERNELS[key] = cp.ReductionKernel(
            "float64 qv, E qe", "float64 y", "ozhpc_delta(qv, qe)", "max(a, b)", "y = a", "0.0", "ozhpc_delta_max",
            preamble=f"#define SHIFT {shift}\n#define SLICES {slices}\n#define TINY {tiny!r}\n" + _DELTA)
    return _KERNELS[key](x, cp.asarray(exps).reshape(-1, 1), axis=1)   # int32 or int64 exponents


_ROW_SUMS = r"""
__device__ __forceinline__ void ozhpc_terms(double v, long long er, long long* acc) {
    if (v != 0.0) {   /* finite entries only (the caller's finite part) */
        const double a = fabs(v);
        acc[0] += (long long)ceil(ldexp(a, (int)(NORM_BITS - er))) + 1;
        acc[1] += 1;
        const double y = ldexp(a, (int)(-er));
        acc[2] += (long long)ceil(ldexp(__dmul_rn(y, y), NORM_BITS)) + 1;
        long long g = er - (long long)(ilogb(a) + 1);
        acc[3] += g < 0 ? 0 : (g > GAP_MAX ? GAP_MAX : g);
    }
}

/* rows along the threads (rows adjacent in memory: op(B)^T of a row-major B), a column chunk per
   blockIdx.y; each thread adds its four sums into out (4, rows) with exact integer atomics */
extern "C" __global__ void ozhpc_row_sums_by_row(const double* x, const long long* e, long long rows, long long cols,
                                                 long long rs, long long cs, long long chunk, long long* out) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    long long acc[4] = {0, 0, 0, 0};
    const long long er = e[r];
    const long long c1 = min(cols, ((long long)blockIdx.y + 1) * chunk);
    for (long long c = (long long)blockIdx.y * chunk; c < c1; ++c) ozhpc_terms(x[r * rs + c * cs], er, acc);
    for (int t = 0; t < 4; ++t)
        if (acc[t]) atomicAdd((unsigned long long*)&out[t * rows + r], (unsigned long long)acc[t]);
}

/* columns along the threads (rows contiguous: a row-major op(A)), one row and column chunk per block */
extern "C" __global__ void ozhpc_row_sums_by_col(const double* x, const long long* e, long long rows, long long cols,
                                                 long long rs, long long cs, long long chunk, long long* out) {
    __shared__ long long part[4][256];
    const long long r = blockIdx.x;
    long long acc[4] = {0, 0, 0, 0};
    const long long er = e[r];
    const long long c1 = min(cols, ((long long)blockIdx.y + 1) * chunk);
    for (long long c = (long long)blockIdx.y * chunk + threadIdx.x; c < c1; c += blockDim.x)
        ozhpc_terms(x[r * rs + c * cs], er, acc);
    for (int t = 0; t < 4; ++t) part[t][threadIdx.x] = acc[t];
    __syncthreads();
    for (int width = blockDim.x / 2; width > 0; width /= 2) {
        if (threadIdx.x < width)
            for (int t = 0; t < 4; ++t) part[t][threadIdx.x] += part[t][threadIdx.x + width];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int t = 0; t < 4; ++t)
            if (part[t][0]) atomicAdd((unsigned long long*)&out[t * rows + r], (unsigned long long)part[t][0]);
}
"""
ROW_SUMS_THREADS = 256


def magnitude_sums(cp, x, exps, norm_bits: int, gap_max: int):
    """int64 ``(4, rows)``: ``norm``, ``nnz``, ``sq``, ``gaps`` per row, exact
    (:func:`ozhpc.engines.statistics.magnitude_stats`), in one pass over ``x`` (``y = |x| 2**-e`` exact, its square
    rounded to nearest; a gap is ``e - (ilogb(x) + 1)``, frexp's exponent, clipped to [0, gap_max]).
    Integer sums, so the order of the atomics does not matter."""
    key = ("row_sums", norm_bits, gap_max)
    if key not in _KERNELS:
        module = cp.RawModule(code=f"#define NORM_BITS {norm_bits}\n#define GAP_MAX {gap_max}LL\n" + _ROW_SUMS)
        _KERNELS[key] = (module.get_function("ozhpc_row_sums_by_row"), module.get_function("ozhpc_row_sums_by_col"))
    by_row, by_col = _KERNELS[key]
    x = cp.asarray(x, dtype=cp.float64)
    rows, cols = x.shape
    e = cp.ascontiguousarray(cp.asarray(exps).astype(cp.int64).ravel())
    out = cp.zeros((4, rows), dtype=cp.int64)
    rs, cs = (st // x.itemsize for st in x.strides)
    if cs == 1 and rs != 1:
        chunk = 4096
        by_col((rows, -(-cols // chunk)), (ROW_SUMS_THREADS,), (x, e, rows, cols, rs, cs, chunk, out))
    else:
        chunk = 256
        by_row((-(-rows // ROW_SUMS_THREADS), -(-cols // chunk)), (ROW_SUMS_THREADS,),
               (x, e, rows, cols, rs, cs, chunk, out))
    return out
