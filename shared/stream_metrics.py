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
its ``StreamBatch``; the replay fills one per segment from aggregates over the whole log.
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
from shared.windows import micros

__all__ = ["METRICS_SCHEMA", "BatchFigures", "metrics_table", "batch_figures", "money_by_currency"]

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


def money_by_currency(table: pa.Table) -> Money:
    """``[(currency, sum of amount)]`` sorted by currency."""
    if table.num_rows == 0:
        return []
    rows = table.group_by("currency", use_threads=False).aggregate([("amount", "sum")]).to_pylist()
    return sorted((row["currency"], row["amount_sum"]) for row in rows)


def _largest(values: np.ndarray) -> int | None:
    return int(values.max()) if len(values) else None


def batch_figures(batch_id: int, parsed: pa.Table, batch: StreamBatch, duration_seconds: float) -> BatchFigures:
    """The figures of micro-batch ``batch_id`` (``parsed``: its parsed lines)."""
    outcomes = batch.outcomes
    late = outcomes["late"]
    segments = parsed["segment"].to_numpy()
    late_count = int(pc.sum(late).as_py() or 0)
    return BatchFigures(
        batch_id=batch_id,
        first_segment=int(segments.min()) if len(segments) else None,
        last_segment=_largest(segments),
        input_lines=batch.input_lines,
        on_time=outcomes.num_rows - late_count,
        late=late_count,
        late_updates=int(pc.sum(outcomes["late_updates"]).as_py() or 0),
        duplicates=batch.duplicates.num_rows,
        dead_letters=batch.dead_letters.num_rows,
        heartbeats=batch.heartbeats,
        watermark=batch.watermark,
        next_watermark=batch.next_watermark,
        max_event_time=batch.max_event_time,
        latest_ingest=_largest(micros(parsed["ingest_time"].drop_null())),
        state_rows=batch.state_rows,
        on_time_amounts=money_by_currency(outcomes.filter(pc.invert(late))),
        late_amounts=money_by_currency(outcomes.filter(late)),
        duplicate_amounts=money_by_currency(batch.duplicates),
        duration_seconds=round(duration_seconds, 3),
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
