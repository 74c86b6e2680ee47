"""``ozhpc check``: the error of a stored product on sampled entries, exactly, where the data lives
(real or complex: a complex entry's error is the modulus of its two components' exact errors).

The sampled entries (i, j) follow from ``--seed`` alone, so every rank draws the same list;
entry t is checked by rank ``t mod R``, which reads only row i of op(A), column j of op(B),
C[i, j] and (beta != 0) C0[i, j], by HDF5 hyperslab reads. The reference
``alpha * op(A) op(B) + beta * C0`` is exact (integers and fractions), the error of an entry
is ``|C - reference| / (|alpha| |op(A)||op(B)| + |beta| |C0|)``, and "native" is the same
formula for the float64 dot of that row and column (``alpha * dot + beta * c0``). Per-entry
results go to every rank in one allgather, so the statistics are the same for any rank count
and no process ever holds A, B or C whole.

``ozhpc check`` is a gate: it fails (exit status 4, EXIT_CHECK) when a sampled entry lies
outside :func:`dgemm_bound` (a NaN or inf where the exact product is finite is infinitely far
outside), or when ``--fingerprint`` finds C differing from its ``ozhpc_fingerprint`` attribute.

A result whose attributes say it was computed with another alpha, beta, transa or transb than
the options given is refused (exit 2) rather than reported accurate or inaccurate by mistake.
"""
from __future__ import annotations

import math
from contextlib import ExitStack
from fractions import Fraction

import numpy as np

from ..errors import InputError, OptionError, trans_mode
from ..io import h5io
from .reference import exact_dot, sample_indices

PROVENANCE = ("alpha", "beta", "transa", "transb")
EXIT_CHECK = 4
"""``ozhpc check`` found C wrong: outside the bound, or its fingerprint differs (exit codes: README)."""
U = 2.0 ** -53


def dgemm_bound(k: int) -> float:
    """gamma_{k+2} = (k+2)u / (1 - (k+2)u): the worst-case error of any FP64 GEMM entry (k products
    and sums, then alpha and beta), relative to |alpha||op(A)||op(B)| + |beta||C0|. ozhpc's C, in
    any mode that claims FP64 accuracy, is far inside it; an entry outside it is wrong."""
    return (k + 2) * U / (1 - (k + 2) * U)


def zgemm_bound(k: int) -> float:
    """``sqrt(2) gamma_{k+4}``: the worst-case error of a complex GEMM entry in moduli (each component
    of the dot product ``gamma_{k+1}`` of the parts, then the complex products by alpha and beta and
    the sum), relative to ``|alpha||op(A)||op(B)| + |beta||C0|`` of the moduli."""
    return math.sqrt(2) * (k + 4) * U / (1 - (k + 4) * U)


def failures(stats: dict) -> list[str]:
    """Why ``ozhpc check`` fails (exit EXIT_CHECK), one phrase each; empty when C passes."""
    found = []
    if stats["outside_bound"]:
        found.append(f"{stats['outside_bound']} of {stats['samples']} sampled entries are outside the bound "
                     f"(worst error {stats['max_rel_error']:.3g}; inf: C is inf/NaN where the exact product "
                     "is finite, or not IEEE's value where the inputs are not)")
    if stats.get("fingerprint_matches") is False:
        found.append("C's fingerprint differs from its ozhpc_fingerprint attribute: C changed after it was written")
    return found


def check_shapes(args) -> tuple[int, int, int]:
    """(m, n, k) of the product the options describe, after every dataset is checked."""
    shape, _ = h5io.dataset_info(args.result, "result C")
    (ra, ca), _ = h5io.dataset_info(args.a, "input A")
    (rb, cb), _ = h5io.dataset_info(args.b, "input B")
    m, k = (ca, ra) if trans_mode(args.transa) != "N" else (ra, ca)
    kb, n = (cb, rb) if trans_mode(args.transb) != "N" else (rb, cb)
    if k != kb or (m, n) != shape:
        raise InputError(f"result C {args.result} has shape {shape}, but op(A) is {m}x{k} and op(B) is {kb}x{n}")
    if args.beta != 0.0:
        if args.c is None:
            raise OptionError("{beta} is not 0: pass the input C the product was made with ({c=FILE.h5:/C0})")
        c0_shape, _ = h5io.dataset_info(args.c, "input C")
        if c0_shape != shape:
            raise InputError(f"input C {args.c} has shape {c0_shape}, expected {shape}")
    return m, n, k


def check_provenance(args) -> None:
    """Refuse options that contradict the attributes ozhpc stored with C (when it did)."""
    with h5io.reading(args.result.file, "result C") as f:
        attrs = f[args.result.path].attrs
        stored = {key: attrs[h5io.ATTRS_PREFIX + key] for key in PROVENANCE if h5io.ATTRS_PREFIX + key in attrs}
    given = {"alpha": args.alpha, "beta": args.beta, "transa": trans_mode(args.transa), "transb": trans_mode(args.transb)}
    if not complex_product(args):   # op C of a real matrix is its transpose
        given.update((key, "T" if given[key] == "C" else given[key]) for key in ("transa", "transb"))
    wrong = [key for key, value in stored.items() if _attribute(args.result, key, value, type(given[key])) != given[key]]
    if wrong:
        made = ", ".join(f"{key}={stored[key]}" for key in wrong)
        said = ", ".join(f"{key}={given[key]}" for key in wrong)
        raise InputError(f"result C {args.result} was computed with {made} (its attributes), but the options "
                         f"say {said}: check it with the options it was made with")


def _attribute(ref, key: str, value, kind):
    """A stored provenance attribute as ``kind`` (float or complex, bool), or an InputError naming it."""
    if kind is str:   # transa / transb: "N", "T", "C", or a boolean (T / N)
        text = value.decode() if isinstance(value, bytes) else value
        if isinstance(text, str) and text in ("N", "T", "C"):
            return text
        return "T" if _attribute(ref, key, value, bool) else "N"
    value = np.asarray(value)
    if kind is float and value.dtype.kind == "c" and value.shape == ():
        return complex(value)
    if kind is complex:
        kind = float if value.dtype.kind in "fiu" else complex
    if value.shape == () and (value.dtype.kind in "fiuc" if kind is not bool else value.dtype.kind in "biu"):
        if kind is not bool or int(value) in (0, 1):
            return kind(value)
    raise InputError(f"result C {ref} has attribute {h5io.ATTRS_PREFIX}{key} = {value.tolist()!r}, which is not "
                     f"{'a number' if kind is float else 'a boolean'}; ozhpc did not write it")


def entry_errors(row, col, c, c0, alpha, beta) -> tuple[float, float]:
    """(ozhpc's, native's) relative error of one entry; see the module docstring.

    Where the row, column or C0 holds inf/NaN, an entry counts 0 when it is the value IEEE
    arithmetic gives (native's own; complex: both components), else inf. A zero scale counts 0 for
    an exact entry, else inf.
    """
    values = (row, col, c, c0, alpha, beta)
    if any(np.iscomplexobj(v) for v in values):
        row, col, c, c0, alpha, beta = (np.asarray(v, dtype=np.complex128) for v in values)
        parts = (lambda z: (z.real, z.imag))
    else:
        parts = (lambda x: (x,))
    with np.errstate(all="ignore"):
        native = alpha * (row @ col) + (beta * c0 if beta != 0.0 else 0.0)
    if not (np.isfinite(row).all() and np.isfinite(col).all() and np.isfinite(c0)):
        same = all((np.isnan(x) and np.isnan(y)) or x == y for x, y in zip(parts(native), parts(c)))
        return (0.0 if same else np.inf), 0.0
    ref = _exact(parts(row), parts(col), parts(alpha), parts(beta), parts(c0))
    scale = abs(alpha) * float(np.abs(row) @ np.abs(col)) + abs(beta) * abs(c0)

    def relative(value) -> float:
        if not np.isfinite(value):
            return np.inf
        err = math.hypot(*(float(Fraction(float(x)) - r) for x, r in zip(parts(value), ref)))
        return err / scale if scale else (np.inf if err else 0.0)
    return relative(c), relative(native)


def _exact(row, col, alpha, beta, c0) -> tuple:
    """The components of ``alpha * row . col + beta * c0`` exactly, from the parts of each
    (one part: real; two: real and imaginary)."""
    if len(row) == 1:
        return (Fraction(float(alpha[0])) * exact_dot(row[0], col[0]) + Fraction(float(beta[0])) * Fraction(float(c0[0])),)
    re = exact_dot(row[0], col[0]) - exact_dot(row[1], col[1])
    im = exact_dot(row[0], col[1]) + exact_dot(row[1], col[0])
    (ar, ai), (br, bi), (cr, ci) = ((Fraction(float(x)) for x in v) for v in (alpha, beta, c0))
    return ar * re - ai * im + br * cr - bi * ci, ar * im + ai * re + br * ci + bi * cr


def _line(dset, index: int, along_rows: bool, ref, what: str, conj: bool = False) -> np.ndarray:
    """Row ``index`` (or column, ``along_rows=False``) of dataset ``ref``, one hyperslab read
    (``conj``: its conjugate, for op = 'C')."""
    line = h5io.exact_float64(dset[index, :] if along_rows else dset[:, index], ref, what)
    return np.conj(line) if conj and np.iscomplexobj(line) else line


def local_errors(args, idx, mine) -> list[tuple[int, float, float]]:
    """``(t, ours, native)`` for the sampled entries ``idx[t]``, t in ``mine`` (this rank's share)."""
    out, rows, cols = [], {}, {}  # a row or column shared by several samples is read once
    with ExitStack() as stack:
        a, b, c = (stack.enter_context(h5io.reading(ref.file, what))[ref.path]
                   for ref, what in ((args.a, "input A"), (args.b, "input B"), (args.result, "result C")))
        c0 = stack.enter_context(h5io.reading(args.c.file, "input C"))[args.c.path] if args.beta != 0.0 else None
        ta, tb = trans_mode(args.transa), trans_mode(args.transb)
        for t in mine:
            i, j = idx[t]
            if i not in rows:
                rows[i] = _line(a, i, ta == "N", args.a, "input A", ta == "C")
            if j not in cols:
                cols[j] = _line(b, j, tb != "N", args.b, "input B", tb == "C")
            cij0 = c0[i, j][()] if c0 is not None else 0.0
            out.append((t, *entry_errors(rows[i], cols[j], c[i, j][()], cij0, args.alpha, args.beta)))
    return out


def statistics(errors: list[tuple[int, float, float]], alpha, beta, k: int, complex: bool = False) -> dict:
    """Max/median of both errors (entries in sample order, so any rank count gives the same), and
    how many of ozhpc's lie outside :func:`dgemm_bound` (``complex``: :func:`zgemm_bound`)."""
    bound = (zgemm_bound if complex else dgemm_bound)(k)
    errors = sorted(errors)
    ours = np.array([e[1] for e in errors])
    native = np.array([e[2] for e in errors])
    worst_native = float(native.max()) if len(errors) else 0.0
    worst = float(ours.max()) if len(errors) else 0.0
    return {
        "samples": len(errors), "alpha": alpha, "beta": beta,
        "max_rel_error": worst,
        "median_rel_error": float(np.median(ours)) if len(errors) else 0.0,
        "native_max_rel_error": worst_native,
        "native_median_rel_error": float(np.median(native)) if len(errors) else 0.0,
        "ratio_to_native": worst / worst_native if worst_native else (0.0 if not worst else float("inf")),
        "bound": bound, "outside_bound": int(np.count_nonzero(~(ours <= bound))),
        **({"complex": True} if complex else {}),
    }


def run_check(args, comm) -> dict:
    """The whole check, collective over ``comm``; returns the statistics on every rank."""
    from ..parallel import collective_errors

    with collective_errors(comm, catch=InputError):
        m, n, k = check_shapes(args)
        check_provenance(args)
        complex_data = is_complex(args)
    idx = sample_indices(m, n, args.samples, args.seed)
    rank, size = comm.Get_rank(), comm.Get_size()
    with collective_errors(comm, catch=(InputError, OSError, KeyError)):
        mine = local_errors(args, idx, range(rank, len(idx), size))
    stats = statistics([e for part in comm.allgather(mine) for e in part], args.alpha, args.beta, k, complex_data)
    if getattr(args, "fingerprint", False):
        stats.update(fingerprint_status(args.result, comm))
    return stats


def complex_product(args) -> bool:
    """Whether op(A) op(B) is complex (A or B is): its transa / transb attributes say C, not T."""
    return h5io.any_complex(args.a, args.b)


def is_complex(args) -> bool:
    """Whether the product is complex: a complex dataset, alpha or beta."""
    refs = [args.result, args.a, args.b] + ([args.c] if args.beta != 0.0 else [])
    return (h5io.any_complex(*refs)
            or any(np.iscomplexobj(v) for v in (args.alpha, args.beta)))


def fingerprint_status(ref, comm) -> dict:
    """C's fingerprint (each rank reads a share of its rows) and whether it equals its attribute."""
    from .fingerprint import fingerprint_dataset

    value = fingerprint_dataset(ref.file, ref.path, comm=comm)
    with h5io.reading(ref.file, "result C") as f:
        stored = f[ref.path].attrs.get(h5io.ATTRS_PREFIX + "fingerprint")
    stored = stored.decode() if isinstance(stored, bytes) else stored
    return {"fingerprint": value, "fingerprint_matches": None if stored is None else str(stored) == value}
