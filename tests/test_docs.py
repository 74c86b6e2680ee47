"""The docs say what the code does: every job key of docs/batch.md's table, with its type and
default, against ``ozhpc.run.jobfile.SCHEMA`` and ``ozhpc.run.config.RunConfig``; the defaults that
``ozhpc gemm --help`` states against RunConfig; the guarantee's cost in bits against its
measurement."""
from __future__ import annotations

import dataclasses
import pathlib
import re
import statistics

import pytest

from conftest import REPO
from ozhpc import cli
from ozhpc.errors import InputError, OptionError
from ozhpc.io.h5io import DatasetRef
from ozhpc.run.config import RunConfig
from ozhpc.run.jobfile import SCHEMA

DOCS = pathlib.Path(REPO) / "docs"
REQUIRED = dict(a=DatasetRef("a.h5", "/A"), b=DatasetRef("b.h5", "/B"), out=DatasetRef("c.h5", "/C"))
SAMPLE = {"boolean": True, "number": 1.5, "string": "x.h5:/X"}
"""A value of each documented type word (a dataset string is also a path)."""
PLACEHOLDERS = {"PxQ": "2x3", "MBxNB": "48x32", "FILE.h5:/dataset": "x.h5:/X"}
"""The docs' placeholders in strings, and a value of each."""


def job_key_table() -> dict[str, tuple[str, str]]:
    """``{"table.key": (type cell, default cell)}`` of docs/batch.md's job-key table."""
    text = (DOCS / "batch.md").read_text()
    section = text[text.index("## Job file reference"):]
    table = section[section.index("| key |"):]
    rows = {}
    for line in table[:table.index("\n\n")].splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def effective(cfg: RunConfig) -> dict:
    """A configuration's values as a run uses them (the scheme a None resolves to)."""
    return {**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}, "scheme": cfg.ozaki.scheme}


def toml_value(text: str):
    """A TOML literal of the docs (`"auto"`, `256`, `1.0`, `false`) as tomllib reads it."""
    import tomllib

    return tomllib.loads(f"v = {text}")["v"]


def accepts(spec, value, key) -> bool:
    try:
        spec.check(value, key)
    except (InputError, OptionError):
        return False
    return True


def test_the_job_key_table_lists_every_key_of_the_schema():
    documented = set(job_key_table())
    keys = {f"{table}.{key}" for table, entries in SCHEMA.items() for key in entries}
    assert (sorted(keys - documented), sorted(documented - keys)) == ([], [])


@pytest.mark.parametrize("name", sorted(job_key_table()))
def test_each_documented_default_is_the_codes(name):
    table, key = name.split(".")
    spec, (_, default) = SCHEMA[table][key], job_key_table()[name]
    field = next(f for f in dataclasses.fields(RunConfig) if f.name == spec.field)
    if default == "required":
        assert spec.required and field.default is dataclasses.MISSING
        return
    assert not spec.required
    if default == "none":
        assert field.default is None
        return
    value = spec.check(toml_value(re.match(r"`([^`]+)`", default).group(1)), name)
    assert effective(RunConfig(**REQUIRED, **{spec.field: value})) == effective(RunConfig(**REQUIRED)), default


@pytest.mark.parametrize("name", sorted(job_key_table()))
def test_each_documented_type_is_accepted_and_its_range_held(name):
    table, key = name.split(".")
    spec, (kind, _) = SCHEMA[table][key], job_key_table()[name]
    words = re.findall(r'`"([^"`]+)"`', kind)
    for word in words:
        assert accepts(spec, PLACEHOLDERS.get(word, word), name), word
    if kind.startswith("`") and "integer" not in kind and "string" not in kind:  # a list of choices: no other
        assert not accepts(spec, "not-" + words[0], name)
        assert set(words) == set(spec.check.choices), kind
    for bare, value in SAMPLE.items():
        if kind.startswith(bare):
            assert accepts(spec, value, name), (kind, value)
    span = re.search(r"integer (\d+)\.\.(\d+)", kind)
    if span:
        lo, hi = map(int, span.groups())
        assert accepts(spec, lo, name) and accepts(spec, hi, name)
        assert not accepts(spec, lo - 1, name) and not accepts(spec, hi + 1, name)
    elif "integer" in kind:
        assert accepts(spec, 8, name)


def gemm_help_defaults():
    """``(option, stated default text, action)`` for each ``ozhpc gemm`` option whose help states
    a default: "(default X)", or "X (default)" for a choice or an option word."""
    parser = cli.build_parser()
    gemm = parser._subparsers._group_actions[0].choices["gemm"]  # noqa: SLF001
    for action in gemm._actions:  # noqa: SLF001
        text = " ".join((action.help or "").split())
        stated = (re.search(r"\(default:? ([\w.]+)[):;]", text) or re.search(r"'([\w-]+)'[^,;()']*\(default\)", text)
                  or re.search(r"([\w-]+) \(default\)", text))
        if stated and action.option_strings:
            yield action.option_strings[-1], stated.group(1), action


def test_the_defaults_gemm_help_states_are_the_codes():
    parser = cli.build_parser()
    defaults = effective(cli.config_from_args(parser.parse_args(["gemm", "a.h5:/A", "b.h5:/B", "-o", "c.h5:/C"])))
    assert defaults == effective(RunConfig(**REQUIRED))   # the parser's own defaults are RunConfig's
    field = {"--output": "out"}
    checked = []
    for option, text, action in gemm_help_defaults():
        if action.choices and text not in action.choices:
            continue   # "for the GPU engine (default)": a phrase, not a value
        value = action.type(text) if action.type and not action.choices else text
        assert value == defaults[field.get(option, action.dest)], (option, text)
        checked.append(option)
    assert {"--alpha", "--beta", "--block", "--scheme", "--slices", "--bits", "--guarantee", "--accuracy",
            "--progress"} <= set(checked)


def test_one_measured_number_of_bits_for_the_tight_guarantee():
    """--guarantee's help, docs/numerics.md, docs/batch.md and the README quote the median extra
    bits measured in bench/results/ (scheme II, standard matrices)."""
    result = (pathlib.Path(REPO) / "bench" / "results" / "guarantee_bits_cpu_2026-12-02.md").read_text()
    extra = [int(row.split("|")[6]) for row in result.splitlines() if re.match(r"\| [\d.]+ \| \d+ \|", row)]
    median = round(statistics.median(extra))
    quoted = {"help": " ".join(cli.GUARANTEE_HELP.split()), "numerics": (DOCS / "numerics.md").read_text(),
              "batch": (DOCS / "batch.md").read_text(), "README": (pathlib.Path(REPO) / "README.md").read_text()}
    for where, text in quoted.items():
        numbers = set(re.findall(r"about (\d+) more bits per\s+entry", text))
        assert numbers == {str(median)}, where


DEVELOPMENT_NOTES = re.compile(r"issue \d|not lent|\$OUT|device call|before the certificate|moved from scheme|"
                               r"session of 20\d\d|the issue asks|\(call \d+\)|final call|until 20\d\d|development VM", re.I)
"""Words about how the project was built (issues, lent machines, benchmark sessions), not about
the product; they belong in bench/results/ and commit messages."""


def user_texts() -> dict[str, str]:
    root = pathlib.Path(REPO)
    paths = [root / "README.md", root / "slurm" / "README.md", *sorted(DOCS.glob("*.md")),
             *sorted((root / "jobs").glob("*.toml"))]
    return {str(p.relative_to(root)): p.read_text() for p in paths}


def test_user_docs_speak_of_the_product_only():
    found = {name: DEVELOPMENT_NOTES.findall(text) for name, text in user_texts().items()}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_planner_rate_sources_speak_of_the_product_only():
    """What ``ozhpc plan`` prints after "rates:" is user text as well."""
    from ozhpc.commands.plan import DEVICES

    assert {name: d.source for name, d in DEVICES.items() if DEVELOPMENT_NOTES.search(d.source)} == {}


def test_figure_legends_speak_of_the_product_only():
    import runpy

    plots = runpy.run_path(str(pathlib.Path(REPO) / "bench" / "plots.py"))
    legends = [plots["LABELS"].get(mode, mode) for mode in plots["STYLE"]]
    legends += [label for label, _, _ in plots["ERROR_LINES"].values()]
    assert [legend for legend in legends if DEVELOPMENT_NOTES.search(legend)] == []


@pytest.mark.parametrize("job", sorted(p.name for p in (pathlib.Path(REPO) / "jobs").glob("*.toml")))
def test_every_key_a_shipped_job_sets_applies_to_its_scheme(job):
    """``slices = "auto"`` in a job that runs scheme II (the default) says something it does not do."""
    from ozhpc.run.jobfile import parse_job

    path = pathlib.Path(REPO) / "jobs" / job
    kwargs = parse_job(path.read_text(), str(path), str(path.parent))
    scheme = RunConfig(**{**REQUIRED, **kwargs}).ozaki.scheme
    other = {"ozaki2": ("slices", "groups"), "ozaki1": ("bits",)}[scheme]
    assert [key for key in other if key in kwargs] == []
