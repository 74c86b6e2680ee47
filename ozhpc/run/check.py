"""``ozhpc check``: the error of a stored product on sampled entries, exactly, where the data lives.

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

from contextlib import ExitStack
from fractions import Fraction

import numpy as np

from ..errors import InputError, OptionError
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
    m, k = (ca, ra) if args.transa else (ra, ca)
    kb, n = (cb, rb) if args.transb else (rb, cb)
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
    given = {"alpha": args.alpha, "beta": args.beta, "transa": args.transa, "transb": args.transb}
    wrong = [key for key, value in stored.items() if _attribute(args.result, key, value, type(given[key])) != given[key]]
    if wrong:
        made = ", ".join(f"{key}={stored[key]}" for key in wrong)
        said = ", ".join(f"{key}={given[key]}" for key in wrong)
        raise InputError(f"result C {args.result} was computed with {made} (its attributes), but the options "
                         f"say {said}: check it with the options it was made with")


def _attribute(ref, key: str, value, kind):
    """A stored provenance attribute as ``kind`` (float or bool), or an InputError naming it."""
    value = np.asarray(value)
    if value.shape == () and (value.dtype.kind in "fiu" if kind is float else value.dtype.kind in "biu"):
        if kind is float or int(value) in (0, 1):
            return kind(value)
    raise InputError(f"result C {ref} has attribute {h5io.ATTRS_PREFIX}{key} = {value.tolist()!r}, which is not "
                     f"{'a number' if kind is float else 'a boolean'}; ozhpc did not write it")


def entry_errors(row, col, c: float, c0: float, alpha: float, beta: float) -> tuple[float, float]:
    """(ozhpc's, native's) relative error of one entry; see the module docstring.

    Where the row, column or C0 holds inf/NaN, an entry counts 0 when it is the value IEEE
    arithmetic gives (native's own), else inf. A zero scale counts 0 for an exact entry, else inf.
    """
    with np.errstate(all="ignore"):
        native = alpha * float(row @ col) + (beta * c0 if beta != 0.0 else 0.0)
    if not (np.isfinite(row).all() and np.isfinite(col).all() and np.isfinite(c0)):
        same = (np.isnan(native) and np.isnan(c)) or native == c
        return (0.0 if same else np.inf), 0.0
    ref = Fraction(alpha) * exact_dot(row, col) + Fraction(beta) * Fraction(c0)
    scale = abs(alpha) * float(np.abs(row) @ np.abs(col)) + abs(beta) * abs(c0)

    def relative(value: float) -> float:
        if not np.isfinite(value):
            return np.inf
        err = abs(Fraction(value) - ref)
        return float(err) / scale if scale else (np.inf if err else 0.0)
    return relative(c), relative(native)


def _line(dset, index: int, along_rows: bool, ref, what: str) -> np.ndarray:
    """Row ``index`` (or column, ``along_rows=False``) of dataset ``ref``, one hyperslab read."""
    return h5io.exact_float64(dset[index, :] if along_rows else dset[:, index], ref, what)


def local_errors(args, idx, mine) -> list[tuple[int, float, float]]:
    """``(t, ours, native)`` for the sampled entries ``idx[t]``, t in ``mine`` (this rank's share)."""
    out, rows, cols = [], {}, {}  # a row or column shared by several samples is read once
    with ExitStack() as stack:
        a, b, c = (stack.enter_context(h5io.reading(ref.file, what))[ref.path]
                   for ref, what in ((args.a, "input A"), (args.b, "input B"), (args.result, "result C")))
        c0 = stack.enter_context(h5io.reading(args.c.file, "input C"))[args.c.path] if args.beta != 0.0 else None
        for t in mine:
            i, j = idx[t]
            row = rows[i] if i in rows else rows.setdefault(i, _line(a, i, not args.transa, args.a, "input A"))
            col = cols[j] if j in cols else cols.setdefault(j, _line(b, j, args.transb, args.b, "input B"))
            cij0 = float(c0[i, j]) if c0 is not None else 0.0
            out.append((t, *entry_errors(row, col, float(c[i, j]), cij0, args.alpha, args.beta)))
    return out


def statistics(errors: list[tuple[int, float, float]], alpha: float, beta: float, k: int) -> dict:
    """Max/median of both errors (entries in sample order, so any rank count gives the same), and
    how many of ozhpc's lie outside :func:`dgemm_bound`."""
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
        "bound": dgemm_bound(k), "outside_bound": int(np.count_nonzero(~(ours <= dgemm_bound(k)))),
    }


def run_check(args, comm) -> dict:
    """The whole check, collective over ``comm``; returns the statistics on every rank."""
    from ..parallel import collective_errors

    with collective_errors(comm, catch=InputError):
        m, n, k = check_shapes(args)
        check_provenance(args)
    idx = sample_indices(m, n, args.samples, args.seed)
    rank, size = comm.Get_rank(), comm.Get_size()
    with collective_errors(comm, catch=(InputError, OSError, KeyError)):
        mine = local_errors(args, idx, range(rank, len(idx), size))
    stats = statistics([e for part in comm.allgather(mine) for e in part], args.alpha, args.beta, k)
    if getattr(args, "fingerprint", False):
        stats.update(fingerprint_status(args.result, comm))
    return stats


def fingerprint_status(ref, comm) -> dict:
    """C's fingerprint (each rank reads a share of its rows) and whether it equals its attribute."""
    from .fingerprint import fingerprint_dataset

    value = fingerprint_dataset(ref.file, ref.path, comm=comm)
    with h5io.reading(ref.file, "result C") as f:
        stored = f[ref.path].attrs.get(h5io.ATTRS_PREFIX + "fingerprint")
    stored = stored.decode() if isinstance(stored, bytes) else stored
    return {"fingerprint": value, "fingerprint_matches": None if stored is None else str(stored) == value}
