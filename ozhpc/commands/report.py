"""Run reports in words: the summary ``gemm`` / ``run`` print, and ``ozhpc report a.json [b.json]``,
which reads one report or compares two (people who run hundreds of jobs diff their reports).

Only what applies is shown (communication only with more than one rank, the certificate only
when it was checked), and each figure says what it is; docs/batch.md documents every field.
"""
from __future__ import annotations

import json
import numbers

from ..errors import InputError
from ..run.named_files import read_regular

COMPUTE_PHASES = ("scales", "split", "multiply", "certificate", "combine")
"""The phases whose sum the FP64-equivalent rate divides by (as ``gflops`` in the report)."""
STEPS = ("startup", "read", *COMPUTE_PHASES, "fingerprint", "write")


def load(path: str) -> "Fields":
    """A report file, or one line saying why it is not one (exit 2)."""
    data = read_regular(path, f"report {path!r}")
    try:
        report = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"report {path!r} is not JSON ({exc})") from None
    except ValueError:  # an integer past Python's limit on decimal digits
        raise InputError(f"report {path!r} holds an integer too large to be a run report's") from None
    except RecursionError:
        raise InputError(f"report {path!r} is nested too deeply to be a run report") from None
    if not isinstance(report, dict) or "ozhpc_version" not in report or "m" not in report:
        raise InputError(f"report {path!r} is not an ozhpc run report (no ozhpc_version, m, n, k)")
    return Fields(report, f"report {path!r}")


def _got(value) -> str:
    """What a field holds, in JSON's words, short (a huge integer by its length)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, numbers.Integral):
        return f"integer {value}" if abs(value) < 10**40 else f"a {len(str(abs(value)))}-digit integer"
    if isinstance(value, numbers.Real):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {json.dumps(value[:40] + ('...' if len(value) > 40 else ''))}"
    return "an array" if isinstance(value, list) else "an object"


class Fields:
    """A report (or one of its objects) whose fields are read by type: a field that is missing or
    of the wrong type is one line naming the report and the field (exit 2), never a traceback.
    The summary of a run just made reads its report the same way."""

    def __init__(self, data: dict, where: str = "report", prefix: str = ""):
        self.data, self.where, self.prefix = data, where, prefix

    def get(self, key, default=None):
        return self.data.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.data

    def _fail(self, key, what: str) -> InputError:
        return InputError(f"{self.where} field '{self.prefix}{key}' must be {what}, got {_got(self.data[key])}")

    def raw(self, key):
        if key not in self.data:
            raise InputError(f"{self.where} has no field '{self.prefix}{key}'")
        return self.data[key]

    def obj(self, key) -> "Fields":
        value = self.raw(key)
        if not isinstance(value, dict):
            raise self._fail(key, "an object")
        return Fields(value, self.where, f"{self.prefix}{key}.")

    def text(self, key) -> str:
        value = self.raw(key)
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def flag(self, key) -> bool | None:
        value = self.raw(key)
        if value is not None and not isinstance(value, bool):
            raise self._fail(key, "true, false or null")
        return value

    def op(self, key) -> str:
        """BLAS's op as "N", "T" or "C" (a boolean: "T" / "N")."""
        value = self.raw(key)
        if value is None or isinstance(value, bool):
            return "T" if value else "N"
        if value not in ("N", "T", "C"):
            raise self._fail(key, "N, T, C, true, false or null")
        return value

    def scalar(self, key, default=None):
        """A number, or a complex one written ``[re, im]``."""
        value = self.data.get(key)
        if isinstance(value, list) and len(value) == 2:
            sub = Fields({"re": value[0], "im": value[1]}, self.where, f"{self.prefix}{key}.")
            return complex(sub.number("re"), sub.number("im"))
        return self.number(key, default)

    def number(self, key, default=None) -> float:
        """A finite or infinite number (``default`` where the field is absent or null, if given)."""
        value = self.data.get(key) if default is not None else self.raw(key)
        if value is None and default is not None:
            return default
        try:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError
            return float(value)
        except (TypeError, OverflowError):
            raise self._fail(key, "a number") from None

    def seconds(self, key, default=None) -> float:
        """A time: a number from 0 on (not NaN), as every phase a run times."""
        value = self.number(key, default)
        if not value >= 0:
            raise self._fail(key, "a number of seconds from 0 on")
        return value

    def count(self, key) -> int:
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= MAX_COUNT:
            raise self._fail(key, f"an integer from 0 to {MAX_COUNT}")
        return int(value)

    def pair(self, key) -> tuple[int, int]:
        value = self.raw(key)
        if not isinstance(value, list) or len(value) != 2:
            raise self._fail(key, "an array of two integers")
        pair = Fields(dict(enumerate(value)), self.where, f"{self.prefix}{key}.")
        return pair.count(0), pair.count(1)


MAX_COUNT = 2**63 - 1
"""The largest count a report holds (sizes, bytes and ranks are int64 where they are made)."""


def _s(x) -> str:
    return f"{x:.3f}"


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.1f} MB"


def _fields(report) -> Fields:
    return report if isinstance(report, Fields) else Fields(report)


def seconds_line(report: Fields) -> str:
    s, ranks = report.obj("seconds"), report.count("ranks")
    parts = [f"{p} {_s(s.seconds(p))}" for p in STEPS if p in s and (p != "certificate" or s.seconds(p))]
    products = f"the products {_s(s.seconds('compute'))}" if "compute" in s else ""
    if ranks > 1 and "comm_wait" in s:
        products += f", waiting for panels {_s(s.seconds('comm_wait'))}"
    elif "comm_exposed" in s:  # one rank: nothing moves; the rest of the loop is packing the panels
        products += f", packing panels {_s(s.seconds('comm_exposed'))}"
    parts = [f"{p} ({products})" if p.startswith("multiply ") and products else p for p in parts]
    return f"seconds, slowest rank: total {_s(s.seconds('total'))} = " + ", ".join(parts)


def communication_line(report: Fields) -> str | None:
    """Panels moved between ranks: None on one rank, where nothing moves."""
    if report.count("ranks") <= 1:
        return None
    s = report.obj("seconds")
    hidden = ("" if report.get("overlap") is None else
              f"; broadcasts took {_s(s.seconds('comm', 0.0))} s, {100 * report.number('overlap'):.0f}% of it "
              "hidden behind the products")
    why = f" ({report.text('transport_reason')})" if report.get("transport_reason") else ""
    wire = f", panels as {report.text('wire')}" if report.get("wire") else ""
    return (f"communication: {report.text('transport')}{why}{wire}, {report.count('panels')} k-panel(s) of width "
            f"{report.count('kb')}{hidden}; sent {_mb(report.obj('bytes_sent').count('total'))} in all "
            f"(the SUMMA model: {_mb(report.count('bytes_model_total'))})")


def rate_line(report: Fields) -> str:
    return (f"rate: {report.number('gflops'):.3g} GFLOP/s FP64-equivalent: 2mnk over the compute phases (scales "
            "to combine), the rate a native FP64 GEMM would need to take as long")


def certificate_line(report: Fields) -> str:
    """The line on the certificate of "auto" (the report's ``certified`` fields)."""
    certified = report.flag("certified")
    if certified is None:
        return f"certified: not checked (fixed {'--bits' if report.text('scheme') == 'ozaki2' else '--slices'})"
    level = report.get("guarantee")
    if certified:
        refined = report.get("refined_entries") or 0
        levels = (f"; {refined} entries by {report.get('levels')} levels of scales, "
                  f"{report.get('exact_entries') or 0} of them exact dots" if refined else "")
        return f"certified: yes, guarantee {level} (worst bound ratio {report.number('worst_ratio'):.2g}{levels})"
    return (f"certified: NO, guarantee {level}: {report.count('uncertified')} entries "
            f"(worst bound ratio {report.number('worst_ratio'):.3g})")


def summary_lines(report, report_path: str | None = None) -> list[str]:
    """What ``ozhpc gemm`` and ``ozhpc run`` print after a run (or a dry run)."""
    report = _fields(report)
    m, n, k, out = report.count("m"), report.count("n"), report.count("k"), report.obj("config").text("out")
    if report.get("dry_run"):
        (p, q), (mb, nb) = report.pair("grid"), report.pair("block")
        return [f"dry run: C = {m}x{n} (k = {k}) -> {out}, grid {p}x{q}, block {mb}x{nb}, "
                f"panel {report.count('kb')}, engine {report.text('engine')}, wire {report.get('wire', '?')}",
                f"  {report.obj('memory').text('summary')}; nothing was read or written"]
    ranks = report.count("ranks")
    grid = "x".join(map(str, report.pair("grid")))
    lines = [f"C = {m}x{n} (k = {k}) -> {out}",
             f"plan: {report.text('plan_summary')}; engine {report.text('engine')}, "
             f"{ranks} rank{'s' if ranks > 1 else ''}" + (f", grid {grid}" if ranks > 1 else ""),
             seconds_line(report)]
    comm = communication_line(report)
    if comm:
        lines.append(comm)
    if report.get("kernels"):
        kn = report.obj("kernels")
        compiled = kn.count("compiled")
        lines.append(f"GPU kernels: {kn.count('from_store')} loaded from the kernel store, {compiled} compiled"
                     + (" (run `ozhpc warmup` once per node or cache directory)" if compiled else ""))
    sha = report.text("sha256") if report.get("sha256") else None
    lines += [rate_line(report), certificate_line(report),
              f"fingerprint {report.text('fingerprint')}" + (f", sha256 {sha}" if sha else "")]
    if report_path:
        lines.append(f"report: {report_path} (read it with: ozhpc report {report_path})")
    return lines[:1] + ["  " + line for line in lines[1:]]


_OP = {"N": "", "T": "^T", "C": "^H"}


def product_line(cfg) -> str:
    """``C = 2 A^T B - C0; A = ..., B = ...`` from the report's ``config``."""
    cfg = _fields(cfg)
    alpha, beta = cfg.scalar("alpha"), cfg.scalar("beta", 0.0)
    text = "C = " + ("" if alpha == 1 else "-" if alpha == -1 else f"{alpha:g} ")
    text += "A" + _OP[cfg.op("transa")] + " B" + _OP[cfg.op("transb")]
    if isinstance(beta, complex):
        text += f" + {beta:g} C0"
    elif beta:
        text += (" + " if beta > 0 else " - ") + ("" if abs(beta) == 1 else f"{abs(beta):g} ") + "C0"
    return text + f"; A = {cfg.text('a')}, B = {cfg.text('b')}" + (f", C0 = {cfg.text('c')}" if beta else "")


def describe(report: Fields) -> list[str]:
    """One report in words: provenance, what was computed, then the summary; for a plan that
    was not certified, its a-priori error bound (a certified C has the certificate's instead)."""
    lines = [f"ozhpc {report.text('ozhpc_version')} on {report.text('host')}, {report.text('date')} "
             f"(python {report.text('python')}, numpy {report.text('numpy')})", product_line(report.obj("config"))]
    lines += summary_lines(report)
    if report.get("error_bound") and not report.get("certified"):
        bound = report.obj("error_bound")
        lines.append(f"  a-priori error bound of the plan: |C_ij - (AB)_ij| <= 2^(e_i+f_j) ("
                     f"{bound.number('truncation'):.2e} truncation + {bound.number('combine', 0.0):.2e} combine) + "
                     f"{bound.number('rounding'):.2e} |C_ij|  (e_i, f_j: the row and column scales)")
    return lines


COMPARED = ("ozhpc_version", "m", "n", "k", "scheme", "plan_summary", "engine", "ranks", "grid", "block", "kb",
            "transport", "wire", "certified")


def compare(a: Fields, b: Fields, paths=("a", "b")) -> list[str]:
    """Two reports side by side: same result or not, what differs in the setup, time per phase."""
    for path, r in zip(paths, (a, b)):
        if r.get("dry_run"):
            raise InputError(f"report {path!r} is a dry run's: it has no result or times to compare")
    same_bits = a.get("fingerprint") == b.get("fingerprint") and (a.count("m"), a.count("n")) == (b.count("m"),
                                                                                                  b.count("n"))
    lines = [f"{x}: {path}: {r.obj('config').text('out')} (ozhpc {r.text('ozhpc_version')}, {r.text('date')}, "
             f"{r.text('host')})"
             for x, path, r in zip("ab", paths, (a, b))]
    lines.append("result: " + ("the same C, bit for bit (same fingerprint)" if same_bits
                               else "C differs (the fingerprints differ)"))
    differs = [f"  {key}: {a.get(key)} -> {b.get(key)}" for key in COMPARED if a.get(key) != b.get(key)]
    lines += (["setup that differs (a -> b):"] + differs) if differs else ["setup: the same"]
    lines.append(f"{'seconds, slowest rank':<24}{'a':>10}{'b':>10}{'b / a':>8}")
    sa, sb = a.obj("seconds"), b.obj("seconds")
    for phase in ("total", *STEPS):
        if phase in sa or phase in sb:
            x, y = sa.seconds(phase, 0.0), sb.seconds(phase, 0.0)
            lines.append(f"  {phase:<22}{x:>10.3f}{y:>10.3f}{_ratio(y, round(x, 3)):>8}")
    ra, rb = a.number("gflops"), b.number("gflops")
    lines.append(f"  {'GFLOP/s FP64-equiv.':<22}{ra:>10.3g}{rb:>10.3g}{_ratio(rb, ra):>8}")
    return lines


def _ratio(y: float, x: float) -> str:
    """``y / x``, or '-' against a time that prints as 0.000 (a ratio to it says nothing)."""
    return f"{y / x:.2f}" if x > 0 else "-"


def report_lines(paths: list[str]) -> list[str]:
    """``ozhpc report``: one path in words, two compared."""
    if len(paths) > 2:
        raise InputError(f"give one report, or two to compare (got {len(paths)})")
    reports = [load(p) for p in paths]
    if len(reports) == 1:
        return describe(reports[0])
    return compare(*reports, paths=tuple(paths))
