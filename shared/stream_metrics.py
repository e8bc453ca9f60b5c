"""``stream_metrics``: one row per micro-batch of the stream.

Segment range and input lines; where the lines went (``on_time + late + duplicates +
dead_letters + heartbeats == input_lines``, in every batch); late updates; the watermark the
batch's first line was judged by, the one in force after its last line, and the largest event
time seen so far; the watermark lag (the batch's latest ingest time minus the watermark it hands
on, in seconds); the state rows kept (remembered first copies and windows held); the money on
time, late and duplicated per currency; and ``duration_seconds``, from the start of the batch
until its rows were ready to commit (the commits themselves are not included; null where the
rows were computed for many batches at once, as the Kappa replay does); then the live latency
(``shared.live_latency``: ``committed_at`` and the p50, p95 and maximum seconds from a line's
publication in the log to its batch's commit), set by the live runner, null in a replay's rows.

A row is built from a ``BatchFigures`` record: the speed layer fills one per micro-batch from
its ``BatchTotals`` (``batch_totals`` of a ``StreamBatch`` on the driver; the buckets' tallies
added up when the step runs on the executors, ``shared.keyed_batch``); the replay fills one per
segment from aggregates over the whole log.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shared.aggregation import AMOUNT_TOTAL_ARROW_TYPE
from shared.events import UTC_MICROS
from shared.live_latency import LATENCY_FIELDS
from shared.speed import StreamBatch

__all__ = [
    "METRICS_SCHEMA",
    "BatchFigures",
    "BatchTotals",
    "TALLY_SCHEMA",
    "SEGMENTS_SCHEMA",
    "metrics_table",
    "batch_totals",
    "segment_lines",
    "tally",
    "add_tallies",
]

_MONEY = pa.map_(pa.string(), AMOUNT_TOTAL_ARROW_TYPE)
METRICS_SCHEMA = pa.schema(
    [
        *[
            pa.field(name, pa.int64())
            for name in ("batch_id", "first_segment", "last_segment", "input_lines", "on_time", "late")
        ],
        *[pa.field(name, pa.int64()) for name in ("late_updates", "duplicates", "dead_letters", "heartbeats")],
        *[pa.field(name, UTC_MICROS) for name in ("watermark", "next_watermark", "max_event_time")],
        pa.field("watermark_lag_seconds", pa.float64()),
        pa.field("state_rows", pa.int64()),
        *[pa.field(name, _MONEY) for name in ("on_time_amounts", "late_amounts", "duplicate_amounts")],
        pa.field("duration_seconds", pa.float64()),
        *LATENCY_FIELDS,
    ]
)

Money = list[tuple[str, Decimal]]


@dataclass(frozen=True)
class BatchFigures:
    """The figures of one ``stream_metrics`` row; times are microseconds (None: unknown)."""

    batch_id: int
    first_segment: int | None
    last_segment: int | None
    input_lines: int
    on_time: int
    late: int
    late_updates: int
    duplicates: int
    dead_letters: int
    heartbeats: int
    watermark: int | None
    next_watermark: int | None
    max_event_time: int | None
    latest_ingest: int | None
    state_rows: int
    on_time_amounts: Money
    late_amounts: Money
    duplicate_amounts: Money
    duration_seconds: float | None

    @property
    def watermark_lag_seconds(self) -> float | None:
        if self.next_watermark is None or self.latest_ingest is None:
            return None
        return (self.latest_ingest - self.next_watermark) / 1e6


def _largest(values: np.ndarray) -> int | None:
    return int(values.max()) if len(values) else None


_WHATS = ("on_time", "late", "duplicate")
# Where a micro-batch's first copies and duplicates went, per currency: ``what`` is on_time, late
# or duplicate. Partial tallies (one per key bucket of a step on the executors) add up to the
# batch's: ``tally`` of their concatenation.
TALLY_SCHEMA = pa.schema(
    [
        pa.field("what", pa.string()),
        pa.field("currency", pa.string()),
        pa.field("events", pa.int64()),
        pa.field("amount", AMOUNT_TOTAL_ARROW_TYPE),
        pa.field("late_updates", pa.int64()),
    ]
)


def _summed(rows: pa.Table, what: str) -> pa.Table:
    sums = rows.group_by("currency", use_threads=False).aggregate(
        [("events", "sum"), ("amount", "sum"), ("late_updates", "sum")]
    )
    return pa.table(
        {
            "what": pa.array([what] * sums.num_rows, pa.string()),
            "currency": sums["currency"],
            "events": sums["events_sum"],
            "amount": sums["amount_sum"].cast(AMOUNT_TOTAL_ARROW_TYPE),
            "late_updates": sums["late_updates_sum"],
        }
    ).cast(TALLY_SCHEMA)


def _counted(rows: pa.Table, late_updates: pa.Array | pa.ChunkedArray) -> pa.Table:
    ones = pa.array(np.ones(rows.num_rows, np.int64))
    return pa.table(
        {"currency": rows["currency"], "amount": rows["amount"], "events": ones, "late_updates": late_updates}
    )


def tally(outcomes: pa.Table, duplicates: pa.Table) -> pa.Table:
    """``TALLY_SCHEMA`` rows of a batch's (or a bucket's) ``outcomes`` and ``duplicates``."""
    late = outcomes["late"]
    on_time, late_rows = outcomes.filter(pc.invert(late)), outcomes.filter(late)
    parts = {
        "on_time": _counted(on_time, on_time["late_updates"]),
        "late": _counted(late_rows, late_rows["late_updates"]),
        "duplicate": _counted(duplicates, pa.array(np.zeros(duplicates.num_rows, np.int64))),
    }
    return _tallied([_summed(rows, what) for what, rows in parts.items() if rows.num_rows])


def _tallied(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables) if tables else TALLY_SCHEMA.empty_table()


def add_tallies(tallies: list[pa.Table]) -> pa.Table:
    """Partial tallies (of ``tally``) added up: one row per ``what`` and currency."""
    rows = _tallied([t.cast(TALLY_SCHEMA) for t in tallies])
    return _tallied([_summed(rows.filter(pc.equal(rows["what"], what)), what) for what in _WHATS])


def _of(tallied: pa.Table, what: str) -> tuple[int, Money]:
    rows = tallied.filter(pc.equal(tallied["what"], what))
    money = sorted((r["currency"], r["amount"]) for r in rows.select(["currency", "amount"]).to_pylist())
    return int(pc.sum(rows["events"]).as_py() or 0), money


@dataclass(frozen=True)
class BatchTotals:
    """What a micro-batch's figures are made of, however its step ran: its lines per segment
    (``segments``: ``segment``, ``lines``, ``latest_ingest`` in microseconds), the clock's
    figures, how many dead letters and heartbeats, the state rows kept after it, and its
    ``tally`` (``TALLY_SCHEMA``)."""

    segments: pa.Table
    input_lines: int
    heartbeats: int
    dead_letters: int
    watermark: int | None
    next_watermark: int | None
    max_event_time: int | None
    state_rows: int
    tally: pa.Table

    @property
    def lines_per_segment(self) -> dict[int, int]:
        """``{segment: lines}``."""
        return dict(zip(self.segments["segment"].to_pylist(), self.segments["lines"].to_pylist()))

    def figures(self, batch_id: int, duration_seconds: float) -> BatchFigures:
        (on_time, on_time_money), (late, late_money) = _of(self.tally, "on_time"), _of(self.tally, "late")
        duplicates, duplicate_money = _of(self.tally, "duplicate")
        segments = self.segments["segment"].to_numpy()
        ingest = self.segments["latest_ingest"].drop_null().to_numpy()
        return BatchFigures(
            batch_id=batch_id,
            first_segment=int(segments.min()) if len(segments) else None,
            last_segment=_largest(segments),
            input_lines=self.input_lines,
            on_time=on_time,
            late=late,
            late_updates=int(pc.sum(self.tally["late_updates"]).as_py() or 0),
            duplicates=duplicates,
            dead_letters=self.dead_letters,
            heartbeats=self.heartbeats,
            watermark=self.watermark,
            next_watermark=self.next_watermark,
            max_event_time=self.max_event_time,
            latest_ingest=_largest(ingest),
            state_rows=self.state_rows,
            on_time_amounts=on_time_money,
            late_amounts=late_money,
            duplicate_amounts=duplicate_money,
            duration_seconds=round(duration_seconds, 3),
        )


SEGMENTS_SCHEMA = pa.schema(
    [pa.field("segment", pa.int64()), pa.field("lines", pa.int64()), pa.field("latest_ingest", pa.int64())]
)


def segment_lines(parsed: pa.Table) -> pa.Table:
    """``SEGMENTS_SCHEMA`` rows of a micro-batch's parsed lines: per segment, its lines and the
    latest ingest time among them (microseconds; null when none has one)."""
    if not parsed.num_rows:
        return SEGMENTS_SCHEMA.empty_table()
    rows = pa.table({"segment": parsed["segment"], "ingest": parsed["ingest_time"].cast(pa.int64())})
    sums = rows.group_by("segment", use_threads=False).aggregate([("segment", "count"), ("ingest", "max")])
    table = pa.table(
        {"segment": sums["segment"], "lines": sums["segment_count"], "latest_ingest": sums["ingest_max"]}
    ).cast(SEGMENTS_SCHEMA)
    return table.sort_by("segment")


def batch_totals(parsed: pa.Table, batch: StreamBatch) -> BatchTotals:
    """The totals of a micro-batch the step ran whole (``parsed``: its parsed lines)."""
    return BatchTotals(
        segments=segment_lines(parsed),
        input_lines=batch.input_lines,
        heartbeats=batch.heartbeats,
        dead_letters=batch.dead_letters.num_rows,
        watermark=batch.watermark,
        next_watermark=batch.next_watermark,
        max_event_time=batch.max_event_time,
        state_rows=batch.state_rows,
        tally=tally(batch.outcomes, batch.duplicates),
    )


def metrics_table(records: list[BatchFigures]) -> pa.Table:
    """``stream_metrics`` rows, one per record."""
    columns = {}
    for field in METRICS_SCHEMA:
        values = [getattr(r, field.name, None) for r in records]  # the live latency: set by the runner
        if field.type == UTC_MICROS:
            columns[field.name] = pa.array(values, pa.int64()).cast(UTC_MICROS)
        else:
            columns[field.name] = pa.array(values, field.type)
    return pa.table(columns, schema=METRICS_SCHEMA)
