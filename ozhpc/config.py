"""One frozen description of a run, built from CLI flags or a job file; defaults live here only."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .engines.crt import MAX_BITS, MIN_BITS
from .errors import InputError
from .io.h5io import DatasetRef
from .ozaki.plan import SCHEMES


def parse_slices(text) -> int | str:
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise InputError(f"--slices must be 'auto' or an integer, got {text!r}") from None
    if not 1 <= value <= 24:
        raise InputError(f"--slices must be between 1 and 24, got {value}")
    return value


def parse_groups(text) -> int | str:
    if text in ("auto", "all"):
        return text
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise InputError(f"--groups must be 'auto', 'all' or an integer, got {text!r}") from None
    if value < 1:
        raise InputError(f"--groups must be at least 1, got {value}")
    return value


def parse_bits(text) -> int | str:
    """``--bits`` (scheme ozaki2): integer bits per operand entry, or 'auto'."""
    if text == "auto":
        return "auto"
    if isinstance(text, bool):
        raise InputError(f"--bits must be 'auto' or an integer, got {text!r}")
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise InputError(f"--bits must be 'auto' or an integer, got {text!r}") from None
    if not MIN_BITS <= value <= MAX_BITS:
        raise InputError(f"--bits must be between {MIN_BITS} and {MAX_BITS}, got {value}")
    return value


def scheme_conflict(scheme, slices, groups, bits, *, job: bool = False) -> str | None:
    """The one message for accuracy options that do not belong to ``scheme``, or None.

    Scheme ozaki1 is tuned by ``slices``/``groups`` and ozaki2 by ``bits``; the others must
    stay "auto". ``job``: spell the options as job-file keys (``ozaki.slices = 8``) instead
    of command-line flags (``--slices 8``).
    """
    def option(name):
        return f"ozaki.{name}" if job else f"--{name}"

    def setting(name, value):
        return f"ozaki.{name} = {json.dumps(value)}" if job else f"--{name} {value}"

    if scheme == "ozaki2":
        given = [setting(name, value) for name, value in (("slices", slices), ("groups", groups))
                 if value not in ("auto", None)]
        if given:
            one = len(given) == 1
            return (f"{' and '.join(given)} {'is an option' if one else 'are options'} of "
                    f"{setting('scheme', 'ozaki1')}; with {setting('scheme', 'ozaki2')} leave "
                    f"{'it' if one else 'them'} out and set the accuracy with {option('bits')}")
    elif bits not in ("auto", None):
        return (f"{setting('bits', bits)} needs {setting('scheme', 'ozaki2')} (the scheme here is "
                f"{json.dumps(scheme) if job else scheme}, whose accuracy is set by {option('slices')})")
    return None


def parse_panel(text) -> int | None:
    """``--panel``: SUMMA's k-panel width, a positive integer, or 'auto' (None)."""
    if text in (None, "auto"):
        return None
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise InputError(f"--panel must be 'auto' or a positive integer, got {text!r}") from None
    if value < 1:
        raise InputError(f"--panel must be positive, got {value}")
    return value


def parse_pair(text, option: str) -> tuple[int, int]:
    """``"N"`` -> (N, N); ``"MxN"`` -> (M, N); positive integers only."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?", str(text))
    if not match:
        raise InputError(f"{option} must be N or MxN with positive integers, got {text!r}")
    first = int(match.group(1))
    second = int(match.group(2)) if match.group(2) else first
    if first < 1 or second < 1:
        raise InputError(f"{option} must be positive, got {text!r}")
    return first, second


@dataclass(frozen=True)
class RunConfig:
    """Everything ``ozhpc gemm`` / ``ozhpc run`` needs; built once, passed down."""

    a: DatasetRef
    b: DatasetRef
    out: DatasetRef
    c: DatasetRef | None = None
    report: str | None = None
    transa: bool = False
    transb: bool = False
    alpha: float = 1.0
    beta: float = 0.0
    grid: tuple[int, int] | None = None  # None: near-square from the rank count
    block: tuple[int, int] = (256, 256)
    scheme: str = "ozaki1"   # "ozaki1" (int8 digit slices) or "ozaki2" (CRT, int8 moduli)
    slices: int | str = "auto"  # scheme ozaki1 only
    groups: int | str = "auto"  # scheme ozaki1 only
    bits: int | str = "auto"    # scheme ozaki2 only
    engine: str = "auto"
    transport: str = "auto"  # "auto", "nccl", "cuda-mpi", "mpi-host" (ozhpc.parallel.transport)
    kb: int | None = None    # SUMMA k-panel width; None: NB on CPUs, min(4096, k / max(P, Q)) on GPUs
    force: bool = False
    progress: str = "auto"  # "auto" (bar on a terminal, log lines otherwise), "bar", "log", "off"
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise InputError(f"scheme must be {' or '.join(SCHEMES)}, got {self.scheme!r}")
        if self.bits != "auto" and (isinstance(self.bits, bool) or not isinstance(self.bits, int)):
            raise InputError(f"--bits must be 'auto' or an integer, got {self.bits!r}")
        parse_bits(self.bits)  # the range
        conflict = scheme_conflict(self.scheme, self.slices, self.groups, self.bits)
        if conflict:
            raise InputError(conflict)
        if isinstance(self.slices, int) and isinstance(self.groups, int) and self.groups > 2 * self.slices - 1:
            raise InputError(f"--groups {self.groups} is more than the {2 * self.slices - 1} groups that "
                             f"{self.slices} slices have (at most 2*slices-1)")
        if self.beta != 0.0 and self.c is None:
            raise InputError("beta != 0 needs an input C (--c FILE.h5:/C)")
        if self.engine not in ("auto", "numpy", "cutile"):
            raise InputError(f"engine must be auto, numpy or cutile, got {self.engine!r}")
        if self.transport not in ("auto", "nccl", "cuda-mpi", "mpi-host"):
            raise InputError(f"transport must be auto, nccl, cuda-mpi or mpi-host, got {self.transport!r}")
        if self.kb is not None and (not isinstance(self.kb, int) or self.kb < 1):
            raise InputError(f"--panel must be a positive integer, got {self.kb!r}")
        if self.progress not in ("auto", "bar", "log", "off"):
            raise InputError(f"progress must be auto, bar, log or off, got {self.progress!r}")

    def describe(self) -> dict:
        """The configuration as plain JSON-able values (for the report)."""
        return {
            "a": str(self.a), "b": str(self.b), "c": str(self.c) if self.c else None,
            "out": str(self.out), "transa": self.transa, "transb": self.transb,
            "alpha": self.alpha, "beta": self.beta,
            "grid": list(self.grid) if self.grid else "auto", "block": list(self.block),
            "scheme": self.scheme, "slices": self.slices, "groups": self.groups, "bits": self.bits,
            "engine": self.engine,
            "transport": self.transport, "kb": self.kb if self.kb is not None else "auto",
        }
