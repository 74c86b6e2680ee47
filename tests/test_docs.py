"""The docs say what the code does: every job key of docs/batch.md's table, with its type and
default, against ``ozhpc.run.jobfile.SCHEMA`` and ``ozhpc.run.config.RunConfig``; the defaults that
``ozhpc gemm --help`` states against RunConfig; the guarantee's cost in bits against its
measurement. What README.md and docs/*.md cite exists: every file path, every ``ozhpc.x.y``
name, every option of an ``ozhpc SUBCOMMAND`` line (or of a sentence about one subcommand), and
every job key."""
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


# ---------------------------------------------------------------- what the docs cite exists

ROOT = pathlib.Path(REPO)
CITING = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in DOCS.glob("*.md"))]
"""The user docs whose citations are checked: README.md and docs/*.md."""
FENCE = re.compile(r"```[\w-]*\n(.*?)```", re.S)


def code_texts(text: str) -> list[str]:
    """The code of a Markdown text: each fenced block's lines, each inline span, each link target."""
    blocks = FENCE.findall(text)
    prose = FENCE.sub("", text)
    return ([line for block in blocks for line in block.splitlines()] + re.findall(r"`([^`\n]+)`", prose)
            + re.findall(r"\]\(([^)\s#]+)", prose))


def cited(pattern: re.Pattern) -> list[tuple[str, str]]:
    """``(doc, match)`` for every match of ``pattern`` in the code of each citing doc."""
    return [(doc, m.group(0)) for doc in CITING for code in code_texts((ROOT / doc).read_text())
            for m in pattern.finditer(code)]


def repo_files() -> list[str]:
    """Every file of the checkout (``git ls-files`` where it is a git checkout)."""
    skip = {".git", "__pycache__", ".pytest_cache", ".hypothesis"}
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.parts)]


FILE_NAME = re.compile(r"(?<![\w./$~-])[\w.-][\w./-]*\.(?:py|md|toml|sh|sbatch|png|json|c)\b(?![\w/-])")
"""A file name with a path or without (an absolute path is a user's, not the checkout's)."""
USER_FILES = {"run.json", "a.json", "b.json", "r.json", "x00.json", "job.toml", "JOB.toml", "big.toml",
              "planner_rates.json", "tma_probe.py", "jobs/demo_run.json", "jobs/grid2x2_run.json",
              "ozhpc-demo/run.json", ".tile/tile-env.sh"}
"""File names the docs give as a user's own (reports, job files, the planner's rates file, a
script the text prints in full, the toolchain bundle tools/tile-kit.sh makes), not files of the
checkout."""


def path_is_in_repo(path: str, files: list[str]) -> bool:
    """A path from the top of the checkout exists; a shorter one (``ozaki/plan.py``,
    ``accept_h200_2026-12-04.md``) ends the path of some file of the checkout."""
    top = {p.split("/")[0] for p in files}
    if path.split("/")[0] in top:
        return path in files
    return any(f == path or f.endswith("/" + path) for f in files)


def test_every_file_the_docs_cite_exists():
    files = repo_files()
    keys = {f"{table}.{key}" for table, entries in SCHEMA.items() for key in entries}
    missing = sorted({(doc, path) for doc, path in cited(FILE_NAME)
                      if path not in USER_FILES | keys and not path_is_in_repo(path, files)})
    assert missing == []


DOTTED = re.compile(r"\bozhpc(?:\.\w+)+")


def resolves(name: str) -> bool:
    """``ozhpc.a.b.c`` is a module, or a name defined in one: by import, or where the module
    cannot be imported here (it needs CuPy) by the names its source defines at its top."""
    import ast
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module, rest = ".".join(parts[:cut]), parts[cut:]
        path = ROOT.joinpath(*parts[:cut])
        if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
            continue
        try:
            obj = importlib.import_module(module)
        except ImportError:
            source = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
            tree = ast.parse(source.read_text())
            top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            top |= {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
            return len(rest) <= 1 and (not rest or rest[0] in top)
        for attr in rest:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_dotted_name_the_docs_cite_resolves():
    assert sorted({(doc, name) for doc, name in cited(DOTTED) if not resolves(name)}) == []


def subcommands() -> dict[str, set[str]]:
    """``{"gemm": {"--alpha", ...}, ...}``: each ``ozhpc`` subcommand and its parser's options."""
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices  # noqa: SLF001
    return {name: {o for a in p._actions for o in a.option_strings} for name, p in commands.items()}  # noqa: SLF001


COMMAND_LINE = re.compile(r"\bozhpc (\w+)([^#`]*)")
"""``ozhpc SUBCOMMAND ARGS`` up to a comment or the end of the line or span."""
OPTION = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def test_every_option_of_a_command_line_in_the_docs_is_its_subcommands():
    """``ozhpc plan --m 131072 --gpus 64`` in a code block or span: ``plan`` takes each option."""
    options = subcommands()
    wrong = sorted({(doc, line) for doc, line in cited(COMMAND_LINE)
                    for sub, args in [COMMAND_LINE.match(line).groups()]
                    if sub not in options or set(OPTION.findall(args)) - options[sub]})
    assert wrong == [("docs/batch.md", "ozhpc gemm: error: unrecognized arguments: --trnasb (did you mean --transb?)")]


def prose_units(text: str):
    """The sentences of a Markdown text's prose, a list item or table row each on its own."""
    for part in re.split(r"\n\s*\n|\n(?=\s*[*|-] )", FENCE.sub("", text)):
        yield from re.split(r"(?<=[.;])\s+(?=[A-Z`(])", part)


def test_an_option_a_sentence_gives_its_one_subcommand_is_that_subcommands():
    """"`ozhpc check --fingerprint` compares ...", "`ozhpc plan`'s `--gpus`": where a sentence
    names one subcommand, the ``ozhpc`` options it shows are that subcommand's."""
    options = subcommands()
    every = set().union(*options.values())
    wrong, seen = [], 0
    for doc in CITING:
        for sentence in prose_units((ROOT / doc).read_text()):
            named = set(re.findall(r"`ozhpc (\w+)", sentence)) & set(options)
            if len(named) == 1:
                sub = named.pop()
                shown = set(re.findall(r"`(--[\w-]+)", sentence))
                seen += len(shown)
                wrong += [(doc, sub, o) for o in sorted(shown & every - options[sub])]
    assert wrong == [] and seen >= 5


NOT_OZHPC_OPTIONS = {
    "pip": {"--no-binary", "--no-cache-dir", "--no-build-isolation", "--no-deps"},
    "srun / sbatch": {"--gpus-per-task", "--cpu-bind", "--cpus-per-task", "--mem", "--mem-per-cpu",
                      "--ntasks-per-node", "--mpi", "--wait"},
    "mpiexec": {"--allow-run-as-root", "--oversubscribe"},
    "words": {"--flags", "--trnasb"},   # options in general; a misspelling whose error the docs show
}
"""Options the docs give to other programs, and the two that are examples of words."""


def test_every_option_the_docs_show_belongs_to_a_command():
    """An option in the docs is an ``ozhpc`` subcommand's, a benchmark script's (bench/), or one
    of another program's listed above: a renamed or removed option fails here."""
    every = set().union(*subcommands().values()) | set().union(*NOT_OZHPC_OPTIONS.values())
    bench = "\n".join(p.read_text() for p in (ROOT / "bench").rglob("*.py"))
    unknown = sorted({(doc, o) for doc in CITING for o in OPTION.findall((ROOT / doc).read_text())
                      if o not in every and f'"{o}"' not in bench})
    assert unknown == []


def test_every_job_key_the_docs_name_is_in_the_schema():
    """A code span that is a job key (``ozaki.guarantee``, ``gemm.beta = 0.5``) names a key of
    ``ozhpc.run.jobfile.SCHEMA``."""
    keys = {f"{table}.{key}" for table, entries in SCHEMA.items() for key in entries}
    span = re.compile(rf"^(?:{'|'.join(SCHEMA)})\.\w+(?= = |$)")
    named = {(doc, m.group(0)) for doc in CITING for code in re.findall(r"`([^`\n]+)`", (ROOT / doc).read_text())
             for m in [span.match(code)] if m and not FILE_NAME.fullmatch(code)}
    assert len(named) >= 20
    assert sorted((doc, key) for doc, key in named if key not in keys) == []


def test_the_defaults_each_commands_help_states_are_its_parsers():
    """``--samples`` "(default 64)", ``--phi`` "(default 0.5)", ``--gpu`` "default h200": what a
    help text of any subcommand states is the default its parser gives (gemm's options, whose
    parser leaves them None for RunConfig, are checked above)."""
    parser = cli.build_parser()
    checked = []
    for name, command in parser._subparsers._group_actions[0].choices.items():  # noqa: SLF001
        for action in command._actions:  # noqa: SLF001
            text = " ".join((action.help or "").split())
            stated = re.search(r"\(default:? ([\w.]+)[);:]|default ([\w.]+)$", text)
            if not stated or action.default is None or not action.option_strings:
                continue
            word = stated.group(1) or stated.group(2)
            value = type(action.default)(float(word) if isinstance(action.default, (int, float)) else word)
            assert value == action.default, (name, action.option_strings[-1], text)
            checked.append(f"{name} {action.option_strings[-1]}")
    assert {"check --samples", "check --seed", "gen --phi", "gen --seed", "demo --n", "plan --gpu",
            "plan --io-rate"} <= set(checked)
