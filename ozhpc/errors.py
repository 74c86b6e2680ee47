"""Errors that mean "the user asked for something that cannot be done" (CLI exit code 2), and the
accuracy certificate's error and warning (exit code 3 under ``--accuracy strict``)."""
from __future__ import annotations

import math
import re


class InputError(ValueError):
    """Bad input: a missing file or dataset, a wrong shape or dtype, a bad option.

    The message names the file, dataset, shape or option at fault.
    """


def require_c(beta: float, c) -> None:
    """The Python API's one check that ``beta != 0`` has a C to read (``ozhpc.gemm``,
    ``dist_gemm`` and ``Summa.__call__``, before the compute); the command line and job files
    learn it, in their spelling, from :class:`ozhpc.run.config.RunConfig`."""
    if beta != 0.0 and c is None:
        raise InputError("beta != 0 needs C")


def scalars(alpha, beta) -> tuple:
    """``alpha`` and ``beta`` as floats, or complex numbers where their imaginary part is not 0 (the
    product's epilogue is then complex), or one TypeError naming the one that is not a number,
    before the compute rather than from NumPy after it."""
    return tuple(_scalar(name, value) for name, value in (("alpha", alpha), ("beta", beta)))


def _scalar(name: str, value):
    import numbers

    kind = getattr(getattr(value, "dtype", None), "kind", None)
    scalar_array = getattr(value, "ndim", None) == 0
    if isinstance(value, complex) or (scalar_array and kind == "c"):
        real, imag = (finite_or_named(name, part, value) for part in (value.real, value.imag))
        return complex(real, imag) if imag else real
    if not (isinstance(value, numbers.Real) or (scalar_array and kind in tuple("fiub"))):
        raise TypeError(f"{name} must be a real or complex number, got {type(value).__name__} {value!r}")
    return finite_or_named(name, value)


TRANS_MODES = ("N", "T", "C")
"""BLAS's op(X): X, its transpose, its conjugate transpose."""


def trans_mode(value, name: str = "trans") -> str:
    """``value`` as "N", "T" or "C": a bool (True: "T") or one of those letters, any case; else one
    TypeError / ValueError naming ``name``."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)) or value is None:
        return "T" if value else "N"
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a bool or one of 'N', 'T', 'C', got {type(value).__name__} {value!r}")
    if value.upper() not in TRANS_MODES:
        raise ValueError(f"{name} must be a bool or one of 'N', 'T', 'C' (BLAS: as is, transposed, conjugate "
                         f"transposed), got {shown(value)}")
    return value.upper()


def finite_or_named(name: str, value, whole=None) -> float:
    """``float(value)``, or a ValueError naming ``name`` for a finite number beyond FP64's range (an
    integer, whose OverflowError names nothing; a long double, which float() makes inf). ``whole``:
    the complex number ``value`` is a part of, as the message quotes it."""
    import numpy as np

    try:
        with np.errstate(over="ignore"):
            out = float(value)
    except OverflowError:
        out = None
    if out is None or (math.isinf(out) and out != value):
        raise ValueError(f"{name} must be within FP64's range, got {shown(value if whole is None else whole)}")
    return out


LONG_DIGITS = 30
"""A number typed with more digits than this is named by its length in messages (it may have thousands)."""


def digit_count(value) -> int | None:
    """How many digits an integer (or the text of one) has when that is more than :data:`LONG_DIGITS`."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) < 10**LONG_DIGITS:
            return None
        try:
            return len(str(abs(value)))
        except ValueError:  # past Python's limit on decimal digits: from the bit length
            return int(abs(value).bit_length() * 0.30103) + 1
    core = value.strip().lstrip("+-").replace("_", "") if isinstance(value, str) else ""
    return len(core) if core.isdigit() and len(core) > LONG_DIGITS else None


def shown(value) -> str:
    """A user's value as a message quotes it: text as repr, a number as written, but a number of
    more than :data:`LONG_DIGITS` digits by its length and a long text cut short."""
    digits = digit_count(value)
    if digits:
        return f"a {digits}-digit integer"
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else f"{value[:40]!r}... ({len(value)} characters)"
    return str(value)


_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_]*)(=[^{}]*)?\}")


def _render(template: str, spell) -> str:
    """``{name}`` -> the option, ``{name=value}`` -> an option with its value, ``{=value}`` ->
    a value alone, each as ``spell(name, value)`` writes it; ``{{`` and ``}}`` are braces
    (:func:`literal`)."""
    def one(m):
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        if not (m.group(1) or m.group(2)):
            return m.group(0)  # "{}": a user's value quoted in the message, not a placeholder
        return spell(m.group(1), m.group(2)[1:] if m.group(2) else None)
    return _PLACEHOLDER.sub(one, template)


def literal(text) -> str:
    """A user's text (a file name, a dataset path) inside an :class:`OptionError` template, its
    braces kept as braces rather than read as placeholders."""
    return str(text).replace("{", "{{").replace("}", "}}")


def api_spelling(name: str, value: str | None = None) -> str:
    """Options as the Python API names them: ``slices``, ``slices=8``."""
    return value if not name else name if value is None else f"{name}={value}"


def cli_spelling(name: str, value: str | None = None) -> str:
    """Options as the command line writes them: ``--slices``, ``--slices 8``; a switch set,
    ``{force=True}``, is the flag alone, ``--force``."""
    if not name:
        return value
    flag = f"--{name.replace('_', '-')}"
    return flag if value in (None, "True") else f"{flag} {value}"


class OptionError(InputError):
    """A bad value of named options, worded once and spelled as the user wrote them.

    Every error below the command line that names an option is one of these, so that no message
    of the library speaks of command-line flags: the front end that reports it spells it.

    ``template`` names options as ``{slices}``, settings as ``{slices=8}`` and values as
    ``{=ozaki1}``; the command line spells them ``--slices 8``, a job file ``ozaki.slices = 8``,
    the API ``slices=8`` (:meth:`spelled`). The
    check lives where the fact is owned (e.g. :class:`ozhpc.ozaki.settings.OzakiSettings`);
    the CLI, job files and the API only choose the spelling.
    """

    def __init__(self, template: str, spell=api_spelling):
        self.template = template
        super().__init__(_render(template, spell))

    def spelled(self, spell) -> "OptionError":
        return OptionError(self.template, spell)


class AccuracyWarning(UserWarning):
    """"auto" could not certify every entry of C to its error bound (docs/numerics.md, "The
    guarantee"); C is still returned. ``accuracy="strict"`` makes this an :class:`AccuracyError`."""


class AccuracyError(RuntimeError):
    """"auto" with ``accuracy="strict"`` could not certify every entry of C (CLI exit code 3,
    nothing written). ``info`` is the product's :class:`ozhpc.GemmInfo`."""

    def __init__(self, message: str, info=None):
        super().__init__(message)
        self.info = info
