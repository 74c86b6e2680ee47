"""The certificate's passes over C and over the operands as CUDA kernels, bitwise equal to the
NumPy reference (:mod:`ozhpc.engines.statistics`, and the array code of :mod:`ozhpc.ozaki.certificate`);
the cuTile engine runs them behind :class:`ozhpc.engines.base.Engine`'s statistics methods.

:func:`ozhpc.ozaki.certificate.certify_entries` on CuPy arrays would run some forty element-wise
kernels over m x n (0.13 s at n = 16384 on an H200, more than the product's certificate budget).
:func:`entry_verdicts` does the same operations in the same order in one pass that writes nothing
m x n (both components of a complex C in one pass, from the three digit groups). Every operation
is written with an explicitly rounded intrinsic (``__dmul_rn``, ``__dadd_rn``, ...), which the
compiler never contracts into an FMA, so each rounds exactly like NumPy's separate operations and
the verdicts -- hence the plan "auto" ends at, hence C -- are the same on every engine.
The passes over C and the representation errors are raw kernels with 2-D indexing over the
arrays' strides: CuPy's element-wise and reduction kernels over broadcast (m, 1) / (1, n) inputs
pay integer divisions per element for their generic indexing (the verdict pass took 4.1 ms at n =
16384 on the H200 that way, a real C; bench/results/certificate_kernels_h200_2026-12-04.md).
The per-entry step is scheme II's only (its combine bound is a formula of |C|; scheme I's comes
from its group sums and stays with the NumPy-style path); the per-k and per-row statistics
(:func:`inner_stats`, :func:`magnitude_sums`, :func:`representation_error_max`) serve both. All integer results (exponents, sums of
integers) are exact; the float results (the worst ratio, the representation errors) are maxima of
exactly rounded values, so atomics in any order give the reference's bits.
"""
from __future__ import annotations

import math

_SOURCE = r"""
/* ldexp(1.0, s) without a call: 2**s exactly for s in [-1074, 1023] (normal or subnormal); 0 below
   (2**-1075 is half the smallest subnormal: to even, 0), inf above. The free bound's 2**-1074 / 2**(e+f)
   lands below -1074 for every entry whose scales multiply to 2 or more. */
__device__ __forceinline__ double ozhpc_pow2(int s) {
    const long long normal = (long long)(s + 1023) << 52, subnormal = 1LL << (min(max(s, -1074), -1023) + 1074);
    const double p = __longlong_as_double(s >= -1022 ? normal : subnormal);
    return s > 1023 ? CUDART_INF : (s < -1074 ? 0.0 : p);
}

/* ldexp(x, s), correctly rounded: where 2**s is a double, one multiplication by it rounds the same
   exact product once (CUDA's ldexp multiplies by up to four powers of two, some twenty instructions) */
__device__ __forceinline__ double ozhpc_ldexp(double x, int s) {
    return (s >= -1074 && s <= 1023) ? __dmul_rn(x, ozhpc_pow2(s)) : ldexp(x, s);
}

/* The ratio of one entry. eij = e_i + f_j clamped to [-4000, 4000] (the clamps below to +-2200 give
   the same s and t as from the sum itself); na / nb: the norms as doubles (int64 units times
   NORM_UNIT), nza / nzb: the counts as doubles -- converted once per row and column by the caller,
   each exactly as NumPy's astype and multiply round it. worst: the caller's largest ratio so far; an
   entry whose ratio cannot exceed it returns without the division (below). */
__device__ __forceinline__ double ozhpc_ratio(double cv, int eij, double da, double na, double nza,
                                              double db, double nb, double nzb, LTYPE lsum, UTYPE usum,
                                              double worst) {
const double c = cv;
const int s = min(max(-eij, -2200), 2200);
const double mag = ozhpc_ldexp(fabs(c), s);
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
const int t = min(max(-1074 - eij, -2200), 2200);
const double sub = __dadd_rn(ozhpc_pow2(t), TINYSUB);
const double fin = __dadd_rn(__dmul_rn(__dmul_rn(RHOU, c_up), UP), sub);
const double raw = __dsub_rn(__dsub_rn(c_lo, bound), fin);
const double slack = __dmul_rn(FOURU, __dadd_rn(__dadd_rn(c_up, bound), fin));
double lower = __dmul_rn(fmax(__dsub_rn(raw, slack), 0.0), DOWN);
if (HAS_L) lower = fmax(lower, __dmul_rn((double)lsum, MAGUNIT));
double scaled = __dmul_rn(bound, 9007199254740992.0);
if (FACTOR_POW2) scaled = __dmul_rn(__dmul_rn(scaled, FACTOR_INV), UP);   /* x / 2**k: the same rounding */
else if (FACTOR != 1.0) scaled = __dmul_rn(__ddiv_rn(scaled, FACTOR), UP);
const bool passed = scaled <= lower;
/* The ratio fl(scaled / lower) only matters where it could raise the caller's maximum (bar: worst, or
   FAIL_MIN for a failing entry, which reports at least that). Where bar * lower > scaled exactly (the
   fused multiply-add's sign is the exact difference's: rounding keeps a sign, and a difference too
   small for a subnormal reads 0, so it is not taken), scaled / lower < bar and, rounding being
   monotone, fl(scaled / lower) <= bar: a passing entry returns 0 and a failing one FAIL_MIN, which
   leave the maximum and the failing count as the ratio itself would. NaNs never take it. */
const double bar = passed ? worst : fmax(worst, FAIL_MIN);
if (isfinite(c) && __fma_rn(bar, lower, -scaled) > 0.0) return passed ? 0.0 : FAIL_MIN;
double r = (lower > 0.0) ? __ddiv_rn(scaled, lower) : CUDART_INF;
r = (scaled > 0.0) ? r : 0.0;
return !isfinite(c) ? 0.0 : (passed ? fmin(r, 1.0) : fmax(r, FAIL_MIN));
}
"""
_VERDICTS = r"""
/* One block: ROWS rows of C by a chunk of its columns, threads along the columns (C row-major:
   coalesced). Each thread holds its column's sizes while it walks the block's rows; the row sizes sit
   in shared memory. Per component, the block's largest ratio and failing count go to out[2 comp],
   out[2 comp + 1] by one atomicMax (on the bits of a ratio >= 0, which order like the values; a NaN
   would win, as cupy.max propagates it) and one atomicAdd. COMPONENTS 2: c is complex (re, im
   adjacent), the digit sums three groups (Re: 0 + 2, exact in FP64; Im: 1). */
__device__ __forceinline__ double ozhpc_larger(double a, double b) { return (a != a || a > b) ? a : b; }

extern "C" __global__ void ozhpc_verdicts(const double* c, long long c_rs, long long c_cs,
        const ETYPE* e, const FTYPE* f, const double* da, const long long* na, const long long* nza,
        const double* db, const long long* nb, const long long* nzb,
        const LTYPE* l, long long l_gs, long long l_rs, long long l_cs,
        const UTYPE* u, long long u_gs, long long u_rs, long long u_cs,
        long long m, long long n, long long chunk, unsigned long long* out) {
    __shared__ long long s_e[ROWS];
    __shared__ double s_da[ROWS], s_na[ROWS], s_nza[ROWS];
    __shared__ double s_worst[COMPONENTS][32];
    __shared__ unsigned long long s_fail[COMPONENTS][32];
    const long long i0 = (long long)blockIdx.x * ROWS;
    if (threadIdx.x < ROWS && i0 + threadIdx.x < m) {
        const long long i = i0 + threadIdx.x;
        s_e[threadIdx.x] = (long long)e[i]; s_da[threadIdx.x] = da[i];
        s_na[threadIdx.x] = __dmul_rn((double)na[i], NORM_UNIT); s_nza[threadIdx.x] = (double)nza[i];
    }
    __syncthreads();
    const int rows = (int)min((long long)ROWS, m - i0);
    double worst[COMPONENTS];
    unsigned long long fail[COMPONENTS];
    for (int q = 0; q < COMPONENTS; ++q) { worst[q] = 0.0; fail[q] = 0; }
    const long long j1 = min(n, ((long long)blockIdx.y + 1) * chunk);
    for (long long j = (long long)blockIdx.y * chunk + threadIdx.x; j < j1; j += blockDim.x) {
        const long long fj = (long long)f[j];
        const double dbj = db[j], nbj = __dmul_rn((double)nb[j], NORM_UNIT), nzbj = (double)nzb[j];
        const double* cj = c + i0 * c_rs + j * c_cs;
#pragma unroll UNROLL_ROWS
        for (int r = 0; r < ROWS; ++r) {
            if (r >= rows) break;
            const long long i = i0 + r, lat = i * l_rs + j * l_cs, uat = i * u_rs + j * u_cs;
            const int eij = (int)min(max(s_e[r] + fj, -4000LL), 4000LL);
#pragma unroll
            for (int q = 0; q < COMPONENTS; ++q) {
#if COMPONENTS == 1
                const LTYPE lsum = HAS_L ? l[lat] : (LTYPE)0;
                const UTYPE usum = HAS_U ? u[uat] : (UTYPE)0;
#else
                const LTYPE lsum = !HAS_L ? 0.0 : (q == 0 ? __dadd_rn((double)l[lat], (double)l[lat + 2 * l_gs])
                                                          : (double)l[lat + l_gs]);
                const UTYPE usum = !HAS_U ? 0.0 : (q == 0 ? __dadd_rn((double)u[uat], (double)u[uat + 2 * u_gs])
                                                          : (double)u[uat + u_gs]);
#endif
                const double v = ozhpc_ratio(cj[r * c_rs + q], eij, s_da[r], s_na[r], s_nza[r], dbj, nbj, nzbj,
                                             lsum, usum, worst[q]);
                worst[q] = ozhpc_larger(v, worst[q]);
                fail[q] += v > 1.0;
            }
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int q = 0; q < COMPONENTS; ++q) {
        for (int width = 16; width > 0; width /= 2) {
            worst[q] = ozhpc_larger(__shfl_down_sync(0xffffffffu, worst[q], width), worst[q]);
            fail[q] += __shfl_down_sync(0xffffffffu, fail[q], width);
        }
        if (lane == 0) { s_worst[q][warp] = worst[q]; s_fail[q][warp] = fail[q]; }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int q = 0; q < COMPONENTS; ++q) {
            double w = 0.0;
            unsigned long long k = 0;
            for (int t = 0; t < (int)(blockDim.x >> 5); ++t) { w = ozhpc_larger(s_worst[q][t], w); k += s_fail[q][t]; }
            if (w != 0.0) atomicMax(&out[2 * q], (unsigned long long)__double_as_longlong(w));   /* -0.0 is 0 */
            if (k) atomicAdd(&out[2 * q + 1], k);
        }
    }
}
"""
_C_TYPES = {"float64": "double", "int32": "int", "int64": "long long"}
VERDICT_THREADS, VERDICT_ROWS, VERDICT_CHUNK = 256, 4, 1024
"""A block of the verdict pass: 256 threads, 4 rows by 1024 columns of C (4 entries a thread per
row; at n = 16384 65536 blocks)."""
VERDICT_UNROLL = 1
"""How many of a block's rows a thread's loop unrolls (1: about 70 registers, more blocks per SM; 4:
112, more entries in flight per thread, 40% slower for a real C on the H200)."""

_KERNELS: dict = {}


def _verdict_kernel(cp, types: tuple, has_l: bool, has_u: bool, components: int, constants: dict, norm_bits: int):
    """The compiled verdict kernel for these element types (exponents, sums), sums present, components
    and constants (one module each, cached)."""
    key = ("verdicts", types, has_l, has_u, components, tuple(sorted(constants.items())), norm_bits, VERDICT_UNROLL)
    if key not in _KERNELS:
        e_type, f_type, l_type, u_type = (_C_TYPES[t] for t in types)
        if components == 2:   # the Re sums are two groups added in FP64
            l_type = u_type = "double"
        defines = "".join(f"#define {name} {value!r}\n" for name, value in constants.items())
        defines += (f"#define HAS_L {int(has_l)}\n#define HAS_U {int(has_u)}\n"
                    f"#define LTYPE {l_type}\n#define UTYPE {u_type}\n#define ETYPE {e_type}\n"
                    f"#define FTYPE {f_type}\n#define COMPONENTS {components}\n#define ROWS {VERDICT_ROWS}\n"
                    f"#define NORM_UNIT {2.0**-norm_bits!r}\n"
                    "#define CUDART_INF __longlong_as_double(0x7ff0000000000000LL)\n")
        factor = float(constants["FACTOR"])
        pow2 = factor > 1.0 and math.frexp(factor)[0] == 0.5   # "dgemm" with k a power of two
        defines += f"#define FACTOR_POW2 {int(pow2)}\n#define FACTOR_INV {1.0 / factor if pow2 else 0.0!r}\n"
        # the sums' element types as stored (LTYPE / UTYPE are what ozhpc_ratio reads)
        store = {"l": _C_TYPES[types[2]], "u": _C_TYPES[types[3]]}
        source = (defines + _SOURCE + _VERDICTS.replace("const LTYPE* l,", f"const {store['l']}* l,")
                  .replace("const UTYPE* u,", f"const {store['u']}* u,")
                  .replace("UNROLL_ROWS", str(VERDICT_UNROLL)))   # a pragma's argument: not macro-expanded
        _KERNELS[key] = cp.RawModule(code=source).get_function("ozhpc_verdicts")
    return _KERNELS[key]


def entry_verdicts(cp, c, e, f, row, col, lower_sums, support_sums, constants: dict, to_host=None,
                   norm_bits: int = 32, components: int = 1):
    """``(failed, worst)`` over this block of C: how many entries have a ratio ``E / (c u L)``
    (:func:`ozhpc.ozaki.certificate.entry_ratio`) above 1 (they fail), and the largest ratio (0 for
    inf/NaN entries), in one pass over C and the digit sums (nothing m x n written; C and the sums
    read through their strides) and one copy of the answer to the host. ``row`` / ``col``: the
    per-row ``(delta, norm, nnz)`` of op(A) and per-column of op(B): float64 deltas, int64 norms in
    units of ``2**-norm_bits`` and counts, converted in the kernel as NumPy converts them; ``e`` /
    ``f``: the integer exponents; ``to_host``: the engine's copy. ``components`` 2: ``c`` is
    complex and the sums are the three groups ``(3, m, n)`` of the parts' digit products
    (:func:`ozhpc.ozaki.complex_certificate.component_sums`: Re = groups 0 + 2, Im = group 1);
    the answer is then one ``(failed, worst)`` per component."""
    get = to_host or (lambda x: x.get())
    m, n = c.shape
    if c.size == 0:
        return ((0, 0.0),) * components if components == 2 else (0, 0.0)
    unit = 16 if components == 2 else 8
    if c.dtype != (cp.complex128 if components == 2 else cp.float64) or any(s % unit for s in c.strides):
        raise TypeError(f"entry_verdicts: C of dtype {c.dtype} and strides {c.strides} for {components} component(s)")
    c_rs, c_cs = (s // 8 for s in c.strides)   # in doubles (a complex entry's parts: +0, +1)
    e, f = (cp.ascontiguousarray(cp.asarray(v).ravel()) for v in (e, f))
    row, col = (tuple(cp.ascontiguousarray(v, dtype=t) for v, t in zip(vs, (cp.float64, cp.int64, cp.int64)))
                for vs in (row, col))
    out = cp.zeros(2 * components, dtype=cp.uint64)
    sums = [_strided(s, components, out) for s in (lower_sums, support_sums)]
    types = (_ctype(e), _ctype(f), *(("float64" if s is None else _ctype(s)) for s in (lower_sums, support_sums)))
    kernel = _verdict_kernel(cp, types, lower_sums is not None, support_sums is not None, components, constants,
                             norm_bits)
    chunk = max(VERDICT_CHUNK, -(-n // 65535))
    kernel((-(-m // VERDICT_ROWS), -(-n // chunk)), (VERDICT_THREADS,),
           (c, c_rs, c_cs, e, f, *row, *col, *sums[0], *sums[1], m, n, chunk, out))
    found = get(out)
    answer = tuple((int(found[2 * q + 1]), float(found[2 * q:2 * q + 1].view("float64")[0]))
                   for q in range(components))
    return answer if components == 2 else answer[0]


def _strided(sums, components: int, unread) -> tuple:
    """A digit-sum array as ``(array, group stride, row stride, column stride)`` in elements (for
    none, ``unread``: a pointer the kernel never reads)."""
    if sums is None:
        return (unread, 0, 0, 0)
    if components == 2:
        g, r, col = (s // sums.itemsize for s in sums.strides)
    else:
        (r, col), g = (s // sums.itemsize for s in sums.strides), 0
    return (sums, g, r, col)


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


_DELTA_MAX = r"""
/* Element t of row r: x[r rs + (t / WIDTH) cs + t % WIDTH] (WIDTH 2: a complex row read as the real
   row of its re/im pairs). The row maxima go to out by atomicMax on the bits of values >= 0. */
__device__ __forceinline__ double ozhpc_at(const double* x, long long r, long long t, long long rs, long long cs) {
    return x[r * rs + (t / WIDTH) * cs + t % WIDTH];
}

/* the columns along the threads (rows contiguous), one row and column chunk per block */
extern "C" __global__ void ozhpc_delta_by_col(const double* x, const ETYPE* e, long long rows, long long cols,
                                              long long rs, long long cs, long long chunk, unsigned long long* out) {
    __shared__ double part[32];
    const long long r = blockIdx.x;
    const long long er = (long long)e[r];
    double y = 0.0;
    const long long c1 = min(cols, ((long long)blockIdx.y + 1) * chunk);
    for (long long t = (long long)blockIdx.y * chunk + threadIdx.x; t < c1; t += blockDim.x)
        y = fmax(y, ozhpc_delta(ozhpc_at(x, r, t, rs, cs), er));
    for (int width = 16; width > 0; width /= 2) y = fmax(y, __shfl_down_sync(0xffffffffu, y, width));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = y;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)(blockDim.x >> 5); ++w) y = fmax(y, part[w]);
        if (y > 0.0) atomicMax(&out[r], (unsigned long long)__double_as_longlong(y));
    }
}

/* the rows along the threads (rows adjacent in memory: op(B)^T of a row-major B), a column chunk per
   blockIdx.y */
extern "C" __global__ void ozhpc_delta_by_row(const double* x, const ETYPE* e, long long rows, long long cols,
                                              long long rs, long long cs, long long chunk, unsigned long long* out) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const long long er = (long long)e[r];
    double y = 0.0;
    const long long c1 = min(cols, ((long long)blockIdx.y + 1) * chunk);
    for (long long t = (long long)blockIdx.y * chunk; t < c1; ++t) y = fmax(y, ozhpc_delta(ozhpc_at(x, r, t, rs, cs), er));
    if (y > 0.0) atomicMax(&out[r], (unsigned long long)__double_as_longlong(y));
}
"""
DELTA_THREADS = 256


def representation_error_max(cp, x, exps, shift: int, slices: int, tiny: float):
    """Row maxima of :func:`ozhpc.engines.statistics.representation_error` (scheme II: ``slices``
    0 and ``shift`` = bits; scheme I: the slices and ``shift`` 0), float64 per row, in one pass over
    ``x`` through its strides (no copy of a transposed or strided operand). A complex ``x`` is read as
    real rows of length 2k, each entry's parts adjacent (what a complex operand's certificate
    statistics take). The errors are >= 0 and every one is rounded exactly as the reference, so the
    maxima (atomics in any order) are its bits."""
    width = 2 if x.dtype == cp.complex128 else 1
    x = x if width == 2 else cp.asarray(x, dtype=cp.float64)
    e = cp.ascontiguousarray(cp.asarray(exps).ravel())
    key = ("delta", shift, slices, tiny, width, _ctype(e))
    if key not in _KERNELS:
        module = cp.RawModule(code=f"#define SHIFT {shift}\n#define SLICES {slices}\n#define TINY {tiny!r}\n"
                                   f"#define WIDTH {width}LL\n#define ETYPE {_C_TYPES[_ctype(e)]}\n"
                                   + _DELTA + _DELTA_MAX)
        _KERNELS[key] = (module.get_function("ozhpc_delta_by_row"), module.get_function("ozhpc_delta_by_col"))
    by_row, by_col = _KERNELS[key]
    rows, cols = x.shape[0], width * x.shape[1]
    out = cp.zeros(rows, dtype=cp.uint64)
    rs, cs = (st // 8 for st in x.strides)   # in doubles (a complex entry: two)
    if rows and cols:
        if rows > 1 and abs(rs) < abs(cs):   # rows adjacent in memory
            chunk = 256
            by_row((-(-rows // DELTA_THREADS), -(-cols // chunk)), (DELTA_THREADS,), (x, e, rows, cols, rs, cs, chunk, out))
        else:
            chunk = 4096
            by_col((rows, -(-cols // chunk)), (DELTA_THREADS,), (x, e, rows, cols, rs, cs, chunk, out))
    return out.view(cp.float64)


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
    if abs(cs) < abs(rs) or rows == 1:   # along a row (a row-major op(A); a complex part: every other double)
        chunk = 4096
        by_col((rows, -(-cols // chunk)), (ROW_SUMS_THREADS,), (x, e, rows, cols, rs, cs, chunk, out))
    else:
        chunk = 256
        by_row((-(-rows // ROW_SUMS_THREADS), -(-cols // chunk)), (ROW_SUMS_THREADS,),
               (x, e, rows, cols, rs, cs, chunk, out))
    return out
