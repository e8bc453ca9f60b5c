"""A declared pipeline's batch truth: every window's count and exact sums over the whole log.

Through the truth runner (``lklab.truth_runner``): the lines parsed as the stream parses them
(``parse.parse_declared``, per partition on the executors), the dead letters kept, the first
copy of each event id in log order ``(segment, line_number)`` kept and the later ones sent to
the duplicates (``payload_conflict`` when keys, measures or event time differ), the windows
assigned by Spark, then ``event_count`` and each measure's sum per ``(window_start,
window_end, keys)``: as ``decimal(38, s)``, a long's as ``decimal(38, 0)`` (summed so, it cannot overflow).

Fixed windows are assigned by ``WindowSpec.assign_frame``. Sessions are Spark's
``session_window`` per the declared keys, over every first copy of a key at once: an event joins
a session while it is less than ``gap`` after the one before, the session being ``[first,
last + gap)``. Spark's ``session_window`` also merges two sessions whose ends touch (an event
exactly ``gap`` after the one before); the lab's sessions do not (``shared.windows``), so the
truth asks Spark for a gap one microsecond shorter and adds the microsecond back to each end:
the same sessions, bound for bound, as the stream's rule forms with every event on time. No watermark: the truth counts every first copy, late or not, which is what the
stream's windows plus its late side output add up to. It shares no code with the stream's step
(``rule.declared_step``) beyond the parse. It replaces ``NAME_truth``, ``NAME_batch_duplicates``
and ``NAME_batch_dead_letter``; its commits are tagged ``(NAME-batch, last segment read)``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.parse import parse_declared
from lklab.pipelines.declared.stream import truth_settings_of
from lklab.pipelines.declared.tables import sum_type, tables_of
from lklab.truth_runner import TruthOutput, TruthRule
from shared.config import LabConfig
from shared.dedup import parsed_counts

__all__ = ["DeclaredTruth", "batch_app_of", "spark_type"]


def batch_app_of(d: Declaration) -> str:
    return f"{d.name}-batch"


def spark_type(measure) -> str:
    """A measure's sum as a Spark SQL type: ``decimal(38, s)`` (``tables.sum_type``)."""
    kind = sum_type(measure)
    return f"decimal({kind.precision},{kind.scale})"


def _fixed_windows(d: Declaration, firsts: DataFrame, sums: list) -> DataFrame:
    return (
        d.window.assign_frame(firsts)
        .groupBy("window_start", "window_end", *d.keys)
        .agg(F.count(F.lit(1)).alias("event_count"), *sums)
    )


def _sessions(d: Declaration, firsts: DataFrame, sums: list) -> DataFrame:
    """Spark's sessions per keys, touching ends apart (the module docstring)."""
    session = F.session_window("event_time", f"{d.window.gap - 1} microseconds")
    return (
        firsts.groupBy(*d.keys, session.alias("session"))
        .agg(F.count(F.lit(1)).alias("event_count"), *sums)
        .select(
            F.col("session.start").alias("window_start"),
            F.timestamp_micros(F.unix_micros("session.end") + F.lit(1)).alias("window_end"),
            *d.keys,
            "event_count",
            *(m.name for m in d.measures),
        )
    )


class DeclaredTruth(TruthRule):
    """The ``TruthRule`` of the pipeline a ``Declaration`` declares (the module docstring)."""

    def __init__(self, declaration: Declaration) -> None:
        self.declaration = declaration
        self.pipeline = declaration.name
        t = tables_of(declaration)
        self.tables = t.batch
        self.app_id = batch_app_of(declaration)

    def settings(self, config: LabConfig) -> dict[str, str]:
        return truth_settings_of(self.declaration)

    def compute(self, spark: SparkSession, raw: DataFrame, config: LabConfig, **options) -> TruthOutput:
        d = self.declaration
        t = tables_of(d)
        measures = [m.name for m in d.measures]
        payload = (*d.keys, *measures, "event_time")
        parsed = parse_declared(raw, d).persist()
        events = parsed.where("reject_reason IS NULL AND NOT heartbeat")
        in_log_order = Window.partitionBy("event_id").orderBy("segment", "line_number")
        ranked = events.select(
            "*",
            F.row_number().over(in_log_order).alias("copy"),
            F.first("segment").over(in_log_order).alias("first_segment"),
            F.first("line_number").over(in_log_order).alias("first_line_number"),
            F.struct(*(F.first(c).over(in_log_order) for c in payload)).alias("first_payload"),
        ).persist()
        firsts = ranked.where("copy = 1")
        sums = [F.sum(F.col(m.name).cast(spark_type(m))).cast(spark_type(m)).alias(m.name) for m in d.measures]
        truth = d.window.pick(fixed=_fixed_windows, merging=_sessions)(d, firsts, sums)
        duplicates = ranked.where("copy > 1").withColumn(
            "payload_conflict", F.struct(*payload) != F.col("first_payload")
        )
        dead_letters = parsed.where("reject_reason IS NOT NULL")

        def figures(_tables) -> dict[str, int]:
            counts = parsed_counts(parsed)
            copies = ranked.agg(F.count_if(F.col("copy") == 1), F.count_if(F.col("copy") > 1)).first()
            return {
                **{k: counts[k] for k in ("lines", "dead_letters", "heartbeats")},
                "events": copies[0],
                "duplicates": copies[1],
            }

        return TruthOutput(
            rows={t.truth: truth, t.batch_duplicates: duplicates, t.batch_dead_letter: dead_letters},
            figures=figures,
            persisted=(parsed, ranked),
        )
