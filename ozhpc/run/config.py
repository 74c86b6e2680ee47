"""One frozen description of a run, built from CLI flags or a job file; defaults live here only.

A front end passes ``None`` for an option the user left out and :class:`RunConfig` fills in its
default; ``ozhpc gemm --help`` states the defaults it reads here (:meth:`RunConfig.default`)."""
from __future__ import annotations

import cmath
import math
import os
import re
from dataclasses import MISSING, dataclass, fields

# The choices and parsers of the options (DatasetRef, ENGINE_NAMES, SCHEMES, DEFAULT_SCHEME, GUARANTEES, ACCURACY,
# option_value, TRANSPORT_NAMES, WIRE_NAMES, PROGRESS_MODES) are also what cli.py builds its parser
# from: it takes them here, never from the layers below.
from ..engines import ENGINE_NAMES
from ..errors import InputError, OptionError, digit_count, shown, trans_mode
from ..io.h5io import DatasetRef
from ..ozaki.settings import (ACCURACY, DEFAULT_GUARANTEE, DEFAULT_SCHEME, GUARANTEES, SCHEMES, OzakiSettings,
                               option_value)  # noqa: F401  (re-exported: cli)
from ..parallel.transport_names import TRANSPORT_NAMES
from ..parallel.wire import WIRE_NAMES
from .progress import MODES as PROGRESS_MODES


MAX_BLOCK = 2**31 - 1
"""Largest block size and k-panel width: MPI and HDF5 count in C ints (a block larger than the
matrix is one block: it means the same as the matrix's extent)."""
MAX_EXTENT = 2**63 - 1
"""Largest matrix extent (``--shape``, ``plan --m``): NumPy and HDF5 index in int64."""
MAX_RANKS = 2**31 - 1
"""Most MPI ranks (``--grid``, ``plan --gpus``): MPI counts them in C ints."""
MAX_SEED = 2**63 - 1
"""Largest random seed: ``ozhpc gen`` stores it as an int64 attribute."""
MAX_SAMPLES = 10**7
"""Most entries ``ozhpc check`` checks exactly (a list of them is drawn in memory; each costs
exact arithmetic over k)."""
MAX_PHI = 80.0
"""Largest exponent spread of ``ozhpc gen``: exp(phi * randn) stays finite (randn < 8.8)."""


def parse_int(text, option: str, lo: int, hi: int) -> int:
    """An integer option in [lo, hi] (CLI text or a job file's integer)."""
    if digit_count(text):
        raise InputError(f"{option} must be between {lo} and {hi}, got {shown(text)}")
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise InputError(f"{option} must be an integer, got {shown(text)}") from None
    if not lo <= value <= hi:
        raise InputError(f"{option} must be between {lo} and {hi}, got {value}")
    return value


def parse_float(text, option: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A finite number option in [lo, hi] (``inf`` and ``nan`` are not values of any option)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError(f"{option} must be a number, got {shown(text)}") from None
    if not math.isfinite(value):
        raise InputError(f"{option} must be a finite number, got {shown(text)}")
    if not lo <= value <= hi:
        raise InputError(f"{option} must be between {lo:g} and {hi:g}, got {value:g}")
    return value


def looks_complex(text) -> bool:
    """A string that ends as a complex number does (``1+2j``, ``-0.5i``)."""
    return isinstance(text, str) and text.strip().lower().rstrip(")").endswith(("j", "i"))


DECIMAL_LITERAL = re.compile(r"(\d*\.?\d+(?:\.\d*)?)(e[+-]?\d+)?", re.IGNORECASE)


def vanishing_literal(text) -> str | None:
    """The first number written in ``text`` with a nonzero digit that FP64 rounds to 0
    (``1e-400``), or None: such a scalar would silently be 0."""
    if not isinstance(text, str):
        return None
    for match in DECIMAL_LITERAL.finditer(text):
        if re.search(r"[1-9]", match.group(1)) and float(match.group(0)) == 0.0:
            return match.group(0)
    return None


def parse_scalar(text, option: str):
    """``--alpha`` / ``--beta``: a finite real number, or a complex one as Python writes it
    (``1+2j``, ``-0.5j``; ``i`` is taken for ``j``); a nonzero number written that FP64 rounds to 0
    is refused (it would drop the term)."""
    tiny = vanishing_literal(text)
    if tiny:
        raise InputError(f"{option} holds {tiny}, which is below FP64's smallest number (5e-324) and would be 0; "
                         "give 0 if that is meant")
    if looks_complex(text):
        try:
            value = complex(text.strip().lower().replace("i", "j").replace(" ", ""))
        except ValueError:
            raise InputError(f"{option} must be a real or complex number (such as 2 or 1+2j), got {shown(text)}") from None
        if not cmath.isfinite(value):
            raise InputError(f"{option} must be a finite number, got {shown(text)}")
        return value if value.imag else value.real
    return parse_float(text, option)


def op_value(mode: str):
    """transa / transb as the report and C's attributes hold them: false (N), true (T) or "C"."""
    return "C" if mode == "C" else mode == "T"


def json_scalar(value):
    """alpha / beta as JSON takes them: a float, or ``[re, im]`` for a complex number."""
    return [value.real, value.imag] if isinstance(value, complex) else value


def parse_panel(text) -> int | None:
    """The panel option's text: 'auto' (None) or an integer (RunConfig checks its range)."""
    if text in (None, "auto"):
        return None
    try:
        if digit_count(text):
            raise ValueError(text)
        return int(text)
    except (TypeError, ValueError):
        raise OptionError(f"{{panel}} must be 'auto' or an integer between 1 and {MAX_BLOCK}, got {shown(text)}") from None


def parse_pair(text, option: str, hi: int = MAX_EXTENT) -> tuple[int, int]:
    """``"N"`` -> (N, N); ``"MxN"`` -> (M, N); positive integers up to ``hi`` only."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?", str(text))
    if not match:
        raise InputError(f"{option} must be N or MxN with positive integers, got {shown(text)}")
    if any(len(part) > len(str(hi)) or int(part) > hi for part in match.groups() if part):
        raise InputError(f"{option} must be at most {hi}, got {shown(text)}")
    first = int(match.group(1))
    second = int(match.group(2)) if match.group(2) else first
    if first < 1 or second < 1:
        raise InputError(f"{option} must be positive, got {text!r}")
    return first, second


def parse_path(text, option: str) -> str:
    """A path option (``--report``, ``output.report``, ``--cache-dir``): a name, neither empty
    (which would otherwise mean "no report", the job file's directory or the default cache) nor
    blanks only (a name no one means) nor holding NUL (no file name does)."""
    if text == "":
        raise InputError(f"{option} must not be an empty path")
    if not text.strip():
        raise InputError(f"{option} {text!r} is blanks only; name a file or directory")
    if "\0" in text:
        raise InputError(f"{option} {text!r} must not contain a NUL character")
    return text


def _absolute(ref: DatasetRef) -> str:
    """``FILE.h5:/dataset`` with the file's absolute path (a report read elsewhere still names it)."""
    return f"{os.path.abspath(ref.file)}:{ref.path}"


@dataclass(frozen=True)
class RunConfig:
    """Everything ``ozhpc gemm`` / ``ozhpc run`` needs; built once, passed down."""

    a: DatasetRef
    b: DatasetRef
    out: DatasetRef
    c: DatasetRef | None = None
    report: str | None = None
    transa: str = "N"   # BLAS's op: "N", "T" or "C" (conjugate transposed); a bool is taken as "N" / "T"
    transb: str = "N"
    alpha: float | complex = 1.0
    beta: float | complex = 0.0
    grid: tuple[int, int] | None = None  # None: near-square from the rank count
    block: tuple[int, int] = (256, 256)
    scheme: str | None = None  # "ozaki2" (CRT, int8 moduli) or "ozaki1" (int8 digit slices); None: ozaki1
    #                            where slices / groups are given, else ozaki2 (OzakiSettings)
    slices: int | str = "auto"  # scheme ozaki1 only
    groups: int | str = "auto"  # scheme ozaki1 only
    bits: int | str = "auto"    # scheme ozaki2 only
    accuracy: str = ACCURACY[0]  # a failed certificate of "auto": "warn" (write C, say so) or "strict" (exit 3)
    guarantee: str = DEFAULT_GUARANTEE  # what "auto" certifies: "dgemm" (k u |A||B|) or "tight" (u |A||B|)
    engine: str = "auto"
    transport: str = "auto"  # "auto", "nccl", "cuda-mpi", "mpi-host" (ozhpc.parallel.transport)
    wire: str = "auto"       # SUMMA panels as "fp64" (split on arrival) or int8 "planes" (ozhpc.parallel.wire)
    panel: int | None = None  # SUMMA k-panel width (Summa's kb); None: min(1024 on CPUs / 4096 on GPUs, k / max(P, Q))
    force: bool = False
    dry_run: bool = False    # check everything and state the memory estimate; read and write nothing
    progress: str = "auto"  # "auto" (bar on a terminal, log lines otherwise), "bar", "log", "off"

    def __post_init__(self):
        """Options left out (None) take their defaults; then every option is checked once, here
        (job files re-spell the messages with their keys)."""
        for field in fields(self):
            if getattr(self, field.name) is None and field.default not in (None, MISSING):
                object.__setattr__(self, field.name, field.default)
        self._check()  # an OptionError in the API's words; the CLI and job files re-spell it

    @classmethod
    def default(cls, name: str):
        """The value an option left out takes (what ``--help`` states)."""
        return next(field.default for field in fields(cls) if field.name == name)

    @property
    def ozaki(self) -> OzakiSettings:
        return OzakiSettings(self.scheme, self.slices, self.groups, self.bits, self.accuracy, self.guarantee)

    def _check(self) -> None:
        self.ozaki  # noqa: B018 -- validates scheme, slices, groups, bits, accuracy, guarantee
        for name in ("transa", "transb"):
            try:
                object.__setattr__(self, name, trans_mode(getattr(self, name), name))
            except (TypeError, ValueError):
                raise OptionError(f"{{{name}}} must be N, T or C (or a boolean), got {shown(getattr(self, name))}") from None
        for name, value in (("alpha", self.alpha), ("beta", self.beta)):
            if not cmath.isfinite(value):
                raise OptionError(f"{{{name}}} must be a finite number, got {value}")
        if self.beta != 0.0 and self.c is None:
            raise OptionError(f"{{beta={self.beta:g}}} needs an input C: add {{c=FILE.h5:/C}}")
        for name, value, choices in (("engine", self.engine, ENGINE_NAMES),
                                     ("transport", self.transport, TRANSPORT_NAMES),
                                     ("wire", self.wire, WIRE_NAMES),
                                     ("progress", self.progress, PROGRESS_MODES)):
            if value not in choices:
                raise OptionError(f"{{{name}}} must be one of {', '.join(choices)}, got {value!r}")
        if self.panel is not None and (isinstance(self.panel, bool) or not isinstance(self.panel, int)
                                       or not 1 <= self.panel <= MAX_BLOCK):
            raise OptionError(f"{{panel}} must be 'auto' or an integer between 1 and {MAX_BLOCK}, got {shown(self.panel)}")
        if max(self.block) > MAX_BLOCK:
            raise OptionError(f"{{block}} must be at most {MAX_BLOCK}, got {'x'.join(map(shown, self.block))}")

    def describe(self) -> dict:
        """The configuration as plain JSON-able values (for the report)."""
        return {
            "a": _absolute(self.a), "b": _absolute(self.b), "c": _absolute(self.c) if self.c else None,
            "out": _absolute(self.out), "transa": op_value(self.transa), "transb": op_value(self.transb),
            "alpha": json_scalar(self.alpha), "beta": json_scalar(self.beta),
            "grid": list(self.grid) if self.grid else "auto", "block": list(self.block),
            "scheme": self.ozaki.scheme, "slices": self.slices, "groups": self.groups, "bits": self.bits,
            "accuracy": self.accuracy, "guarantee": self.guarantee, "engine": self.engine,
            "transport": self.transport, "wire": self.wire,
            "kb": self.panel if self.panel is not None else "auto",  # the report's name: the layout's kb
        }
