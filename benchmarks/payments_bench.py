"""order_payments: the lab's batch truth and stream against bare Spark joining the same, same process.

One log from the lab's generator (``lklab.pipelines.order_payments.generator``: split and slow payments,
gateway retries, offline clients, a regional outage, 0.2% malformed lines), with the lab's
default settings (bound 15 minutes, watermark delay 1m, dedup horizon 1h). One Spark session;
one unmeasured run of each of the four jobs first (JVM, JIT, Python workers, delta-rs), then
``--repeats`` measured runs of each, interleaved, and the median of each.

**The join** (both sides): a payment matches an order with the same ``order_id`` when
``order.event_time <= payment.event_time <= order.event_time + 15 minutes``; an order without a
match is unpaid, a payment without one an orphan.

**Batch.** Bare Spark: ``read.json`` of the log directory, rows missing a field dropped,
``dropDuplicates(["event_id"])`` (an arbitrary copy), orders and payments split by ``kind``, one
full outer join on that condition (matched pairs, unpaid orders and orphan payments in one
result), written as Parquet. The lab: ``run_payments_batch`` (every line validated, first copies
in log order, the join partitioned by ``order_id``, matched/unpaid/orphans, duplicates and dead
letters as Delta tables), its tables deleted before each run.

**Stream.** Bare Spark: its own stream-stream interval join. Each side is Spark's file source
over the log's segment files (one file per micro-batch, in segment order,
``Trigger.AvailableNow``; a stream-stream join has two sources, so every segment is read and
parsed twice, once per side), rows missing a field dropped, filtered by ``kind``,
``withWatermark(event_time, 1 minute)`` and ``dropDuplicatesWithinWatermark(["event_id"])``
(a retry repeats the event time, so it is dropped as long as it can be on time), then a full
outer join on the condition above, in append mode, to Parquet, with one shuffle partition (the
lab steps each micro-batch in one piece on the driver). Spark drops every row whose event time
is at most the watermark (the global one: the smaller side's largest event time - 1 minute, of
the micro-batch before); it emits an unmatched row once the watermark passes its interval, and
keeps no late side output, duplicates or dead letters. The lab: ``run_payments_speed`` over the
same segments, one per micro-batch (its log source, each batch parsed in Python, the step,
every output committed exactly once). Two figures per side: the wall time of a run (query start
and stop included) and the steady state, the sum of Spark's ``triggerExecution`` over every
micro-batch after the first (the lab's ``foreachBatch``, Delta commits included), with the log
lines of those batches per second.

**Agreement** (checked after the measured runs; the script fails if any check fails). Pairs are
``(order event_id, payment event_id)``.

* batch: bare Spark keeps lines the lab dead-letters (a zero amount, a lower-case currency, an
  event time without offset, a numeric amount, ...), and those join. On the events the lab
  accepts the results are equal: the lab's matched pairs are exactly bare Spark's pairs between
  such events, its unpaid orders and orphans exactly those events in no such pair;
* Spark's stream: its matched pairs are exactly the batch pairs between the events it kept (the
  first copy of an event is dropped when its event time is at most the watermark of the
  micro-batch before the one that read it: its own progress reports and source log);
* the lab's stream: its matched pairs are exactly the truth's pairs between events it did not
  judge late (``payments_late_events``);
* the two streams: on the pairs between events both kept they are equal; the pairs only one of
  them emits are counted. Their lateness differs: the lab drops an order only once its interval
  has closed (``W > order_time + bound``) and judges by a watermark that moves every second on
  the log's clock; Spark drops any row at or behind a watermark that moves once per micro-batch.

Unpaid and orphan rows of the streams are counted, not compared: each is emitted when its side's
watermark passes, and both end with some still held.

    .venv/bin/python benchmarks/payments_bench.py [--events N] [--segment-minutes M] [--repeats R] [--scratch DIR] [--json-out FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path

import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)
from pyspark.sql import Column, DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from lklab.cli.process_exit import exit_process  # noqa: E402
from lklab.pipelines.order_payments.batch import run_payments_batch  # noqa: E402
from lklab.pipelines.order_payments.generator import OrderPaymentParams, generate_order_payments  # noqa: E402
from lklab.pipelines.order_payments.stream import run_payments_speed  # noqa: E402
from lklab.pipelines.order_payments.tables import (  # noqa: E402
    PAYMENTS_BATCH_DEAD_LETTER,
    PAYMENTS_BATCH_TABLES,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_MATCHED,
    PAYMENTS_ORPHANS,
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_TRUTH_UNPAID,
    PAYMENTS_UNPAID,
)
from shared.config import LabConfig  # noqa: E402
from shared.tables import Tables  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab_against_bare import BenchRun, bench_arguments, print_report, run_four_jobs, run_to_end  # noqa: E402
from stream_runs import (  # noqa: E402
    files_per_batch,
    micros_of,
    progress,
    require,
)

EVENT_SCHEMA = "event_id string, kind string, order_id string, amount string, currency string, event_time timestamp"
PRESENT = " AND ".join(
    f"{name} IS NOT NULL" for name in ("event_id", "kind", "order_id", "amount", "currency", "event_time")
)
SIDE_COLUMNS = ("event_id", "order_id", "amount", "currency", "event_time")


def side(events: DataFrame, kind: str) -> DataFrame:
    """One side of the join, its columns prefixed with ``kind``."""
    return events.where(F.col("kind") == kind).select(*[F.col(name).alias(f"{kind}_{name}") for name in SIDE_COLUMNS])


def interval(bound_seconds: int) -> Column:
    order_time, payment_time = F.col("order_event_time"), F.col("payment_event_time")
    return (
        (F.col("order_order_id") == F.col("payment_order_id"))
        & (payment_time >= order_time)
        & (payment_time <= order_time + F.expr(f"INTERVAL {bound_seconds} SECONDS"))
    )


def with_amount(events: DataFrame) -> DataFrame:
    return events.withColumn("amount", F.col("amount").try_cast("decimal(20,6)"))


def bare_batch(spark: SparkSession, log_dir: Path, config: LabConfig, out: Path) -> None:
    events = (
        spark.read.schema(EVENT_SCHEMA)
        .json(str(log_dir))
        .where(PRESENT)
        .dropDuplicates(["event_id"])
        .transform(with_amount)
    )
    joined = side(events, "order").join(side(events, "payment"), interval(config.join_bound // 1_000_000), "full_outer")
    joined.write.mode("overwrite").parquet(str(out))


def bare_stream(spark: SparkSession, log_dir: Path, config: LabConfig, checkpoint: Path, out: Path) -> None:
    """Spark's stream-stream join, to its end (the session's shuffle partitions restored once it
    has started: the setting is fixed into the checkpoint then)."""
    delay = f"{config.watermark_delay // 1_000_000} seconds"

    def stream_side(kind: str) -> DataFrame:
        events = (
            spark.readStream.schema(EVENT_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(log_dir))
            .where(PRESENT)
            .where(F.col("kind") == kind)
            .withWatermark("event_time", delay)
            .dropDuplicatesWithinWatermark(["event_id"])
        )
        return side(events.transform(with_amount), kind)

    joined = stream_side("order").join(stream_side("payment"), interval(config.join_bound // 1_000_000), "full_outer")
    run_to_end(spark, joined, checkpoint, out)


def column(frame: DataFrame, name: str) -> list:
    return frame.select(name).toArrow()[name].to_pylist()


def pairs_of(frame: DataFrame) -> set[tuple[str, str]]:
    matched = frame.where("order_event_id IS NOT NULL AND payment_event_id IS NOT NULL")
    return set(zip(column(matched, "order_event_id"), column(matched, "payment_event_id")))


def sample(values: set) -> list:
    return sorted(values)[:3]


def rejected_events(spark: SparkSession, tables: Tables, scratch: Path) -> set[str]:
    """Event ids of the lines bare Spark keeps and the lab dead-letters (read as bare Spark reads them)."""
    path = scratch / "rejected.jsonl"
    path.write_text("".join(f"{line}\n" for line in column(tables.read(PAYMENTS_BATCH_DEAD_LETTER.name), "raw_line")))
    return set(column(spark.read.schema(EVENT_SCHEMA).json(str(path)).where(PRESENT), "event_id"))


def spark_kept(spark: SparkSession, log_dir: Path, checkpoint: Path, reports: list[dict]) -> set[str]:
    """The events Spark's stream kept: those whose first copy's event time is after the watermark
    of the micro-batch before the one that read it (a later copy is a duplicate or late too)."""
    segments = [[path.name] for path in sorted(log_dir.glob("segment-*.jsonl"))]
    for source in (0, 1):
        batches = files_per_batch(checkpoint, source)
        require(
            [names for _, names in sorted(batches.items())] == segments,
            f"Spark's file source {source} did not read one segment per micro-batch in segment order",
        )
    watermark = {report["batchId"]: micros_of(report["eventTime"].get("watermark")) for report in reports}
    bounds = [(names[0], watermark.get(batch - 1) or -(2**62)) for batch, names in enumerate(segments)]
    events = (
        spark.read.schema(EVENT_SCHEMA)
        .json(str(log_dir))
        .where(PRESENT)
        .withColumn("segment", F.regexp_extract(F.input_file_name(), r"(segment-\d+\.jsonl)$", 1))
        .groupBy("event_id")
        .agg(F.min_by(F.struct("segment", "event_time"), "segment").alias("first"))
        .select("event_id", "first.*")
        .join(F.broadcast(spark.createDataFrame(bounds, "segment string, late_through long")), "segment")
    )
    return set(column(events.where(F.unix_micros("event_time") > F.col("late_through")), "event_id"))


def check(
    spark: SparkSession,
    config: LabConfig,
    scratch: Path,
    bare_out: Path,
    stream_out: Path,
    checkpoint: Path,
    reports: list[dict],
    prefix: str,
) -> dict:
    """Every agreement the docstring lists; returns the numbers compared."""
    tables = Tables(spark, config.lake, config.table_engine)
    rejected = rejected_events(spark, tables, scratch)
    bare = spark.read.parquet(str(bare_out))
    bare_pairs = pairs_of(bare)
    bare_orders = set(column(bare.where("order_event_id IS NOT NULL"), "order_event_id"))
    bare_payments = set(column(bare.where("payment_event_id IS NOT NULL"), "payment_event_id"))
    truth = pairs_of(tables.read(PAYMENTS_TRUTH_MATCHED.name))
    accepted = {pair for pair in bare_pairs if not rejected & set(pair)}
    require(truth == accepted, f"batch: {len(truth ^ accepted)} pairs differ, e.g. {sample(truth ^ accepted)}")
    unpaid, orphans = (
        set(column(tables.read(table.name), "event_id")) for table in (PAYMENTS_TRUTH_UNPAID, PAYMENTS_TRUTH_ORPHANS)
    )
    expected = (bare_orders - rejected) - {order for order, _ in truth}
    require(
        unpaid == expected, f"batch: {len(unpaid ^ expected)} unpaid orders differ, e.g. {sample(unpaid ^ expected)}"
    )
    expected = (bare_payments - rejected) - {payment for _, payment in truth}
    require(orphans == expected, f"batch: {len(orphans ^ expected)} orphans differ, e.g. {sample(orphans ^ expected)}")

    spark_stream = spark.read.parquet(str(stream_out))
    spark_pairs = pairs_of(spark_stream)
    kept = spark_kept(spark, Path(config.lake) / "log", checkpoint, reports)
    expected = {pair for pair in bare_pairs if set(pair) <= kept}
    require(
        spark_pairs == expected,
        f"Spark's stream: {len(spark_pairs ^ expected)} pairs differ from the batch pairs between "
        f"the events it kept, e.g. {sample(spark_pairs ^ expected)}",
    )

    lab_pairs = pairs_of(tables.read(PAYMENTS_MATCHED.at(prefix)))
    late = set(column(tables.read(PAYMENTS_LATE_EVENTS.at(prefix)), "event_id"))
    expected = {pair for pair in truth if not late & set(pair)}
    require(
        lab_pairs == expected,
        f"lab stream: {len(lab_pairs ^ expected)} pairs differ from the truth's between on-time "
        f"events, e.g. {sample(lab_pairs ^ expected)}",
    )

    both_kept = {pair for pair in lab_pairs if set(pair) <= kept}
    on_both = {pair for pair in spark_pairs if not (late | rejected) & set(pair)}
    require(
        both_kept == on_both,
        f"streams: {len(both_kept ^ on_both)} pairs between events both kept differ, e.g. {sample(both_kept ^ on_both)}",
    )
    return {
        "bare_batch_pairs": len(bare_pairs),
        "truth_pairs": len(truth),
        "truth_unpaid": len(unpaid),
        "truth_orphans": len(orphans),
        "lines_only_bare_spark_keeps": len(rejected),
        "spark_stream_pairs": len(spark_pairs),
        "spark_dropped_events": len((bare_orders | bare_payments) - kept),
        "spark_stream_unpaid": spark_stream.where("payment_event_id IS NULL").count(),
        "spark_stream_orphans": spark_stream.where("order_event_id IS NULL").count(),
        "lab_stream_pairs": len(lab_pairs),
        "lab_late_events": len(late),
        "lab_stream_unpaid": tables.read(PAYMENTS_UNPAID.at(prefix)).count(),
        "lab_stream_orphans": tables.read(PAYMENTS_ORPHANS.at(prefix)).count(),
        "stream_pairs_compared": len(both_kept),
        "pairs_only_lab": len(lab_pairs - spark_pairs),
        "pairs_only_spark": len(spark_pairs - lab_pairs),
    }


def main(argv: list[str] | None = None) -> int:
    args = bench_arguments(
        argv,
        __doc__.splitlines()[0],
        100_000,
        "orders to generate, as 'lklab generate --pipeline order_payments --events' (default 100,000: ~204,000 lines)",
    )

    def generate(lake: Path) -> dict:
        progress(f"generating {args.events:,} orders and their payments")
        params = OrderPaymentParams(orders=args.events, segment_interval=args.segment_minutes * 60_000_000)
        return generate_order_payments(params, lake).manifest

    run = run_four_jobs(
        args,
        pipeline="order_payments",
        name="payments",
        generate=generate,
        bare_batch=bare_batch,
        bare_stream=bare_stream,
        batch_tables=PAYMENTS_BATCH_TABLES,
        run_batch=run_payments_batch,
        run_speed=run_payments_speed,
        check=check,
        checking="checking that the lab and bare Spark joined the same pairs (the last run of each)",
    )
    return report(args, run)


def report(args, run: BenchRun) -> int:
    manifest, a = run.manifest, run.agreement
    return print_report(
        args,
        run,
        {"orders": manifest["orders"], "payments": manifest["payments"], "retries": manifest["retries"]},
        {
            "bare_batch": "bare Spark batch (read.json, dropDuplicates, full outer join)",
            "lab_batch": "lab batch truth (validation, first copies, line-level tables)",
            "bare_stream": "bare Spark stream-stream join (drops late rows)",
            "lab_stream": "lab stream (late side output, state, exactly once)",
        },
        [
            f"agreement: batch {a['truth_pairs']:,} pairs, {a['truth_unpaid']:,} unpaid, {a['truth_orphans']:,} orphans equal on the events "
            f"the lab accepts (bare Spark also keeps {a['lines_only_bare_spark_keeps']:,} lines the lab dead-letters: {a['bare_batch_pairs']:,} pairs); "
            f"Spark's stream = the pairs between the events it kept ({a['spark_stream_pairs']:,}; it dropped {a['spark_dropped_events']:,} events); "
            f"the lab's = the truth's between its on-time events ({a['lab_stream_pairs']:,}; {a['lab_late_events']:,} late); "
            f"streams equal on {a['stream_pairs_compared']:,} pairs ({a['pairs_only_lab']:,} only the lab's, {a['pairs_only_spark']:,} only Spark's)",
            f"unpaid/orphan rows emitted by the streams (not compared): Spark {a['spark_stream_unpaid']:,}/{a['spark_stream_orphans']:,}, "
            f"lab {a['lab_stream_unpaid']:,}/{a['lab_stream_orphans']:,}",
        ],
    )


if __name__ == "__main__":
    exit_process(main())
