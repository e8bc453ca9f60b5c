"""Reconciliation on known answers: exact diffs, attribution, fold, corrections and idempotence.

The hand-made log (tumbling 10 s windows, watermark delay 5 s, allowed lateness 20 s, dedup
horizon 10 s; one segment per micro-batch; seconds after 2026-01-05 10:00) covers every way a
stream and its truth part:

    seg 0  a t=10   1.00  [10,20)
    seg 1  b t=45   2.00  [40,50)   watermark -> 40
    seg 2  c t=12   4.00  [10,20)   late: 40 >= 20 + 20          -> value_mismatch, late
    seg 3  d t=3    8.00  [0,10)    late                         -> missing_in_stream, late
    seg 4  e t=46  16.00  [40,50)
    seg 5  f t=80  32.00  [80,90)   watermark -> 75, e forgotten (beyond the 10 s horizon)
    seg 6  e again          [40,50)   not recognised, late: side output, a duplicate for the batch
    seg 7  a malformed line          dead letter on both sides
    seg 8  g t=100 64.00  [100,110) read by the stream only (the batch read up to segment 7)
                                                                 -> extra_in_stream, unread
"""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lklab.cli import main as lklab_main
from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.reconcile import reconcile
from lklab.pipelines.billing_windows.speed import run_speed
from reconciliation.attribution import LineRecords, explain_windows, parsed_log
from reconciliation.reconcile import ReconcileInputError
from reconciliation.render import as_dict, render_text
from reconciliation.result import Explanation, nearest_rank
from reconciliation.tolerance import Tolerance
from shared.config import load_config
from shared.eventlog import EventLog
from shared.partitions import DayRange
from shared.tables import Tables
from tests.conftest import event_line

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
DAY = DayRange.of("2026-01-05")
SETTINGS = {
    "window-kind": "tumbling",
    "window-size": "10s",
    "watermark-delay": "5s",
    "allowed-lateness": "20s",
    "dedup-horizon": "10s",
}
SEGMENTS = [
    [("a", 10, "1.00")],
    [("b", 45, "2.00")],
    [("c", 12, "4.00")],
    [("d", 3, "8.00")],
    [("e", 46, "16.00")],
    [("f", 80, "32.00")],
    [("e", 46, "16.00")],
    ["malformed"],
    [("g", 100, "64.00")],
]


def iso(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write_log(lake: Path, segments=SEGMENTS) -> None:
    log = EventLog(lake)
    for index, events in enumerate(segments):
        lines = []
        for event in events:
            if event == "malformed":
                lines.append(event_line(event_id="x", amount="abc", event_time=iso(50), account_id="u1"))
                continue
            event_id, t, amount = event
            lines.append(
                event_line(
                    event_id=event_id,
                    account_id="u1",
                    amount=amount,
                    event_time=iso(t),
                    ingest_time=iso(10_000 + index),
                )
            )
        log.append(lines, stamp=False)


def window(start: int) -> tuple:
    return (BASE + timedelta(seconds=start)).replace(tzinfo=None).isoformat()


@pytest.fixture(scope="module")
def known(spark, tmp_path_factory):
    """The hand-made lake after the speed layer (all 9 segments) and the batch (segments 1..8)."""
    lake = tmp_path_factory.mktemp("recon-known")
    write_log(lake)
    config = load_config(None, {"lake": str(lake), "table-engine": "deltalake", **SETTINGS}, environ={})
    run_speed(spark, config, available_now=True)
    run_batch(spark, config, DAY, last_segment=8)
    shutil.copytree(lake, tmp_path_factory.getbasetemp() / "recon-known-unreconciled")
    result = reconcile(spark, config, DAY)
    return lake, config, result


def gaps_by_window(result):
    return {g.window_start: g for g in result.largest_gaps}


def test_diff_statuses_and_deltas_are_exact(known):
    _, _, result = known
    (usd,) = result.currencies
    assert usd.currency == "USD"
    assert (result.batch_last_segment, result.stream_last_segment) == (8, 9)
    assert usd.status_counts == {"match": 2, "value_mismatch": 1, "missing_in_stream": 1, "extra_in_stream": 1}
    assert (usd.truth_events, usd.stream_events) == (6, 5)
    assert (usd.truth_amount, usd.stream_amount) == (Decimal("63"), Decimal("115"))
    assert usd.total_abs_error == Decimal("76")  # 8 + 4 + 64
    assert usd.max_rel_error == Decimal("1")  # the missing window: all of its money
    gaps = gaps_by_window(result)
    assert {k: (g.status, g.events_delta, g.amount_delta) for k, g in gaps.items()} == {
        window(0): ("missing_in_stream", 1, Decimal("8")),
        window(10): ("value_mismatch", 1, Decimal("4")),
        window(100): ("extra_in_stream", -1, Decimal("-64")),
    }


def test_every_gap_is_attributed_and_nothing_is_unexplained(known):
    _, _, result = known
    (usd,) = result.currencies
    gaps = gaps_by_window(result)
    assert gaps[window(0)].explained == (Explanation("late", 1, Decimal("8")),)
    assert gaps[window(10)].explained == (Explanation("late", 1, Decimal("4")),)
    assert gaps[window(100)].explained == (Explanation("unread", -1, Decimal("-64")),)
    assert usd.explained == (Explanation("late", 2, Decimal("12")), Explanation("unread", -1, Decimal("-64")))
    assert (usd.unexplained_windows, usd.unexplained_events, usd.unexplained_money) == (0, 0, Decimal(0))
    assert result.breaches() == []


def test_side_output_and_lateness_figures(known):
    _, _, result = known
    (usd,) = result.currencies
    # c missed watermark 40 by 28 s, d by 37 s; the resent e missed 75 by 29 s.
    assert (usd.late_events, usd.late_amount) == (3, Decimal("28"))
    assert (usd.lateness.p50, usd.lateness.p99, usd.lateness.p99_9, usd.lateness.max) == (
        Decimal("29"),
        Decimal("37"),
        Decimal("37"),
        Decimal("37"),
    )


def test_fold_gives_corrected_aggregates_and_says_why_they_still_differ(spark, known):
    lake, _, result = known
    (usd,) = result.currencies
    corrected = Tables(spark, lake, "deltalake").read_arrow("corrected_aggregates").to_pylist()
    rows = sorted(
        (r["window_start"].isoformat()[:19], r["event_count"], r["amount_total"], r["late_events"]) for r in corrected
    )
    assert rows == [
        (window(0), 1, Decimal("8"), 1),
        (window(10), 2, Decimal("5"), 1),
        (window(40), 3, Decimal("34"), 1),
        (window(80), 1, Decimal("32"), 0),
        (window(100), 1, Decimal("64"), 0),
    ]
    assert (usd.corrected_windows_compared, usd.corrected_windows_matched) == (5, 3)
    # The late copy of e is a duplicate for the batch; g is beyond the batch's position.
    assert usd.corrected_explained == (
        Explanation("duplicate", -1, Decimal("-16")),
        Explanation("unread", -1, Decimal("-64")),
    )
    assert (usd.corrected_unexplained_events, usd.corrected_unexplained_money) == (0, Decimal(0))
    assert not result.corrected_equals_truth


def test_corrections_are_the_deltas_to_apply(spark, known):
    lake, _, result = known
    rows = Tables(spark, lake, "deltalake").read_arrow("recon_corrections").to_pylist()
    assert {r["run_id"] for r in rows} == {result.run_id}
    assert sorted((r["window_start"].isoformat()[:19], r["kind"], r["add_events"], r["add_amount"]) for r in rows) == [
        (window(0), "insert", 1, Decimal("8")),
        (window(10), "update", 1, Decimal("4")),
        (window(40), "update", 1, Decimal("16")),
    ]
    assert result.corrections == 3


def test_recon_tables_hold_the_result(spark, known):
    lake, _, result = known
    tables = Tables(spark, lake, "deltalake")
    runs = tables.read_arrow("recon_runs").to_pylist()
    assert len(runs) == 1
    run = runs[0]
    assert (run["run_id"], run["currency"], run["date_from"], run["date_to"]) == (
        result.run_id,
        "USD",
        date(2026, 1, 5),
        date(2026, 1, 5),
    )
    assert (run["windows_compared"], run["windows_matched"], run["exact_match_rate"]) == (5, 2, 0.4)
    assert (run["late_events"], run["late_amount"], run["unexplained_amount"]) == (3, Decimal("28"), Decimal(0))
    assert (run["explained_late_events"], run["explained_late_amount"]) == (2, Decimal("12"))
    assert (run["explained_unread_events"], run["explained_unread_amount"], run["explained_duplicate_events"]) == (
        -1,
        Decimal("-64"),
        0,
    )
    diffs = tables.read_arrow("recon_diffs")
    assert set(diffs["run_id"].to_pylist()) == {result.run_id}
    # window 80 matches and nothing touches it: counted (windows_matched), not listed; window 40
    # matches too, but its late copy (a duplicate for the batch) makes the corrected side differ
    listed = sorted((r["window_start"].isoformat()[:19], r["status"]) for r in diffs.to_pylist())
    assert listed == [
        (window(0), "missing_in_stream"),
        (window(10), "value_mismatch"),
        (window(40), "match"),
        (window(100), "extra_in_stream"),
    ]
    assert sum(diffs["amount_delta"].to_pylist()) == Decimal("63") - Decimal("115")


def test_every_table_written_has_the_rows_its_catalog_entry_says(spark, known):
    """Speed layer, batch and reconciliation tables, as written: the columns and types of
    ``shared.catalog`` and ``reconciliation.tables`` (nullability aside: Spark and delta-rs record it
    differently)."""
    from reconciliation import tables as reconciliation_tables
    from shared import catalog

    lake, _, _ = known
    tables = Tables(spark, lake, "deltalake")
    declared = [*vars(catalog).values(), *vars(reconciliation_tables).values()]
    entries = [t for t in declared if isinstance(t, catalog.Table) and tables.exists(t.name)]
    columns = lambda schema: [(f.name, f.type) for f in schema]
    assert {t.name for t in entries} == {
        "speed_aggregates",
        "late_events",
        "duplicate_events",
        "dead_letter",
        "stream_metrics",
        "stream_state",
        "batch_truth",
        "batch_dead_letter",
        "batch_duplicates",
        "batch_events",
        "batch_runs",
        "corrected_aggregates",
        "recon_runs",
        "recon_diffs",
        "recon_corrections",
    }
    differing = {
        t.name: columns(tables.read_arrow(t.name).schema)
        for t in entries
        if columns(tables.read_arrow(t.name).schema) != columns(t.schema)
    }
    assert differing == {}


def test_renderers_read_the_result(known):
    _, _, result = known
    text = render_text(result)
    assert "1 missing_in_stream" in text and "explained by late: +2 events, +12.000000" in text
    summary = as_dict(result)
    assert summary["currencies"][0]["late_amount"] == "28.000000"
    assert summary["date_from"] == "2026-01-05" and summary["unexplained_events"] == 0


def test_rerun_on_unchanged_inputs_leaves_tables_identical(spark, known):
    lake, config, result = known
    tables = Tables(spark, lake, "deltalake")
    names = ("recon_runs", "recon_diffs", "recon_corrections", "corrected_aggregates")
    before = {name: tables.version(name) for name in names}
    again = reconcile(spark, config, DAY)
    assert again.run_id == result.run_id and again == result
    assert {name: tables.version(name) for name in names} == before


def test_the_split_of_agreeing_windows_writes_what_comparing_every_window_writes(spark, tmp_path, known):
    # The known lake is far below the split's threshold: every window was compared. The same lake
    # before its reconcile, reconciled with the windows whose checksums agree counted from the truth
    # (window 80; window 40 agrees but a late event folds into it), gives the same result and rows.
    lake, config, result = known
    shutil.copytree(lake.parent / "recon-known-unreconciled", tmp_path, dirs_exist_ok=True)
    split_config = load_config(None, {"lake": str(tmp_path), "table-engine": "deltalake", **SETTINGS}, environ={})
    split = reconcile(spark, split_config, DAY, split_from_windows=0)
    assert dataclasses.replace(split, tables=result.tables) == result  # the tables' paths name its own lake
    every, ours = Tables(spark, lake, "deltalake"), Tables(spark, tmp_path, "deltalake")
    clocks = {"recon_runs": ["recorded_at"]}  # when each run was recorded
    for name in ("recon_runs", "recon_diffs", "recon_corrections", "corrected_aggregates"):
        rows = [
            sorted(t.read_arrow(name).drop_columns(clocks.get(name, [])).to_pylist(), key=repr) for t in (every, ours)
        ]
        assert rows[0] == rows[1], name


@pytest.mark.slow
def test_tampered_stream_is_an_unexplained_gap_and_a_breach(spark, tmp_path, known, capsys):
    # The known lake's stream (all 9 segments), with the batch refreshed to the log's end too.
    shutil.copytree(known[0], tmp_path, dirs_exist_ok=True)
    config = load_config(None, {"lake": str(tmp_path), "table-engine": "deltalake", **SETTINGS}, environ={})
    run_batch(spark, config, DAY, refresh=True)
    # A stream that lost a row nobody recorded as late, duplicate or dead.
    DeltaTable(str(tmp_path / "tables" / "speed_aggregates")).delete(
        f"window_start = '{BASE + timedelta(seconds=80):%Y-%m-%d %H:%M:%S}'"
    )
    result = reconcile(spark, config, DAY)
    (usd,) = result.currencies
    assert (usd.unexplained_windows, usd.unexplained_events, usd.unexplained_money) == (1, 1, Decimal("32"))
    assert gaps_by_window(result)[window(80)].unexplained_money == Decimal("32")
    assert result.breaches() and not result.breaches(Decimal("32"), 1)

    # The command line's verdict: ``lklab reconcile`` called in this process (``lklab.cli.main``), in
    # the tests' session, which it uses and leaves running, instead of a process with a JVM of its own.
    capsys.readouterr()
    code = lklab_main(
        [
            "reconcile",
            "--lake",
            str(tmp_path),
            "--date",
            "2026-01-05",
            *sum(([f"--{k}", v] for k, v in SETTINGS.items()), []),
        ]
    )
    errors = capsys.readouterr().err
    assert code == 3, errors[-2000:]
    assert "UNEXPLAINED GAP: USD stream: unexplained money 32.000000 exceeds 0" in errors


def test_explain_names_dead_letters_duplicates_and_unread_lines_on_either_side(spark, tmp_path):
    """Line records that disagree in every way, given by hand (the stream's tables are not run)."""
    write_log(
        tmp_path, [[("a", 10, "1.00"), ("b", 11, "2.00"), ("c", 12, "4.00"), ("d", 13, "8.00")], [("e", 14, "16.00")]]
    )
    config = load_config(None, {"lake": str(tmp_path), "table-engine": "deltalake", **SETTINGS}, environ={})
    lines = lambda *pairs: spark.createDataFrame(list(pairs), "segment long, line_number long")
    parsed = parsed_log(spark, str(tmp_path), 2)
    batch = LineRecords(2, duplicates=lines((1, 4)), dead_letters=lines())
    late = parsed.where("false").selectExpr(
        "segment", "line_number", "event_time as window_start", "event_time as window_end"
    )
    stream = LineRecords(1, duplicates=lines(), dead_letters=lines((1, 2)), late=late)
    rows = explain_windows(parsed, batch, stream, config.window, DAY).collect()
    assert sorted((r["reason"], r["events"], r["money"]) for r in rows) == [
        ("dead_letter", 1, Decimal("2")),  # b: the stream dead-lettered what the batch counted
        ("duplicate", -1, Decimal("-8")),  # d: the stream counted what the batch called a copy
        ("unread", 1, Decimal("16")),  # e: beyond the stream's position
    ]


def test_missing_inputs_are_clear_errors(spark, tmp_path):
    write_log(tmp_path, SEGMENTS[:2])
    config = load_config(None, {"lake": str(tmp_path), "table-engine": "deltalake", **SETTINGS}, environ={})
    with pytest.raises(ReconcileInputError, match="run 'lklab batch' first"):
        reconcile(spark, config, DAY)
    run_batch(spark, config, DAY)
    with pytest.raises(ReconcileInputError, match="run 'lklab speed' first"):
        reconcile(spark, config, DAY)
    with pytest.raises(ReconcileInputError, match="kappa:<RUN>"):
        reconcile(spark, config, DAY, against="kappa")
    with pytest.raises(ReconcileInputError, match="no batch truth recorded for 2026-01-06"):
        reconcile(spark, config, DayRange.of("2026-01-06"))


def test_tolerance_rule():
    assert Tolerance().exact and Tolerance().describe() == "exact"
    with pytest.raises(ValueError, match="abs_tol must be a finite number >= 0"):
        Tolerance(Decimal("-1"))


def test_nearest_rank():
    values = [Decimal(v) for v in range(1, 1001)]
    assert [nearest_rank(values, p) for p in (0.5, 0.99, 0.999, 1.0)] == [
        Decimal(500),
        Decimal(990),
        Decimal(999),
        Decimal(1000),
    ]
    assert nearest_rank([], 0.5) is None and nearest_rank([Decimal(7)], 0.01) == Decimal(7)


@pytest.mark.parametrize("fold_late", [False, True])
def test_the_disputed_lines_explain_exactly_what_the_whole_log_explains(spark, known, fold_late):
    """Attribution over the lines either side recorded (and the segments between the two
    positions) equals attribution over every line of the log, window by window."""
    from reconciliation.attribution import disputed_lines
    from shared.aggregation import WINDOW_KEY

    lake, config, result = known
    tables = Tables(spark, lake, "deltalake")
    batch = LineRecords(8, tables.read("batch_duplicates"), tables.read("batch_dead_letter"))
    stream = LineRecords(
        9,
        tables.read("duplicate_events"),
        tables.read("dead_letter"),
        tables.read("late_events"),
        tables.read("speed_aggregates").select(*WINDOW_KEY),
    )
    disputed = disputed_lines(spark, str(lake), batch, stream, config.window)
    every_line = parsed_log(spark, str(lake), 9)
    explain = lambda lines: sorted(
        tuple(r) for r in explain_windows(lines, batch, stream, config.window, DAY, fold_late=fold_late).collect()
    )
    assert disputed.count() < every_line.count()
    assert explain(disputed) == explain(every_line) != []
