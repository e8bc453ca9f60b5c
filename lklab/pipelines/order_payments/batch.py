"""The order-payment join's batch truth, from the complete log.

``run_payments_batch`` runs ``PaymentsTruth`` through the batch-truth runner
(``lklab.truth_runner``: locks, settings, the log's segments ``1..N``, the writes). The rule
validates the lines (``parse_order_events``), deduplicates by ``event_id`` over the whole log and
runs the interval join partitioned by ``order_id`` (``batch_interval_join``). It replaces the
truth tables (``payments_truth_matched``, ``payments_truth_unpaid``, ``payments_truth_orphans``)
and the line-level ones (``payments_batch_duplicates``, ``payments_batch_dead_letter``), each
commit tagged ``(payments-batch, N)``: ``N`` is the position the truth stands for (a
reconciliation reads it back as the truth's last segment), and a rerun at the same position
commits nothing again. The truth's ``join-bound`` is recorded on its tables; another bound is
refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
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
from lklab.truth_runner import TruthOutput, TruthRule, run_truth, truth_lock
from shared.config import LabConfig
from shared.dedup import first_copies, later_copies
from shared.table_settings import interval_join_truth_settings
from shared.tables import Tables

__all__ = [
    "BATCH_APP",
    "PAYMENTS_BATCH_LOCK",
    "PaymentsBatchRun",
    "PaymentsTruth",
    "run_payments_batch",
    "truth_position",
]

BATCH_APP = "payments-batch"
PAYMENTS_BATCH_LOCK = truth_lock(
    "order_payments"
)  # held by a run while it rewrites the truth's tables, shared by their readers


@dataclass(frozen=True)
class PaymentsBatchRun:
    """What one batch run read and decided. ``lines == orders + payments + duplicates +
    dead_letters + heartbeats`` (``conserved``); ``orders`` and ``payments`` are first copies;
    what it cost (seconds, ``shared.compute_cost``)."""

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
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def conserved(self) -> bool:
        return self.lines == self.orders + self.payments + self.duplicates + self.dead_letters + self.heartbeats


def truth_position(tables: Tables) -> int | None:
    """The last segment the committed truth was computed from (None: no truth yet)."""
    return tables.committed_version(PAYMENTS_TRUTH_MATCHED.name, BATCH_APP)


class PaymentsTruth(TruthRule):
    """The order-payment join's batch, as the runner runs it (the module docstring)."""

    pipeline = "order_payments"
    tables = PAYMENTS_BATCH_TABLES
    app_id = BATCH_APP

    def settings(self, config: LabConfig) -> dict[str, str]:
        return interval_join_truth_settings(config)  # the bound, and the line settings that decide the dead letters

    def compute(self, spark: SparkSession, raw: DataFrame, config: LabConfig) -> TruthOutput:
        parsed = raw.transform(parse_order_events, max_clock_skew=config.max_clock_skew).persist()
        marked = valid_order_events(parsed).transform(mark_order_duplicates).persist()
        result = outcome_result(batch_interval_join(marked.transform(first_copies), config.join_bound).toArrow())
        duplicates = marked.transform(later_copies).toArrow()
        dead_letters = (
            parsed.where(F.col("reject_reason").isNotNull()).select(*PAYMENTS_BATCH_DEAD_LETTER.schema.names).toArrow()
        )
        counts = parsed.agg(F.count(F.lit(1)).alias("lines"), F.count_if("heartbeat").alias("heartbeats")).first()
        kinds = {
            row["kind"]: row["count"] for row in marked.where(~F.col("is_duplicate")).groupBy("kind").count().collect()
        }
        figures = {
            "lines": counts["lines"],
            "orders": kinds.get("order", 0),
            "payments": kinds.get("payment", 0),
            "matched": result.matched.num_rows,
            "unpaid": result.unpaid.num_rows,
            "orphans": result.orphans.num_rows,
            "duplicates": duplicates.num_rows,
            "dead_letters": dead_letters.num_rows,
            "heartbeats": counts["heartbeats"],
        }
        rows = {
            PAYMENTS_TRUTH_MATCHED: result.matched,
            PAYMENTS_TRUTH_UNPAID: result.unpaid,
            PAYMENTS_TRUTH_ORPHANS: result.orphans,
            PAYMENTS_BATCH_DUPLICATES: duplicates,
            PAYMENTS_BATCH_DEAD_LETTER: dead_letters,
        }
        return TruthOutput(rows, lambda tables: figures, persisted=(parsed, marked))


def run_payments_batch(spark: SparkSession, config: LabConfig, last_segment: int | None = None) -> PaymentsBatchRun:
    """Recompute the join's truth from segments ``1..last_segment`` (default: the whole log); one
    run per lake at a time (``LockHeld``)."""
    run = run_truth(spark, config, PaymentsTruth(), last_segment=last_segment)
    return PaymentsBatchRun(
        last_segment=run.last_segment, **run.figures, wall_seconds=run.wall_seconds, cpu_seconds=run.cpu_seconds
    )
