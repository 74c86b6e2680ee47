"""Hostile input never gives a traceback: every field of a valid run report and every key of a
valid job file deleted, set to a wrong type, to a huge integer, to a NUL, or nested thousands
deep, and every integer option given hundreds of digits, ends in exit 0 or in exactly one
stderr line and exit 2. In-process (cli.main) for speed, with a few subprocess checks of the
real exit status."""
from __future__ import annotations

import copy
import json
import math

import pytest
from mpi4py import MPI

from ozhpc import cli

from conftest import run_cli

COMM = MPI.COMM_SELF
HUGE = 10**5000 + 7      # past Python's int-to-text limit (4300 digits) too
BIG = 10**400
DEEP = 100_000


def nested(depth: int, leaf=1):
    """``[[[...leaf...]]]`` ``depth`` deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep_json(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def outcome(argv, capsys) -> tuple[int, list[str]]:
    """(exit status, stderr lines) of ``ozhpc ARGV`` in this process; any exception fails the test."""
    try:
        code = cli.main(list(map(str, argv)), comm=COMM)
    except SystemExit as exc:  # argparse's own exits
        code = exc.code
    return code, capsys.readouterr().err.splitlines()


def assert_clean(case, code, err):
    assert (code == 0) or (code == 2 and len(err) == 1), (case, code, err)
    assert not any("Traceback" in line for line in err), (case, err)


# ------------------------------------------------------------------------- run reports

@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A real report of a small run."""
    from ozhpc.commands.gemm import gemm
    from ozhpc.commands.gen import gen
    from ozhpc.io.h5io import DatasetRef
    from ozhpc.run.config import RunConfig

    d = tmp_path_factory.mktemp("report")
    gen(DatasetRef(str(d / "in.h5"), "/A"), (12, 9), seed=1)
    gen(DatasetRef(str(d / "in.h5"), "/B"), (9, 5), seed=2)
    rep = gemm(RunConfig(a=DatasetRef(str(d / "in.h5"), "/A"), b=DatasetRef(str(d / "in.h5"), "/B"),
                         out=DatasetRef(str(d / "out.h5"), "/C"), engine="numpy", progress="off",
                         report=str(d / "run.json")))
    return json.loads((d / "run.json").read_text()), rep


def field_paths(doc, prefix=()):
    """Every field of a JSON document (dicts and lists), as key paths."""
    if isinstance(doc, dict):
        items = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return
    for key, value in items:
        yield prefix + (key,)
        yield from field_paths(value, prefix + (key,))


MISSING = object()
REPORT_VALUES = [MISSING, None, "x", "", True, 0, -1, 2, 1.5, BIG, -BIG, [], {}, [1, 2, 3], {"a": 1},
                 float("nan"), float("inf"), nested(50)]


def mutated(doc, path, value):
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if value is MISSING:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


def report_cases(doc):
    for path in field_paths(doc):
        for value in REPORT_VALUES:
            if value is MISSING and isinstance(path[-1], int):
                continue
            yield path, value


def test_every_field_mutation_of_a_report_is_one_line_or_a_reading(report, tmp_path, capsys):
    doc, _ = report
    cases = list(report_cases(doc))
    assert len(cases) > 1500
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    two.write_text(json.dumps(doc))
    refused = 0
    for i, (path, value) in enumerate(cases):
        one.write_text(json.dumps(mutated(doc, path, value)))
        for argv in (["report", one], ["report", two, one] if i % 4 == 0 else None):
            if argv is None:
                continue
            code, err = outcome(argv, capsys)
            assert_clean((path, value, argv), code, err)
            if code == 2:
                refused += 1
                assert err[0].startswith(f"ozhpc report: error: report {str(one)!r}"), (path, value, err)
    assert refused > 100   # the checks did refuse


@pytest.mark.parametrize("field, value, message", [
    ("host", MISSING, "has no field 'host'"),
    ("seconds", None, "field 'seconds' must be an object, got null"),
    ("m", BIG, "field 'm' must be an integer from 0 to 9223372036854775807, got a 401-digit integer"),
    ("gflops", "x", "field 'gflops' must be a number, got string \"x\""),
])
def test_a_broken_report_names_its_field(report, tmp_path, capsys, field, value, message):
    doc, _ = report
    path = tmp_path / "r.json"
    path.write_text(json.dumps(mutated(doc, (field,), value)))
    assert outcome(["report", path], capsys) == (2, [f"ozhpc report: error: report {str(path)!r} {message}"])


@pytest.mark.parametrize("how, message", [
    ("deep", "is nested too deeply to be a run report"),
    ("huge", "holds an integer too large to be a run report's"),
])
def test_a_report_nested_too_deep_or_with_a_huge_integer_is_one_line(tmp_path, capsys, how, message):
    path = tmp_path / "r.json"
    path.write_text(deep_json(DEEP) if how == "deep" else '{"m": 1' + "0" * 5000 + "}")
    assert outcome(["report", path], capsys) == (2, [f"ozhpc report: error: report {str(path)!r} {message}"])
    r = run_cli(["report", path])
    assert (r.returncode, r.stderr.splitlines()) == (2, [f"ozhpc report: error: report {str(path)!r} {message}"])


@pytest.mark.parametrize("phase, value, got", [("total", -1.0, "number -1.0"), ("read", math.nan, "number nan"),
                                               ("write", -math.inf, "number -inf")])
def test_a_negative_or_nan_time_is_refused_read_or_compared(report, tmp_path, capsys, phase, value, got):
    """A time no run measures (below 0, NaN) is one line, whether the report is read or compared."""
    doc, _ = report
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(doc))
    bad.write_text(json.dumps(mutated(doc, ("seconds", phase), value)))
    line = f"ozhpc report: error: report {str(bad)!r} field 'seconds.{phase}' must be a number of seconds from 0 on, got {got}"
    for argv in (["report", bad], ["report", good, bad]):
        assert outcome(argv, capsys) == (2, [line])


def test_the_report_command_of_a_real_report_is_unchanged(report, tmp_path, capsys):
    doc, _ = report
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    code, err = outcome(["report", path], capsys)
    assert (code, err) == (0, [])


# ---------------------------------------------------------------------------- job files

JOB = {
    "inputs": {"a": '"in.h5:/A"', "b": '"in.h5:/B"', "c": '"in.h5:/C0"'},
    "output": {"c": '"out.h5:/C"', "report": '"run.json"', "force": "true"},
    "gemm": {"alpha": "1.0", "beta": "0.5", "transa": "false", "transb": "false"},
    "layout": {"grid": '"auto"', "block": "4", "panel": '"auto"'},
    "ozaki": {"scheme": '"ozaki2"', "bits": '"auto"', "guarantee": '"dgemm"', "accuracy": '"warn"',
              "engine": '"numpy"'},
    "run": {"progress": '"off"', "transport": '"auto"'},
    "summa": {"wire": '"auto"'},
}
JOB_VALUES = ['""', '"x"', '"in.h5\\u0000:/A"', '"a\\u0000b"', "{}", "[]", "true", "1.5", "-1", "0", "nan",
              "1" + "0" * 400, "-1" + "0" * 400, "1" + "0" * 5000, "[" * 3000 + "]" * 3000,
              "{a = " * 3000 + "1" + "}" * 3000, "1979-05-27", "[1, 2]", '{a = 1}']


def job_text(job: dict) -> str:
    return "".join(f"[{table}]\n" + "".join(f"{key} = {value}\n" for key, value in keys.items())
                   for table, keys in job.items())


def job_cases():
    for table, keys in JOB.items():
        yield f"{table}: deleted", {t: k for t, k in JOB.items() if t != table}
        for key in keys:
            yield f"{table}.{key}: deleted", {t: {k: v for k, v in ks.items() if (t, k) != (table, key)}
                                             for t, ks in JOB.items()}
            for value in JOB_VALUES:
                yield f"{table}.{key} = {value[:20]}", {t: {**ks, **({key: value} if t == table else {})}
                                                     for t, ks in JOB.items()}
    yield "a huge integer in a new table", {**JOB, "extra": {"x": "1" + "0" * 5000}}
    yield "nested 3000 deep at the top", {**JOB, "deep": {"x": "[" * 3000 + "]" * 3000}}


def test_every_key_mutation_of_a_job_file_is_one_line_or_a_run(jobdir, capsys):
    cases = list(job_cases())
    assert len(cases) > 400
    path = jobdir / "job.toml"
    runs = 0
    for case, job in cases:
        path.write_text(job_text(job))
        code, err = outcome(["run", path], capsys)
        assert_clean(case, code, err)
        runs += code == 0
        if code == 2:
            assert err[0].startswith("ozhpc run: error: "), (case, err)
    assert runs > 20   # the valid mutations did run


@pytest.mark.parametrize("key, value, message", [
    ("output.c", '"out.h5\\u0000:/C"', "output.c '{d}/out.h5\\x00:/C' must not contain a NUL character"),
    ("output.report", '"run\\u0000.json"', "output.report '{d}/run\\x00.json' must not contain a NUL character"),
    ("ozaki.accuracy", "{}", "ozaki.accuracy must be one of warn, strict, got {}"),
    ("layout.block", "[" * 3000 + "]" * 3000, "arrays or tables are nested too deeply for a job file"),
    ("gemm.alpha", "1" + "0" * 5000, "line 10: an integer of 5001 digits; TOML integers are 64-bit"),
    ("gemm.alpha", "1" + "0" * 400, "gemm.alpha must be a finite number, got integer of 401 digits"),
])
def test_a_hostile_job_file_names_the_file_and_key(jobdir, capsys, key, value, message):
    table, name = key.split(".")
    job = {t: {**ks, **({name: value} if t == table else {})} for t, ks in JOB.items()}
    path = jobdir / "job.toml"
    path.write_text(job_text(job))
    code, err = outcome(["run", path], capsys)
    assert (code, len(err)) == (2, 1) and err[0].startswith(f"ozhpc run: error: {path}: "), err
    assert err[0].endswith(": " + message.replace("{d}", str(jobdir))), err
    r = run_cli(["run", path])
    assert (r.returncode, r.stderr.splitlines()) == (2, err)
