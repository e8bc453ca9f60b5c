"""Reconcile a ``running_max`` stream (the live one or a replay) with the batch truth.

Both sides are read at one moment: the stream's tables at its last completed micro-batch
(``shared.stream_cut``), the truth under its batch lock (held shared: a batch rewriting it
waits). The diff is the keyed diff of every pipeline with one row per key
(``reconciliation.keyed_diff``) on ``key`` with the measures ``max_value`` and ``events``.

A maximum over what was read is final for what was read, so a difference has one explanation:
the stream has not read the segments the truth read (``unread``). A differing key is explained
exactly when a reading of it lies in those segments; any other difference is ``unexplained``
(exit 3 from ``lklab reconcile``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from lklab.pipelines.running_max.parse import PARSED_SCHEMA, parse_readings
from lklab.pipelines.running_max.tables import MAX_STATE, MAX_STREAM, MAX_STREAM_METRICS, MAX_TRUTH
from lklab.pipelines.running_max.truth import BATCH_APP, BATCH_LOCK
from reconciliation.keyed_diff import keyed_diff, status_counts
from shared.catalog import stream_prefix, tables_root
from shared.config import LabConfig
from shared.locks import hold
from shared.log_source import raw_log
from shared.spark_arrow import per_partition
from shared.stream_cut import stream_cut
from shared.tables import Tables

__all__ = ["MaxReconciliation", "reconcile_max", "render_text"]


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


def reconcile_max(spark: SparkSession, config: LabConfig, against: str = "speed") -> MaxReconciliation:
    """Diff the stream named by ``against`` (``speed`` or ``kappa:RUN``) with the truth."""
    lake = Path(config.lake).resolve()
    prefix = stream_prefix(against)
    tables = Tables(spark, lake, config.table_engine)
    names = [table.at(prefix) for table in (MAX_STREAM, MAX_STREAM_METRICS)]
    if not tables.exists(MAX_STATE.at(prefix)):
        raise RuntimeError(f"no running_max stream {against!r} in {lake}: run 'lklab speed' or 'lklab replay' first")
    with hold(lake, BATCH_LOCK, shared=True, wait=True):
        truth_last = tables.committed_version(MAX_TRUTH.name, BATCH_APP)
        if truth_last is None:
            raise RuntimeError(f"no running_max truth in {lake}: run 'lklab batch --pipeline running_max' first")
        truth = tables.read(MAX_TRUTH.name)
        cut = stream_cut(tables_root(lake), names, MAX_STATE.at(prefix))
        stream = tables.read(names[0], cut.versions[names[0]])
        metrics = tables.read_arrow(names[1], cut.versions[names[1]])
        stream_last = pc.max(metrics["last_segment"]).as_py() or 0
        diff = keyed_diff(truth, stream.select(*MAX_TRUTH.schema.names), ["key"], ["max_value", "events"]).persist()
        statuses = status_counts(diff)
        differing = diff.where("status != 'match'").select("key")
        unread_keys = spark.createDataFrame([], "key string")
        if stream_last < truth_last:
            unread = raw_log(spark, str(lake), truth_last, first_segment=stream_last + 1)
            parse = partial(parse_readings, max_clock_skew=config.max_clock_skew)
            parsed = per_partition(unread, parse, from_arrow_schema(PARSED_SCHEMA))
            unread_keys = parsed.where("reject_reason IS NULL AND NOT heartbeat").select("key").distinct()
        explained = differing.join(unread_keys, "key", "left_semi").count()
        unexplained = sorted(row["key"] for row in differing.join(unread_keys, "key", "left_anti").limit(100).collect())
        diff.unpersist()
    return MaxReconciliation(against, statuses, truth_last, stream_last, explained, tuple(unexplained))


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
