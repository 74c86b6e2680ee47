"""Run reports in words: the summary ``gemm`` / ``run`` print, and ``ozhpc report a.json [b.json]``,
which reads one report or compares two (people who run hundreds of jobs diff their reports).

Only what applies is shown (communication only with more than one rank, the certificate only
when it was checked), and each figure says what it is; docs/batch.md documents every field.
"""
from __future__ import annotations

import json

from .errors import InputError

COMPUTE_PHASES = ("scales", "split", "multiply", "certificate", "combine")
"""The phases whose sum the FP64-equivalent rate divides by (as ``gflops`` in the report)."""
STEPS = ("startup", "read", *COMPUTE_PHASES, "fingerprint", "write")


def load(path: str) -> dict:
    """A report file, or one line saying why it is not one (exit 2)."""
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as exc:
        raise InputError(f"report {path!r}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"report {path!r} is not JSON ({exc})") from None
    if not isinstance(report, dict) or "ozhpc_version" not in report or "m" not in report:
        raise InputError(f"report {path!r} is not an ozhpc run report (no ozhpc_version, m, n, k)")
    return report


def _s(x) -> str:
    return f"{x:.3f}" if isinstance(x, (int, float)) else str(x)


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.1f} MB"


def seconds_line(report: dict) -> str:
    s = report["seconds"]
    parts = [f"{p} {_s(s[p])}" for p in STEPS if p in s and (p != "certificate" or s[p])]
    products = f"the products {_s(s['compute'])}" if "compute" in s else ""
    if report["ranks"] > 1 and "comm_wait" in s:
        products += f", waiting for panels {_s(s['comm_wait'])}"
    elif "comm_exposed" in s:  # one rank: nothing moves; the rest of the loop is packing the panels
        products += f", packing panels {_s(s['comm_exposed'])}"
    parts = [f"{p} ({products})" if p.startswith("multiply ") and products else p for p in parts]
    return f"seconds, slowest rank: total {_s(s['total'])} = " + ", ".join(parts)


def communication_line(report: dict) -> str | None:
    """Panels moved between ranks: None on one rank, where nothing moves."""
    if report["ranks"] <= 1:
        return None
    s, overlap = report["seconds"], report.get("overlap")
    hidden = ("" if overlap is None else
              f"; broadcasts took {_s(s.get('comm', 0.0))} s, {100 * overlap:.0f}% of it hidden behind the products")
    why = f" ({report['transport_reason']})" if report.get("transport_reason") else ""
    wire = f", panels as {report['wire']}" if report.get("wire") else ""
    return (f"communication: {report['transport']}{why}{wire}, {report['panels']} k-panel(s) of width {report['kb']}"
            f"{hidden}; sent {_mb(report['bytes_sent']['total'])} in all "
            f"(the SUMMA model: {_mb(report['bytes_model_total'])})")


def rate_line(report: dict) -> str:
    return (f"rate: {report['gflops']:.3g} GFLOP/s FP64-equivalent: 2mnk over the compute phases (scales "
            "to combine), the rate a native FP64 GEMM would need to take as long")


def certificate_line(report: dict) -> str:
    """The line on the certificate of "auto" (the report's ``certified`` fields)."""
    if report["certified"] is None:
        return f"certified: not checked (fixed {'--bits' if report['scheme'] == 'ozaki2' else '--slices'})"
    level = report.get("guarantee")
    if report["certified"]:
        return f"certified: yes, guarantee {level} (worst bound ratio {float(report['worst_ratio']):.2g})"
    return (f"certified: NO, guarantee {level}: {report['uncertified']} entries "
            f"(worst bound ratio {float(report['worst_ratio']):.3g})")


def summary_lines(report: dict, report_path: str | None = None) -> list[str]:
    """What ``ozhpc gemm`` and ``ozhpc run`` print after a run (or a dry run)."""
    if report.get("dry_run"):
        return [f"dry run: C = {report['m']}x{report['n']} (k = {report['k']}) -> {report['config']['out']}, "
                f"grid {report['grid'][0]}x{report['grid'][1]}, block {report['block'][0]}x{report['block'][1]}, "
                f"panel {report['kb']}, engine {report['engine']}, wire {report.get('wire', '?')}",
                f"  {report['memory']['summary']}; nothing was read or written"]
    lines = [f"C = {report['m']}x{report['n']} (k = {report['k']}) -> {report['config']['out']}",
             f"plan: {report['plan_summary']}; engine {report['engine']}, "
             f"{report['ranks']} rank{'s' if report['ranks'] > 1 else ''}"
             + (f", grid {report['grid'][0]}x{report['grid'][1]}" if report["ranks"] > 1 else ""),
             seconds_line(report)]
    comm = communication_line(report)
    if comm:
        lines.append(comm)
    if report.get("kernels"):
        kn = report["kernels"]
        lines.append(f"GPU kernels: {kn['from_store']} loaded from the kernel store, {kn['compiled']} compiled"
                     + (" (run `ozhpc warmup` once per node or cache directory)" if kn["compiled"] else ""))
    lines += [rate_line(report), certificate_line(report),
              f"fingerprint {report['fingerprint']}" + (f", sha256 {report['sha256']}" if report.get("sha256") else "")]
    if report_path:
        lines.append(f"report: {report_path} (read it with: ozhpc report {report_path})")
    return lines[:1] + ["  " + line for line in lines[1:]]


def product_line(cfg: dict) -> str:
    """``C = 2 A^T B - C0; A = ..., B = ...`` from the report's ``config``."""
    alpha, beta = float(cfg["alpha"]), float(cfg.get("beta") or 0.0)
    text = "C = " + ("" if alpha == 1 else "-" if alpha == -1 else f"{alpha:g} ")
    text += ("A^T" if cfg["transa"] else "A") + " " + ("B^T" if cfg["transb"] else "B")
    if beta:
        text += (" + " if beta > 0 else " - ") + ("" if abs(beta) == 1 else f"{abs(beta):g} ") + "C0"
    return text + f"; A = {cfg['a']}, B = {cfg['b']}" + (f", C0 = {cfg['c']}" if beta else "")


def describe(report: dict) -> list[str]:
    """One report in words: provenance, what was computed, then the summary; for a plan that
    was not certified, its a-priori error bound (a certified C has the certificate's instead)."""
    lines = [f"ozhpc {report['ozhpc_version']} on {report['host']}, {report['date']} "
             f"(python {report['python']}, numpy {report['numpy']})", product_line(report["config"])]
    lines += summary_lines(report)
    bound = report.get("error_bound")
    if bound and not report.get("certified"):
        lines.append(f"  a-priori error bound of the plan: |C_ij - (AB)_ij| <= 2^(e_i+f_j) ("
                     f"{float(bound['truncation']):.2e} truncation + {float(bound.get('combine', 0.0)):.2e} combine) + "
                     f"{float(bound['rounding']):.2e} |C_ij|  (e_i, f_j: the row and column scales)")
    return lines


COMPARED = ("m", "n", "k", "scheme", "plan_summary", "engine", "ranks", "grid", "block", "kb", "transport", "wire",
            "certified")


def compare(a: dict, b: dict, paths=("a", "b")) -> list[str]:
    """Two reports side by side: same result or not, what differs in the setup, time per phase."""
    for path, r in zip(paths, (a, b)):
        if r.get("dry_run"):
            raise InputError(f"report {path!r} is a dry run's: it has no result or times to compare")
    same_bits = a.get("fingerprint") == b.get("fingerprint") and (a["m"], a["n"]) == (b["m"], b["n"])
    lines = [f"a: {paths[0]}: {a['config']['out']} ({a['date']}, {a['host']})",
             f"b: {paths[1]}: {b['config']['out']} ({b['date']}, {b['host']})",
             "result: " + ("the same C, bit for bit (same fingerprint)" if same_bits
                           else "C differs (the fingerprints differ)")]
    differs = [f"  {key}: {a.get(key)} -> {b.get(key)}" for key in COMPARED if a.get(key) != b.get(key)]
    lines += (["setup that differs (a -> b):"] + differs) if differs else ["setup: the same"]
    lines.append(f"{'seconds, slowest rank':<24}{'a':>10}{'b':>10}{'b / a':>8}")
    sa, sb = a["seconds"], b["seconds"]
    for phase in ("total", *STEPS):
        if phase in sa or phase in sb:
            x, y = float(sa.get(phase, 0.0)), float(sb.get(phase, 0.0))
            lines.append(f"  {phase:<22}{x:>10.3f}{y:>10.3f}{_ratio(y, round(x, 3)):>8}")
    ra, rb = float(a["gflops"]), float(b["gflops"])
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
