"""``stream_metrics``: one row per micro-batch of the speed layer.

Segment range and input lines; where the lines went (``on_time + late + duplicates +
dead_letters == input_lines``, in every batch); late updates; the watermark the batch was
judged by, the one it hands on, and the largest event time seen so far; the watermark lag (the
batch's latest ingest time minus the watermark it hands on, in seconds); the state rows kept;
the money on time, late and duplicated per currency; and ``duration_seconds``, from the start
of the batch until its rows were ready to commit (the commits themselves are not included).
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shared.aggregation import AMOUNT_TOTAL_ARROW_TYPE
from shared.events import UTC_MICROS
from shared.speed import SpeedBatch
from shared.windows import micros

__all__ = ["METRICS_SCHEMA", "metrics_row"]

_MONEY = pa.map_(pa.string(), AMOUNT_TOTAL_ARROW_TYPE)
METRICS_SCHEMA = pa.schema(
    [
        *[pa.field(name, pa.int64()) for name in ("batch_id", "first_segment", "last_segment", "input_lines", "on_time", "late")],
        *[pa.field(name, pa.int64()) for name in ("late_updates", "duplicates", "dead_letters")],
        *[pa.field(name, UTC_MICROS) for name in ("watermark", "next_watermark", "max_event_time")],
        pa.field("watermark_lag_seconds", pa.float64()),
        pa.field("state_rows", pa.int64()),
        *[pa.field(name, _MONEY) for name in ("on_time_amounts", "late_amounts", "duplicate_amounts")],
        pa.field("duration_seconds", pa.float64()),
    ]
)


def _money_by_currency(table: pa.Table) -> list[tuple[str, Decimal]]:
    if table.num_rows == 0:
        return []
    rows = table.group_by("currency").aggregate([("amount", "sum")]).to_pylist()
    return sorted((row["currency"], row["amount_sum"]) for row in rows)


def _largest(values: np.ndarray) -> int | None:
    return int(values.max()) if len(values) else None


def metrics_row(batch_id: int, parsed: pa.Table, batch: SpeedBatch, duration_seconds: float) -> pa.Table:
    """The ``stream_metrics`` row of micro-batch ``batch_id`` (``parsed``: its parsed lines)."""
    outcomes = batch.event_outcomes
    late = outcomes["late"]
    segments = parsed["segment"].to_numpy()
    latest_ingest = _largest(micros(parsed["ingest_time"].drop_null()))
    lag = None
    if batch.next_watermark is not None and latest_ingest is not None:
        lag = (latest_ingest - batch.next_watermark) / 1e6
    row = {
        "batch_id": batch_id,
        "first_segment": int(segments.min()) if len(segments) else None,
        "last_segment": _largest(segments),
        "input_lines": parsed.num_rows,
        "on_time": outcomes.num_rows - pc.sum(late).as_py() if outcomes.num_rows else 0,
        "late": pc.sum(late).as_py() or 0,
        "late_updates": pc.sum(outcomes["late_updates"]).as_py() or 0,
        "duplicates": batch.duplicates.num_rows,
        "dead_letters": batch.dead_letters.num_rows,
        "watermark": batch.watermark,
        "next_watermark": batch.next_watermark,
        "max_event_time": batch.max_event_time,
        "watermark_lag_seconds": lag,
        "state_rows": batch.state.num_rows,
        "on_time_amounts": _money_by_currency(outcomes.filter(pc.invert(late))),
        "late_amounts": _money_by_currency(outcomes.filter(late)),
        "duplicate_amounts": _money_by_currency(batch.duplicates),
        "duration_seconds": round(duration_seconds, 3),
    }
    columns = {}
    for field in METRICS_SCHEMA:
        value = row[field.name]
        if field.type == UTC_MICROS:
            columns[field.name] = pa.array([value], pa.int64()).cast(UTC_MICROS)
        else:
            columns[field.name] = pa.array([value], field.type)
    return pa.table(columns, schema=METRICS_SCHEMA)
