"""``ozhpc.gemm``: the Ozaki product of whole arrays on one process.

The same :class:`~ozhpc.ozaki.product.Product` as the distributed driver
(:mod:`ozhpc.parallel.summa`), with no reductions and all of k in one panel.
"""
from __future__ import annotations

import numpy as np

from ..engines import get_engine
from ..errors import require_c, scalars, trans_mode
from .domain import domain_of
from .product import GemmInfo, Product, enforce_accuracy, op_rows  # noqa: F401  (GemmInfo re-exported)
from .settings import DEFAULT_GUARANTEE, OzakiSettings


def as_matrix(x, name: str, complex_ok: bool = False):
    """``x`` checked as a 2-D real (``complex_ok``: or complex) array; a list or other array-like
    becomes a NumPy array (``numpy.asarray``), as NumPy functions take them. A masked array with
    masked entries is refused: ``numpy.asarray`` would multiply the values under the mask."""
    if np.ma.is_masked(x):
        raise TypeError(f"{name} is a masked array with masked entries, and the product would use the values under "
                        f"the mask; pass {name}.filled(0) to count them as 0, or {name}.data to use them")
    if getattr(x, "shape", None) is None or getattr(x, "dtype", None) is None:
        try:
            x = np.asarray(x)
        except (TypeError, ValueError):   # a ragged list
            raise TypeError(f"{name} must be a 2-D array, got a {type(x).__name__} that NumPy cannot make "
                            "one array of (rows of different lengths?)") from None
    check_real_matrix(x, name, complex_ok)
    why = fp64_misfit(x, "it") if isinstance(x, np.ndarray) else None
    if why:
        raise ValueError(f"{name} holds {why}")
    return x


FP64_EXACT_INT = 2**53
"""Every integer up to this magnitude is a float64; wider ones only some (checked one by one)."""
FP64_MAX = float(np.finfo(np.float64).max)


def fp64_misfit(values: np.ndarray, noun: str) -> str | None:
    """The one check of every input read as FP64 (``ozhpc.gemm``'s arrays, every dataset the
    command line and job files read): why NumPy's float64 (complex128) copy of ``values`` would not
    be its numbers, in words that follow "X holds" and end in advice for ``noun`` ("it", "the
    dataset"); None when the copy is faithful up to rounding. Refused: an integer beyond 2^53 that
    FP64 has no bits for (the copy would round it), a finite long double beyond FP64's range (the
    copy would be inf). A long double within the range is rounded to the nearest FP64 number, as
    any FP64 GEMM reads it."""
    values = np.asarray(values)
    kind, size = values.dtype.kind, values.dtype.itemsize
    if kind in "iu" and size > 4:
        bad = _inexact_integer(values)
        return None if bad is None else (f"the integer {bad}, which FP64 cannot represent exactly (integers are "
                                         f"exact up to 2^53); convert {noun} to float64 first")
    if (kind == "f" and size > 8) or (kind == "c" and size > 16):   # long double
        for part in (values.real, values.imag) if kind == "c" else (values,):
            wide = np.isfinite(part) & (np.abs(part) > FP64_MAX)   # compared in the wide type: exact
            with np.errstate(over="ignore"):
                over = np.isinf(part[wide].astype(np.float64)) if wide.any() else wide[:0]
            if over.any():
                return (f"the value {str(values[wide][over][0])}, beyond FP64's range (its largest "
                        f"number is {FP64_MAX!r}); scale {noun} into that range first")
    return None


def _inexact_integer(values: np.ndarray):
    """The first entry of the 64-bit integer array ``values`` that float64 does not hold exactly,
    or None: float64 rounds integers beyond 2^53 that it has no bits for."""
    wide = values > FP64_EXACT_INT
    if values.dtype.kind == "i":
        wide |= values < -FP64_EXACT_INT
    if not wide.any():
        return None
    x = values[wide]
    f = x.astype(np.float64)
    fits = f < 2.0 ** (8 * values.dtype.itemsize - (values.dtype.kind == "i"))  # no overflow back
    bad = ~fits | (np.where(fits, f, 0).astype(values.dtype) != x)
    return x[bad][0] if bad.any() else None


def check_real_matrix(x, name: str, complex_ok: bool = False):
    """Raise a clear error unless ``x`` is a 2-D array of real (``complex_ok``: or complex) numbers."""
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(shape)}")
    if dtype.kind not in ("fiubc" if complex_ok else "fiub"):
        raise TypeError(f"{name} must hold {'real or complex' if complex_ok else 'real'} numbers, got dtype {dtype}")


def gemm(A, B, C=None, *, alpha=1.0, beta=0.0, transa=False, transb=False,
         slices="auto", groups="auto", engine="auto", scheme=None, bits="auto", accuracy="warn",
         guarantee=DEFAULT_GUARANTEE, info=False):
    """FP64 ``alpha * op(A) @ op(B) + beta * C`` by the Ozaki scheme, exact up to one final rounding.

    Parameters
    ----------
    A, B : 2-D real or complex arrays (NumPy, or CuPy with the cutile engine); lists and other
        array-likes are taken as ``numpy.asarray`` makes them. When either is complex the product is
        a complex one (ZGEMM: a real operand is promoted; docs/numerics.md, "Complex products")
    C : array of shape (m, n), read only when ``beta != 0``
    alpha, beta : real or complex numbers
    transa, transb : bool or "N", "T", "C"
        op(A) / op(B): as is ("N", False), transposed ("T", True) or conjugate transposed ("C").
    slices : "auto" or int
        Scheme I only: int8 digit slices per operand; "auto" starts from the exponent spread of
        the data and widens the plan until every entry of C is certified (``guarantee``).
    groups : "auto", "all" or int
        Keep slice pairs with ``p + q < groups``: "auto" = slices (the triangle),
        "all" = every pair (``2*slices - 1``), fewer for a faster, less accurate product.
    engine : "auto", "numpy", "cutile" or an Engine
    scheme : "ozaki2", "ozaki1" or None (default: "ozaki1" when ``slices`` or ``groups`` is given, else "ozaki2")
        Ozaki scheme II (integers modulo coprimes <= 256, one int8 GEMM per modulus: linear in
        the accuracy, the fast one) or I (int8 digit slices, the triangle of slice pairs).
        Each gives the same bits on every engine and grid; the two schemes differ.
    bits : "auto" or int
        Scheme II only: integer bits per entry. "auto" picks bits whose error in fact is no
        worse than native DGEMM's on this data, then certifies ``guarantee`` per entry.
    guarantee : "dgemm" (default) or "tight"
        What "auto" certifies for every finite entry, plus the final rounding of C (u = 2**-53):
        "dgemm" ``|C_ij - (op(A) op(B))_ij| <= k u (|op(A)||op(B)|)_ij``, the bound native DGEMM
        itself guarantees; "tight" ``u (|op(A)||op(B)|)_ij`` (more bits). The plan is widened
        where an entry fails.
    accuracy : "warn" or "strict"
        Where the certificate still fails at the widest plan, "warn" returns C with an
        :class:`ozhpc.AccuracyWarning` (``GemmInfo.certified`` False), "strict" raises
        :class:`ozhpc.AccuracyError`. Fixed ``slices`` / ``bits`` are not certified
        (``GemmInfo.certified`` None).
    info : bool
        Also return a :class:`GemmInfo`.

    Returns
    -------
    C : float64 (complex128 when A, B, C, alpha or beta is complex) array on the engine's device
        (NumPy arrays in, NumPy out), or ``(C, GemmInfo)``.

    Raises
    ------
    AccuracyError
        ``accuracy="strict"`` and some entry not certified.
    TypeError, ValueError
        Not 2-D, not numbers (matrices, alpha, beta), integers FP64 would round, shapes that do not
        match, bad slices/groups/bits
        (:class:`ozhpc.errors.InputError`, a ValueError, for the options).
    """
    settings = OzakiSettings(scheme, slices, groups, bits, accuracy, guarantee)
    alpha, beta = scalars(alpha, beta)
    transa, transb = trans_mode(transa, "transa"), trans_mode(transb, "transb")
    eng = get_engine(engine)
    A, B = as_matrix(A, "A", True), as_matrix(B, "B", True)
    a_rows = op_rows(eng.asarray(A).astype(domain_of(A).dtype, copy=False), transa, True)
    b_rows = op_rows(eng.asarray(B).astype(domain_of(B).dtype, copy=False), transb, False)
    (m, k), (n, kb) = a_rows.shape, b_rows.shape
    if k != kb:
        raise ValueError(f"inner dimensions differ: op(A) is {m}x{k}, op(B) is {kb}x{n}")
    require_c(beta, C)
    c_dev = None if beta == 0.0 else _input_c(eng, C, (m, n))
    product = Product(settings, eng, a_rows, b_rows)
    product.multiply()
    while product.settle():       # "auto": a wider plan until every entry is certified
        product.multiply()
    out = product.finish(alpha, beta, c_dev)
    if isinstance(A, np.ndarray):
        out = eng.to_host(out)
    # the phase timers are read (a wait for the device) only where someone reads them
    details = product.info(None if info else {})
    if not info and details.accuracy_message():
        details = product.info()
    enforce_accuracy(details, settings.accuracy)
    return (out, details) if info else out


def _input_c(eng, C, shape):
    C = as_matrix(C, "C", True)
    if tuple(C.shape) != shape:
        raise ValueError(f"C has shape {tuple(C.shape)}, expected {shape}")
    return eng.asarray(C).astype(domain_of(C).dtype, copy=False)
