"""Hostile input never gives a traceback: every field of a valid run report and every key of a
valid job file deleted, set to a wrong type, to a huge integer, to a NUL, or nested thousands
deep, and every integer option given hundreds of digits, ends in exit 0 or in exactly one
stderr line and exit 2. In-process (cli.main) for speed, with a few subprocess checks of the
real exit status."""
from __future__ import annotations

import copy
import json

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
    from ozhpc.config import RunConfig
    from ozhpc.io.h5io import DatasetRef

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
REPORT_VALUES = [MISSING, None, "x", "", True, 0, -1, 1.5, BIG, -BIG, [], {}, [1, 2, 3], {"a": 1},
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


def test_the_report_command_of_a_real_report_is_unchanged(report, tmp_path, capsys):
    doc, _ = report
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    code, err = outcome(["report", path], capsys)
    assert (code, err) == (0, [])
