"""The ``unique_visitors`` batch truth: the rule over every first copy of the complete log.

``run_visitors_batch`` runs ``VisitorsTruth`` through the batch-truth runner
(``lklab.truth_runner``: locks, settings, the log's segments ``1..N``, the writes, the cost).
The rule parses the lines with ``parse_page_views``, deduplicates over the whole log
(``shared.dedup``) and runs the rule (``lklab.pipelines.unique_visitors.rule``) per user
through Spark. It replaces:

* ``visitors_truth_members``: one row per (window, user, URL) with its views and first line;
* ``visitors_truth``: ``distinct_urls`` per (window, user), the number of those members;
* ``visitors_batch_duplicates`` and ``visitors_batch_dead_letter``: the later copies and the
  rejected lines of the log.

Each rerun rewrites them from the log as it is then (the log only grows, so the rows only
grow); the commits are untagged. Windows or line settings (``max-clock-skew``,
``max-line-bytes``) other than the ones the tables were built with are refused
(``SettingsConflict``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from lklab.pipelines.unique_visitors.parse import (
    PAYLOAD_COLUMNS,
    parse_page_views,
    rejected_lines,
    valid_page_views,
)
from lklab.pipelines.unique_visitors.rule import COUNT_SCHEMA, distinct_url_counts_table, truth_members
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_BATCH_DEAD_LETTER,
    VISITORS_BATCH_DUPLICATES,
    VISITORS_TRUTH,
    VISITORS_TRUTH_MEMBERS,
)
from lklab.truth_runner import TruthOutput, TruthRule, run_truth
from shared.config import LabConfig
from shared.dedup import first_copies, later_copies, line_counts, mark_duplicates
from shared.spark_arrow import per_key
from shared.table_settings import batch_settings

__all__ = ["BATCH_APP", "VisitorsBatchRun", "VisitorsTruth", "run_visitors_batch"]


@dataclass(frozen=True)
class VisitorsBatchRun:
    """What a batch read and found: every line is a view's first copy, a duplicate, a dead
    letter or a heartbeat (``conserved``); ``windows``: (window, user) rows of the truth."""

    last_segment: int
    lines: int
    views: int
    duplicates: int
    dead_letters: int
    heartbeats: int
    windows: int
    members: int
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def conserved(self) -> bool:
        return self.lines == self.views + self.duplicates + self.dead_letters + self.heartbeats


BATCH_APP = "visitors-batch"


class VisitorsTruth(TruthRule):
    """The ``unique_visitors`` batch, as the runner runs it (the module docstring)."""

    pipeline = "unique_visitors"
    app_id = BATCH_APP  # each commit tagged with the last segment the truth read
    # in write order: the members, then the counts made of them
    tables = (VISITORS_TRUTH_MEMBERS, VISITORS_TRUTH, VISITORS_BATCH_DUPLICATES, VISITORS_BATCH_DEAD_LETTER)

    def settings(self, config: LabConfig) -> dict[str, str]:
        return batch_settings(config)  # the windows, and the line settings that decide the dead letters

    def compute(self, spark: SparkSession, raw: DataFrame, config: LabConfig) -> TruthOutput:
        parsed = raw.transform(parse_page_views, max_clock_skew=config.max_clock_skew).persist()
        marked = mark_duplicates(valid_page_views(parsed), PAYLOAD_COLUMNS).persist()
        members = first_copies(marked).transform(truth_members(config.window)).persist()

        def figures(tables) -> dict[str, int]:
            counts = line_counts(parsed, later_copies(marked))
            return {
                "lines": counts["lines"],
                "views": counts["firsts"],
                "duplicates": counts["duplicates"],
                "dead_letters": counts["dead_letters"],
                "heartbeats": counts["heartbeats"],
                "windows": tables.read(VISITORS_TRUTH.name).count(),
                "members": members.count(),
            }

        rows = {
            VISITORS_TRUTH_MEMBERS: members,
            VISITORS_TRUTH: per_key(members, ["user_id"], distinct_url_counts_table, from_arrow_schema(COUNT_SCHEMA)),
            VISITORS_BATCH_DUPLICATES: later_copies(marked),
            VISITORS_BATCH_DEAD_LETTER: rejected_lines(parsed),
        }
        return TruthOutput(rows, figures, persisted=(parsed, marked, members))


def run_visitors_batch(spark: SparkSession, config: LabConfig, last_segment: int | None = None) -> VisitorsBatchRun:
    """Recompute the ``unique_visitors`` truth from segments ``1..last_segment`` (default: the
    whole log), one batch at a time per lake."""
    run = run_truth(spark, config, VisitorsTruth(), last_segment=last_segment)
    return VisitorsBatchRun(
        last_segment=run.last_segment, **run.figures, wall_seconds=run.wall_seconds, cpu_seconds=run.cpu_seconds
    )
