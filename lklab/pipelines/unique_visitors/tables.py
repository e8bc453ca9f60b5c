"""The ``unique_visitors`` pipeline's tables (``shared.catalog.Table``): its stream's (under a run
prefix), its batch truth's and the reconciliation's."""

from __future__ import annotations

from shared.catalog import LATENCY_COLUMNS, Table

__all__ = [
    "VISITORS_WINDOWS",
    "VISITORS_MEMBERS",
    "VISITORS_LATE_EVENTS",
    "VISITORS_DUPLICATES",
    "VISITORS_DEAD_LETTER",
    "VISITORS_STATE",
    "VISITORS_STREAM_TABLES",
    "VISITORS_TRUTH",
    "VISITORS_CORRECTED",
    "VISITORS_STREAM_METRICS",
    "VISITORS_SEEN",
    "VISITORS_SPEED_TABLES",
    "VISITORS_TRUTH_MEMBERS",
    "VISITORS_BATCH_DUPLICATES",
    "VISITORS_BATCH_DEAD_LETTER",
    "VISITORS_BATCH_TABLES",
]

# The second pipeline's tables (distinct URLs per user per window; ``lklab.pipelines.unique_visitors.step``).
# Its stream writes them under the same run prefixes as the billing stream's.

VISITORS_WINDOWS = Table(
    "visitors_windows", "lklab.pipelines.unique_visitors.step:VISITOR_WINDOW_SCHEMA"
)  # one current row per (window, user)
VISITORS_MEMBERS = Table(
    "visitors_members", "lklab.pipelines.unique_visitors.step:VISITOR_MEMBER_SCHEMA"
)  # the URLs each window counted
VISITORS_LATE_EVENTS = Table(
    "visitors_late_events", "lklab.pipelines.unique_visitors.step:VISITOR_LATE_SCHEMA"
)  # the side output, with adds_url
VISITORS_DUPLICATES = Table("visitors_duplicates", "lklab.pipelines.unique_visitors.step:VISITOR_DUPLICATE_SCHEMA")
VISITORS_DEAD_LETTER = Table("visitors_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA")
VISITORS_STATE = Table(
    "visitors_state", "lklab.pipelines.unique_visitors.state:STATE_SCHEMA"
)  # clock, remembered ids, member entries (TTL)
VISITORS_STREAM_TABLES = (
    VISITORS_WINDOWS,
    VISITORS_MEMBERS,
    VISITORS_LATE_EVENTS,
    VISITORS_DUPLICATES,
    VISITORS_DEAD_LETTER,
    VISITORS_STATE,
)
VISITORS_TRUTH = Table(
    "visitors_truth", "lklab.pipelines.unique_visitors.rule:COUNT_SCHEMA"
)  # the batch rule over the whole log
VISITORS_CORRECTED = Table(
    "visitors_corrected", "lklab.pipelines.unique_visitors.reconcile_rule:CORRECTED_SCHEMA"
)  # per stream: served, corrected, truth and verdict per window
# Per micro-batch: the segments read, where the lines went (a reconciliation's read-through) and
# the step's time (added later: an older lake's table takes the column at its next micro-batch).
VISITORS_STREAM_METRICS = Table(
    "visitors_stream_metrics",
    "lklab.pipelines.unique_visitors.metrics:VISITOR_METRICS_SCHEMA",
    added=("duration_seconds", *LATENCY_COLUMNS),
)
# Each user's URLs seen within the state TTL, as of the last micro-batch (rewritten every batch).
VISITORS_SEEN = Table("visitors_seen", "lklab.pipelines.unique_visitors.state:SEEN_TABLE_SCHEMA")
# What a stream job writes: its outputs, then the state (the commit point) last.
VISITORS_SPEED_TABLES = (*VISITORS_STREAM_TABLES[:-1], VISITORS_STREAM_METRICS, VISITORS_SEEN, VISITORS_STATE)
# The batch's: the truth's members (with the first line of each) and its line-level results.
VISITORS_TRUTH_MEMBERS = Table("visitors_truth_members", "lklab.pipelines.unique_visitors.rule:MEMBER_SCHEMA")
VISITORS_BATCH_DUPLICATES = Table(
    "visitors_batch_duplicates", "lklab.pipelines.unique_visitors.step:VISITOR_DUPLICATE_SCHEMA", without=("batch_id",)
)
VISITORS_BATCH_DEAD_LETTER = Table(
    "visitors_batch_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA", without=("batch_id",)
)
VISITORS_BATCH_TABLES = (VISITORS_TRUTH, VISITORS_TRUTH_MEMBERS, VISITORS_BATCH_DUPLICATES, VISITORS_BATCH_DEAD_LETTER)
