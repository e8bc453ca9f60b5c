"""``lklab compare``: hand-made cases for the measurement's definitions, then the report's figures
recomputed from the tables a real comparison wrote (and from the generator's own events)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal as D
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lklab.pipelines.billing_windows import measure
from lklab.pipelines.billing_windows.agreement import StreamsDisagree, require_same_rows
from lklab.pipelines.billing_windows.comparison import ComparisonPlan, run_comparison
from lklab.pipelines.billing_windows.generator import EPOCH_START, GeneratorParams, generate, load_events
from lklab.pipelines.billing_windows.truth import truth_windows
from lklab.report import ErrorPoint, report_from_json, write_report
from lklab.report.arrival import nearest_rank
from lklab.report.scaling import fit_runs
from shared.config import load_config
from shared.events import UTC_MICROS
from shared.speed import StreamSettings, stream_step
from shared.stream_state import StreamState
from shared.stream_windows import HISTORY_SCHEMA
from shared.tables import Tables
from shared.windows import TumblingWindows
from tests.test_faithful_replay import live
from tests.test_speed_step import BASE, PARSED_SCHEMA, line, parsed

SECOND = 1_000_000
MINUTE = 60 * SECOND
A = (0, MINUTE, "acct-1", "USD")  # the window [00:00, 00:01) of acct-1 in USD, in microseconds
B = (MINUTE, 2 * MINUTE, "acct-1", "USD")


def utc(seconds: float) -> dt.datetime:
    return measure.to_utc(int(seconds * SECOND))


# --- the definitions, on hand-made histories ----------------------------------------------


def history(*rows: tuple) -> pa.Table:
    """``(window, change, status, processing second, count, total, line, late_update)`` rows."""
    columns = {name: [] for name in HISTORY_SCHEMA.names}
    for window, change, status, second, count, total, line_number, late_update in rows:
        values = {
            "window_start": window[0],
            "window_end": window[1],
            "account_id": window[2],
            "currency": window[3],
            "event_count": count,
            "amount_total": D(total),
            "status": status,
            "change": change,
            "late_update": late_update,
            "processing_time": int(second * SECOND),
            "segment": None if line_number is None else 1,
            "line_number": line_number,
        }
        for name in columns:
            columns[name].append(values.get(name))
    for name in ("window_start", "window_end", "processing_time"):
        columns[name] = pa.array(columns[name], pa.int64()).cast(UTC_MICROS)
    return pa.Table.from_pydict(columns, schema=HISTORY_SCHEMA)


# Window A: 2 events by 00:00:50, a third on time at 00:01:05 (after the end), final at 00:01:40
# (the watermark passed 00:01:00), a late update at 00:02:00. Window B: one event at 00:01:30,
# never final. Rows are given out of order: the measurement orders them.
STREAM = history(
    (A, "update", "open", 50, 2, "30", 7, False),
    (A, "update", "open", 20, 1, "10", 3, False),
    (A, "final", "final", 100, 3, "35", None, False),
    (A, "update", "open", 65, 3, "35", 9, False),
    (A, "update", "final", 120, 4, "40", 12, True),
    (B, "update", "open", 90, 1, "7", 11, False),
)
TRUTH = {A: (4, D("40")), B: (1, D("7"))}


def test_stream_latency_first_final_and_exact():
    served = measure.served_from_history(STREAM)
    assert served.changes[A] == (
        (20 * SECOND, (1, D(10))),
        (50 * SECOND, (2, D(30))),
        (65 * SECOND, (3, D(35))),
        (120 * SECOND, (4, D(40))),
    )
    assert served.finals == {A: 100 * SECOND}
    summary = measure.latency(served, TRUTH)
    # A: first served at 00:00:20, before its end: 0; final 40 s after its end; exactly right from the late
    # update at 00:02:00, 60 s after its end. B: first at 00:01:30 (before its end at 00:02:00), never final,
    # exactly right from then: 0.
    assert (summary.first_result_p50, summary.first_result_max, summary.never_emitted) == (D(0), D(0), 0)
    assert (summary.final_p50, summary.final_max, summary.never_final) == (D(40), D(40), 1)
    assert (summary.exact_p50, summary.exact_max, summary.never_exact) == (D(0), D(60), 0)
    # when final, A held 3 of its 4 events; B was never final
    assert (summary.events_when_final, summary.truth_events) == (3, 5)


def test_error_series_samples_every_step_where_it_changes():
    served = measure.served_from_history(STREAM)
    points = measure.error_series(served, TRUTH, end=180 * SECOND, step=10 * SECOND)
    # A ends at 60 s holding 2 of 4 (|40 - 30| wrong); at 65 s 3 of 4 (5 wrong), at 120 s right.
    # B ends at 120 s, right since 90 s. Sampled at 20 (nothing has ended: 0 wrong), 60, 70 and 120; the end at 180.
    assert points == (
        ErrorPoint(utc(20), 0, {}),
        ErrorPoint(utc(60), 1, {"USD": D(10)}),
        ErrorPoint(utc(70), 1, {"USD": D(5)}),
        ErrorPoint(utc(120), 0, {}),
        ErrorPoint(utc(180), 0, {}),
    )
    # a coarser step sees the state at its ticks only (20 s sits before the tick at 60, 65 s between 60 and 120)
    assert measure.error_series(served, TRUTH, end=180 * SECOND, step=MINUTE) == (
        ErrorPoint(utc(60), 1, {"USD": D(10)}),
        ErrorPoint(utc(120), 0, {}),
        ErrorPoint(utc(180), 0, {}),
    )


def test_lambda_serves_each_nightly_recompute_from_its_landing():
    speed = measure.served_from_history(STREAM.filter(pc.invert(STREAM["late_update"])))  # allowed lateness 0
    # Two recomputes cover both windows (they start before either landing): the one landing at 150 s missed A's
    # late fourth event, the one at 300 s has it.
    landings = [(150 * SECOND, {A: (3, D(35)), B: (1, D(7))}), (300 * SECOND, {A: (4, D(40)), B: (1, D(7))})]
    served = measure.with_nightly_batches(speed, landings)
    assert served.changes[A][-2:] == ((150 * SECOND, (3, D(35))), (300 * SECOND, (4, D(40))))
    summary = measure.latency(served, TRUTH)
    # A: exactly right from the second landing, 240 s after its end; B from 90 s (the batch agreed): 0
    assert (summary.exact_max, summary.exact_p50, summary.never_exact) == (D(240), D(0), 0)
    assert summary.final_max == D(40)  # finality stays the speed layer's watermark
    end = measure.at_end(served, TRUTH, 300 * SECOND)
    assert (end.windows_compared, end.windows_exact) == (2, 2)
    # a window the recompute does not have is no longer served once it lands
    gone = measure.with_nightly_batches(speed, [(150 * SECOND, {A: (4, D(40))})])
    assert gone.value_at(B, 149 * SECOND) == (1, D(7)) and gone.value_at(B, 150 * SECOND) is None


def test_processing_time_windows_count_each_copy_on_arrival():
    firsts = pa.table(
        {
            "event_id": ["e-1", "e-2", "e-3"],
            "account_id": ["acct-1"] * 3,
            "currency": ["USD"] * 3,
            "amount": pa.array([D("10"), D("20"), D("5")], pa.decimal128(20, 6)),
            "processing_time": pa.array([20 * SECOND, 65 * SECOND, 70 * SECOND], pa.int64()),
            "line": [1, 2, 3],
        }
    )
    served = measure.served_by_processing_time(TumblingWindows(MINUTE), firsts)
    # e-2 belongs to A by event time but arrived at 65 s: processing time puts it in B
    truth = {A: (2, D(30)), B: (1, D(5))}
    assert served.changes == {
        A: ((20 * SECOND, (1, D(10))),),
        B: ((65 * SECOND, (1, D(20))), (70 * SECOND, (2, D(25)))),
    }
    summary = measure.latency(served, truth, completeness=False)
    assert (summary.final_max, summary.never_final, summary.never_exact, summary.events_when_final) == (
        D(0),
        0,
        2,
        None,
    )
    end = measure.at_end(served, truth, 180 * SECOND)
    assert (end.windows_compared, end.windows_exact, dict(end.served_money)) == (2, 0, {"USD": D(35)})
    gaps = measure.final_gaps(served, truth)
    assert [(g.window_start, g.gap) for g in gaps["USD"]] == [(utc(0), D(20)), (utc(60), D(20))]


def test_five_minutes_of_watermark_delay_declare_windows_final_270_s_later_than_30_s():
    """One event every 10 s of processing time, each arriving 2 s after it happened (event times
    0, 10, ..., 1190 s; ingest 2 s later), one account: twenty one-minute windows of 6 events.
    With a 1 s watermark interval the watermark for the line at ``p = 10k + 2`` is the event
    time of the line before it minus the delay, ``10(k - 1) - W``. The window ending at
    ``e = 60(m + 1)`` is final at the first line where that reaches ``e``:

    * ``W = 30s``: ``k = 6m + 10``, at ``p = 60m + 102``: 42 s after its end; the lines reach
      ``k = 119``, so windows ``m = 0..18`` become final and the last one never does;
    * ``W = 5m``: ``k = 6m + 37``, at ``p = 60m + 372``: 312 s after its end, windows
      ``m = 0..13``; six never do.

    Every window is complete 8 s before its end, so it is first served and exactly right before
    its end (0 s) and holds its 6 events when final, whatever the delay."""
    lines = [line(1, k + 1, "event", f"e{k}", 10 * k, 10 * k + 2) for k in range(120)]
    log = pa.Table.from_pylist(lines, schema=PARSED_SCHEMA)
    start = int(BASE.timestamp()) * SECOND
    truth = {(start + m * MINUTE, start + (m + 1) * MINUTE, "u1", "USD"): (6, D("6.00")) for m in range(20)}
    latency = {}
    for delay in (30, 300):
        settings = StreamSettings(
            TumblingWindows(MINUTE), watermark_delay=delay * SECOND, allowed_lateness=0, dedup_horizon=3600 * SECOND
        )
        step = stream_step(log, StreamState.empty(), settings, 0, history=True)
        latency[delay] = measure.latency(measure.served_from_history(step.history), truth)
    short, long = latency[30], latency[300]
    assert (short.final_p50, short.final_p95, short.final_max, short.never_final) == (D(42), D(42), D(42), 1)
    assert (long.final_p50, long.final_p95, long.final_max, long.never_final) == (D(312), D(312), D(312), 6)
    assert long.final_p50 - short.final_p50 == D(270)
    for summary, final in ((short, 19), (long, 14)):
        assert (summary.first_result_max, summary.exact_max, summary.never_emitted, summary.never_exact) == (
            D(0),
            D(0),
            0,
            0,
        )
        assert (summary.events_when_final, summary.truth_events) == (6 * final, 120)


def test_a_session_merged_away_is_no_longer_served():
    merged = (0, 5 * MINUTE, "acct-1", "USD")
    wider = (0, 8 * MINUTE, "acct-1", "USD")
    served = measure.served_from_history(
        history(
            (merged, "update", "open", 10, 1, "3", 1, False),
            (merged, "delete", "open", 200, 0, "0", None, False),
            (wider, "update", "open", 200, 2, "5", 4, False),
        )
    )
    end = measure.at_end(served, {wider: (2, D(5))}, 900 * SECOND)
    assert served.value_at(merged, 199 * SECOND) == (1, D(3)) and served.value_at(merged, 200 * SECOND) is None
    assert (end.windows_compared, end.windows_exact) == (1, 1)


def test_a_live_run_and_its_replay_must_write_the_same_rows_to_every_table(spark, tmp_path):
    """What ``lklab compare`` checks before it measures: a run reading one segment per
    micro-batch and one reading the whole log at once agree (batch ids and metrics rows differ,
    the rows and the metrics' totals do not); a run that lost a late event, saw a window final
    that is open, and counted a heartbeat too many stops the comparison, naming those tables."""
    settings = StreamSettings(
        TumblingWindows(MINUTE), watermark_delay=10 * SECOND, allowed_lateness=0, dedup_horizon=3600 * SECOND
    )
    # segment 2: the watermark is 70 - 10 = 60, "a" again is a duplicate; segment 3: it is 120, "d" (20 s) is late
    segments = [parsed(1, [("a", 10), ("b", 70)], bad=1), parsed(2, [("a", 10), ("c", 130)]), parsed(3, [("d", 20)])]
    runs = {"one": live(settings, segments), "whole": live(settings, [pa.concat_tables(segments)])}
    tampered = dict(runs["one"])
    tampered["late_events"] = tampered["late_events"].slice(0, 0)
    windows = tampered["speed_aggregates"].to_pylist()
    windows[0]["status"] = "final" if windows[0]["status"] == "open" else "open"
    tampered["speed_aggregates"] = pa.Table.from_pylist(windows, schema=tampered["speed_aggregates"].schema)
    metrics = tampered["stream_metrics"].to_pylist()
    metrics[0]["heartbeats"] += 1
    tampered["stream_metrics"] = pa.Table.from_pylist(metrics, schema=tampered["stream_metrics"].schema)
    runs["tampered"] = tampered
    tables = Tables(spark, tmp_path, "deltalake")
    for run, outputs in runs.items():
        for name, rows in outputs.items():
            tables.overwrite(f"kappa/{run}/{name}", rows)
    assert (
        runs["one"]["late_events"].num_rows,
        runs["one"]["duplicate_events"].num_rows,
        runs["one"]["dead_letter"].num_rows,
    ) == (1, 1, 1)
    assert runs["one"]["stream_metrics"].num_rows == 3 and runs["whole"]["stream_metrics"].num_rows == 1

    require_same_rows(tables, "kappa/one/", "kappa/whole/", "stream W=10s L=0")
    with pytest.raises(StreamsDisagree) as stopped:
        require_same_rows(tables, "kappa/whole/", "kappa/tampered/", "stream W=10s L=0")
    assert str(stopped.value) == (
        "stream W=10s L=0: kappa/whole/ and kappa/tampered/ must hold the same rows but disagree on "
        "late_events (1 rows only in the first, 0 only in the second); "
        "speed_aggregates (1 rows only in the first, 1 only in the second); "
        "stream_metrics (figures heartbeats 0 against 1)"
    )


# --- a real comparison --------------------------------------------------------------------

START = EPOCH_START - 15 * MINUTE  # the log crosses midnight: Lambda recomputes once inside it
MIDNIGHT = measure.to_utc(EPOCH_START)


@pytest.fixture(scope="module")
def compared(spark, tmp_path_factory):
    lake = tmp_path_factory.mktemp("compare")
    generate(
        GeneratorParams(
            events=400, start=START, span=30 * MINUTE, accounts=6, segment_interval=5 * MINUTE, duplicate_rate=0.02
        ),
        lake,
    )
    config = load_config(None, {"lake": str(lake), "table-engine": "deltalake", "dedup-horizon": "30m"}, environ={})
    plan = ComparisonPlan(name="t", watermark_delays=("20s",), allowed_lateness=("10m",), segments_per_batch=100)
    stages = []
    report = run_comparison(spark, config, plan, source="billing", progress=stages.append)
    files = write_report(report, lake / "reports" / "t")
    return lake, report, files, stages


def rows(tables, name):
    return tables.read_arrow(name).to_pylist()


def windows(table: pa.Table) -> dict:
    return measure.rows_of(table)


def value_at(series, moment):
    return [p for p in series if p.processing_time <= moment][-1]


def test_configurations_runs_and_progress(spark, compared):
    lake, report, _, stages = compared
    tables = Tables(spark, lake, "deltalake")
    assert [r.configuration.key for r in report.results] == ["lambda-w20s-l0", "kappa-w20s-l10m", "processing-time"]
    assert stages[0] == "batch over segment 1: the session warmed up (measured by nothing)"
    assert stages[1] == "nightly batch recompute at 2026-01-05 00:00Z: days to 2026-01-04, segments 1..3"
    assert stages[2].startswith("batch recompute")
    # the live stream warmed up too, before the first measured one, in a lake of its own
    assert stages[3] == "live stream over segment 1: the session warmed up (measured by nothing)"
    assert stages[4].startswith("[1/2] W=20s L=0: live stream")
    assert not list(Path(lake).glob(".measurement-*")) and not list(Path(lake).glob(".warm-up-*"))
    assert not (Path(lake) / "tables" / "kappa" / "warm-up").exists()
    assert any(s.startswith("[2/2] W=20s L=10m: live stream") and "left" in s for s in stages)
    for run in report.streams:
        live = f"kappa/t-w{run.watermark_delay}-l{run.allowed_lateness}/"
        assert run.windows == tables.read_arrow(f"{live}speed_aggregates").num_rows
        assert run.windows == tables.read_arrow(f"{live[:-1]}-replay/speed_aggregates").num_rows
        assert run.micro_batches == tables.read_arrow(f"{live}stream_metrics").num_rows == 1  # 100 segments per batch


def test_kappa_figures_match_the_stream_tables(spark, compared):
    lake, report, _, _ = compared
    tables = Tables(spark, lake, "deltalake")
    truth = windows(tables.read_arrow("batch_truth"))
    kappa = report.result("kappa-w20s-l10m")
    final = tables.read_arrow("kappa/t-w20s-l10m/speed_aggregates")
    served = windows(final)
    status = dict(zip(served, final["status"].to_pylist()))
    # at the end Kappa serves its last rows: the live stream's table
    keys = truth.keys() | served.keys()
    assert kappa.end.windows_compared == len(keys)
    assert kappa.end.windows_exact == sum(1 for k in keys if served.get(k) == truth.get(k))
    assert kappa.error_series[-1].windows_wrong == len(keys) - kappa.end.windows_exact
    # the reconciliation of the same stream agrees
    recon = [r for r in rows(tables, "recon_runs") if r["against"] == "kappa:t-w20s-l10m"]
    assert kappa.end.windows_compared == sum(r["windows_compared"] for r in recon)
    assert kappa.end.windows_exact == sum(r["windows_matched"] for r in recon)
    assert dict(kappa.end.served_money) == {r["currency"]: r["stream_amount"] for r in recon}
    assert kappa.reconciliation.unexplained_windows == 0 == sum(r["unexplained_windows"] for r in recon)
    # fixed windows are never removed: a window never served is not in the table; one never final is not final there
    assert kappa.latency.never_emitted == sum(1 for k in truth if k not in served)
    assert kappa.latency.never_final == sum(1 for k in truth if status.get(k) != "final")
    assert kappa.latency.windows == len(truth) and kappa.latency.truth_events == sum(v[0] for v in truth.values())


def test_kappa_latency_recomputed_from_the_history(spark, compared):
    lake, report, _, _ = compared
    tables = Tables(spark, lake, "deltalake")
    truth = windows(tables.read_arrow("batch_truth"))
    history_rows = sorted(
        rows(tables, "kappa/t-w20s-l10m-replay/window_history"),
        key=lambda r: (r["processing_time"], r["change"] != "update", r["line_number"] or 0),
    )
    micros = lambda t: (t - measure.to_utc(0)) // dt.timedelta(microseconds=1)
    per_window: dict = {}
    for r in history_rows:
        per_window.setdefault(
            (micros(r["window_start"]), micros(r["window_end"]), r["account_id"], r["currency"]), []
        ).append(r)
    first, final, exact = [], [], []
    for key, right in truth.items():
        end = measure.to_utc(key[1])
        changes = per_window.get(key, [])
        after = lambda t: None if t is None else D(max(0, (t - end) // dt.timedelta(microseconds=1))).scaleb(-6)
        updates = [r for r in changes if r["change"] == "update"]
        first.append(after(updates[0]["processing_time"] if updates else None))
        final.append(after(next((r["processing_time"] for r in changes if r["status"] == "final"), None)))
        since = None
        for r in updates:
            if (r["event_count"], r["amount_total"]) == right:
                since = since or r["processing_time"]
            else:
                since = None
        exact.append(after(since))
    kappa = report.result("kappa-w20s-l10m").latency
    for stage, values in (("first_result", first), ("final", final), ("exact", exact)):
        reached = sorted(v for v in values if v is not None)
        assert getattr(kappa, f"{stage}_p50") == nearest_rank(reached, "0.5"), stage
        assert getattr(kappa, f"{stage}_p95") == nearest_rank(reached, "0.95"), stage
        assert getattr(kappa, f"{stage}_max") == (reached[-1] if reached else None), stage
    assert kappa.never_exact == sum(1 for v in exact if v is None) and kappa.final_p50 >= D(20)


def test_late_costs_and_state_match_the_tables(spark, compared):
    lake, report, _, _ = compared
    tables = Tables(spark, lake, "deltalake")
    lam, kap, base = report.results
    for result, stream in ((lam, "t-w20s-l0"), (kap, "t-w20s-l10m")):
        late = rows(tables, f"kappa/{stream}/late_events") if tables.exists(f"kappa/{stream}/late_events") else []
        money = {}
        for r in {r["event_id"]: r for r in late}.values():
            money[r["currency"]] = money.get(r["currency"], D(0)) + abs(r["amount"])
        assert (result.late.side_output_events, dict(result.late.side_output_money)) == (
            len({r["event_id"] for r in late}),
            money,
        )
    assert lam.late.side_output_events > kap.late.side_output_events, "allowed lateness absorbs late events"
    # absorbed: one late update per event with tumbling windows, as the replay's metrics count them
    metrics = rows(tables, "kappa/t-w20s-l10m-replay/stream_metrics")
    assert kap.late.absorbed_events == sum(r["late_updates"] for r in metrics) > 0
    assert base.late is None and base.costs == () and base.reconciliation is None and base.state_rows_max is None

    replays = {r["name"]: r for r in rows(tables, "replay_runs")}
    assert (kap.cost("replay").cpu_seconds, kap.cost("replay").wall_seconds) == (
        replays["t-w20s-l10m-replay"]["cpu_seconds"],
        replays["t-w20s-l10m-replay"]["wall_seconds"],
    )
    batches = rows(tables, "batch_runs")
    assert len(batches) == 2 and [b["last_segment"] for b in sorted(batches, key=lambda b: b["run_number"])][0] == 3
    assert lam.cost("batch").cpu_seconds == pytest.approx(sum(b["cpu_seconds"] for b in batches))
    # the recompute at midnight (segments 1..3) and the one over the whole log: two sizes, split over both
    in_order = sorted(batches, key=lambda b: b["run_number"])
    assert lam.cost("batch").scaling == fit_runs([(b["lines"], b["cpu_seconds"]) for b in in_order])
    assert lam.cost("batch").scaling.points == 2
    assert lam.cost("reconciliation").scaling is None and kap.cost("replay").scaling is None  # one size each
    assert [c.path for c in lam.costs] == ["speed", "batch", "reconciliation"] and [c.path for c in kap.costs] == [
        "streaming",
        "replay",
    ]
    assert kap.state_rows_max == max(r["state_rows"] for r in metrics)
    # the recompute at midnight read segments 1..3, the last one the segments after: their events add up
    assert report.events == sum(b["events"] for b in batches) == 400  # the events generated, duplicates aside


def test_lambda_serves_the_nightly_recomputes(spark, compared):
    lake, report, _, _ = compared
    lam = report.result("lambda-w20s-l0")
    assert (
        report.nightly_landings
        == (MIDNIGHT, MIDNIGHT + dt.timedelta(days=1))
        == (report.nightly_landings[0], report.end)
    )
    assert (lam.end.windows_exact, lam.latency.never_exact, lam.error_series[-1].windows_wrong) == (
        lam.end.windows_compared,
        0,
        0,
    )
    # At midnight Lambda serves, for the windows before it, the recompute over the segments complete by then:
    # the generator's own events that arrived before midnight (an oracle sharing no code with the lake).
    events = load_events(lake)
    keep = lambda mask: type(events)(**{f.name: getattr(events, f.name)[mask] for f in dataclasses.fields(events)})
    spec = TumblingWindows(MINUTE)
    ingested = events.ingest_times // 1000 * 1000  # the log stamps milliseconds
    at_midnight = windows(truth_windows(keep(ingested < EPOCH_START), spec))
    everything = windows(truth_windows(events, spec))
    before = [k for k in everything.keys() | at_midnight.keys() if k[1] <= EPOCH_START]
    assert value_at(lam.error_series, MIDNIGHT).windows_wrong == sum(
        1 for k in before if at_midnight.get(k) != everything.get(k)
    )


def test_processing_time_windows_match_the_generator(spark, compared):
    lake, report, _, _ = compared
    base = report.result("processing-time")
    events = load_events(lake)
    by_arrival = dataclasses.replace(events, event_times=events.ingest_times // 1000 * 1000)
    arrived = windows(truth_windows(by_arrival, TumblingWindows(MINUTE)))
    truth = windows(truth_windows(events, TumblingWindows(MINUTE)))
    keys = truth.keys() | arrived.keys()
    assert (base.end.windows_compared, base.end.windows_exact) == (
        len(keys),
        sum(1 for k in keys if arrived.get(k) == truth.get(k)),
    )
    assert base.end.windows_exact < report.result("kappa-w20s-l10m").end.windows_exact, "event time buys correctness"
    assert (base.latency.final_max, base.latency.never_final, base.latency.events_when_final) == (D(0), 0, None)


def test_report_files_and_audit(compared):
    _, report, files, _ = compared
    assert files.html.is_file() and "<svg" in files.html.read_text()
    assert report_from_json(files.summary_json.read_text()) == report
    audit_lines = files.audit_csv.read_text().strip().splitlines()
    assert len(audit_lines) - 1 == len(report.audit.events)
    lam, kap, _ = report.results
    folded = [e for e in report.audit.events if e.configuration == "lambda-w20s-l0"]
    assert {e.disposition for e in folded} == {"folded_in"} and len(folded) == lam.late.side_output_events
    absorbed = [e for e in report.audit.events if e.configuration == "kappa-w20s-l10m" and e.disposition == "absorbed"]
    assert len(absorbed) == kap.late.absorbed_events and all(e.lateness_seconds >= 0 for e in absorbed)
