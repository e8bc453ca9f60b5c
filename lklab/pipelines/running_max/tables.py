"""The ``running_max`` pipeline's tables (``shared.catalog.Table``): the stream's (under a run
prefix), the batch truth's."""

from __future__ import annotations

from shared.catalog import LATENCY_COLUMNS, Table

__all__ = [
    "MAX_STREAM",
    "MAX_DUPLICATES",
    "MAX_DEAD_LETTER",
    "MAX_STREAM_METRICS",
    "MAX_STATE",
    "MAX_TRUTH",
    "MAX_BATCH_DUPLICATES",
    "MAX_BATCH_DEAD_LETTER",
    "MAX_STREAM_TABLES",
    "MAX_BATCH_TABLES",
]

_RULE = "lklab.pipelines.running_max.rule"
MAX_STREAM = Table("max_stream", f"{_RULE}:MAXIMUM_SCHEMA")  # one current row per key
MAX_DUPLICATES = Table("max_duplicates", f"{_RULE}:DUPLICATE_SCHEMA")
MAX_DEAD_LETTER = Table("max_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA")
MAX_STREAM_METRICS = Table("max_stream_metrics", f"{_RULE}:METRICS_SCHEMA", added=LATENCY_COLUMNS)
MAX_STATE = Table("max_state", f"{_RULE}:STATE_SCHEMA")  # the maxima and every event id seen
MAX_TRUTH = Table("max_truth", f"{_RULE}:MAXIMUM_SCHEMA", without=("updated_batch_id",))
MAX_BATCH_DUPLICATES = Table("max_batch_duplicates", f"{_RULE}:DUPLICATE_SCHEMA", without=("batch_id",))
MAX_BATCH_DEAD_LETTER = Table("max_batch_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA", without=("batch_id",))
MAX_STREAM_TABLES = (MAX_DEAD_LETTER, MAX_DUPLICATES, MAX_STREAM, MAX_STREAM_METRICS, MAX_STATE)
MAX_BATCH_TABLES = (MAX_TRUTH, MAX_BATCH_DUPLICATES, MAX_BATCH_DEAD_LETTER)
