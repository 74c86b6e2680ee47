"""Rank-0 progress for long runs, fed by the SUMMA driver's ``on_panel(done, total)`` hook and
the runner's steps around it (:func:`step`: reading A and B, scales and split, writing C), so
that a run shows what it does from its first second.

* ``"bar"``: a tqdm bar on stderr (what ``"auto"`` picks when stderr is a terminal), labelled
  with the step under way, its elapsed time ticking every second;
* ``"log"``: plain lines, one per step, and for the panels throttled to one per 10 % of the
  panels or per 30 s, whichever comes first, plus the last one; a step or panel that runs
  longer than 30 s says so every 30 s (what ``"auto"`` picks in batch jobs, where a bar's
  carriage returns would fill the Slurm output file)::

      ozhpc: reading A and B, 0.4 s elapsed
      ozhpc: scales and split, 1.1 s elapsed
      ozhpc: panel 12/64 (19%), 3.2 s elapsed, ~14 s left

* ``"off"``: nothing.

The ETA counts from the start of the panel loop, never the reads and start-up before it:
a call ``on_panel(0, total)`` marks that start; without one, the first panel's call does
(so the first line has no ETA yet). Only rank 0 reports; :func:`make_progress` gives
every other rank ``None`` (no hook at all), so they never pay for it. The hook itself is local:
no communication, and a call that prints nothing costs one clock read and a comparison.
"""
from __future__ import annotations

import sys
import threading
import time
import weakref
from typing import Callable, Optional, TextIO

MODES = ("auto", "bar", "log", "off")
#: Log mode prints at least every LOG_FRACTION of the panels and every LOG_SECONDS.
LOG_FRACTION = 0.10
LOG_SECONDS = 30.0


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def resolve_mode(mode: str, stream: TextIO | None = None) -> str:
    """``"auto"`` -> ``"bar"`` on a terminal, ``"log"`` otherwise; other modes unchanged."""
    if mode not in MODES:
        raise ValueError(f"progress must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "auto":
        return mode
    return "bar" if _isatty(stream if stream is not None else sys.stderr) else "log"


def _seconds(t: float) -> str:
    if t < 60:
        return f"{t:.1f} s"
    if t < 3600:
        return f"{int(t // 60)} min {int(t % 60):02d} s"
    return f"{int(t // 3600)} h {int(t % 3600 // 60):02d} min"


class _Progress:
    """What both displays share: the current step, the panel rate since the loop started (for
    the ETA), and a ticker thread started by the first :meth:`step`, which calls :meth:`_tick`
    every ``tick`` seconds until :meth:`close` (it holds only a weak reference, so a hook
    dropped after an error stops it too)."""

    tick = 1.0

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.start = clock()
        self.current = ""   # the step under way, or "" in the panel loop
        self.done = self.total = 0
        self._first = None  # (time, done) at the loop start (a call with done = 0) or the first
        self._lock = threading.Lock()   # panel: the ETA uses the panel rate since then, not the set-up
        self._ticker: threading.Thread | None = None
        self.closed = False

    def _left(self, done: int, total: int, now: float) -> float | None:
        """Seconds left at the panel rate since the loop started; None before any rate is known."""
        t1, d1 = self._first
        return (now - t1) / (done - d1) * (total - done) if done > d1 else None

    def _panels(self, done: int, total: int) -> float:
        """Record a panel call; returns the time."""
        now = self.clock()
        if self._first is None or done == 0:   # done == 0: a (new) pass of the panel loop starts
            self._first = (now, done)
        self.done, self.total = done, total
        self.current = "" if done < total else FINISHING
        return now

    def step(self, name: str) -> None:
        """A step outside the panel loop begins (reading, split, writing): shown at once."""
        with self._lock:
            self.current = name
            self._show_step(name)
        if self._ticker is None and self.tick:
            ref = weakref.ref(self)
            self._ticker = threading.Thread(target=_tick_while_open, args=(ref, self.tick), daemon=True,
                                            name="ozhpc-progress")
            self._ticker.start()

    def close(self) -> None:
        self.closed = True


FINISHING = "finishing C (certificate, combine)"
"""The step after the last panel of a pass, until the next pass or the write."""


def _tick_while_open(ref, interval: float) -> None:
    while True:
        time.sleep(interval)
        hook = ref()
        if hook is None or hook.closed:
            return
        with hook._lock:
            hook._tick()
        del hook


class LogProgress(_Progress):
    """Throttled plain-text progress lines (see the module docstring).

    Parameters
    ----------
    stream : text stream, default ``sys.stderr``
    label : str
        What is counted ("panel").
    fraction, interval : float
        Print when another ``fraction`` of the total is done or ``interval`` seconds passed
        (also with no panel done: a step or a long panel says it is still running).
    clock : callable
        Seconds as a float (tests pass a fake one).
    """

    def __init__(self, stream: TextIO | None = None, label: str = "panel",
                 fraction: float = LOG_FRACTION, interval: float = LOG_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(clock)
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.fraction = fraction
        self.interval = interval
        self._last_time = self.start
        self._last_done = 0
        self.lines = 0

    def format(self, done: int, total: int, elapsed: float, left: float | None = None) -> str:
        pct = 100.0 * done / total if total else 100.0
        text = f"ozhpc: {self.label} {done}/{total} ({pct:.0f}%), {_seconds(elapsed)} elapsed"
        if left is not None and done < total:
            text += f", ~{_seconds(left)} left"
        return text

    def _print(self, text: str, now: float) -> None:
        print(text, file=self.stream, flush=True)
        self._last_time = now
        self.lines += 1

    def _show_step(self, name: str) -> None:
        now = self.clock()
        self._print(f"ozhpc: {name}, {_seconds(now - self.start)} elapsed", now)

    def _tick(self) -> None:
        """Every ``interval`` without a line: say what is still running."""
        now = self.clock()
        if now - self._last_time < self.interval:
            return
        if self.current:
            self._show_step(self.current)
        else:
            self._print(self.format(self.done, self.total, now - self.start,
                                    self._left(self.done, self.total, now)), now)

    def __call__(self, done: int, total: int) -> None:
        with self._lock:
            now = self._panels(done, total)
            if done == 0:  # the panel loop (or another pass of it) starts: nothing to print yet
                self._last_done = 0
                return
            step = max(1, int(total * self.fraction)) if total else 1
            if not (self._last_done == 0 or done >= total or done - self._last_done >= step
                    or now - self._last_time >= self.interval):
                return
            self._last_done = done
            self._print(self.format(done, total, now - self.start, self._left(done, total, now)), now)


class BarProgress(_Progress):
    """A tqdm bar on ``stream`` (a terminal): the step under way as its label, the panels done,
    the elapsed time ticking every second, and the time left at the panel rate since the loop
    started (the set-up before it does not count)."""

    FORMAT = "{desc}: {bar}{n_fmt}/{total_fmt} panels, {elapsed} elapsed{postfix}"

    def __init__(self, stream: TextIO | None = None, label: str = "panel",
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(clock)
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.bar = None

    def _open(self, total=None):
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=self.stream, unit=self.label, desc="ozhpc", bar_format=self.FORMAT,
                            dynamic_ncols=True, leave=True)
        return self.bar

    def _show_step(self, name: str) -> None:
        self._open().set_description_str(f"ozhpc {name}")

    def _tick(self) -> None:
        if self.bar is not None:
            self.bar.refresh()

    def __call__(self, done: int, total: int) -> None:
        with self._lock:
            now = self._panels(done, total)
            bar = self._open(total)
            bar.total = total
            bar.set_description_str(f"ozhpc {self.current or 'multiply'}", refresh=False)
            left = self._left(done, total, now) if done < total else None
            bar.set_postfix_str("" if left is None else f"~{_seconds(left)} left", refresh=False)
            bar.update(done - bar.n)

    def close(self) -> None:
        super().close()
        if self.bar is not None:
            self.bar.close()


def step(hook, name: str) -> None:
    """Tell ``hook`` (an ``on_panel`` hook, or None) that a step begins, when it shows steps."""
    show = getattr(hook, "step", None)
    if show is not None:
        show(name)


def make_progress(mode: str = "auto", rank: int = 0, stream: TextIO | None = None,
                  label: str = "panel") -> Optional[Callable[[int, int], None]]:
    """The ``on_panel(done, total)`` hook for this rank, or ``None`` for no hook.

    Parameters
    ----------
    mode : "auto", "bar", "log" or "off"
        ``RunConfig.progress``.
    rank : int
        Only rank 0 gets a hook.
    stream : text stream, default ``sys.stderr``

    Returns
    -------
    callable or None
        ``None`` on ranks other than 0 and for ``"off"``; otherwise a callable with a
        ``close()`` method.

    Raises
    ------
    ValueError
        An unknown mode.
    """
    mode = resolve_mode(mode, stream)
    if rank != 0 or mode == "off":
        return None
    if mode == "bar":
        return BarProgress(stream, label)
    return LogProgress(stream, label)
