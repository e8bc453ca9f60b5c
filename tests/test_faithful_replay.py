"""Faithful replay: the stream's rows depend on the log alone.

On generated logs of every scenario and every window kind: the live step over one segment per
micro-batch, over random cuts with a restart from the state table in the middle, and the Kappa
replay through Spark over the whole log write the same rows (batch ids aside where the cuts
differ; a replay numbers its rows as a run reading one segment per micro-batch does). End to
end, ``lklab speed`` at two batch sizes and ``lklab replay`` leave the same Delta tables. On a
hand-made log whose clock misbehaves (ingest times that go back, heartbeats, a first line with
no ingest time), with the watermark moved after every line and on a 7 s cadence, random cuts
with a restart and ``lklab replay`` write the same rows to every table as one segment per
micro-batch.
"""

from __future__ import annotations

import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lklab.pipelines.billing_windows.agreement import BOOKKEEPING, metric_totals, row_counts
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.replay import run_replay
from lklab.pipelines.billing_windows.speed import SPEED_TABLES, run_speed
from shared.catalog import replay_prefix
from shared.config import load_config
from shared.eventlog import EventLog, format_timestamp, heartbeat_line
from shared.log_source import parsed_log
from shared.micro_batch import TIMING_COLUMNS
from shared.replay import replay
from shared.speed import StreamSettings, stream_step
from shared.stream_metrics import batch_totals, metrics_table
from shared.stream_state import StreamState, state_from_table, state_table
from shared.tables import Tables
from shared.windows import SessionWindows, SlidingWindows, TumblingWindows
from tests.conftest import event_line
from tests.test_speed_step import at, parsed, seconds_of

SECOND = 1_000_000
SCENARIOS = ("billing", "clickstream", "outage")
WINDOWS = {
    "tumbling": TumblingWindows(60 * SECOND),
    "sliding": SlidingWindows(120 * SECOND, 30 * SECOND),
    "session": SessionWindows(90 * SECOND),
}


@pytest.fixture(scope="module")
def logs(spark, tmp_path_factory) -> dict[str, pa.Table]:
    """Per scenario: a small generated log, parsed once (Arrow, in log order)."""
    parsed = {}
    for scenario in SCENARIOS:
        lake = tmp_path_factory.mktemp(scenario)
        params = GeneratorParams(
            scenario=scenario,
            events=1_200,
            accounts=4,
            span=2 * 3600 * SECOND,
            duplicate_rate=0.03,
            malformed_rate=0.01,
            segment_interval=10 * 60 * SECOND,
            seed=5,
        )
        generate(params, lake)
        table = parsed_log(spark, str(lake), EventLog(lake).last_segment()).toArrow()
        parsed[scenario] = table.sort_by([("segment", "ascending"), ("line_number", "ascending")])
    return parsed


def settings_for(kind: str) -> StreamSettings:
    return StreamSettings(
        WINDOWS[kind], watermark_delay=30 * SECOND, allowed_lateness=5 * 60 * SECOND, dedup_horizon=20 * 60 * SECOND
    )


def segments_of(parsed: pa.Table) -> list[pa.Table]:
    numbers = sorted(set(parsed["segment"].to_pylist()))
    return [parsed.filter(pa.compute.equal(parsed["segment"], n)) for n in numbers]


def live(
    settings: StreamSettings, batches: list[pa.Table], restart_after: int | None = None, history: bool = False
) -> dict[str, pa.Table]:
    """What the speed layer commits, batch by batch (window rows merged as ``Tables.upsert`` does)."""
    state, out = (
        StreamState.empty(),
        {"dead_letter": [], "duplicate_events": [], "late_events": [], "stream_metrics": [], "window_history": []},
    )
    windows: dict[tuple, dict] = {}
    for batch_id, lines in enumerate(batches):
        step = stream_step(lines, state, settings, batch_id, history=history)
        if history:
            out["window_history"].append(step.history)
        out["dead_letter"].append(step.dead_letters)
        out["duplicate_events"].append(step.duplicates)
        out["late_events"].append(step.late_events)
        out["stream_metrics"].append(metrics_table([batch_totals(lines, step).figures(batch_id, 0.0)]))
        for row in step.window_changes.to_pylist():
            key = (row["window_start"], row["window_end"], row["account_id"], row["currency"])
            if row.pop("_delete"):
                windows.pop(key, None)
            else:
                windows[key] = row
        state = step.state
        if batch_id == restart_after:
            state = state_from_table(state_table(state))
    tables = {name: pa.concat_tables(parts) for name, parts in out.items() if parts}
    tables["speed_aggregates"] = pa.Table.from_pylist(list(windows.values()))
    tables["stream_state"] = state_table(state)
    return tables


def random_cuts(segments: list[pa.Table], chooser: random.Random) -> tuple[list[pa.Table], int]:
    """The segments cut into 2 to 6 micro-batches at random, and after which one to restart."""
    cuts = sorted(chooser.sample(range(1, len(segments)), k=chooser.randint(1, min(5, len(segments) - 1))))
    bounds = [0, *cuts, len(segments)]
    batches = [pa.concat_tables(segments[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    return batches, chooser.randrange(len(batches))


def same(
    left: dict,
    right: dict,
    ignore: set[str],
    names=("dead_letter", "duplicate_events", "late_events", "speed_aggregates", "stream_state"),
) -> None:
    for name in names:
        assert row_counts(left[name], ignore) == row_counts(right[name], ignore), name


@pytest.mark.parametrize("kind", sorted(WINDOWS))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_random_cuts_and_a_restart_write_the_same_rows(logs, scenario, kind):
    settings = settings_for(kind)
    segments = segments_of(logs[scenario])
    finest = live(settings, segments)
    for seed in range(3):
        batches, restart_after = random_cuts(segments, random.Random(f"{scenario}-{kind}-{seed}"))
        cut = live(settings, batches, restart_after=restart_after)
        same(cut, finest, BOOKKEEPING)
    assert finest["late_events"].num_rows > 0 and finest["duplicate_events"].num_rows > 0


@pytest.mark.parametrize("kind", sorted(WINDOWS))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_spark_replay_writes_the_rows_of_one_segment_per_micro_batch(spark, logs, scenario, kind):
    """The log as Spark hands it over here (rows spread over partitions regardless of segments)."""
    settings = settings_for(kind)
    history = scenario == "billing"  # the replay's line-by-line path, which the comparison uses
    expected = live(settings, segments_of(logs[scenario]), history=history)
    result = replay(spark.createDataFrame(logs[scenario]).persist(), settings, history=history)
    try:
        got = {
            "dead_letter": result.dead_letters.toArrow(),
            "duplicate_events": result.duplicates.toArrow(),
            "late_events": result.late_events.toArrow(),
            "speed_aggregates": result.windows,
            "stream_state": result.state,
            "stream_metrics": result.metrics,
        }
        if history:
            got["window_history"] = result.history.toArrow()
    finally:
        result.release()
    names = ("dead_letter", "duplicate_events", "late_events", "speed_aggregates", "stream_state", "stream_metrics")
    same(got, expected, TIMING_COLUMNS, names=names + (("window_history",) if history else ()))
    if history:
        assert got["window_history"].num_rows > got["speed_aggregates"].num_rows


def test_lklab_speed_at_any_batch_size_and_lklab_replay_leave_the_same_tables(spark, tmp_path):
    params = GeneratorParams(
        scenario="clickstream",
        events=1_500,
        accounts=5,
        span=3600 * SECOND,
        duplicate_rate=0.02,
        malformed_rate=0.01,
        segment_interval=5 * 60 * SECOND,
        seed=3,
    )
    fine, coarse = tmp_path / "fine", tmp_path / "coarse"
    generate(params, fine)
    shutil.copytree(fine / "log", coarse / "log")
    settings = {
        "table-engine": "deltalake",
        "window-kind": "sliding",
        "window-size": "2m",
        "window-slide": "30s",
        "watermark-delay": "20s",
    }
    for lake, per_batch in ((fine, 1), (coarse, 100_000)):
        run_speed(
            spark,
            load_config(None, {"lake": str(lake), **settings}, environ={}),
            available_now=True,
            segments_per_batch=per_batch,
        )
    run_replay(spark, load_config(None, {"lake": str(fine), **settings}, environ={}), "again")

    def tables_of(lake, prefix=""):
        tables = Tables(spark, lake, "deltalake")
        return {name: tables.read_arrow(prefix + name) for name in SPEED_TABLES}

    one_per_batch, all_in_one, replayed = tables_of(fine), tables_of(coarse), tables_of(fine, "kappa/again/")
    names = ("dead_letter", "duplicate_events", "late_events", "speed_aggregates", "stream_state")
    same(all_in_one, one_per_batch, BOOKKEEPING, names)
    same(replayed, one_per_batch, TIMING_COLUMNS, (*names, "stream_metrics"))
    assert all_in_one["stream_metrics"].num_rows == 1 < one_per_batch["stream_metrics"].num_rows


def test_a_held_window_finalised_then_late_updated_in_one_batch_keeps_its_final_marker():
    """The case the awkward log below found: a window opened in an earlier batch, made final by
    one line and then updated late by a later line of the same batch. Its history must say it
    was final from the first of those lines whatever the batches; it lost that row when the
    window came from the held state, because the batch's late update was taken as its opening."""
    settings = StreamSettings(
        TumblingWindows(60 * SECOND),
        watermark_delay=10 * SECOND,
        allowed_lateness=60 * SECOND,
        dedup_horizon=3600 * SECOND,
        watermark_interval=0,
    )
    # a (10 s) opens [0, 60); b (75 s) moves the watermark to 65: final; c (30 s) is judged by 65: a late update
    segments = [parsed(1, [("a", 10)]), parsed(2, [("b", 75), ("c", 30)])]
    history = lambda run: sorted(
        (seconds_of(r["processing_time"]), r["change"], r["status"], r["event_count"], r["late_update"])
        for r in run["window_history"].to_pylist()
        if r["window_end"] == at(60)
    )
    # segment k arrives at 10,000 + k seconds
    expected = [
        (10_001, "update", "open", 1, False),
        (10_002, "final", "final", 1, False),
        (10_002, "update", "final", 2, True),
    ]
    for batches in (segments, [pa.concat_tables(segments)]):
        assert history(live(settings, batches, history=True)) == expected


# ------------------------------------------------------------------ a clock that misbehaves

AWKWARD_START = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
AWKWARD_WINDOWS = {
    "tumbling": {"window-kind": "tumbling", "window-size": "1m"},
    "sliding": {"window-kind": "sliding", "window-size": "2m", "window-slide": "30s"},
    "session": {"window-kind": "session", "session-gap": "90s"},
}
AWKWARD_SETTINGS = {
    "table-engine": "deltalake",
    "watermark-delay": "30s",
    "allowed-lateness": "1m",
    "dedup-horizon": "4m",
}


def awkward_lines(rng: random.Random) -> list[list[str]]:
    """About 250 lines in 15 segments, written by a producer whose clock misbehaves: the log
    opens with a line that has no ingest time (the clock starts unknown); now and then the
    writer's clock steps back (every later line is stamped earlier than lines before it) or one
    line carries an older stamp; heartbeats come between events, and two segments are quiet
    spells of heartbeats only; some events arrive minutes late, some are resent (a few with
    another amount, a few after the dedup horizon), some lines are not JSON (no ingest time) or
    lack a field."""
    at = lambda seconds: format_timestamp(AWKWARD_START + timedelta(seconds=seconds))
    now, sent, segments = 0.0, [], [["not json"]]
    for number in range(2, 16):
        if number in (7, 12):
            segments.append([heartbeat_line(AWKWARD_START + timedelta(seconds=now + 40 * k)) for k in (1, 2, 3)])
            now += 120
            continue
        lines = []
        for _ in range(rng.randint(10, 26)):
            now += rng.uniform(0, 6)
            if rng.random() < 0.05:
                now -= rng.uniform(20, 90)  # the writer's clock steps back
            stamp = now - rng.uniform(30, 120) if rng.random() < 0.04 else now  # one line stamped earlier
            roll = rng.random()
            if roll < 0.08:
                lines.append(heartbeat_line(AWKWARD_START + timedelta(seconds=stamp)))
            elif roll < 0.12:
                lines.append("{not json")
            elif roll < 0.14:
                lines.append(event_line(event_id=f"x{len(lines)}", account_id=None, ingest_time=at(stamp)))
            elif roll < 0.24 and sent:
                again = dict(rng.choice(sent[-8:] if rng.random() < 0.7 else sent))
                if rng.random() < 0.3:
                    again["amount"] = "99.99"  # a resend that contradicts its first copy
                lines.append(event_line(**again, ingest_time=at(stamp)))
            else:
                delay = rng.uniform(0, 15) if rng.random() < 0.8 else rng.uniform(40, 400)
                event = {
                    "event_id": f"e{len(sent)}",
                    "account_id": rng.choice(["a1", "a2"]),
                    "currency": rng.choice(["USD", "EUR"]),
                    "amount": f"{rng.randint(1, 9999) / 100:.2f}",
                    "event_time": at(stamp - delay),
                }
                sent.append(event)
                lines.append(event_line(**event, ingest_time=at(stamp)))
        segments.append(lines)
    return segments


@pytest.fixture(scope="module")
def awkward(spark, tmp_path_factory) -> tuple[Path, pa.Table]:
    """The awkward log in a lake of its own, and its lines as the live layer parses them."""
    lake = tmp_path_factory.mktemp("awkward")
    log = EventLog(lake)
    for lines in awkward_lines(random.Random(15)):
        log.append(lines, stamp=False)
    parsed = (
        parsed_log(spark, str(lake), log.last_segment())
        .toArrow()
        .sort_by([("segment", "ascending"), ("line_number", "ascending")])
    )
    ingest = parsed["ingest_time"].cast(pa.int64()).to_numpy(zero_copy_only=False)
    assert parsed["ingest_time"][0].as_py() is None and (np.diff(ingest[~np.isnan(ingest)]) < 0).sum() > 5, (
        "the clock goes back"
    )
    assert sum(parsed["heartbeat"].to_pylist()) > 10 and parsed.num_rows < 300
    return lake, parsed


@pytest.mark.parametrize("kind", sorted(AWKWARD_WINDOWS))
def test_on_a_clock_that_goes_back_live_cuts_restarts_and_lklab_replay_write_the_same_rows(spark, awkward, kind):
    """Ingest times that go back, heartbeats, a watermark moved after every line (0) or on a 7 s
    cadence: one segment per micro-batch and random cuts with a restart write the same rows to
    every table, window history included; so does the replay: at 7 s ``lklab replay`` itself
    (``run_replay``: the log read and parsed, replayed with its history through the line-by-line
    path, written to Delta), at 0 the replay's computation without history (fixed windows: the
    pairs summed by Spark)."""
    lake, parsed = awkward
    segments = segments_of(parsed)
    every = ("dead_letter", "duplicate_events", "late_events", "speed_aggregates", "stream_state")
    for interval in ("0", "7s"):
        config = load_config(
            None,
            {"lake": str(lake), **AWKWARD_SETTINGS, **AWKWARD_WINDOWS[kind], "watermark-interval": interval},
            environ={},
        )
        settings = StreamSettings.of(config)
        finest = live(settings, segments, history=True)
        chooser = random.Random(f"awkward-{kind}-{interval}")
        for _ in range(3):
            batches, restart_after = random_cuts(segments, chooser)
            cut = live(settings, batches, restart_after=restart_after, history=True)
            same(cut, finest, BOOKKEEPING, (*every, "window_history"))
            assert metric_totals(cut["stream_metrics"]) == metric_totals(finest["stream_metrics"]), interval

        if interval == "7s":
            name = f"awkward-{kind}"
            run_replay(spark, config, name, history=True)
            tables = Tables(spark, lake, "deltalake")
            replayed = {
                table: tables.read_arrow(replay_prefix(name) + table) for table in (*SPEED_TABLES, "window_history")
            }
            same(replayed, finest, TIMING_COLUMNS, (*every, "stream_metrics", "window_history"))
        else:
            result = replay(spark.createDataFrame(parsed), settings)
            try:
                replayed = {
                    "dead_letter": result.dead_letters.toArrow(),
                    "duplicate_events": result.duplicates.toArrow(),
                    "late_events": result.late_events.toArrow(),
                    "speed_aggregates": result.windows,
                    "stream_state": result.state,
                    "stream_metrics": result.metrics,
                }
            finally:
                result.release()
            same(replayed, finest, TIMING_COLUMNS, (*every, "stream_metrics"))
        late, duplicates = finest["late_events"], finest["duplicate_events"]
        assert (
            late.num_rows > 0
            and sum(duplicates["payload_conflict"].to_pylist()) > 0
            and finest["dead_letter"].num_rows > 5
        )
