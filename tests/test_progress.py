"""Rank-0 progress: throttled log lines, a tqdm bar on terminals, nothing when off or off rank 0."""
import io

import pytest

from ozhpc.run.progress import BarProgress, LogProgress, make_progress, resolve_mode


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


def test_bar_eta_counts_from_the_loop_start_not_the_setup():
    out, clock = Tty(), FakeClock()
    hook = BarProgress(out, clock=clock)
    clock.t += 60.0           # reads and start-up
    hook(1, 8)
    assert hook.bar.n == 1 and "left" not in str(hook.bar)   # no rate from the first panel alone
    clock.t += 2.0
    hook(2, 8)
    assert str(hook.bar).endswith("2/8 panels, 00:00 elapsed, ~12.0 s left")   # 2 s per panel since panel 1
    hook(8, 8)
    hook.close()


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
    assert hook.bar.n == 8 and str(hook.bar).startswith("ozhpc finishing C (certificate, combine): ")
    hook.step("writing C")
    hook.close()
    assert hook.bar.disable  # closed by the runner at the end
    text = out.getvalue()
    assert "8/8 panels" in text and "ozhpc writing C" in text


def test_steps_show_at_once_and_the_bar_ticks():
    """Before the first panel the bar shows the step and its elapsed time moving, every second."""
    import time

    out = Tty()
    hook = make_progress("bar", rank=0, stream=out)
    hook.step("reading A and B")
    assert str(hook.bar).startswith("ozhpc reading A and B: ") and "0/? panels, 00:00 elapsed" in str(hook.bar)
    written = out.getvalue()
    time.sleep(2.5)
    assert out.getvalue() != written and "00:02 elapsed" in out.getvalue()   # refreshed with no call at all
    hook.close()
    time.sleep(1.5)
    assert not hook._ticker.is_alive()


def test_log_steps_and_a_line_every_30_seconds_while_a_step_runs():
    out, clock = io.StringIO(), FakeClock()
    hook = LogProgress(out, clock=clock)
    hook.tick = None   # the test ticks by hand
    hook.step("reading A and B")
    clock.t += 1.5
    hook.step("scales and split")
    for _ in range(70):   # a long split: one line per 30 s, none between
        clock.t += 1.0
        hook._tick()
    hook(0, 4)
    clock.t += 40.0
    hook._tick()          # the first panel runs for 40 s
    hook(1, 4)
    assert out.getvalue().splitlines() == [
        "ozhpc: reading A and B, 0.0 s elapsed",
        "ozhpc: scales and split, 1.5 s elapsed",
        "ozhpc: scales and split, 31.5 s elapsed",
        "ozhpc: scales and split, 1 min 01 s elapsed",
        "ozhpc: panel 0/4 (0%), 1 min 51 s elapsed",   # still in the first panel
        "ozhpc: panel 1/4 (25%), 1 min 51 s elapsed, ~2 min 00 s left"]


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
