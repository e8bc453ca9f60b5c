"""The ``order_payments`` and ``unique_visitors`` transcripts through the Spark jobs, as billing's
``tests/test_transcripts.py`` runs its own: the same scenario, the same expected answers, the
other path.

Each transcript's log is written to a lake in arrival order (segment by segment, with the ingest
times its Arrow test uses, and the closing heartbeat), then the real jobs run over it: the speed
layer as a Structured Streaming query (``available_now``, ``SEGMENTS_PER_BATCH`` segments per
micro-batch: the rows do not depend on it, so two segments a batch also carry the state across
batches while keeping the run short), the batch truth, and the reconciliation. Their tables must
hold what the transcript says. The Arrow tests (``tests/test_order_payments.py``,
``tests/test_visitor_transcripts.py``) run the same files through the stream step.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from lklab.pipelines.order_payments.tables import (
    PAYMENTS_DEAD_LETTER,
    PAYMENTS_DUPLICATES,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_MATCHED,
    PAYMENTS_ORPHANS,
    PAYMENTS_STATE,
    PAYMENTS_STREAM_METRICS,
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_TRUTH_UNPAID,
    PAYMENTS_UNPAID,
)
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_DUPLICATES,
    VISITORS_LATE_EVENTS,
    VISITORS_STREAM_METRICS,
    VISITORS_TRUTH,
    VISITORS_WINDOWS,
)
from shared import catalog
from shared.config import load_config
from shared.eventlog import EventLog
from shared.tables import Tables
from tests import order_payment_transcripts as orders
from tests.visitor_lines import at, seconds_of, url

SEGMENTS_PER_BATCH = 2
VISITOR_TRANSCRIPTS = sorted(Path(__file__).parent.joinpath("transcripts", "unique_visitors").glob("*.yaml"))


def _config(lake: Path, settings: dict):
    return load_config(None, {"lake": str(lake), "table-engine": "deltalake", **settings}, environ={})


def _conserved(tables: Tables, metrics: catalog.Table, lines: int) -> None:
    """Every line was read once, in ``ceil(segments / SEGMENTS_PER_BATCH)`` micro-batches."""
    rows = tables.read_arrow(metrics.name).sort_by("batch_id")
    segments = rows["last_segment"].to_pylist()[-1]
    assert rows["batch_id"].to_pylist() == list(range(-(-segments // SEGMENTS_PER_BATCH)))
    assert sum(rows["input_lines"].to_pylist()) == lines


@pytest.mark.parametrize("path", orders.TRANSCRIPTS, ids=[p.stem for p in orders.TRANSCRIPTS])
def test_order_payments_transcript_through_the_spark_stream_batch_and_reconciliation(spark, tmp_path, path):
    from lklab.pipelines.order_payments.batch import run_payments_batch
    from lklab.pipelines.order_payments.reconcile import reconcile_payments
    from lklab.pipelines.order_payments.state import join_state_from_table
    from lklab.pipelines.order_payments.stream import run_payments_speed

    transcript = yaml.safe_load(path.read_text())
    expect, log, ids = transcript["expect"], EventLog(tmp_path), {}
    segments = orders.segment_lines(transcript["segments"])
    for number, lines in enumerate(segments, start=1):
        log.append(lines, stamp=False)
        for line_number, line in enumerate(lines, start=1):
            if line.startswith('{"event_id"'):
                ids[(number, line_number)] = json.loads(line)["event_id"]
    config = _config(tmp_path, orders.lab_settings(transcript["settings"]))
    tables = Tables(None, tmp_path, "deltalake")
    read = lambda table: tables.read_arrow(table.name)

    run_payments_speed(spark, config, available_now=True, segments_per_batch=SEGMENTS_PER_BATCH)
    _conserved(tables, PAYMENTS_STREAM_METRICS, sum(map(len, segments)))
    state = join_state_from_table(read(PAYMENTS_STATE))
    orders.check_stream(
        expect,
        matched=read(PAYMENTS_MATCHED),
        unpaid=read(PAYMENTS_UNPAID),
        orphans=read(PAYMENTS_ORPHANS),
        late=read(PAYMENTS_LATE_EVENTS),
        duplicates=read(PAYMENTS_DUPLICATES),
        dead_letters=read(PAYMENTS_DEAD_LETTER).sort_by([("segment", "ascending"), ("line_number", "ascending")]),
        held=state.orders["event_id"].to_pylist() + state.payments["event_id"].to_pylist(),
    )
    run_payments_batch(spark, config)
    orders.check_truth(
        expect,
        matched=read(PAYMENTS_TRUTH_MATCHED),
        unpaid=read(PAYMENTS_TRUTH_UNPAID),
        orphans=read(PAYMENTS_TRUTH_ORPHANS),
    )
    found = reconcile_payments(spark, config, against="speed", run="transcript")
    assert found.truth_segment == found.stream_segment == len(segments)
    orders.check_reconciliation(expect, found.result, ids)


def _view_line(view: dict, ingest: int) -> str:
    return json.dumps(
        {
            "event_id": view["id"],
            "user_id": view.get("user", "u1"),
            "url": url(view.get("url", "home")),
            "event_time": at(view["t"]).isoformat().replace("+00:00", "Z"),
            "ingest_time": at(ingest).isoformat().replace("+00:00", "Z"),
        }
    )


@pytest.mark.parametrize("path", VISITOR_TRANSCRIPTS, ids=[p.stem for p in VISITOR_TRANSCRIPTS])
def test_unique_visitors_transcript_through_the_spark_stream_batch_and_reconciliation(spark, tmp_path, path):
    from lklab.pipelines.unique_visitors.batch import run_visitors_batch
    from lklab.pipelines.unique_visitors.reconcile import reconcile_visitors
    from lklab.pipelines.unique_visitors.speed import run_visitors_speed

    transcript = yaml.safe_load(path.read_text())
    expect, log, ingest, lines = transcript["expect"], EventLog(tmp_path), 10_000, 0
    for number, segment in enumerate(
        transcript["segments"], start=1
    ):  # as tests/test_visitor_transcripts.py's batches_of
        views, ingest = (
            (segment["views"], segment["ingest"]) if isinstance(segment, dict) else (segment, 10_000 + number)
        )
        log.append([_view_line(view, ingest) for view in views], stamp=False)
        lines += len(views)
    log.append_heartbeat(at(ingest + 1))
    config = _config(tmp_path, transcript["settings"])
    tables = Tables(None, tmp_path, "deltalake")
    read = lambda table: tables.read_arrow(table.name)
    window = lambda r: [seconds_of(r["window_start"]), seconds_of(r["window_end"]), r["user_id"]]

    run_visitors_speed(spark, config, available_now=True, segments_per_batch=SEGMENTS_PER_BATCH)
    _conserved(tables, VISITORS_STREAM_METRICS, lines + 1)
    served = sorted([*window(r), r["distinct_urls"], r["status"]] for r in read(VISITORS_WINDOWS).to_pylist())
    assert served == sorted(expect["windows"])
    late = sorted(
        [r["event_id"], *window(r)[:2], seconds_of(r["watermark"]), r["lateness_seconds"], r["adds_url"]]
        for r in read(VISITORS_LATE_EVENTS).to_pylist()
    )
    assert late == sorted([i, s, e, w, Decimal(x), adds] for i, s, e, w, x, adds in expect["late"])
    assert sorted(read(VISITORS_DUPLICATES)["event_id"].to_pylist()) == sorted(expect.get("duplicates", []))

    run_visitors_batch(spark, config)
    assert sorted([*window(r), r["distinct_urls"]] for r in read(VISITORS_TRUTH).to_pylist()) == sorted(expect["truth"])
    result = reconcile_visitors(spark, config, against="speed").result
    assert result.proven
    assert sorted([*window(r), r["corrected"], r["verdict"]] for r in result.windows.to_pylist()) == sorted(
        expect["corrected"]
    )
