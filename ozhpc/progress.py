"""Rank-0 progress for long runs, fed by the SUMMA driver's ``on_panel(done, total)`` hook.

* ``"bar"``: a tqdm bar on stderr (what ``"auto"`` picks when stderr is a terminal);
* ``"log"``: plain lines, throttled to one per 10 % of the panels or per 30 s, whichever
  comes first, plus the last one (what ``"auto"`` picks in batch jobs, where a bar's
  carriage returns would fill the Slurm output file)::

      ozhpc: panel 12/64 (19%), 3.2 s elapsed, ~14 s left

* ``"off"``: nothing.

The ETA counts from the start of the panel loop, never the reads and start-up before it:
a call ``on_panel(0, total)`` marks that start; without one, the first panel's call does
(so the first line has no ETA yet). Only rank 0 reports; :func:`make_progress` gives
every other rank ``None`` (no hook at all), so they never pay for it. The hook itself is local: no communication, and a call
that prints nothing costs one clock read and a comparison.
"""
from __future__ import annotations

import sys
import time
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


class LogProgress:
    """Throttled plain-text progress lines (see the module docstring).

    Parameters
    ----------
    stream : text stream, default ``sys.stderr``
    label : str
        What is counted ("panel").
    fraction, interval : float
        Print when another ``fraction`` of the total is done or ``interval`` seconds passed.
    clock : callable
        Seconds as a float (tests pass a fake one).
    """

    def __init__(self, stream: TextIO | None = None, label: str = "panel",
                 fraction: float = LOG_FRACTION, interval: float = LOG_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.fraction = fraction
        self.interval = interval
        self.clock = clock
        self.start = clock()
        self._last_time = self.start
        self._last_done = 0
        self._first = None  # (time, done) at the loop start (a call with done = 0) or the first
        self.lines = 0      # panel: the ETA uses the panel rate since then, not the set-up before

    def format(self, done: int, total: int, elapsed: float, left: float | None = None) -> str:
        pct = 100.0 * done / total if total else 100.0
        text = f"ozhpc: {self.label} {done}/{total} ({pct:.0f}%), {_seconds(elapsed)} elapsed"
        if left is not None and done < total:
            text += f", ~{_seconds(left)} left"
        return text

    def _left(self, done: int, total: int, now: float) -> float | None:
        """Seconds left at the panel rate since the loop started; None before any rate is known."""
        t1, d1 = self._first
        return (now - t1) / (done - d1) * (total - done) if done > d1 else None

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self._first is None:
            self._first = (now, done)
        if done == 0:  # the panel loop starts: nothing to print yet
            return
        step = max(1, int(total * self.fraction)) if total else 1
        if not (self.lines == 0 or done >= total or done - self._last_done >= step
                or now - self._last_time >= self.interval):
            return
        self._last_done, self._last_time = done, now
        print(self.format(done, total, now - self.start, self._left(done, total, now)),
              file=self.stream, flush=True)
        self.lines += 1

    def close(self) -> None:
        pass


class BarProgress:
    """A tqdm bar on ``stream`` (a terminal), created at the first call with the panels done
    so far as its start, so that its rate and ETA exclude the set-up before the loop."""

    def __init__(self, stream: TextIO | None = None, label: str = "panel"):
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.bar = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, file=self.stream, unit=self.label, desc="ozhpc",
                            dynamic_ncols=True, leave=True)
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


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
