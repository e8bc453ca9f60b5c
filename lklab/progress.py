"""Progress of long work: a bar on a terminal, plain log lines everywhere else.

    with progress("replay", total=len(segments)) as replay:
        for segment in segments:
            ...
            replay.advance()

A stage has a name, a number of steps done out of ``total`` (``None``: not known in advance),
the seconds elapsed since it began and, once a step is done, the seconds left: the pace of the
steps done (``pace``: their seconds over their number) carried over the steps to come, less the
time already spent on the one under way, ``pace * (total - done) - in_step``, and never less
than the steps after it would take (``pace * (total - done - 1)``): an estimate that falls as
the work goes on, not one that grows while a step runs.

Where stderr is a terminal the stage is a ``rich`` bar (name, bar, done/total, elapsed, time
left) redrawn in place; a stage opened inside it is a bar below it while it runs. Anywhere else (CI, a log
file, an Airflow task) the same facts are records of the ``lklab.progress`` logger: one when
the stage begins, then at most one every ``interval`` seconds, and one when it ends, so a log
holds a handful of lines per stage, not a line per step.

Messages are not progress: write them with ``logging`` (``logging.getLogger(__name__).info``).
``configure_logging`` prints records as ``[HH:MM:SS] message`` on stderr, and a record written
while a bar is drawn goes above the bar instead of through it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as _Bars

__all__ = ["Progress", "progress", "configure_logging", "CurrentStderr"]

log = logging.getLogger(__name__)

_bars: _Bars | None = None  # the bars drawn now, shared by nested stages
_open_stages = 0


def _console() -> Console:
    return Console(stderr=True)


class Progress:
    """One stage of long work: ``advance`` it as steps are done."""

    def __init__(
        self, stage: str, total: int | None, interval: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if total is not None and total < 0:
            raise ValueError(f"total {total}: a number of steps >= 0, or None when not known")
        if interval < 0:
            raise ValueError(f"interval {interval}: seconds >= 0 between log lines")
        self.stage, self.total, self.interval = stage, total, interval
        self.done = 0
        self._now = clock  # seconds on a clock that only goes forward
        self._started = self._logged = clock()
        self._done_at = self._started  # when the last step was counted done
        self._bar: tuple[_Bars, int] | None = None

    @property
    def elapsed(self) -> float:
        """Seconds since the stage began."""
        return self._now() - self._started

    @property
    def remaining(self) -> float | None:
        """Seconds left at the pace of the steps done, less the time spent on the one under way;
        ``None`` before the first step or without a total."""
        if self.total is None or not self.done:
            return None
        to_come = max(self.total - self.done, 0)
        pace = (self._done_at - self._started) / self.done
        in_step = self._now() - self._done_at
        return max(pace * to_come - in_step, pace * max(to_come - 1, 0))

    def describe(self) -> str:
        """``3/10 (30%), 12s elapsed, about 28s left``: where the stage is."""
        if self.total is None:
            return f"{self.done:,} done, {self.elapsed:.0f}s elapsed"
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        left = "" if self.remaining is None else f", about {self.remaining:.0f}s left"
        return f"{self.done:,}/{self.total:,}{share}, {self.elapsed:.0f}s elapsed{left}"

    def step(self, text: str) -> str:
        """``text`` about the step under way, as a message says it: ``[3/10] text, about 28s left``
        (the step's number, and the time left once a step is done)."""
        number = f"[{self.done + 1}/{self.total}] " if self.total is not None else ""
        left = "" if self.remaining is None else f", about {self.remaining:.0f}s left"
        return f"{number}{text}{left}"

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more steps done."""
        if steps < 0:
            raise ValueError(f"steps {steps}: progress only goes forward")
        self.done += steps
        self._done_at = self._now()
        if self._bar is not None:
            bars, task = self._bar
            bars.update(task, completed=self.done)
        elif self._now() - self._logged >= self.interval:
            self._log(self.describe())

    def _log(self, text: str, level: int = logging.INFO) -> None:
        self._logged = self._now()
        log.log(level, "%s: %s", self.stage, text)


@contextmanager
def progress(
    stage: str,
    total: int | None = None,
    *,
    interval: float = 10.0,
    bar: bool | None = None,
    clock: Callable[[], float] = time.monotonic,
    console: Console | None = None,
) -> Iterator[Progress]:
    """Track ``stage`` while the ``with`` block runs: a bar when ``bar`` (default: when stderr
    is a terminal), else log lines at most every ``interval`` seconds. ``clock`` times the
    stage (seconds); ``console`` is where a bar is drawn (default: stderr)."""
    global _bars, _open_stages
    tracked = Progress(stage, total, interval, clock)
    console = console or _console()
    if bar is None:
        bar = _bars is not None or console.is_terminal
    if bar:
        if _bars is None:
            _bars = _Bars(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=console,
            )
            _bars.start()
        tracked._bar = (_bars, _bars.add_task(stage, total=total))
    else:
        tracked._log(f"0/{total:,}" if total is not None else "started")
    _open_stages += 1
    try:
        yield tracked
    except BaseException:
        if tracked._bar is None:
            tracked._log(
                f"stopped at {tracked.done:,}{'' if total is None else f'/{total:,}'} after {tracked.elapsed:.0f}s",
                logging.WARNING,
            )
        raise
    else:
        if tracked._bar is None:
            tracked._log(f"{tracked.done:,}{'' if total is None else f'/{total:,}'} done in {tracked.elapsed:.0f}s")
    finally:
        _open_stages -= 1
        if _bars is not None and not _open_stages:
            _bars.stop()
            _bars = None
        elif tracked._bar is not None:
            _bars.remove_task(tracked._bar[1])  # a stage inside another: only the open ones stay drawn


class CurrentStderr(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is when a record comes: while a bar is
    drawn, rich has put a stand-in there that prints above the bar."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def configure_logging(level: int = logging.INFO, logger: str = "lklab") -> None:
    """Print the records of ``logger`` and its children at ``level`` and above on stderr as
    ``[HH:MM:SS] message``; calling it again changes the level, it adds no second handler."""
    target = logging.getLogger(logger)
    target.setLevel(level)
    if not any(isinstance(h, CurrentStderr) for h in target.handlers):
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", datefmt="%H:%M:%S"))
        target.addHandler(handler)
