"""Real or complex: what a product's operands are, and the few steps of the pipeline that differ.

A product's operands are real (float64) or complex (complex128; a real operand of a complex
product is promoted, its imaginary part all zero, which the certificate sees term by term:
:mod:`ozhpc.ozaki.complex_certificate`). :data:`REAL` and :data:`COMPLEX` answer, for the product,
its passes and its operands, the questions whose answer depends on that and nothing else:

* the operands as real rows for the statistics (row maxima, sizes, spread): the rows themselves,
  or a complex row's parts side by side (a real row of length 2k; the scales come out as one
  exponent per complex row for both parts);
* their finite parts, their certificate digit planes and special-value codes: one int8 plane per
  operand, or one per part (two), whose products a pass sums into ``2 planes - 1`` groups (the
  engine's slice-pair groups: ``Mr Mr``, ``Mr Mi + Mi Mr``, ``Mi Mi``);
* the plan: what :func:`ozhpc.ozaki.plan.resolve_plan` picks, or its complex form (``forms``);
* the per-k statistics of equilibration, and its exact scaling of columns;
* the special values, the certificate and its factor under "dgemm" (k for a real product, k + 1
  for a complex one: native ZGEMM's ``gamma_(k+1)`` per component), the last scaling of an entry
  that overflowed, and alpha / beta.

Everything complex is done on the parts with the same real operations on every engine (a complex
multiply of NumPy or CuPy may fuse its products into FMAs; the epilogue here never does), so the
bits do not depend on the engine.
"""
from __future__ import annotations

from ..engines.base import final_scale
from . import certificate, complex_certificate, special
from .complex_plan import COMPLEX_FORM


class RealDomain:
    """Real operands: the pipeline as it was written for them."""

    complex = False
    dtype = "float64"
    """What the product's operands and C are held as."""
    digit_planes = 1
    """int8 planes per operand of each certificate digit plane and of the special-value codes."""
    width = 1
    """Real entries per entry: a :meth:`realified` row, over which the certificate's exact sums
    run, is ``width * k`` long."""

    def operand(self, xp, x):
        """This rank's rows as the product holds them (the given array)."""
        return x

    def realified(self, x):
        """The rows as real rows (for row maxima, sizes and the spread statistic)."""
        return x

    def finite(self, xp, x, nonfinite=None):
        return special.finite_part(xp, x, nonfinite)

    def magnitudes(self, engine, fin, exps, upper: bool = False):
        """The certificate's magnitude (``upper``: support) digits, int8 ``(digit_planes, rows, cols)``."""
        return engine.magnitudes(fin, exps, upper=upper)

    def codes(self, xp, x):
        """The special-value class codes, int8 ``(digit_planes, rows, cols)``."""
        return special.classify(xp, x)[None]

    def zeros_counts(self, xp, m: int, n: int):
        return special.zeros_counts(xp, m, n)

    def add_counts(self, xp, counts, codes_a, codes_b) -> None:
        special.accumulate_counts(xp, counts, codes_a[0], codes_b[0])

    def apply_counts(self, xp, c, counts):
        return special.apply_counts(xp, c, counts)

    forms: dict = {}
    """The plan classes the operands take (:func:`ozhpc.ozaki.plan.resolve_plan`'s ``forms``)."""

    def inner_stats(self, engine, rows):
        """Equilibration's per-k statistics (the engine's ``inner_stats``)."""
        return engine.inner_stats(rows)

    def ldexp_columns(self, xp, rows, shifts):
        return certificate.ldexp_columns(xp, rows, shifts)

    def times(self, xp, alpha, x):
        """``alpha * x`` (one rounding per entry)."""
        return alpha * x

    def factor(self, k: int) -> int:
        """The certified bound's factor under "dgemm": a real dot product's k roundings."""
        return max(k, 1)

    def part_stats(self, engine, fin, exps, plan, reduce_max, mags, reduce_sum=None):
        """The certificate's statistics of one operand (``reduce_sum``: of its rows' sums over every
        rank that holds a piece of them, where the statistics are made afresh)."""
        return certificate.operand_stats(engine, fin, exps, plan, reduce_max, reduce_sum or (lambda x: x),
                                         mags=None if mags is None else mags[:2])

    def certify(self, engine, c, lower, stats, e, f, plan, acc, support, **kwargs):
        """:func:`ozhpc.ozaki.certificate.certify_entries` (``lower`` / ``support``: the digit sums)."""
        lower, support = (None if s is None else s[0] for s in (lower, support))
        return certificate.certify_entries(engine, c, lower, stats, e, f, plan, acc, support, **kwargs)

    def scaled(self, xp, low, shift):
        """``final_scale`` of each entry's total ``low`` by ``shift``."""
        return final_scale(xp, low, shift)

    def epilogue(self, xp, ab, alpha, beta, c):
        """``alpha * ab + beta * c``, each operation rounded separately, as BLAS defines it:
        ``c`` is not read when beta == 0, and ``ab`` is not used when alpha == 0 (so inf/NaN in
        op(A) op(B) do not reach the result). A zero result is +0.0 (a BLAS adds the products to
        +0.0 or to ``beta * c``), also when ``alpha < 0``."""
        if alpha == 0.0:
            if beta == 0.0:
                return xp.zeros_like(ab)
            return c.copy() if beta == 1.0 else beta * c
        if alpha == 1.0 and beta == 0.0:
            return ab   # every combine ends in final_scale, whose zeros are +0.0 already: no pass over C
        out = ab if alpha == 1.0 else alpha * ab
        if beta != 0.0:
            out = out + (c if beta == 1.0 else beta * c)
        return out + 0.0


REAL = RealDomain()


def _parts(z):
    return z.real, z.imag


def _times(xp, alpha, z):
    """``alpha * z`` by the schoolbook rule, every product and sum rounded apart (NumPy's and
    CuPy's own complex multiply may fuse them): ``(ar zr - ai zi, ar zi + ai zr)``."""
    ar, ai = float(alpha.real), float(alpha.imag)
    zr, zi = _parts(z)
    if ai == 0.0:
        return special.assemble(xp, ar * zr, ar * zi)
    re, im = ar * zr, ar * zi
    re = re - ai * zi
    im = im + ai * zr
    return special.assemble(xp, re, im)


class ComplexDomain(RealDomain):
    """Complex operands (complex128 rows, C-ordered: their parts are a real array of twice the width)."""

    complex = True
    dtype = "complex128"
    digit_planes = 2
    width = 2

    def operand(self, xp, x):
        return xp.ascontiguousarray(x, dtype=xp.complex128)

    def realified(self, x):
        return x.view(x.real.dtype).reshape(x.shape[0], 2 * x.shape[1])

    def finite(self, xp, x, nonfinite=None):
        return special.finite_parts(xp, x, nonfinite)

    def magnitudes(self, engine, fin, exps, upper: bool = False):
        xp = engine.xp
        return xp.concatenate([engine.magnitudes(part, exps, upper=upper) for part in _parts(fin)])   # strided views

    def codes(self, xp, x):
        return special.classify_parts(xp, x)

    def zeros_counts(self, xp, m: int, n: int):
        return special.zeros_complex_counts(xp, m, n)

    def add_counts(self, xp, counts, codes_a, codes_b) -> None:
        special.accumulate_complex_counts(xp, counts, codes_a, codes_b)

    def apply_counts(self, xp, c, counts):
        return special.apply_complex_counts(xp, c, counts)

    forms = COMPLEX_FORM

    def inner_stats(self, engine, rows):
        """Of both parts of each complex column together (one shift scales both)."""
        stats = engine.inner_stats(self.realified(rows))
        return stats.reshape(2, rows.shape[1], 2).max(axis=2)

    def ldexp_columns(self, xp, rows, shifts):
        return special.assemble(xp, *(certificate.ldexp_columns(xp, part, shifts) for part in _parts(rows)))

    def times(self, xp, alpha, x):
        return _times(xp, complex(alpha), x)

    def factor(self, k: int) -> int:
        """Native ZGEMM's per component: each complex product's two real products and their sum,
        then k - 1 additions."""
        return max(k, 1) + 1

    def part_stats(self, engine, fin, exps, plan, reduce_max, mags, reduce_sum=None):
        """Both parts' statistics together from the measured row sizes; each part's, SUM-reduced over
        the row's ranks, only where the term-by-term check needs them."""
        return complex_certificate.part_stats(engine, fin, exps, plan, reduce_max, reduce_sum, mags=mags)

    def certify(self, engine, c, lower, stats, e, f, plan, acc, support, **kwargs):
        return complex_certificate.certify_complex_entries(engine, c, lower, stats, e, f, plan, acc, support, **kwargs)

    def scaled(self, xp, low, shift):
        return special.assemble(xp, *(final_scale(xp, part, shift) for part in _parts(low)))

    def epilogue(self, xp, ab, alpha, beta, c):
        """As :meth:`RealDomain.epilogue`, with complex alpha, beta and C multiplied part by part."""
        alpha, beta = complex(alpha), complex(beta)
        if alpha == 0:
            if beta == 0:
                return xp.zeros_like(ab)
            return c.copy() if beta == 1 else _times(xp, beta, c)
        if alpha == 1 and beta == 0:
            return ab
        out = ab if alpha == 1 else _times(xp, alpha, ab)
        if beta != 0:
            add = c if beta == 1 else _times(xp, beta, c)
            out = special.assemble(xp, out.real + add.real, out.imag + add.imag)
        return special.assemble(xp, out.real + 0.0, out.imag + 0.0)


COMPLEX = ComplexDomain()


def domain_of(*arrays) -> RealDomain:
    """:data:`COMPLEX` when any of the operands is a complex array, else :data:`REAL` (a complex
    alpha, beta or C alone makes only the epilogue complex: op(A) op(B) is real)."""
    return COMPLEX if any(getattr(x, "dtype", None) is not None and x.dtype.kind == "c" for x in arrays) else REAL
