"""Order/payment log lines for the tests, and the ``order_payments`` transcripts with their checks.

A transcript (``tests/transcripts/order_payments/*.yaml``) lists events per log segment (``t``
in minutes after ``BASE``; ``raw`` a line as it is). Segment ``k`` (from 0) is ingested at
``BASE + 10h + k`` seconds: with the one-second watermark interval each segment is a tick of its
own, so a segment's lines are judged by the latest event time of the segments before it minus
the delay. The log ends with a heartbeat one second later, which takes the last segment into the
watermark. ``check_stream``, ``check_truth`` and ``check_reconciliation`` hold one transcript's
expectations against what a path produced: the stream step in Arrow (``tests/test_order_payments.py``)
or the Spark speed layer, batch job and reconciliation (``tests/test_transcripts_spark.py``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from lklab.pipelines.order_payments.rule import JoinSettings
from shared.durations import parse_duration

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
MINUTE = 60_000_000
TRANSCRIPTS = sorted(Path(__file__).parent.joinpath("transcripts", "order_payments").glob("*.yaml"))
RAW_SCHEMA = pa.schema([("segment", pa.int64()), ("line_number", pa.int64()), ("raw_line", pa.string())])


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event(event_id, kind, order_id, minutes, ingest_seconds, amount="10.00", currency="EUR") -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "kind": kind,
            "order_id": order_id,
            "amount": amount,
            "currency": currency,
            "event_time": iso(BASE + timedelta(minutes=minutes)),
            "ingest_time": iso(BASE + timedelta(hours=10, seconds=ingest_seconds)),
        }
    )


def heartbeat(ingest_seconds) -> str:
    return json.dumps({"heartbeat": True, "ingest_time": iso(BASE + timedelta(hours=10, seconds=ingest_seconds))})


def raw(segment: int, lines: list[str]) -> pa.Table:
    return pa.table(
        {"segment": [segment] * len(lines), "line_number": list(range(1, len(lines) + 1)), "raw_line": lines},
        schema=RAW_SCHEMA,
    )


def minutes(moment) -> int:
    return int((moment - BASE).total_seconds() // 60)


def join_settings_of(options: dict) -> JoinSettings:
    """A transcript's ``settings`` as the stream step's."""
    return JoinSettings(
        bound=parse_duration(options["bound"]),
        watermark_delay=parse_duration(options["watermark-delay"]),
        dedup_horizon=parse_duration(options["dedup-horizon"]),
        allowed_lateness=parse_duration(options.get("allowed-lateness", "0s")),
    )


def lab_settings(options: dict) -> dict[str, str]:
    """A transcript's ``settings`` as the lab's (``shared.config.load_config`` flags)."""
    return {
        "join-bound": options["bound"],
        "watermark-delay": options["watermark-delay"],
        "dedup-horizon": options["dedup-horizon"],
        "allowed-lateness": options.get("allowed-lateness", "0s"),
    }


def segment_lines(segments: list) -> list[list[str]]:
    """The log's lines per segment, in arrival order, the closing heartbeat's segment last."""
    lines = [
        [
            e["raw"] if "raw" in e else event(e["id"], e["kind"], e["order"], e["t"], index, e.get("amount", "10.00"))
            for e in entries
        ]
        for index, entries in enumerate(segments)
    ]
    return [*lines, [heartbeat(len(segments))]]


def _pairs(table: pa.Table) -> list:
    return sorted(map(list, zip(table["order_event_id"].to_pylist(), table["payment_event_id"].to_pylist())))


def _closed(table: pa.Table) -> list:
    return sorted([r["event_id"], minutes(r["watermark"])] for r in table.to_pylist())


def check_stream(expect: dict, *, matched, unpaid, orphans, late, duplicates, dead_letters, held: list[str]) -> None:
    """The stream's outputs (tables, batch ids aside) against ``expect['stream']``."""
    stream = expect["stream"]
    assert _pairs(matched) == sorted(stream["matched"])
    assert _closed(unpaid) == sorted(stream["unpaid"])
    assert _closed(orphans) == sorted(stream["orphans"])
    found = [
        [r["event_id"], r["kind"], minutes(r["watermark"]), minutes(r["closed_at"]), r["lateness_seconds"]]
        for r in late.to_pylist()
    ]
    assert sorted(found) == sorted([i, k, w, c, Decimal(x)] for i, k, w, c, x in stream["late"])
    assert sorted(duplicates["event_id"].to_pylist()) == sorted(stream["duplicates"])
    assert dead_letters["reject_reason"].to_pylist() == stream["dead_letters"]
    assert sorted(held) == stream["held"]


def check_truth(expect: dict, *, matched, unpaid, orphans) -> None:
    truth = expect["truth"]
    assert _pairs(matched) == sorted(truth["matched"])
    assert sorted(unpaid["event_id"].to_pylist()) == sorted(truth["unpaid"])
    assert sorted(orphans["event_id"].to_pylist()) == sorted(truth["orphans"])


def check_reconciliation(expect: dict, found, ids: dict) -> None:
    """``found``: a ``JoinReconciliation``; ``ids``: ``(segment, line_number) -> event_id``."""
    described = [
        [d.outcome, d.presence, ids.get(d.order_line), ids.get(d.payment_line), d.reason] for d in found.differences
    ]
    assert sorted(described, key=str) == sorted(expect["reconciliation"], key=str)
    assert found.unexplained == 0
