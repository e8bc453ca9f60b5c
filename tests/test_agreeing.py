"""``reconciliation.agreeing``: the windows counted from the truth alone are exactly the ones the
full comparison calls a match in both diffs with nothing explained, and the figures, diff rows
and corrected rows come out the same either way."""

import datetime as dt
from decimal import Decimal as D

from pyspark.sql import functions as F

from reconciliation.agreeing import split_agreeing
from reconciliation.diff import compare_windows, side_rows
from reconciliation.fold import corrected_rows, corrections_due, stream_parts
from reconciliation.metrics import currency_figures, diff_rows, explained_windows, join_explanations
from shared.windows import TumblingWindows

ROWS = "window_start timestamp, window_end timestamp, account_id string, currency string, event_count long, amount_total decimal(38,6)"
LATE = "window_start timestamp, window_end timestamp, account_id string, currency string, segment long, line_number long, amount decimal(20,6), lateness_seconds decimal(20,6)"
EXPLAINED = "window_start timestamp, window_end timestamp, account_id string, currency string, corrected boolean, reason string, events long, money decimal(38,6)"
SPEC = TumblingWindows(60 * 1_000_000)


def window(minute, account, currency="EUR"):
    start = dt.datetime(2026, 11, 1, 0, minute)
    return (start, start + dt.timedelta(minutes=1), account, currency)


TRUTH = [
    (*window(0, "a"), 2, D("10.000000")),  # agrees
    (*window(1, "a"), 1, D("5.000000")),  # the stream has one millionth more
    (*window(2, "a"), 3, D("7.500000")),  # missing in the stream
    (*window(3, "a"), 1, D("1.000000")),  # agrees, and a late event folds into it
    (*window(4, "a"), 1, D("2.000000")),  # agrees, and the attribution explains it
    (*window(5, "b", "JPY"), 4, D("0.000000")),  # agrees: a currency only agreeing windows hold
    (*window(6, "b", "JPY"), 1, D("300.000000")),  # agrees
]
STREAM = [
    (*window(0, "a"), 2, D("10.000000")),
    (*window(1, "a"), 1, D("5.000001")),
    (*window(3, "a"), 1, D("1.000000")),
    (*window(4, "a"), 1, D("2.000000")),
    (*window(5, "b", "JPY"), 4, D("0.000000")),
    (*window(6, "b", "JPY"), 1, D("300.000000")),
    (*window(9, "c"), 1, D("9.000000")),  # extra in the stream
]
LATE_ROWS = [(*window(3, "a"), 7, 1, D("0.500000"), D("90.000000"))]
# a late event and a duplicate cancelling out in window 4: it agrees, yet two reasons explain it
EXPLANATIONS = [
    (*window(4, "a"), False, "late", 1, D("2.000000")),
    (*window(4, "a"), False, "duplicate", -1, D("-2.000000")),
]


def outputs(spark, split: bool):
    truth, stream = spark.createDataFrame(TRUTH, ROWS), spark.createDataFrame(STREAM, ROWS)
    late = spark.createDataFrame(LATE_ROWS, LATE)
    explanations = spark.createDataFrame(EXPLANATIONS, EXPLAINED)
    parts = [
        side_rows(truth, truth_count="event_count", truth_amount="amount_total"),
        *stream_parts(stream, late, SPEC, F.lit(True)),
    ]
    touched = [SPEC.late_windows(late), explanations]
    agreeing = split_agreeing(truth, stream, touched, min_windows=0) if split else None
    if agreeing:
        parts = [agreeing.disputed(part) for part in parts]
    windows = explained_windows(join_explanations(compare_windows(parts), explanations))
    late_in_scope = late.select("currency", "amount", "lateness_seconds")
    figures, corrections = currency_figures(
        windows, late_in_scope, corrections_due(), agreeing.truth_totals if agreeing else None
    )
    diffs, corrected = diff_rows(windows), corrected_rows(windows)
    if agreeing:
        corrected = corrected.unionByName(agreeing.corrected_rows(corrected))
    return agreeing, figures, corrections, diffs, corrected


def test_agreeing_windows_are_the_untouched_matches(spark):
    agreeing, *_ = outputs(spark, split=True)
    kept = sorted((r["window_start"].minute, r["account_id"]) for r in agreeing.rows.collect())
    assert kept == [(0, "a"), (5, "b"), (6, "b")]
    # 1 differs, 2 missing, 9 extra, 3 a late event's, 4 explained
    assert agreeing.disputed_windows == 5


def test_the_split_reports_what_comparing_every_window_reports(spark):
    _, figures, corrections, diffs, corrected = outputs(spark, split=True)
    _, every_figures, every_corrections, every_diffs, every_corrected = outputs(spark, split=False)
    assert figures == every_figures and corrections == every_corrections == 1
    eur, jpy = (next(f for f in figures if f.currency == c) for c in ("EUR", "JPY"))
    assert jpy.windows_compared == jpy.status_counts["match"] == jpy.corrected_windows_matched == 2
    assert jpy.truth_amount == jpy.stream_amount == D("300.000000") and jpy.max_rel_error == 0
    assert eur.status_counts == {"match": 3, "value_mismatch": 1, "missing_in_stream": 1, "extra_in_stream": 1}
    assert eur.truth_amount == D("25.500000") and eur.stream_amount == D("27.000001")
    for ours, theirs in ((diffs, every_diffs), (corrected, every_corrected)):
        assert [(f.name, f.dataType) for f in ours.schema] == [(f.name, f.dataType) for f in theirs.schema]
        assert sorted(ours.collect(), key=repr) == sorted(theirs.collect(), key=repr)
    # listed: 1, 2, 9 (they differ), 3 (a late event folds into it), 4 (explained)
    listed = sorted((r["window_start"].minute, r["status"], r["late_events"]) for r in diffs.collect())
    assert listed == [
        (1, "value_mismatch", 0),
        (2, "missing_in_stream", 0),
        (3, "match", 0),
        (4, "match", 1),
        (9, "extra_in_stream", 0),
    ]
    assert corrected.count() == 7


def test_a_window_held_twice_leaves_no_split(spark):
    truth = spark.createDataFrame([*TRUTH, TRUTH[0]], ROWS)  # window 0 twice, each copy equal to the stream's
    stream = spark.createDataFrame(STREAM, ROWS)
    assert split_agreeing(truth, stream, [], min_windows=0) is None


def test_a_window_named_in_other_types_is_still_disputed(spark):
    truth, stream = spark.createDataFrame(TRUTH, ROWS), spark.createDataFrame(STREAM, ROWS)
    start, end, account, currency = window(3, "a")
    named = spark.createDataFrame(
        [(str(start), str(end), account, currency)],
        "window_start string, window_end string, account_id string, currency string",
    )
    agreeing = split_agreeing(truth, stream, [named], min_windows=0)
    kept = sorted((r["window_start"].minute, r["account_id"]) for r in agreeing.rows.collect())
    assert kept == [(0, "a"), (4, "a"), (5, "b"), (6, "b")]


def test_a_truth_of_fewer_windows_than_the_threshold_is_compared_whole(spark):
    # 7 windows of truth: a split up to a threshold of 7, none from 8 (the default is far above)
    truth, stream = spark.createDataFrame(TRUTH, ROWS), spark.createDataFrame(STREAM, ROWS)
    assert split_agreeing(truth, stream, [], min_windows=7).disputed_windows == 3  # 1 differs, 2 missing, 9 extra
    assert split_agreeing(truth, stream, [], min_windows=8) is None
    assert split_agreeing(truth, stream, []) is None
