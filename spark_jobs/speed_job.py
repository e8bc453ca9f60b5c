"""The speed layer: an always-on Structured Streaming job over the durable log.

Source: the log, one segment per micro-batch by default, offsets in Spark's checkpoint. Each
micro-batch runs ``shared.speed.speed_step`` and writes its results. Exactly once: every write
is a Delta commit tagged ``(app_id, batch_id)`` and skipped when already committed, and the
state table is written last, so a micro-batch replayed after a crash reads the state from
before it and commits nothing twice. The same job is the Kappa streaming job with a table
prefix of its own.

A micro-batch runs as one partition: one segment is small, and a single partition needs no
shuffle for the step's dedup, joins and aggregates (with one partition per input it took
about 1.6 s more per batch on a 2-core machine).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shared.config import LabConfig
from shared.events import parse_events
from shared.log_source import SOURCE_NAME
from shared.speed import STATE_COLUMNS, WINDOW_KEY, SpeedSettings, empty_state, speed_step
from shared.tables import Tables
from shared.watermark import watermark_after

__all__ = ["SpeedLayer", "run_speed", "SPEED_TABLES", "main"]

SPEED_TABLES = ("dead_letter", "duplicate_events", "late_events", "speed_aggregates", "stream_metrics", "stream_state")
_MONEY = pa.map_(pa.string(), pa.decimal128(38, 6))


def _crash_point(batch_id: int, point: str) -> None:
    """Fault injection for the exactly-once tests: ``LKLAB_CRASH_AT=<batch>:<point>`` kills
    this process with SIGKILL there (points: ``start``, ``before:<table>``, ``after:<table>``)."""
    if os.environ.get("LKLAB_CRASH_AT") == f"{batch_id}:{point}":
        os.kill(os.getpid(), signal.SIGKILL)


def _money_by_currency(table: pa.Table) -> dict[str, Decimal]:
    if table.num_rows == 0:
        return {}
    rows = table.group_by("currency").aggregate([("amount", "sum")]).to_pylist()
    return {row["currency"]: row["amount_sum"] for row in sorted(rows, key=lambda r: r["currency"])}


def _micros(value) -> int | None:
    if value is None:
        return None
    return int(value.timestamp() * 1_000_000) if not isinstance(value, int) else value


@dataclass
class SpeedLayer:
    """Processes micro-batches into the tables ``<prefix><table>``."""

    spark: SparkSession
    config: LabConfig
    app_id: str = "speed"
    prefix: str = ""

    def __post_init__(self) -> None:
        self.tables = Tables(self.spark, self.config.lake, self.config.table_engine)
        self.settings = SpeedSettings(
            self.config.window, self.config.watermark_delay, self.config.allowed_lateness, self.config.dedup_horizon
        )
        self.busy = threading.Event()
        # (batch id, max event time of the batches before it), carried from the batch just done.
        self._max_before: tuple[int, int | None] | None = None

    def table(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _state(self) -> DataFrame:
        if not self.tables.exists(self.table("stream_state")):
            return empty_state(self.spark)
        return self.tables.read(self.table("stream_state")).select(*STATE_COLUMNS)

    def _max_event_time_before(self, batch_id: int) -> int | None:
        if self._max_before is not None and self._max_before[0] == batch_id:
            return self._max_before[1]
        name = self.table("stream_metrics")
        if not self.tables.exists(name):
            return None
        metrics = self.tables.read_arrow(name).filter(pc.field("batch_id") < batch_id)
        value = pc.max(metrics["max_event_time"]).as_py() if metrics.num_rows else None
        return _micros(value)

    def _write(self, batch_id: int, name: str, action) -> None:
        _crash_point(batch_id, f"before:{name}")
        action(self.table(name))
        _crash_point(batch_id, f"after:{name}")

    def _append_rows(self, name: str, rows: pa.Table, batch_id: int) -> None:
        """Append a batch's rows once. A batch without rows commits nothing (once the table
        exists): there is nothing a replay could repeat, and most batches have no side output."""
        if rows.num_rows or not self.tables.exists(name):
            self.tables.append(name, rows, app_id=self.app_id, version=batch_id)

    def process(self, raw: DataFrame, batch_id: int) -> None:
        """``foreachBatch`` body: classify the batch's lines and commit each result once."""
        self.busy.set()
        try:
            self._process(raw, batch_id)
        finally:
            self.busy.clear()

    def _process(self, raw: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        _crash_point(batch_id, "start")
        app, tables = self.app_id, self.tables
        parsed = raw.transform(parse_events).coalesce(1).persist()
        try:
            previous_max = self._max_event_time_before(batch_id)
            stats = parsed.agg(
                F.count(F.lit(1)).alias("lines"),
                F.min("segment").alias("first_segment"),
                F.max("segment").alias("last_segment"),
                F.max(F.when(F.col("reject_reason").isNull(), F.unix_micros("event_time"))).alias("max_event"),
                F.max("ingest_time").alias("max_ingest"),
            ).first()
            maxima = [m for m in (previous_max, stats["max_event"]) if m is not None]
            max_event = max(maxima) if maxima else None
            watermark = watermark_after(previous_max, self.settings.watermark_delay)
            next_watermark = watermark_after(max_event, self.settings.watermark_delay)
            state = self._state().coalesce(1).persist()
            step = speed_step(parsed, state, self.settings, batch_id, watermark, next_watermark, reuse=DataFrame.persist)

            dead = step.dead_letters.toArrow()
            duplicates = step.duplicates.toArrow()
            late = step.late_events.toArrow()
            updates = step.window_updates.toArrow()
            outcomes = step.event_outcomes.toArrow()
            new_state = step.state.toArrow()
            on_time, late_money = outcomes.filter(pc.invert(outcomes["late"])), outcomes.filter(outcomes["late"])
            late_updates = pc.sum(outcomes["late_updates"]).as_py() or 0

            for name, rows in (("dead_letter", dead), ("duplicate_events", duplicates), ("late_events", late)):
                self._write(batch_id, name, lambda n, rows=rows: self._append_rows(n, rows, batch_id))
            self._write(
                batch_id,
                "speed_aggregates",
                lambda n: updates.num_rows and tables.upsert(n, updates, keys=WINDOW_KEY, app_id=app, version=batch_id),
            )
            if next_watermark is not None:
                limit = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(next_watermark // 1_000_000))
                limit += f".{next_watermark % 1_000_000:06d}Z"
                tables.update_where(
                    self.table("speed_aggregates"),
                    {"status": "'final'"},
                    f"status = 'open' AND window_end <= '{limit}'",
                    app_id=f"{app}:finalise",
                    version=batch_id,
                )
            to_ts = lambda micros: None if micros is None else pa.scalar(micros, pa.timestamp("us", tz="UTC")).as_py()
            metrics = pa.table(
                {
                    "batch_id": pa.array([batch_id], pa.int64()),
                    "first_segment": pa.array([stats["first_segment"]], pa.int64()),
                    "last_segment": pa.array([stats["last_segment"]], pa.int64()),
                    "input_lines": pa.array([stats["lines"]], pa.int64()),
                    "on_time": pa.array([on_time.num_rows], pa.int64()),
                    "late": pa.array([late_money.num_rows], pa.int64()),
                    "late_updates": pa.array([late_updates], pa.int64()),
                    "duplicates": pa.array([duplicates.num_rows], pa.int64()),
                    "dead_letters": pa.array([dead.num_rows], pa.int64()),
                    "watermark": pa.array([to_ts(watermark)], pa.timestamp("us", tz="UTC")),
                    "next_watermark": pa.array([to_ts(next_watermark)], pa.timestamp("us", tz="UTC")),
                    "max_event_time": pa.array([to_ts(max_event)], pa.timestamp("us", tz="UTC")),
                    "watermark_lag_seconds": pa.array(
                        [
                            None
                            if next_watermark is None or stats["max_ingest"] is None
                            else (_micros(stats["max_ingest"]) - next_watermark) / 1e6
                        ],
                        pa.float64(),
                    ),
                    "state_rows": pa.array([new_state.num_rows], pa.int64()),
                    "on_time_amounts": pa.array([list(_money_by_currency(on_time).items())], _MONEY),
                    "late_amounts": pa.array([list(_money_by_currency(late_money).items())], _MONEY),
                    "duplicate_amounts": pa.array([list(_money_by_currency(duplicates).items())], _MONEY),
                    "duration_seconds": pa.array([round(time.monotonic() - started, 3)], pa.float64()),
                }
            )
            self._write(batch_id, "stream_metrics", lambda n: tables.append(n, metrics, app_id=app, version=batch_id))
            # The state is the commit point: written last, so a replay before it sees the old state.
            self._write(
                batch_id, "stream_state", lambda n: tables.overwrite(n, new_state, app_id=app, version=batch_id)
            )
            self._max_before = (batch_id + 1, max_event)
        finally:
            self.spark.catalog.clearCache()


def _checkpoint_guard(layer: SpeedLayer, checkpoint: Path) -> None:
    metrics = layer.table("stream_metrics")
    if not checkpoint.exists() and layer.tables.exists(metrics):
        raise RuntimeError(
            f"tables {layer.prefix or ''}stream_metrics already hold batches of '{layer.app_id}' but its "
            f"checkpoint {checkpoint} is missing: batch ids would restart and be skipped as done. "
            "Restore the checkpoint, or start over with new tables (another --name or a fresh lake)."
        )


def run_speed(
    spark: SparkSession,
    config: LabConfig,
    *,
    available_now: bool = False,
    segments_per_batch: int = 1,
    trigger_interval: str = "1 second",
    app_id: str = "speed",
    prefix: str = "",
    stop: threading.Event | None = None,
) -> SpeedLayer:
    """Run the speed layer until the log is consumed (``available_now``) or ``stop`` is set."""
    lake = Path(config.lake).resolve()
    layer = SpeedLayer(spark, config, app_id, prefix)
    checkpoint = lake / "checkpoints" / (prefix + app_id)
    _checkpoint_guard(layer, checkpoint)
    stream = (
        spark.readStream.format(SOURCE_NAME)
        .option("path", str(lake))
        .option("segmentsPerBatch", segments_per_batch)
        .load()
        .writeStream.foreachBatch(layer.process)
        .option("checkpointLocation", str(checkpoint))
    )
    stream = stream.trigger(availableNow=True) if available_now else stream.trigger(processingTime=trigger_interval)
    query = stream.start()
    stop = stop or threading.Event()
    while query.isActive:
        query.awaitTermination(0.5)
        if stop.is_set() and not layer.busy.is_set():
            query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"speed layer failed: {query.exception()}")
    return layer


def main(argv: list[str] | None = None) -> int:
    """``spark-submit spark_jobs/speed_job.py [lklab speed flags]``: always on; SIGTERM stops it cleanly."""
    from lklab.cli import main as lklab

    return lklab(["speed", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
