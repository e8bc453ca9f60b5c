"""``lklab.progress``: where a stage is, as log lines off a terminal and as a bar on one."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

import lklab.progress as progress_module
from lklab.progress import configure_logging, progress


class Clock:
    """A clock the test moves: ``now`` seconds; called, it reads the time, as ``progress`` does."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lklab.progress"]


def test_log_lines_off_a_terminal_at_most_one_per_interval(clock, caplog):
    caplog.set_level(logging.INFO, logger="lklab.progress")
    with progress("replay", total=4, interval=10, bar=False, clock=clock) as replay:
        clock.now += 5
        replay.advance()  # 5 s after the first line: not yet
        clock.now += 5
        replay.advance()
        assert (replay.done, replay.elapsed, replay.remaining) == (2, 10, 10)
        clock.now += 30
        replay.advance(2)
    assert lines(caplog) == [
        "replay: 0/4",
        "replay: 2/4 (50%), 10s elapsed, about 10s left",
        "replay: 4/4 (100%), 40s elapsed, about 0s left",
        "replay: 4/4 done in 40s",
    ]


def test_the_time_left_falls_while_a_step_runs(clock):
    with progress("settings", total=4, bar=False, clock=clock) as settings:
        clock.now += 10
        settings.advance()  # a step takes 10 s: 3 to come, 30 s
        assert settings.remaining == 30
        clock.now += 4
        assert settings.remaining == 26  # 4 s into the second step
        assert settings.step("next") == "[2/4] next, about 26s left"
        clock.now += 15
        assert settings.remaining == 20  # the step runs long: at least the 2 steps after it
        settings.advance()  # 2 steps in 29 s: 14.5 s a step, 2 to come
        assert settings.remaining == 29


def test_a_stage_without_a_total_and_one_that_fails(clock, caplog):
    caplog.set_level(logging.INFO, logger="lklab.progress")
    with progress("scan", interval=0, bar=False, clock=clock) as scan:
        clock.now += 3
        scan.advance(1500)
        assert scan.remaining is None
    with pytest.raises(RuntimeError), progress("batch", total=3, bar=False, clock=clock) as batch:
        batch.advance()
        clock.now += 7
        raise RuntimeError("boom")
    assert lines(caplog) == [
        "scan: started",
        "scan: 1,500 done, 3s elapsed",
        "scan: 1,500 done in 3s",
        "batch: 0/3",
        "batch: stopped at 1/3 after 7s",
    ]
    assert caplog.records[-1].levelno == logging.WARNING


def test_a_bar_on_a_terminal(caplog):
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    caplog.set_level(logging.INFO, logger="lklab.progress")
    with progress("streams", total=2, console=terminal) as streams:
        with progress("replay", total=5) as replay:  # a second bar below the first
            replay.advance(5)
            progress_module._bars.refresh()  # draw now, not at the next tick
        streams.advance(2)
    drawn = screen.getvalue()
    assert "streams" in drawn and "2/2" in drawn and "replay" in drawn and "5/5" in drawn
    assert lines(caplog) == [] and progress_module._bars is None


def test_bad_figures_are_refused():
    with pytest.raises(ValueError, match="a number of steps >= 0"), progress("x", total=-1, bar=False):
        pass
    with pytest.raises(ValueError, match="only goes forward"), progress("x", total=1, bar=False) as stage:
        stage.advance(-1)


def test_configure_logging_prints_time_and_message_once(capsys):
    logger = logging.getLogger("lklab_test_progress")  # outside ``lklab``, which an in-process ``main`` may have set up
    try:
        configure_logging(logger="lklab_test_progress")
        configure_logging(logger="lklab_test_progress")
        logger.info("starting Spark")
    finally:
        logger.handlers.clear()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("] starting Spark") and line[0] == "[" and line[9] == "]"


def test_a_step_says_its_number_and_the_time_left(clock):
    with progress("settings", total=3, bar=False, clock=clock) as settings:
        assert settings.step("W=20s: live stream") == "[1/3] W=20s: live stream"  # no pace yet
        clock.now += 12
        settings.advance()
        assert settings.step("W=5m: replay") == "[2/3] W=5m: replay, about 24s left"
    with progress("scan", bar=False, clock=clock) as scan:
        assert scan.step("segment 7") == "segment 7"
