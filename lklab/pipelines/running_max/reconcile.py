"""Reconcile a ``running_max`` stream (the live one or a replay) with the batch truth.

Both sides are read at one moment: the stream's tables at its last completed micro-batch
(``shared.stream_cut``), the truth under its batch lock (held shared: a batch rewriting it
waits). The diff is the keyed diff of every pipeline with one row per key on ``key`` with the
measures ``max_value`` and ``events``, by checksums (``reconciliation.range_diff``): only the
keys whose checksums differ are joined, the others counted as matches.

A maximum over what was read is final for what was read, so a difference has one explanation:
the stream has not read the segments the truth read (``unread``). A differing key is explained
exactly when a reading of it lies in those segments; any other difference is ``unexplained``
(exit 3 from ``lklab reconcile``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from pyspark.sql.pandas.types import from_arrow_schema

from lklab.pipelines.running_max.parse import PARSED_SCHEMA, parse_readings
from lklab.pipelines.running_max.stream import MAX_RULE
from lklab.pipelines.running_max.tables import MAX_STREAM, MAX_TRUTH
from lklab.pipelines.running_max.truth import BATCH_APP
from lklab.reconcile_runner import ReconcileRule, Sides, reconcile_stream
from reconciliation.range_diff import range_diff
from shared.log_source import raw_log
from shared.spark_arrow import per_partition

__all__ = ["MAX_RECONCILE", "MaxReconciliation", "reconcile_max", "render_text"]


@dataclass(frozen=True)
class MaxReconciliation:
    """What the diff found: ``statuses`` (keys per status), the segments each side read, the
    differing keys explained by unread segments, and the ``unexplained`` keys (sorted)."""

    against: str
    statuses: dict[str, int]
    truth_last_segment: int
    stream_last_segment: int
    unread: int
    unexplained: tuple[str, ...]


def _compare(sides: Sides) -> MaxReconciliation:
    spark = sides.spark
    # only the differing keys are read after the counts: the keys whose checksums agree are not joined
    ranged = range_diff(
        sides.truth_frame(MAX_TRUTH),
        sides.stream_frame(MAX_STREAM).select(*MAX_TRUTH.schema.names),
        ["key"],
        ["max_value", "events"],
    )
    diff = ranged.differing.persist()
    statuses = ranged.status_counts()
    differing = diff.where("status != 'match'").select("key")
    unread_keys = spark.createDataFrame([], "key string")
    if sides.read_through < sides.truth_segment:
        unread = raw_log(spark, str(sides.lake), sides.truth_segment, first_segment=sides.read_through + 1)
        parse = partial(parse_readings, max_clock_skew=sides.config.max_clock_skew)
        parsed = per_partition(unread, parse, from_arrow_schema(PARSED_SCHEMA))
        unread_keys = parsed.where("reject_reason IS NULL AND NOT heartbeat").select("key").distinct()
    explained = differing.join(unread_keys, "key", "left_semi").count()
    unexplained = sorted(row["key"] for row in differing.join(unread_keys, "key", "left_anti").limit(100).collect())
    diff.unpersist()
    return MaxReconciliation(
        sides.against, statuses, sides.truth_segment, sides.read_through, explained, tuple(unexplained)
    )


MAX_RECONCILE = ReconcileRule(
    pipeline="running_max",
    stream=MAX_RULE,
    stream_tables=(MAX_STREAM,),
    truth_tables=(MAX_TRUTH,),
    truth_position=lambda tables, **_: tables.committed_version(MAX_TRUTH.name, BATCH_APP),
    compare=_compare,
)


def reconcile_max(spark, config, against: str = "speed") -> MaxReconciliation:
    """Diff the stream named by ``against`` (``speed`` or ``kappa:RUN``) with the truth."""
    return reconcile_stream(spark, config, MAX_RECONCILE, against)


def render_text(result: MaxReconciliation) -> str:
    """The reconciliation as the command line prints it."""
    counts = ", ".join(f"{status} {count:,}" for status, count in result.statuses.items())
    lines = [
        f"running_max: {result.against} (segments 1..{result.stream_last_segment}) against the truth "
        f"(segments 1..{result.truth_last_segment}): {counts}",
        f"explained: {result.unread:,} keys with readings in segments the stream has not read yet",
        f"unexplained: {len(result.unexplained):,} keys"
        + (f" ({', '.join(result.unexplained)})" if result.unexplained else ""),
    ]
    return "\n".join(lines)
