"""The ``order_payments`` pipeline's tables (``shared.catalog.Table``): the interval join's stream
(under a run prefix), its batch truth and state."""

from __future__ import annotations

from shared.catalog import LATENCY_COLUMNS, Table

__all__ = [
    "PAYMENTS_MATCHED",
    "PAYMENTS_UNPAID",
    "PAYMENTS_ORPHANS",
    "PAYMENTS_LATE_EVENTS",
    "PAYMENTS_DUPLICATES",
    "PAYMENTS_DEAD_LETTER",
    "PAYMENTS_STREAM_METRICS",
    "PAYMENTS_STATE",
    "PAYMENTS_ROWS",
    "PAYMENTS_TABLES",
    "PAYMENTS_OUTPUTS",
    "PAYMENTS_TRUTH_MATCHED",
    "PAYMENTS_TRUTH_UNPAID",
    "PAYMENTS_TRUTH_ORPHANS",
    "PAYMENTS_BATCH_DUPLICATES",
    "PAYMENTS_BATCH_DEAD_LETTER",
    "PAYMENTS_BATCH_TABLES",
]

# The order-payment interval join (``lklab.pipelines.order_payments.rule``): its stream tables (under a run
# prefix like the others), its batch truth, and the stream's one-table state.

_RULE = "lklab.pipelines.order_payments.rule"
PAYMENTS_MATCHED = Table("payments_matched", f"{_RULE}:MATCHED_SCHEMA")
PAYMENTS_UNPAID = Table("payments_unpaid", f"{_RULE}:UNPAID_SCHEMA")
PAYMENTS_ORPHANS = Table("payments_orphans", f"{_RULE}:ORPHAN_SCHEMA")
PAYMENTS_LATE_EVENTS = Table("payments_late_events", f"{_RULE}:LATE_JOIN_SCHEMA")
PAYMENTS_DUPLICATES = Table("payments_duplicates", f"{_RULE}:JOIN_DUPLICATE_SCHEMA")
PAYMENTS_DEAD_LETTER = Table("payments_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA")
PAYMENTS_STREAM_METRICS = Table(
    "payments_stream_metrics", "lklab.pipelines.order_payments.metrics:JOIN_METRICS_SCHEMA", added=LATENCY_COLUMNS
)
PAYMENTS_STATE = Table("payments_state", "lklab.pipelines.order_payments.state:JOIN_STATE_SCHEMA")
# The join's rows: what a live run and a replay of the same log must agree on (the metrics
# time the run, the state is the commit point).
PAYMENTS_ROWS = (
    PAYMENTS_MATCHED,
    PAYMENTS_UNPAID,
    PAYMENTS_ORPHANS,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_DUPLICATES,
    PAYMENTS_DEAD_LETTER,
)
PAYMENTS_TABLES = (*PAYMENTS_ROWS, PAYMENTS_STREAM_METRICS, PAYMENTS_STATE)
PAYMENTS_OUTPUTS = PAYMENTS_TABLES[:-1]  # what a reconciliation reads (the state is the commit point)

PAYMENTS_TRUTH_MATCHED = Table("payments_truth_matched", f"{_RULE}:MATCH_SCHEMA")
PAYMENTS_TRUTH_UNPAID = Table("payments_truth_unpaid", "lklab.pipelines.order_payments.parse:ORDER_EVENT_SCHEMA")
PAYMENTS_TRUTH_ORPHANS = Table("payments_truth_orphans", "lklab.pipelines.order_payments.parse:ORDER_EVENT_SCHEMA")
PAYMENTS_BATCH_DUPLICATES = Table("payments_batch_duplicates", f"{_RULE}:JOIN_DUPLICATE_SCHEMA", without=("batch_id",))
PAYMENTS_BATCH_DEAD_LETTER = Table(
    "payments_batch_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA", without=("batch_id",)
)
PAYMENTS_BATCH_TABLES = (
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_UNPAID,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_BATCH_DUPLICATES,
    PAYMENTS_BATCH_DEAD_LETTER,
)
