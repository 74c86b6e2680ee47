"""TOML job files for ``ozhpc run JOB.toml``: parse, validate, build a :class:`RunConfig`.

A job file describes one product, the same one ``ozhpc gemm`` flags describe::

    [inputs]
    a = "in.h5:/A"
    b = "in.h5:/B"          # c = "c0.h5:/C" when beta != 0
    [output]
    c = "out.h5:/C"
    report = "run.json"
    [gemm]
    alpha = 1.0
    [layout]
    grid = "2x2"            # or "auto"
    block = 256             # or "MBxNB"
    [ozaki]
    scheme = "ozaki2"       # the default; or "ozaki1" (then slices / groups, not bits)
    bits = "auto"           # or an integer
    guarantee = "dgemm"     # what "auto" certifies per entry: "dgemm" (k u |A||B|) or "tight" (u |A||B|)
    accuracy = "warn"       # or "strict": a C that "auto" cannot certify is not written (exit 3)

Every error is an :class:`~ozhpc.errors.InputError` (CLI exit status 2) whose message
starts with the job file's path and names the table and key at fault, e.g.
``job.toml: gemm.alpha must be a number, got string "x"``. Relative paths are taken
relative to the job file's directory, so a job runs the same from any working directory.

Defaults are NOT declared here: a key left out is simply not passed to ``RunConfig``,
whose field defaults are the only ones. ``SCHEMA`` below is the single
list of allowed keys; ``docs/batch.md`` documents it.

Parsing has no side effects and no MPI calls, so every rank of a job can call
:func:`load_job` and reach the same verdict on the same file.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ..engines import ENGINE_NAMES
from ..errors import TRANS_MODES, InputError, OptionError, trans_mode
from ..io import h5io
from ..ozaki.settings import ACCURACY, GUARANTEES, SCHEMES, OzakiSettings, option_value
from ..parallel.transport_names import TRANSPORT_NAMES
from ..parallel.wire import WIRE_NAMES
from .config import MAX_RANKS, RunConfig, parse_pair, parse_path
from .named_files import read_regular
from .progress import MODES as PROGRESS_MODES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


# ---------------------------------------------------------------- value checkers
# Each takes (value, "table.key") and returns the RunConfig value or raises InputError
# (without the file prefix, which load_job adds).

def _toml_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__  # dates and times


def _toml_repr(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{...}"
    if isinstance(value, list):
        return "[...]"
    if isinstance(value, int) and abs(value) >= 10**40:
        return f"of {len(str(abs(value)))} digits"
    return str(value)


def _got(value) -> str:
    return f"got {_toml_type(value)} {_toml_repr(value)}"


def _boolean(value, key):
    if not isinstance(value, bool):
        raise InputError(f"{key} must be true or false, {_got(value)}")
    return value


def _number(value, key):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{key} must be a number, {_got(value)}")
    try:
        return float(value)
    except OverflowError:
        raise InputError(f"{key} must be a finite number, {_got(value)}") from None


def _trans(value, key):
    """BLAS's op: true / false (T / N) or "N", "T", "C" (conjugate transposed), any case
    (:func:`ozhpc.errors.trans_mode`'s rule, in the job file's words)."""
    if isinstance(value, bool) or (isinstance(value, str) and value.upper() in TRANS_MODES):
        return trans_mode(value, key)
    raise InputError(f"{key} must be true, false, \"N\", \"T\" or \"C\", {_got(value)}")


def _scalar(value, key):
    """A real number, or a complex one as a string (``"1+2j"``: TOML has no complex numbers)."""
    from .config import looks_complex, parse_scalar

    return parse_scalar(value, key) if looks_complex(value) else _number(value, key)


def _string(value, key):
    if not isinstance(value, str):
        raise InputError(f"{key} must be a string, {_got(value)}")
    return value


def _file(value, key):
    """A file path: a string, not empty, without NUL (:func:`~ozhpc.run.config.parse_path`)."""
    return parse_path(_string(value, key), key)


def _choice(*choices):
    def check(value, key):
        if not isinstance(value, str) or value not in choices:
            allowed = ", ".join(json.dumps(c) for c in choices)
            raise InputError(f"{key} must be one of {allowed}, {_got(value)}")
        return value
    check.choices = choices  # what docs/batch.md lists (tests/test_docs.py)
    return check


def _dataset(value, key):
    if not isinstance(value, str):
        raise InputError(f"{key} must be a string \"FILE.h5:/dataset\", {_got(value)}")
    return h5io.DatasetRef.parse(value, key)


def _grid(value, key):
    if value == "auto":
        return None
    if isinstance(value, str):
        return parse_pair(value, key, MAX_RANKS)
    raise InputError(f"{key} must be \"auto\" or a string \"PxQ\", {_got(value)}")


def _block(value, key):
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise InputError(f"{key} must be positive, got integer {value}")
        return (value, value)
    if isinstance(value, str):
        return parse_pair(value, key)
    raise InputError(f"{key} must be an integer NB or a string \"MBxNB\", {_got(value)}")


def _panel(value, key):
    if value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{key} must be \"auto\" or a positive integer, {_got(value)}")
    return value  # RunConfig checks that it is positive


def _count(name):
    """``ozaki.slices`` / ``groups`` / ``bits``: a TOML integer or string, checked by the
    Ozaki settings (the one place that knows their ranges)."""
    words = {"groups": '"auto", "all"'}.get(name, '"auto"')

    def check(value, key):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise InputError(f"{key} must be {words} or an integer, {_got(value)}")
        return option_value(name, value)
    return check


def _accuracy(value, key):
    """``ozaki.accuracy``: checked by the Ozaki settings, as ``--accuracy`` and the API are."""
    return OzakiSettings(accuracy=value).accuracy


_accuracy.choices = ACCURACY


@dataclass(frozen=True)
class Key:
    field: str                       # RunConfig field it sets
    check: Callable[[Any, str], Any]
    required: bool = False
    path: bool = False               # a file path: made relative to the job file's directory
    doc: str = ""


#: Every table and key a job file may hold. The single source for validation and docs.
SCHEMA: dict[str, dict[str, Key]] = {
    "inputs": {
        "a": Key("a", _dataset, required=True, path=True, doc="left operand A"),
        "b": Key("b", _dataset, required=True, path=True, doc="right operand B"),
        "c": Key("c", _dataset, path=True, doc="input C, read (and required) only when gemm.beta != 0"),
    },
    "output": {
        "c": Key("out", _dataset, required=True, path=True, doc="where C is written (a temporary dataset renamed when complete)"),
        "report": Key("report", _file, path=True, doc="JSON run report (never an input or output file)"),
        "force": Key("force", _boolean, doc="replace an existing output dataset and report"),
    },
    "gemm": {
        "transa": Key("transa", _trans, doc="op(A): false/\"N\" A, true/\"T\" A transposed, \"C\" conjugate transposed"),
        "transb": Key("transb", _trans, doc="op(B): false/\"N\" B, true/\"T\" B transposed, \"C\" conjugate transposed"),
        "alpha": Key("alpha", _scalar, doc="scale of op(A) op(B): a number, or a complex one as a string (\"1+2j\")"),
        "beta": Key("beta", _scalar, doc="scale of the input C: a number, or a complex one as a string"),
    },
    "layout": {
        "grid": Key("grid", _grid, doc="process grid \"PxQ\" or \"auto\""),
        "block": Key("block", _block, doc="block-cyclic block NB or \"MBxNB\""),
        "panel": Key("panel", _panel, doc="SUMMA k-panel width, or \"auto\"; never changes C"),
    },
    "ozaki": {
        "scheme": Key("scheme", _choice(*SCHEMES), doc="Ozaki scheme: \"ozaki2\" (CRT; the default) or \"ozaki1\" "
                                                       "(slices; the default when slices or groups is given)"),
        "slices": Key("slices", _count("slices"), doc="scheme ozaki1: int8 slices per operand, or \"auto\""),
        "groups": Key("groups", _count("groups"), doc="scheme ozaki1: slice-pair groups kept: \"auto\", \"all\" or an integer"),
        "bits": Key("bits", _count("bits"), doc="scheme ozaki2: integer bits per entry (8..100), or \"auto\""),
        "guarantee": Key("guarantee", _choice(*GUARANTEES), doc="what \"auto\" certifies per entry: \"dgemm\" "
                                                                "(k u |A||B|, the default) or \"tight\" (u |A||B|)"),
        "accuracy": Key("accuracy", _accuracy, doc="a C that \"auto\" cannot certify: \"warn\" (written, "
                                                   "with a warning) or \"strict\" (exit 3, nothing written)"),
        "engine": Key("engine", _choice(*ENGINE_NAMES), doc="local engine"),
    },
    "run": {
        "progress": Key("progress", _choice(*PROGRESS_MODES), doc="rank-0 progress display"),
        "transport": Key("transport", _choice(*TRANSPORT_NAMES),
                         doc="how SUMMA moves slice panels"),
    },
    "summa": {
        "wire": Key("wire", _choice(*WIRE_NAMES), doc="SUMMA panels as \"fp64\" (split on arrival) or int8 "
                                                      "\"planes\", or \"auto\"; never changes C"),
    },
}


JOB_KEYS = {key: f"{table}.{key}" for table in reversed(SCHEMA) for key in SCHEMA[table]}
"""Option name -> job key (``panel`` -> ``layout.panel``; ``c`` -> ``inputs.c``)."""


def job_spelling(name: str, value: str | None = None) -> str:
    """Options as a job file writes them: ``ozaki.slices``, ``ozaki.slices = 8``, ``"ozaki1"``."""
    def toml(text):
        if text in ("True", "False"):  # a switch: ``output.force = true``
            return text.lower()
        try:
            float(text)
            return text
        except ValueError:
            return json.dumps(text)
    if not name:
        return toml(value)
    key = JOB_KEYS.get(name, name)
    return key if value is None else f"{key} = {toml(value)}"


def _suggest(name: str, candidates, spell) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {spell(close[0])}?)" if close else ""


def _resolve(value: str, base: str, is_dataset: bool) -> str:
    """Make the file part of ``value`` relative to ``base`` (``~`` expanded; absolute kept)."""
    if is_dataset:
        file, sep, path = value.rpartition(":")
        if not (sep and file):
            return value  # malformed: DatasetRef.parse says so
        return f"{os.path.normpath(os.path.join(base, os.path.expanduser(file)))}:{path}"
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def parse_job(text: str, source: str = "<job>", base_dir: str = ".") -> dict:
    """Validate a job file's text; returns the RunConfig keyword arguments it sets.

    Raises
    ------
    InputError
        Syntax error (with line and column), unknown table or key (with the close match),
        wrong type or value, missing required key, beta != 0 without inputs.c, an accuracy
        key of the other scheme (ozaki.slices/groups with "ozaki2", ozaki.bits with "ozaki1").
    """
    def fail(message):
        return InputError(f"{source}: {message}")

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise fail(f"TOML syntax error: {exc}") from None
    except RecursionError:
        raise fail("arrays or tables are nested too deeply for a job file") from None
    except ValueError:  # an integer past Python's limit on decimal digits
        raise fail(_huge_integer(text)) from None

    kwargs: dict[str, Any] = {}
    for table, content in doc.items():
        if table not in SCHEMA:
            raise fail(f"unknown table [{table}]{_suggest(table, SCHEMA, lambda t: f'[{t}]')}; "
                       f"allowed tables: {', '.join('[' + t + ']' for t in SCHEMA)}")
        if not isinstance(content, dict):
            raise fail(f"{table} must be a table [{table}], {_got(content)}")
        for key, value in content.items():
            spec = SCHEMA[table].get(key)
            if spec is None:
                raise fail(f"unknown key {table}.{key}{_suggest(key, SCHEMA[table], lambda k: f'{table}.{k}')}; "
                           f"allowed in [{table}]: {', '.join(SCHEMA[table])}")
            name = f"{table}.{key}"
            if spec.path and isinstance(value, str) and value:   # "" is refused as it is, not as the directory
                value = _resolve(value, base_dir, spec.check is _dataset)
            try:
                kwargs[spec.field] = spec.check(value, name)
            except OptionError as exc:
                raise fail(exc.spelled(job_spelling)) from None
            except InputError as exc:
                raise fail(str(exc)) from None

    for table, keys in SCHEMA.items():
        for key, spec in keys.items():
            if spec.required and spec.field not in kwargs:
                hint = "" if table in doc else f" (the file has no [{table}] table)"
                raise fail(f"missing required key {table}.{key}{hint}")

    if kwargs.get("beta", 0.0) == 0.0:
        kwargs.pop("c", None)  # never read when beta == 0
    return kwargs


def _huge_integer(text: str) -> str:
    """Where the integer too long to read is (tomllib says only that one is)."""
    for number, line in enumerate(text.splitlines(), 1):
        found = max(re.findall(r"[0-9_]+", line), key=len, default="")
        if len(found) > 1000:
            return f"line {number}: an integer of {len(found.replace('_', ''))} digits; TOML integers are 64-bit"
    return "an integer too long to read; TOML integers are 64-bit"


def check_inputs(kwargs: dict, source: str) -> None:
    """Every input exists and is a 2-D real dataset (read-only checks, via h5io)."""
    for table_key, field in (("inputs.a", "a"), ("inputs.b", "b"), ("inputs.c", "c")):
        ref = kwargs.get(field)
        if ref is None:
            continue
        try:
            h5io.dataset_info(ref, table_key)
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None


def load_job(path, *, comm=None, check_files: bool = True, **overrides) -> RunConfig:
    """Read, validate and resolve the job file ``path``; returns the run's :class:`RunConfig`.

    Parameters
    ----------
    path : str or os.PathLike
        The TOML job file. Relative paths inside it are relative to its directory.
    comm : mpi4py communicator, optional
        Under MPI: the ranks agree on the verdict (one allgather), so a file that only some
        ranks cannot see fails every rank alike instead of leaving the others waiting.
    check_files : bool
        Also check that every input file and dataset exists and is a 2-D real matrix.
    **overrides
        RunConfig fields that replace the job file's values (e.g. ``force=True`` or
        ``report="other.json"`` from the command line). ``None`` values are ignored.

    Returns
    -------
    RunConfig

    Raises
    ------
    InputError
        With a message that starts with the job file's path and names the table and key.
    """
    from ..parallel.collective import collective_errors

    with collective_errors(comm, catch=InputError):
        cfg = _load(os.fspath(path), check_files, overrides)
        if comm is not None:
            _check_grid(os.fspath(path), cfg, comm.Get_size())
    return cfg


def _check_grid(source: str, cfg: RunConfig, ranks: int) -> None:
    """The job's layout.grid must match the ranks it runs on (named as the job file names it)."""
    if cfg.grid is not None and cfg.grid[0] * cfg.grid[1] != ranks:
        p, q = cfg.grid
        raise InputError(f"{source}: layout.grid = \"{p}x{q}\" needs {p * q} MPI ranks, but the job has "
                         f"{ranks} (run with mpiexec/srun -n {p * q}, or set grid = \"auto\")")


def _load(source: str, check_files: bool, overrides: dict) -> RunConfig:
    raw = read_regular(source, f"job file {source!r}")
    try:
        text = raw.decode("utf-8-sig")   # a leading byte-order mark (some editors write one) is not TOML
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text ({exc})") from None

    kwargs = parse_job(text, source, os.path.dirname(os.path.abspath(source)))
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    try:
        cfg = RunConfig(**kwargs)
    except OptionError as exc:
        raise InputError(f"{source}: {exc.spelled(job_spelling)}") from None
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
    if cfg.report and h5io.same_file(cfg.report, source):
        raise InputError(f"{source}: the report {cfg.report!r} is this job file; choose another report path")
    if check_files:
        check_inputs(kwargs, source)
    return cfg
