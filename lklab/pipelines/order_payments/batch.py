"""The order-payment join's batch truth, from the complete log.

``run_payments_batch`` reads segments ``1..N`` (the log's end now) through Spark, validates them
(``parse_order_events``), deduplicates by ``event_id`` over the whole log and runs the interval
join partitioned by ``order_id`` (``batch_interval_join``). It replaces the truth tables
(``payments_truth_matched``, ``payments_truth_unpaid``, ``payments_truth_orphans``) and the
line-level ones (``payments_batch_duplicates``, ``payments_batch_dead_letter``), each commit
tagged ``(payments-batch, N)``: ``N`` is the position the truth stands for (a reconciliation reads
it back as the truth's last segment), and a rerun at the same position commits nothing again.
The truth's ``join-bound`` is recorded on its tables; another bound is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lklab.pipelines.order_payments.parse import parse_order_events, valid_order_events
from lklab.pipelines.order_payments.rule import batch_interval_join, mark_order_duplicates, outcome_result
from lklab.pipelines.order_payments.tables import (
    PAYMENTS_BATCH_DEAD_LETTER,
    PAYMENTS_BATCH_DUPLICATES,
    PAYMENTS_BATCH_TABLES,
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_TRUTH_UNPAID,
)
from shared.config import LabConfig
from shared.dedup import first_copies, later_copies
from shared.eventlog import EventLog
from shared.locks import hold, writer
from shared.log_source import raw_log
from shared.table_settings import interval_join_truth_settings, record, require
from shared.tables import Tables

__all__ = ["BATCH_APP", "PAYMENTS_BATCH_LOCK", "PaymentsBatchRun", "run_payments_batch", "truth_position"]

BATCH_APP = "payments-batch"
PAYMENTS_BATCH_LOCK = (
    "payments-batch-tables"  # held by a run while it rewrites the truth's tables, shared by their readers
)


@dataclass(frozen=True)
class PaymentsBatchRun:
    """What one batch run read and decided. ``lines == orders + payments + duplicates +
    dead_letters + heartbeats`` (``conserved``); ``orders`` and ``payments`` are first copies."""

    last_segment: int
    lines: int
    orders: int
    payments: int
    matched: int
    unpaid: int
    orphans: int
    duplicates: int
    dead_letters: int
    heartbeats: int

    @property
    def conserved(self) -> bool:
        return self.lines == self.orders + self.payments + self.duplicates + self.dead_letters + self.heartbeats


def truth_position(tables: Tables) -> int | None:
    """The last segment the committed truth was computed from (None: no truth yet)."""
    return tables.committed_version(PAYMENTS_TRUTH_MATCHED.name, BATCH_APP)


def run_payments_batch(spark: SparkSession, config: LabConfig) -> PaymentsBatchRun:
    """Recompute the join's truth from the whole log; one run per lake at a time (``LockHeld``)."""
    lake = str(Path(config.lake).resolve())
    with writer(lake, "payments-batch"), hold(lake, PAYMENTS_BATCH_LOCK, wait=True):
        tables = Tables(spark, lake, config.table_engine)
        bound = interval_join_truth_settings(config)  # the bound, and the line settings that decide the dead letters
        names = [table.name for table in PAYMENTS_BATCH_TABLES]
        require(tables, names, bound)
        last = EventLog(lake).last_segment()
        if last == 0:
            raise RuntimeError(f"the log under {lake} is empty: run 'lklab generate --pipeline order_payments' first")
        raw = raw_log(spark, lake, last, max_line_bytes=config.max_line_bytes)
        parsed = raw.transform(parse_order_events, max_clock_skew=config.max_clock_skew).persist()
        marked = valid_order_events(parsed).transform(mark_order_duplicates).persist()
        result = outcome_result(batch_interval_join(marked.transform(first_copies), config.join_bound).toArrow())
        duplicates = marked.transform(later_copies).toArrow()
        dead_letters = (
            parsed.where(F.col("reject_reason").isNotNull()).select(*PAYMENTS_BATCH_DEAD_LETTER.schema.names).toArrow()
        )
        counts = parsed.agg(F.count(F.lit(1)).alias("lines"), F.count_if("heartbeat").alias("heartbeats")).first()
        firsts = marked.where(~F.col("is_duplicate")).groupBy("kind").count().collect()
        kinds = {row["kind"]: row["count"] for row in firsts}
        rows = {
            PAYMENTS_TRUTH_MATCHED: result.matched,
            PAYMENTS_TRUTH_UNPAID: result.unpaid,
            PAYMENTS_TRUTH_ORPHANS: result.orphans,
            PAYMENTS_BATCH_DUPLICATES: duplicates,
            PAYMENTS_BATCH_DEAD_LETTER: dead_letters,
        }
        for table, table_rows in rows.items():
            ordered = table_rows.select(table.schema.names).cast(table.schema)
            tables.overwrite(table.name, ordered, app_id=BATCH_APP, version=last)
        record(tables, names, bound)
        for frame in (parsed, marked):
            frame.unpersist()
    return PaymentsBatchRun(
        last_segment=last,
        lines=counts["lines"],
        orders=kinds.get("order", 0),
        payments=kinds.get("payment", 0),
        matched=result.matched.num_rows,
        unpaid=result.unpaid.num_rows,
        orphans=result.orphans.num_rows,
        duplicates=duplicates.num_rows,
        dead_letters=dead_letters.num_rows,
        heartbeats=counts["heartbeats"],
    )
