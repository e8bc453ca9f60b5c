"""Faithful replay: the stream's rows depend on the log alone.

On generated logs of every scenario and every window kind: the live step over one segment per
micro-batch, over random cuts with a restart from the state table in the middle, and the Kappa
replay through Spark over the whole log write the same rows (batch ids aside where the cuts
differ; a replay numbers its rows as a run reading one segment per micro-batch does). End to
end, ``lklab speed`` at two batch sizes and ``lklab replay`` leave the same Delta tables.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter

import pyarrow as pa
import pytest

from lklab.generator import GeneratorParams, generate
from lklab.kappa_replay import run_replay
from lklab.speed_layer import SPEED_TABLES, run_speed
from shared.config import load_config
from shared.eventlog import EventLog
from shared.log_source import parsed_log
from shared.replay import replay
from shared.speed import StreamSettings, stream_step
from shared.stream_metrics import batch_figures, metrics_table
from shared.stream_state import StreamState, state_from_table, state_table
from shared.tables import Tables
from shared.windows import SessionWindows, SlidingWindows, TumblingWindows

SECOND = 1_000_000
SCENARIOS = ("billing", "clickstream", "outage")
WINDOWS = {
    "tumbling": TumblingWindows(60 * SECOND),
    "sliding": SlidingWindows(120 * SECOND, 30 * SECOND),
    "session": SessionWindows(90 * SECOND),
}
BOOKKEEPING = {"batch_id", "updated_batch_id", "duration_seconds"}


@pytest.fixture(scope="module")
def logs(spark, tmp_path_factory) -> dict[str, pa.Table]:
    """Per scenario: a small generated log, parsed once (Arrow, in log order)."""
    parsed = {}
    for scenario in SCENARIOS:
        lake = tmp_path_factory.mktemp(scenario)
        params = GeneratorParams(scenario=scenario, events=1_200, accounts=4, span=2 * 3600 * SECOND, duplicate_rate=0.03,
                                 malformed_rate=0.01, segment_interval=10 * 60 * SECOND, seed=5)
        generate(params, lake)
        table = parsed_log(spark, str(lake), EventLog(lake).last_segment()).toArrow()
        parsed[scenario] = table.sort_by([("segment", "ascending"), ("line_number", "ascending")])
    return parsed


def settings_for(kind: str) -> StreamSettings:
    return StreamSettings(WINDOWS[kind], watermark_delay=30 * SECOND, allowed_lateness=5 * 60 * SECOND, dedup_horizon=20 * 60 * SECOND)


def segments_of(parsed: pa.Table) -> list[pa.Table]:
    numbers = sorted(set(parsed["segment"].to_pylist()))
    return [parsed.filter(pa.compute.equal(parsed["segment"], n)) for n in numbers]


def live(settings: StreamSettings, batches: list[pa.Table], restart_after: int | None = None, history: bool = False) -> dict[str, pa.Table]:
    """What the speed layer commits, batch by batch (window rows merged as ``Tables.upsert`` does)."""
    state, out = StreamState.empty(), {"dead_letter": [], "duplicate_events": [], "late_events": [], "stream_metrics": [], "window_history": []}
    windows: dict[tuple, dict] = {}
    for batch_id, lines in enumerate(batches):
        step = stream_step(lines, state, settings, batch_id, history=history)
        if history:
            out["window_history"].append(step.history)
        out["dead_letter"].append(step.dead_letters)
        out["duplicate_events"].append(step.duplicates)
        out["late_events"].append(step.late_events)
        out["stream_metrics"].append(metrics_table([batch_figures(batch_id, lines, step, 0.0)]))
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


def _hashable(value):
    return tuple(map(_hashable, value)) if isinstance(value, (list, tuple)) else value


def rows(table: pa.Table, ignore: set[str] = frozenset()) -> Counter:
    return Counter(tuple((k, _hashable(v)) for k, v in sorted(r.items()) if k not in ignore) for r in table.to_pylist())


def same(left: dict, right: dict, ignore: set[str], names=("dead_letter", "duplicate_events", "late_events", "speed_aggregates", "stream_state")) -> None:
    for name in names:
        assert rows(left[name], ignore) == rows(right[name], ignore), name


@pytest.mark.parametrize("kind", sorted(WINDOWS))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_random_cuts_and_a_restart_write_the_same_rows(logs, scenario, kind):
    settings = settings_for(kind)
    segments = segments_of(logs[scenario])
    finest = live(settings, segments)
    for seed in range(3):
        chooser = random.Random(f"{scenario}-{kind}-{seed}")
        cuts = sorted(chooser.sample(range(1, len(segments)), k=chooser.randint(1, min(5, len(segments) - 1))))
        bounds = [0, *cuts, len(segments)]
        batches = [pa.concat_tables(segments[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        cut = live(settings, batches, restart_after=chooser.randrange(len(batches)))
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
    same(got, expected, {"duration_seconds"}, names=names + (("window_history",) if history else ()))
    if history:
        assert got["window_history"].num_rows > got["speed_aggregates"].num_rows


def test_lklab_speed_at_any_batch_size_and_lklab_replay_leave_the_same_tables(spark, tmp_path):
    params = GeneratorParams(scenario="clickstream", events=1_500, accounts=5, span=3600 * SECOND, duplicate_rate=0.02,
                             malformed_rate=0.01, segment_interval=5 * 60 * SECOND, seed=3)
    fine, coarse = tmp_path / "fine", tmp_path / "coarse"
    generate(params, fine)
    shutil.copytree(fine / "log", coarse / "log")
    settings = {"table-engine": "deltalake", "window-kind": "sliding", "window-size": "2m", "window-slide": "30s", "watermark-delay": "20s"}
    for lake, per_batch in ((fine, 1), (coarse, 100_000)):
        run_speed(spark, load_config(None, {"lake": str(lake), **settings}, environ={}), available_now=True, segments_per_batch=per_batch)
    run_replay(spark, load_config(None, {"lake": str(fine), **settings}, environ={}), "again")

    def tables_of(lake, prefix=""):
        tables = Tables(spark, lake, "deltalake")
        return {name: tables.read_arrow(prefix + name) for name in SPEED_TABLES}

    one_per_batch, all_in_one, replayed = tables_of(fine), tables_of(coarse), tables_of(fine, "kappa/again/")
    names = ("dead_letter", "duplicate_events", "late_events", "speed_aggregates", "stream_state")
    same(all_in_one, one_per_batch, BOOKKEEPING, names)
    same(replayed, one_per_batch, {"duration_seconds"}, (*names, "stream_metrics"))
    assert all_in_one["stream_metrics"].num_rows == 1 < one_per_batch["stream_metrics"].num_rows
