"""Rank-0 progress: throttled log lines, a tqdm bar on terminals, nothing when off or off rank 0."""
import io

import pytest

from ozhpc.progress import BarProgress, LogProgress, make_progress, resolve_mode


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_modes_resolve_by_terminal():
    assert resolve_mode("auto", Tty()) == "bar"
    assert resolve_mode("auto", io.StringIO()) == "log"
    assert resolve_mode("log", Tty()) == "log"
    with pytest.raises(ValueError, match="progress must be one of"):
        resolve_mode("loud")


def test_only_rank_zero_gets_a_hook():
    assert make_progress("log", rank=1, stream=io.StringIO()) is None
    assert make_progress("bar", rank=3, stream=Tty()) is None
    assert make_progress("off", rank=0, stream=Tty()) is None
    assert isinstance(make_progress("auto", rank=0, stream=io.StringIO()), LogProgress)
    assert isinstance(make_progress("auto", rank=0, stream=Tty()), BarProgress)


def test_log_lines_every_ten_percent_with_eta():
    out, clock = io.StringIO(), FakeClock()
    hook = LogProgress(out, clock=clock)
    clock.t += 2.0          # set-up before the first panel
    for done in range(1, 65):
        hook(done, 64)
        clock.t += 0.5
    lines = out.getvalue().splitlines()
    # first panel, then every 6 panels (10% of 64), then the last one
    assert [int(l.split()[2].split("/")[0]) for l in lines] == [1, 7, 13, 19, 25, 31, 37, 43, 49, 55, 61, 64]
    assert lines[0] == "ozhpc: panel 1/64 (2%), 2.0 s elapsed"  # no panel rate yet, and the set-up is not one
    assert lines[2] == "ozhpc: panel 13/64 (20%), 8.0 s elapsed, ~25.5 s left"  # rate since panel 1: 0.5 s/panel
    assert lines[-1] == "ozhpc: panel 64/64 (100%), 33.5 s elapsed"


def test_eta_counts_from_the_loop_start_not_the_setup():
    """A long set-up (reads, kernel start-up) before the loop must not inflate or zero the ETA."""
    out, clock = io.StringIO(), FakeClock()
    hook = LogProgress(out, clock=clock)
    clock.t += 60.0           # reads and start-up
    hook(0, 10)               # the panel loop starts
    for done in range(1, 11):
        clock.t += 2.0
        hook(done, 10)
    lines = out.getvalue().splitlines()
    assert lines[0] == "ozhpc: panel 1/10 (10%), 1 min 02 s elapsed, ~18.0 s left"
    assert lines[4] == "ozhpc: panel 5/10 (50%), 1 min 10 s elapsed, ~10.0 s left"


def test_bar_rate_starts_at_its_first_panel():
    out = Tty()
    hook = make_progress("bar", rank=0, stream=out)
    hook(1, 8)
    assert hook.bar.initial == 1 and hook.bar.n == 1   # no rate from a bar created and updated at once
    assert "?" in str(hook.bar)                       # remaining time unknown, not "00:00"
    hook(8, 8)


def test_log_lines_at_least_every_30_seconds():
    out, clock = io.StringIO(), FakeClock()
    hook = LogProgress(out, clock=clock)
    for done in range(1, 1001):   # 1000 panels of 1 s: 10% = 100 s, so the 30 s rule decides
        clock.t += 1.0
        hook(done, 1000)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("ozhpc: panel 31/1000 (3%), 31.0 s elapsed, ~16 min 09 s left")
    assert len(lines) == 1 + 999 // 30 + 1


def test_log_is_quiet_between_lines():
    out, clock = io.StringIO(), FakeClock()
    hook = LogProgress(out, clock=clock)
    hook(1, 100)
    before = out.getvalue()
    for done in range(2, 11):
        hook(done, 100)
    assert out.getvalue() == before


def test_bar_counts_panels_and_closes():
    out = Tty()
    hook = make_progress("bar", rank=0, stream=out)
    for done in range(1, 8):
        hook(done, 8)
    assert hook.bar.n == 7 and not hook.bar.disable
    hook(8, 8)
    assert hook.bar.n == 8 and hook.bar.disable  # closed at the end
    text = out.getvalue()
    assert "8/8" in text and "panel" in text


def test_run_prints_log_lines_on_rank_zero(tmp_path):
    from conftest import run_cli

    a, b = tmp_path / "in.h5:/A", tmp_path / "in.h5:/B"
    assert run_cli(["gen", "--shape", "9x20", a]).returncode == 0
    assert run_cli(["gen", "--shape", "20x6", b]).returncode == 0
    proc = run_cli(["gemm", a, b, "-o", tmp_path / "c.h5:/C", "--block", "4", "--panel", "4", "--progress", "log",
                    "--engine", "numpy"])
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("ozhpc: panel")]
    assert lines and lines[-1].startswith("ozhpc: panel 5/5 (100%)")
    proc = run_cli(["gemm", a, b, "-o", tmp_path / "d.h5:/C", "--block", "4", "--progress", "off", "--engine", "numpy"])
    assert proc.returncode == 0 and "panel" not in proc.stderr
