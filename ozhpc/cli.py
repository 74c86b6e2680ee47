"""``ozhpc`` command line: gen, gemm, run, check, fingerprint, warmup, info, demo, plan, report.

This module parses, dispatches and maps errors to exit codes; each command's work is a function
in ozhpc/commands/ (one module per command), given the communicator explicitly, and the process
around it is ozhpc/commands/lifecycle.py. Nothing below ozhpc/run/ is imported here.

Arguments are parsed before any MPI or GPU start-up. User errors (a missing
file or dataset, a wrong shape, a bad option) print one line naming the culprit
and exit with status 2. A C that "auto" cannot certify gives one warning line (``--accuracy warn``)
or one error line and exit status 3 with nothing written (``--accuracy strict``).

Longer than 500 lines because it is the parser of ten commands with their help texts; the work
of each lives below it (``ozhpc/commands/``, ``ozhpc/run/``).
"""
from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys
import warnings

from . import __version__, signals
from .commands import lifecycle, plan
from .commands.lifecycle import launcher_rank
from .errors import AccuracyError, AccuracyWarning, InputError, OptionError, cli_spelling, shown, trans_mode
from .run.config import (ACCURACY, DEFAULT_SCHEME, ENGINE_NAMES, GUARANTEES, MAX_PHI, MAX_RANKS, MAX_SAMPLES, MAX_SEED,
                         PROGRESS_MODES, SCHEMES, TRANSPORT_NAMES, WIRE_NAMES, DatasetRef, RunConfig, option_value,
                         parse_float, parse_int, parse_pair, parse_panel, parse_path, parse_scalar)

EXIT_USAGE = 2
MAX_DEMO_N = 1 << 16
"""The demo runs on one process: n = 65536 already needs about 100 GiB."""
EXIT_ACCURACY = 3
"""``--accuracy strict`` and "auto" could not certify C: nothing was written (exit codes: README)."""

EPILOG = """examples:
  ozhpc gen --phi 0.5 --shape 2048x2048 --seed 1 in.h5:/A
  ozhpc gen --phi 0.5 --shape 2048x2048 --seed 2 in.h5:/B
  ozhpc gemm in.h5:/A in.h5:/B -o out.h5:/C --report run.json
  ozhpc gemm in.h5:/A in.h5:/B -o out2.h5:/C --scheme ozaki1      # Ozaki scheme I (int8 slices)
  ozhpc check out.h5:/C --a in.h5:/A --b in.h5:/B
  ozhpc run jobs/demo.toml
  mpiexec -n 4 ozhpc gemm in.h5:/A in.h5:/B -o out.h5:/C --grid 2x2 --block 128
"""


def _dataset(what):
    def parse(text):
        try:
            return DatasetRef.parse(text, what)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = "FILE.h5:/dataset"
    return parse


def _option(parser_fn, option, *bounds):
    def parse(text):
        try:
            return parser_fn(text) if option is None else parser_fn(text, option, *bounds)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc.spelled(cli_spelling))) from None
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = option or parser_fn.__name__
    return parse


def _number(option, lo=-float("inf"), hi=float("inf")):
    """A finite number in [lo, hi] (argparse's float takes 'nan' and 'inf')."""
    return _option(parse_float, option, lo, hi)


def _scalar(option):
    """A finite real or complex number (``1+2j``)."""
    return _option(parse_scalar, option)


def _trans(option):
    """BLAS's op: N, T or C, any case."""
    def parse(text):
        try:
            return trans_mode(text, option)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be N, T or C (conjugate transposed), got {shown(text)}") from None
    parse.__name__ = option
    return parse


TRANS_OPTIONS = ("--transa", "--transb")


def _trans_values(argv: list) -> list:
    """``--transa`` alone means T: give it its value, so the next token (a dataset) is never taken
    for one."""
    out, i = [], 0
    end = argv.index("--") if "--" in argv else len(argv)
    while i < len(argv):
        token = argv[i]
        if i < end and token in TRANS_OPTIONS:
            value = argv[i + 1] if i + 1 < end else ""
            if value.upper() in ("N", "T", "C"):
                out.append(f"{token}={value}")
                i += 2
                continue
            out.append(f"{token}=T")
        else:
            out.append(token)
        i += 1
    return out


def _integer(option, lo, hi):
    return _option(parse_int, option, lo, hi)


def _ozaki_option(name):
    """``--slices`` / ``--groups`` / ``--bits``, checked by the Ozaki settings, spelled for the CLI."""
    def parse(text):
        try:
            return option_value(name, text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc.spelled(cli_spelling))) from None
    parse.__name__ = name
    return parse


default = RunConfig.default
"""A gemm option's default, for its help: the parser leaves it None and RunConfig fills it in."""


def add_product_options(p: argparse.ArgumentParser) -> None:
    """Options that describe op(A), op(B), alpha and beta (gemm and check share them)."""
    for name, x in (("--transa", "A"), ("--transb", "B")):  # check reads them too: their defaults here
        p.add_argument(name, type=_trans(name), default=default(name[2:]), nargs="?", const="T", metavar="{N,T,C}",
                       help=f"op({x}): {x} as is with N (default {default(name[2:])}), transposed with T ({name} alone), "
                            "conjugate transposed with C")
    p.add_argument("--alpha", type=_scalar("--alpha"), default=default("alpha"),
                   help=f"scale of op(A) op(B), real or complex such as 1+2j (default {default('alpha'):g})")
    p.add_argument("--beta", type=_scalar("--beta"), default=default("beta"),
                   help=f"scale of the input C, real or complex (default {default('beta'):g}: C is not read)")
    p.add_argument("--c", type=_dataset("input C"), metavar="FILE.h5:/C0", help="input C, needed when beta != 0")


CACHE_HELP = ("GPU kernel cache shared by the ranks of a node (default $OZHPC_CACHE_DIR, else "
              "$CUDA_TILE_CACHE_DIR, else ~/.cache/ozhpc/cutile; 'off' disables it)")


def add_tool_commands(sub) -> None:
    """fingerprint, warmup and report: helpers around a run (kept apart from build_parser's length)."""
    fp = sub.add_parser("fingerprint", help="the grid-independent fingerprint of a dataset (as in the run report)",
                        description="Print the fingerprint of a 2-D HDF5 dataset: the same 64 hex digits a run "
                                    "report's \"fingerprint\" and the ozhpc_fingerprint attribute hold, whatever "
                                    "grid, block size or rank count wrote it. Reads the dataset in row chunks (under "
                                    "mpiexec each rank a share of the rows; rank 0 prints).")
    fp.add_argument("dataset", type=_dataset("dataset"), metavar="FILE.h5:/C")

    w = sub.add_parser("warmup", help="compile the GPU kernels ahead of time into the kernel cache",
                       description="Compile the cuTile kernels for this node's GPU into the kernel cache (both "
                                   "schemes, real and complex products), so that jobs start without compiling. Run once per node or shared "
                                   "cache directory; without a usable GPU engine it says so and exits 0.")
    w.add_argument("--cache-dir", type=_option(parse_path, "--cache-dir"), metavar="DIR", help=CACHE_HELP)
    plan.add_arguments(sub.add_parser(
        "plan", help="predict time, bytes and memory of a product on P GPUs and pick grid, panel and wire",
        description="The run planner (docs/planning.md): for the best grid, panel width and wire it finds, the "
                    "predicted time of the product, of reading A and B and writing C (--io-rate) and of the "
                    "start-up, and their total; TFLOP/s per GPU, bytes per GPU over NVLink and the network, "
                    "memory per GPU and the share of communication hidden, and why. Exit 2 when no layout fits."))

    r = sub.add_parser("report", help="read a run report in words, or compare two",
                       description="Read one JSON run report (gemm --report, run) in words, or compare two: "
                                   "whether C is the same (fingerprints), what differs in the setup, the seconds "
                                   "per phase side by side. The fields: docs/batch.md, 'The JSON report'.")
    r.add_argument("reports", nargs="+", metavar="REPORT.json", help="one report, or two to compare")


NEGATIVE_VALUE = re.compile(r"^-(\.?\d|inf|nan)", re.IGNORECASE)
"""A token that is an option's value, not an option: ``--alpha -1e3``, ``--alpha -1+2j``,
``--beta -2j``, ``--shape -1x5`` (argparse's own rule takes only ``-1`` and ``-1.5``, and says
"expected one argument" of the others)."""


class Parser(argparse.ArgumentParser):
    """An argument error is one line, ``ozhpc <cmd>: error: ...`` (exit 2); the usage is printed
    only with ``--help`` and when the command itself is missing (subcommands inherit the class)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_VALUE

    def error(self, message):
        if self._subparsers is not None and "required: COMMAND" in message:
            self.print_usage(sys.stderr)
        handling = sys.exc_info()[1]  # a bad value: our own message names the option or dataset
        if isinstance(handling, argparse.ArgumentError) and isinstance(handling.__context__, argparse.ArgumentTypeError):
            message, name = str(handling.__context__), handling.argument_name or ""
            if name and not any(part in message for part in name.split("/")):
                message = f"{name} {message}"   # a message that does not name its option gets the name, as ours do
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ozhpc", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Bitwise-reproducible FP64 matrix products C = alpha*op(A)@op(B) + beta*C by the Ozaki\n"
                    "scheme I or II (int8 slices or int8 moduli, exact integer products), on CPUs or GPUs,\n"
                    "one process or MPI.")
    parser.add_argument("--version", action="version", version=f"ozhpc {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what is chosen (engine, plan)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_gen_command(sub)
    add_gemm_command(sub)
    add_run_command(sub)
    add_check_command(sub)
    add_tool_commands(sub)
    add_info_and_demo_commands(sub)
    for command in sub.choices.values():  # -v also after the command (`ozhpc gemm ... -v`)
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="log what is chosen (engine, plan)")
    return parser


def add_gen_command(sub) -> None:
    g = sub.add_parser("gen", help="write a standard test matrix (rand-0.5)*exp(phi*randn)",
                       description="Write the standard test matrix a_ij = (rand - 0.5) * exp(phi * randn). "
                                   "Larger phi widens the exponent range (0.5 is about what HPL makes). "
                                   "The same seed and shape give the same matrix on any machine.")
    g.add_argument("output", type=_dataset("output"), metavar="FILE.h5:/dataset")
    g.add_argument("--shape", type=_option(parse_pair, "--shape"), required=True, metavar="MxN")
    g.add_argument("--phi", type=_number("--phi", 0.0, MAX_PHI), default=0.5,
                   help=f"exponent spread, 0 to {MAX_PHI:g} (default 0.5)")
    g.add_argument("--seed", type=_integer("--seed", 0, MAX_SEED), default=0, help="random seed, 0 or more (default 0)")
    g.add_argument("--complex", action="store_true",
                   help="a complex128 matrix (h5py's compound of r and i), both parts drawn so")
    g.add_argument("--force", action="store_true", help="replace an existing dataset")


def _marked(word: str, option: str) -> str:
    """A choice as a help text names it, with "(default)" when it is the option's default."""
    chosen = DEFAULT_SCHEME if option == "scheme" else default(option)  # a scheme left out: OzakiSettings'
    return f"{word} (default)" if chosen == word else word


GUARANTEE_HELP = ("what 'auto' --bits / --slices certify for every entry of C at run time, plus the final "
                  f"rounding of C (u = 2^-53): {_marked('dgemm', 'guarantee')} |C_ij - (op(A) op(B))_ij| <= k u (|op(A)||op(B)|)_ij, "
                  f"the bound native FP64 GEMM itself guarantees; {_marked('tight', 'guarantee')} u (|op(A)||op(B)|)_ij, about 7 more bits per "
                  "entry (two more moduli) on the standard test matrices. The plan is widened where an entry fails "
                  "(see --accuracy)")
ACCURACY_HELP = ("what to do when 'auto' cannot certify C (--guarantee) even at its widest plan: "
                 f"{_marked('warn', 'accuracy')} writes C, prints one warning line and records certified = false in the report and the "
                 f"attributes of C; {_marked('strict', 'accuracy')} writes nothing and exits with status 3. Fixed --slices / --bits are "
                 "not certified")


def add_gemm_command(sub) -> None:
    m = sub.add_parser("gemm", help="C = alpha*op(A)@op(B) + beta*C from HDF5 to HDF5",
                       description="Multiply two HDF5 datasets with the Ozaki scheme. C is written safely (a temporary "
                                   "dataset in the output file, renamed when complete, under the file's lock) and, "
                                   "for a given --scheme, bitwise identical for "
                                   "any engine, grid, block size and rank count. Run under mpiexec/srun to distribute.")
    m.add_argument("a", type=_dataset("input A"), metavar="A.h5:/A")
    m.add_argument("b", type=_dataset("input B"), metavar="B.h5:/B")
    m.add_argument("-o", "--output", type=_dataset("output"), required=True, metavar="OUT.h5:/C")
    add_product_options(m)
    m.add_argument("--scheme", choices=SCHEMES,
                   help=f"{_marked('ozaki2', 'scheme')}: the integers modulo coprime int8 moduli, one int8 GEMM per "
                        f"modulus (about 15 for FP64 accuracy), the fast one; {_marked('ozaki1', 'scheme')}: int8 digit slices, one int8 GEMM "
                        "per slice pair (45 for 9 slices); the default is ozaki1 when --slices or --groups is "
                        "given. Each scheme is bitwise reproducible; the two give different bits")
    m.add_argument("--slices", type=_ozaki_option("slices"),
                   help=f"scheme ozaki1: int8 slices per operand, or '{default('slices')}' (default): certified "
                        "(--guarantee), widened where the data needs it")
    m.add_argument("--groups", type=_ozaki_option("groups"),
                   help=f"scheme ozaki1: keep slice pairs with p+q < GROUPS: '{default('groups')}' = slices (default), "
                        "'all', or fewer for a faster, less accurate product")
    m.add_argument("--bits", type=_ozaki_option("bits"),
                   help=f"scheme ozaki2: integer bits per operand entry (8..100), or '{default('bits')}' (default): "
                        "bits whose error in fact is no worse than native FP64 GEMM's on this data, certified "
                        "(--guarantee); about 4 bits more cost one more modulus (int8 GEMM)")
    m.add_argument("--guarantee", choices=GUARANTEES, help=GUARANTEE_HELP)
    m.add_argument("--accuracy", choices=ACCURACY, help=ACCURACY_HELP)
    add_run_options(m)


def add_run_options(m: argparse.ArgumentParser) -> None:
    """How and where ``gemm`` runs: engine, layout, transport, output and report."""
    m.add_argument("--engine", choices=ENGINE_NAMES,
                   help=f"numpy (CPU) or cutile (NVIDIA GPU); auto picks cutile when it can run (default "
                        f"{default('engine')})")
    m.add_argument("--grid", type=_option(parse_pair, "--grid", MAX_RANKS), metavar="PxQ",
                   help="process grid under MPI (default: near-square from the rank count)")
    m.add_argument("--block", type=_option(parse_pair, "--block"), metavar="NB|MBxNB",
                   help=f"block-cyclic block size (default {'x'.join(map(str, dict.fromkeys(default('block'))))})")
    m.add_argument("--transport", choices=TRANSPORT_NAMES,
                   help="how SUMMA moves slice panels: nccl (GPU), cuda-mpi (CUDA-aware MPI), mpi-host "
                        f"(host-staged); {default('transport')} picks nccl > cuda-mpi > mpi-host for the GPU "
                        "engine (default)")
    m.add_argument("--wire", choices=WIRE_NAMES,
                   help="SUMMA panels as fp64 (split by the receiving rank: no whole-operand planes) or int8 "
                        f"planes; {default('wire')} compares bytes moved with the split's cost (default); never "
                        "changes the result")
    m.add_argument("--panel", type=_option(parse_panel, None), metavar="KB",
                   help="SUMMA k-panel width (default: min(1024 with numpy, 4096 with cutile; k/max(P,Q)), "
                        "whatever the block size); never changes the result")
    m.add_argument("--cache-dir", type=_option(parse_path, "--cache-dir"), metavar="DIR", help=CACHE_HELP)
    m.add_argument("--report", type=_option(parse_path, "--report"), metavar="run.json",
                   help="write a JSON report (configuration, plan, times, SHA-256)")
    m.add_argument("--dry-run", action="store_true",
                   help="check inputs, outputs and options and print the plan and the per-rank peak memory "
                        "(host and GPU) the run would need; read and write nothing (exit 0, or 2 when it "
                        "would not fit)")
    m.add_argument("--force", action="store_true",
                   help="replace an existing output dataset and report (never a group, a read-only file or an input)")
    m.add_argument("--progress", choices=PROGRESS_MODES,
                   help=f"progress on rank 0: bar on a terminal, log lines otherwise (default {default('progress')})")


def add_run_command(sub) -> None:
    from .run.jobfile import SCHEMA

    r = sub.add_parser("run", help="run the product a TOML job file describes",
                       description=f"Run what a TOML job file describes ({', '.join(SCHEMA)} tables; see "
                                   "docs/batch.md). Relative paths in the file are relative to the file. Same "
                                   "engine and output as 'gemm'; run under mpiexec/srun to distribute.")
    r.add_argument("job", metavar="JOB.toml", help="the job file")
    r.add_argument("--force", action="store_true", default=None,
                   help="replace an existing output dataset and report (overrides output.force)")
    r.add_argument("--report", type=_option(parse_path, "--report"), metavar="run.json",
                   help="write the JSON report here (overrides output.report)")
    r.add_argument("--progress", choices=PROGRESS_MODES,
                   help="progress on rank 0 (overrides run.progress)")
    r.add_argument("--accuracy", choices=ACCURACY,
                   help="warn or strict: a C that 'auto' cannot certify is written with a warning, or not "
                        "written (exit 3); overrides ozaki.accuracy (see ozhpc gemm --help)")
    r.add_argument("--cache-dir", type=_option(parse_path, "--cache-dir"), metavar="DIR", help=CACHE_HELP)
    r.add_argument("--dry-run", action="store_true",
                   help="check the job (inputs, outputs, options, memory and disk on these ranks) and print its "
                        "plan and per-rank peak memory, as gemm --dry-run; read and write nothing (exit 0, or 2 "
                        "when it would not fit)")


def add_check_command(sub) -> None:
    c = sub.add_parser("check", help="error statistics of a computed C against an exact reference",
                       description="Compare C with the exact alpha*op(A)@op(B) + beta*C0 on sampled entries "
                                   "(exact rational arithmetic) and print max/median |C - exact| / (|alpha||A||B| + "
                                   "|beta||C0|), next to the same figures for the native FP64 dot of each row and "
                                   "column. Under mpiexec each rank reads and checks its share of the entries; no "
                                   "process reads A, B or C whole. Exit status 4 when an entry is outside (k+2)u, "
                                   "the worst-case error of any FP64 GEMM (NaN where the exact product has none "
                                   "included), or --fingerprint finds C changed; 0 when C passes.")
    c.add_argument("result", type=_dataset("result C"), metavar="OUT.h5:/C")
    c.add_argument("--a", type=_dataset("input A"), required=True, metavar="A.h5:/A")
    c.add_argument("--b", type=_dataset("input B"), required=True, metavar="B.h5:/B")
    add_product_options(c)
    c.add_argument("--samples", type=_integer("--samples", 1, MAX_SAMPLES), default=64,
                   help=f"entries checked exactly, 1 to {MAX_SAMPLES} (default 64; all of C when it has fewer)")
    c.add_argument("--seed", type=_integer("--seed", 0, MAX_SEED), default=0,
                   help="which entries are sampled, 0 or more (default 0)")
    c.add_argument("--json", action="store_true", help="print the statistics as JSON")
    c.add_argument("--fingerprint", action="store_true",
                   help="also compute C's fingerprint (reads all of C, shared over the ranks) and compare it "
                        "with its ozhpc_fingerprint attribute")


def add_info_and_demo_commands(sub) -> None:
    sub.add_parser("info", help="versions, engines, MPI and HDF5 features available here",
                   description="Print versions and which engines, MPI library and HDF5 features are usable.")

    d = sub.add_parser("demo", help="generate, multiply, check and report in a directory",
                       description="End-to-end demo on one process: writes A and B (phi = 0.5) to DIR/in.h5, "
                                   "multiplies them into DIR/out.h5:/C with a report DIR/run.json, and checks C "
                                   "against the exact product. Files of an earlier demo (or any DIR/in.h5:/A, "
                                   "/B, DIR/out.h5:/C, DIR/run.json) are refused unless --force.")
    d.add_argument("--dir", default="ozhpc-demo", help="working directory (default ./ozhpc-demo)")
    d.add_argument("--force", action="store_true", help="replace the demo's datasets and report in DIR")
    d.add_argument("--n", type=_integer("--n", 1, MAX_DEMO_N), default=512, help=f"matrix size, 1 to {MAX_DEMO_N} (default 512)")
    d.add_argument("--phi", type=_number("--phi", 0.0, MAX_PHI), default=0.5,
                   help=f"exponent spread, 0 to {MAX_PHI:g} (default 0.5)")


def _strict_parse(parser: argparse.ArgumentParser, argv):
    """``parse_args``, but an unknown option names the closest known one, in one line (exit 2).

    An unknown ``--option`` is found before parsing: argparse would otherwise take the value after
    it as a positional argument and name that instead (``gen --dtype float32 x.h5:/A``)."""
    argv = _trans_values(sys.argv[1:] if argv is None else [str(a) for a in argv])
    commands = parser._subparsers._group_actions[0].choices  # noqa: SLF001
    name = next((token for token in argv if token in commands), None)
    if name is not None:
        known = _known_options(parser, commands[name])
        options = argv[:argv.index("--")] if "--" in argv else argv
        unknown = [token for token in options if token.startswith("--") and len(token) > 2
                   and not any(k.startswith(token.split("=", 1)[0]) for k in known)]  # argparse takes prefixes
        if unknown:
            _unrecognized(parser, commands[name], unknown)
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    _unrecognized(parser, commands[args.command], extra)


def _known_options(parser: argparse.ArgumentParser, command: argparse.ArgumentParser) -> list[str]:
    return list(command._option_string_actions) + list(parser._option_string_actions)  # noqa: SLF001


def _unrecognized(parser: argparse.ArgumentParser, command: argparse.ArgumentParser, extra: list[str]):
    """One line naming the arguments ``command`` does not know, and the closest known option (exit 2)."""
    known = _known_options(parser, command)
    hints = []
    for token in (t.split("=", 1)[0] for t in extra if t.startswith("-")):
        close = difflib.get_close_matches(token, known, n=1, cutoff=0.6)
        if close:
            hints.append((token, close[0]))
    hint = ""
    if len(hints) == 1:
        hint = f" (did you mean {hints[0][1]}?)"
    elif hints:
        hint = f" (did you mean {', '.join(f'{c} for {t}' for t, c in hints)}?)"
    sys.stderr.write(f"{command.prog}: error: unrecognized arguments: {' '.join(extra)}{hint}\n")
    sys.exit(EXIT_USAGE)


def config_from_args(args) -> RunConfig:
    """The run's configuration; options left out are None (RunConfig's defaults), and its option
    errors are spelled as flags here."""
    try:
        return RunConfig(a=args.a, b=args.b, out=args.output, c=args.c, report=args.report,
                         transa=args.transa, transb=args.transb, alpha=args.alpha, beta=args.beta,
                         grid=args.grid, block=args.block, scheme=args.scheme, slices=args.slices,
                         groups=args.groups, bits=args.bits, accuracy=args.accuracy, guarantee=args.guarantee,
                         engine=args.engine, transport=args.transport, wire=args.wire,
                         panel=args.panel, force=args.force, progress=args.progress, dry_run=args.dry_run)
    except OptionError as exc:
        raise exc.spelled(cli_spelling) from None


def cmd_gen(args, comm) -> int:
    from .commands.gen import gen

    say(gen(args.output, args.shape, args.phi, args.seed, args.force, comm=comm, complex=args.complex))
    return 0


def say(*lines: str) -> None:
    """Print on rank 0 only (under MPI every rank runs the command)."""
    if launcher_rank() == 0:
        print("\n".join(lines))


def cmd_plan(args, comm) -> int:
    return plan.main(args)


def cmd_warmup(args, comm) -> int:
    from .commands.warmup import run_warmup

    return run_warmup(args.cache_dir)


def cmd_gemm(args, comm) -> int:
    from .commands.gemm import gemm

    report = gemm(config_from_args(args), comm=comm, cache_dir=args.cache_dir)
    print_summary(report, args.report)
    return 0


def cmd_run(args, comm) -> int:
    from .commands.gemm import run

    report, report_path = run(args.job, comm=comm, force=args.force, report=args.report, progress=args.progress,
                              accuracy=args.accuracy, cache_dir=args.cache_dir, dry_run=args.dry_run)
    print_summary(report, report_path)
    return 0


def print_summary(report: dict, report_path: str | None = None) -> None:
    from .commands.report import summary_lines

    say(*summary_lines(report, report_path))


def cmd_report(args, comm) -> int:
    from .commands.report import report_lines

    print("\n".join(report_lines(args.reports)))
    return 0


def cmd_check(args, comm) -> int:
    from .commands.check import check, check_lines
    from .run.check import EXIT_CHECK, failures

    stats = check(args.result, args.a, args.b, c=args.c, alpha=args.alpha, beta=args.beta, transa=args.transa,
                  transb=args.transb, samples=args.samples, seed=args.seed, fingerprint=args.fingerprint, comm=comm)
    failed = failures(stats)   # the same on every rank: every rank exits alike
    if launcher_rank() == 0:
        print("\n".join(check_lines(stats, args.alpha, args.beta, args.json)))
        for why in failed:
            print(f"ozhpc check: FAILED: {why}", file=sys.stderr)
    return EXIT_CHECK if failed else 0


def cmd_fingerprint(args, comm) -> int:
    from .commands.fingerprint import fingerprint

    value = fingerprint(args.dataset, comm=comm)
    say(f"{value}  {args.dataset}")
    return 0


def cmd_info(args, comm) -> int:
    from .commands.info import info_lines

    say(*info_lines(comm))  # collective under MPI: every rank runs it
    return 0


def cmd_demo(args, comm) -> int:
    from .commands.demo import demo

    return demo(args.dir, args.n, args.phi, main, args.force)


COMMANDS = {"gen": cmd_gen, "gemm": cmd_gemm, "run": cmd_run, "check": cmd_check, "fingerprint": cmd_fingerprint,
            "warmup": cmd_warmup, "info": cmd_info, "demo": cmd_demo, "report": cmd_report, "plan": cmd_plan}


# -- MPI behaviour: ozhpc/commands/lifecycle.py -----------------------------------------------------
def _parse(parser: argparse.ArgumentParser, argv):
    """``parser.parse_args`` with usage/help output on rank 0 only (all ranks exit alike)."""
    if launcher_rank() == 0:
        return _strict_parse(parser, argv)
    with open(os.devnull, "w") as quiet:
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = quiet
        try:
            return _strict_parse(parser, argv)
        finally:
            sys.stdout, sys.stderr = saved


MPI_COMMANDS = ("gen", "gemm", "run", "check", "warmup", "demo")
"""Commands that run through the distributed driver (one process is a 1x1 grid)."""


def main(argv=None, comm=None) -> int:
    """Run one command; ``comm`` (default COMM_WORLD) is what MPI commands run on."""
    parser = build_parser()
    args = _parse(parser, argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="ozhpc: %(message)s")
    try:
        lifecycle.join(check_launch=args.command != "info",  # info says why instead
                       forget_segments=args.command in MPI_COMMANDS and comm is None)
        with warnings.catch_warnings():
            warnings.simplefilter("always", AccuracyWarning)
            warnings.showwarning = _one_line_warnings(warnings.showwarning, args.command)
            return COMMANDS[args.command](args, comm)
    except InputError as exc:
        if launcher_rank() == 0:
            print(f"ozhpc {args.command}: error: {_spelled(exc, args)}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError as exc:  # a limit the memory check could not see: one line, not a traceback
        return _out_of_memory(args.command, comm, exc)
    except AccuracyError as exc:  # raised on every rank alike: the certificate is global
        if launcher_rank() == 0:
            print(f"ozhpc {args.command}: error: {exc}; nothing was written ({_strict_spelling(args)})",
                  file=sys.stderr)
        return EXIT_ACCURACY


def _out_of_memory(command: str, comm, exc: MemoryError) -> int:
    """Only this rank ran out: it says so, and under MPI takes the others down (exit 2)."""
    import socket

    detail = f": {exc}" if str(exc) else ""
    sys.stderr.write(f"ozhpc {command}: error: out of memory on rank {launcher_rank()} "
                     f"({socket.gethostname()}){detail}; use more ranks or nodes, or a smaller problem\n")
    sys.stderr.flush()
    lifecycle.abort_others(comm, EXIT_USAGE)
    return EXIT_USAGE


def _one_line_warnings(show_default, command):
    """``warnings.showwarning`` that prints an :class:`AccuracyWarning` as one line on rank 0
    (``ozhpc <command>: warning: ...``, the other ranks say nothing) and any other warning as before."""
    def show(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, AccuracyWarning):
            return show_default(message, category, filename, lineno, file, line)
        if launcher_rank() == 0:
            print(f"ozhpc {command}: warning: {message}", file=sys.stderr)
        return None
    return show


def _spelled(exc: InputError, args) -> InputError:
    """An option's error in this command's words: its flags, and for ``ozhpc run`` the job file's
    keys where ``run`` has no such flag (the library words it without either)."""
    if not isinstance(exc, OptionError):
        return exc
    if args.command != "run":
        return exc.spelled(cli_spelling)
    from .run.jobfile import job_spelling

    flags = {name for name in vars(args) if name not in ("command", "job", "verbose")}
    return exc.spelled(lambda name, value=None: (cli_spelling if name in flags else job_spelling)(name, value))


def _strict_spelling(args) -> str:
    """Where "strict" came from: ``--accuracy strict``, or the job file's ``ozaki.accuracy``."""
    from .run.jobfile import job_spelling

    from_job = args.command == "run" and args.accuracy is None
    return (job_spelling if from_job else cli_spelling)("accuracy", "strict")


def entry_point() -> None:
    """The ``ozhpc`` command (``ozhpc/__main__.py`` installs the signal handlers before this
    module is imported). A signal at any point, the end included, exits 128 + signal with one line."""
    lifecycle.begin(_command_name(sys.argv[1:]))
    try:
        code = main()
        lifecycle.finish()
    except SystemExit:
        raise
    except signals.Interrupted as exc:
        signals.leave(exc.signum)
    except BrokenPipeError:  # `ozhpc ... | head`: the reader is gone, which is not an error
        lifecycle.silence(sys.stdout)  # so that the interpreter's final flush does not fail again
        sys.exit(0)
    except BaseException:  # noqa: BLE001 -- report, then take the whole MPI job down
        if signals.received():  # e.g. an MPI error because the other ranks left on the signal
            signals.leave(signals.received())
        lifecycle.abort_job()
    signals.exit(code)


def _command_name(argv) -> str:
    return next((a for a in argv if a in COMMANDS), "")
