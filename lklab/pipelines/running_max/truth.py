"""The ``running_max`` batch truth: every key's maximum over the first copies of the whole log.

Through the truth runner (``lklab.truth_runner``): the lines parsed as the stream parses them
(``parse.parse_readings``, per partition on the executors), the first copy of each
``event_id`` in log order kept, and ``max(value)`` and ``count`` per key computed by Spark, an
implementation that shares no code with the stream's step (``rule.max_step``). It replaces
``max_truth``, ``max_batch_duplicates`` and ``max_batch_dead_letter``; its commits are tagged
``(max-batch, last segment read)``.
"""

from __future__ import annotations

from functools import partial

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lklab.pipelines.running_max.parse import PARSED_SCHEMA, parse_readings
from lklab.pipelines.running_max.tables import MAX_BATCH_DEAD_LETTER, MAX_BATCH_DUPLICATES, MAX_TRUTH
from lklab.truth_runner import TruthOutput, TruthRule
from shared.config import LabConfig
from shared.dedup import parsed_counts
from shared.spark_arrow import per_partition
from shared.table_settings import line_settings

__all__ = ["MaxTruth", "MAX_TRUTH_RULE", "BATCH_APP"]

BATCH_APP = "max-batch"


class MaxTruth(TruthRule):
    pipeline = "running_max"
    tables = (MAX_TRUTH, MAX_BATCH_DUPLICATES, MAX_BATCH_DEAD_LETTER)
    app_id = BATCH_APP

    def settings(self, config: LabConfig) -> dict[str, str]:
        return line_settings(config)

    def compute(self, spark: SparkSession, raw: DataFrame, config: LabConfig) -> TruthOutput:
        parse = partial(parse_readings, max_clock_skew=config.max_clock_skew)
        parsed = per_partition(raw, parse, from_arrow_schema(PARSED_SCHEMA)).persist()
        readings = parsed.where("reject_reason IS NULL AND NOT heartbeat")
        in_log_order = Window.partitionBy("event_id").orderBy("segment", "line_number")
        first = F.first
        ranked = readings.select(
            "*",
            F.row_number().over(in_log_order).alias("copy"),
            first("segment").over(in_log_order).alias("first_segment"),
            first("line_number").over(in_log_order).alias("first_line_number"),
            F.struct(*(first(c).over(in_log_order) for c in ("key", "value", "event_time"))).alias("first_payload"),
        ).persist()
        truth = (
            ranked.where("copy = 1")
            .groupBy("key")
            .agg(F.max("value").alias("max_value"), F.count(F.lit(1)).alias("events"))
        )
        duplicates = ranked.where("copy > 1").withColumn(
            "payload_conflict", F.struct("key", "value", "event_time") != F.col("first_payload")
        )
        dead_letters = parsed.where("reject_reason IS NOT NULL")

        def figures(_tables) -> dict[str, int]:
            counts = parsed_counts(parsed)
            copies = ranked.agg(F.count_if(F.col("copy") == 1).alias("readings"), F.count_if(F.col("copy") > 1)).first()
            return {
                **{k: counts[k] for k in ("lines", "dead_letters", "heartbeats")},
                "readings": copies[0],
                "duplicates": copies[1],
            }

        return TruthOutput(
            rows={MAX_TRUTH: truth, MAX_BATCH_DUPLICATES: duplicates, MAX_BATCH_DEAD_LETTER: dead_letters},
            figures=figures,
            persisted=(parsed, ranked),
        )


MAX_TRUTH_RULE = MaxTruth()
