"""unique_visitors: the lab's batch truth and speed layer against bare Spark counting the same, same process.

One log from the lab's generator (``lklab.pipelines.unique_visitors.generator``, scenario ``clickstream``: 1%
resends, 0.2% malformed lines), with the lab's default settings (tumbling 1-minute windows,
watermark delay 1m, no allowed lateness). One Spark session; one unmeasured run of each of the
four jobs first (JVM, JIT, Python workers, delta-rs), then ``--repeats`` measured runs of each,
interleaved, and the median of each.

**Batch.** Bare Spark: ``read.json`` of the log directory, rows missing a field dropped,
``dropDuplicates(["event_id"])`` (an arbitrary copy), ``window(event_time)``, an exact
``count(distinct url)`` per (window, user), written as Parquet. The lab: ``run_visitors_batch``
(every line validated, first copies in log order, the rule in Arrow per user, the truth, its
members, duplicates and dead letters as Delta tables), its tables deleted before each run.

**Stream.** Spark cannot run ``dropDuplicates`` followed by a count of distinct values in a
streaming query (a distinct aggregate is not supported on a stream), so bare Spark does what it
can: its file source over the log's segment files (one per micro-batch, in segment order,
``Trigger.AvailableNow``), rows missing a field dropped, ``withWatermark(event_time, 1
minute)``, ``dropDuplicatesWithinWatermark(["user_id", "url", "window_start"])`` and ``count``
per (``window(event_time)``, user) in append mode, to Parquet, with one shuffle partition (the
lab steps each micro-batch in one piece on the driver). The dedup drops every later view of a
(user, URL, window) for as long as one can still be on time (the lab's 1-minute window is no
longer than its 1-minute watermark delay), so the count is the number of distinct URLs; a resend is the same (user, URL,
window), so it is also the event-id dedup. The window's start is a plain timestamp there: with
Spark's ``window`` struct as the dedup's event-time column, Spark 4.2 evicted every key at the
end of each micro-batch (the operator's state held 0 rows) and so counted a URL viewed again in
a later micro-batch twice. Bare Spark keeps no dead letters, duplicates, late side output or
members. The lab: ``run_visitors_speed`` over the same segments, one per micro-batch, all its
tables committed exactly once. Two figures per side: the wall time of a run (query start and
stop included) and the steady state, the sum of Spark's ``triggerExecution`` over every
micro-batch after the first (for the lab that holds its ``foreachBatch``: Arrow collection,
the step and every Delta commit), with the log lines of those batches per second.

**Agreement** (checked after the measured runs; the script fails if any check fails):

* batch: the lab's ``visitors_truth`` equals bare Spark's counts on every (window, user) except
  those holding a line bare Spark keeps and the lab dead-letters (a relative URL, a numeric
  user id, an event time without offset, a JSON array: bare Spark only drops missing fields);
* Spark's stream: its counts equal the exact distinct counts over the lines it kept. Spark
  drops a view when ``event_time <=`` the watermark of the micro-batch before the one that read
  it (its ``eventTime.watermark``: the largest event time so far - 1 minute), and emits a window
  once its end is at most the last watermark; the counts it must emit follow from its own
  progress reports and source log, and must be exactly what it wrote;
* the lab's stream: on every window without a late view (``visitors_late_events``) its served
  count equals the truth;
* the two streams: on every window Spark emitted in which neither dropped a view and no line
  the lab dead-letters falls, the counts are equal. The lab's watermark moves every second on
  the log's clock; Spark's once per micro-batch; so they call different views late.

    .venv/bin/python benchmarks/visitors_bench.py [--events N] [--segment-minutes M] [--repeats R] [--scratch DIR] [--json-out FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path

import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)
from pyspark.sql import Column, DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from lklab.cli.process_exit import exit_process  # noqa: E402
from lklab.pipelines.unique_visitors.batch import run_visitors_batch  # noqa: E402
from lklab.pipelines.unique_visitors.generator import PageViewParams, generate_page_views  # noqa: E402
from lklab.pipelines.unique_visitors.speed import run_visitors_speed  # noqa: E402
from lklab.pipelines.unique_visitors.tables import (  # noqa: E402
    VISITORS_BATCH_DEAD_LETTER,
    VISITORS_BATCH_TABLES,
    VISITORS_LATE_EVENTS,
    VISITORS_TRUTH,
    VISITORS_WINDOWS,
)
from shared.config import LabConfig  # noqa: E402
from shared.tables import Tables  # noqa: E402
from shared.windows import TumblingWindows  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab_against_bare import BenchRun, bench_arguments, print_report, run_four_jobs, run_to_end  # noqa: E402
from stream_runs import (  # noqa: E402
    files_per_batch,
    micros_of,
    progress,
    require,
)

VIEW_SCHEMA = "event_id string, user_id string, url string, event_time timestamp"
PRESENT = " AND ".join(f"{name} IS NOT NULL" for name in ("event_id", "user_id", "url", "event_time"))
Counts = dict[tuple[int, int, str], int]  # (window_start, window_end in microseconds, user_id) -> distinct URLs


def window_of(config: LabConfig) -> Column:
    """The lab's window as Spark's ``window`` (tumbling: the benchmark refuses other kinds)."""
    spec = config.window
    if not isinstance(spec, TumblingWindows):
        raise SystemExit(f"visitors_bench compares tumbling windows; the settings give {spec.describe()}")
    return F.window("event_time", f"{spec.size // 1_000_000} seconds")


def window_start_of(config: LabConfig) -> Column:
    """The start of the view's window as a plain timestamp (no event-time metadata)."""
    micros = F.unix_micros("event_time")
    return F.timestamp_micros(micros - F.pmod(micros, F.lit(config.window.size)))


def bare_counts(frame: DataFrame, config: LabConfig) -> DataFrame:
    """Views (``VIEW_SCHEMA``) -> exact distinct URLs per (window, user)."""
    return (
        frame.withColumn("window", window_of(config))
        .groupBy("window", "user_id")
        .agg(F.count_distinct("url").alias("distinct_urls"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "user_id",
            "distinct_urls",
        )
    )


def bare_batch(spark: SparkSession, log_dir: Path, config: LabConfig, out: Path) -> None:
    views = spark.read.schema(VIEW_SCHEMA).json(str(log_dir)).where(PRESENT).dropDuplicates(["event_id"])
    bare_counts(views, config).write.mode("overwrite").parquet(str(out))


def bare_stream(spark: SparkSession, log_dir: Path, config: LabConfig, checkpoint: Path, out: Path) -> None:
    """Spark's streaming query, to its end (the session's shuffle partitions restored once it has
    started: the setting is fixed into the checkpoint then)."""
    counts = (
        spark.readStream.schema(VIEW_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(log_dir))
        .where(PRESENT)
        .withWatermark("event_time", f"{config.watermark_delay // 1_000_000} seconds")
        .withColumn("window_start", window_start_of(config))
        .dropDuplicatesWithinWatermark(["user_id", "url", "window_start"])
        .groupBy(window_of(config).alias("window"), "user_id")
        .agg(F.count(F.lit(1)).alias("distinct_urls"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "user_id",
            "distinct_urls",
        )
    )
    run_to_end(spark, counts, checkpoint, out)


def counts_of(frame: DataFrame) -> Counts:
    table = frame.select(
        F.unix_micros("window_start").alias("s"),
        F.unix_micros("window_end").alias("e"),
        "user_id",
        "distinct_urls",
    ).toArrow()
    keys = zip(table["s"].to_pylist(), table["e"].to_pylist(), table["user_id"].to_pylist())
    return dict(zip(keys, table["distinct_urls"].to_pylist()))


def keys_of(frame: DataFrame) -> set[tuple[int, int, str]]:
    return set(counts_of(frame.select("window_start", "window_end", "user_id", F.lit(0).alias("distinct_urls"))))


def differing(left: Counts, right: Counts, keys) -> list:
    return sorted(key for key in keys if left.get(key) != right.get(key))


def rejected_windows(spark: SparkSession, tables: Tables, config: LabConfig, scratch: Path) -> set:
    """Windows of the lines bare Spark keeps and the lab dead-letters (read as bare Spark reads them)."""
    lines = tables.read(VISITORS_BATCH_DEAD_LETTER.name).select("raw_line").toArrow()["raw_line"].to_pylist()
    path = scratch / "rejected.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines))
    views = spark.read.schema(VIEW_SCHEMA).json(str(path)).where(PRESENT)
    return keys_of(bare_counts(views, config))


def spark_kept(
    spark: SparkSession, log_dir: Path, config: LabConfig, checkpoint: Path, reports: list[dict]
) -> tuple[Counts, set]:
    """What Spark's stream must have emitted (counts over the (view, window) pairs it kept, windows
    ended by its last watermark) and the windows in which it dropped a pair as late."""
    batches = files_per_batch(checkpoint)
    segments = sorted(path.name for path in log_dir.glob("segment-*.jsonl"))
    require(
        [names for _, names in sorted(batches.items())] == [[name] for name in segments],
        "Spark's file source did not read one segment per micro-batch in segment order",
    )
    watermark = {report["batchId"]: micros_of(report["eventTime"].get("watermark")) for report in reports}
    # A batch drops what the watermark of the batch before it has passed (none before batch 1).
    bounds = [(names[0], watermark.get(batch - 1) or -(2**62)) for batch, names in batches.items()]
    bound = spark.createDataFrame(bounds, "segment string, late_through long")
    pairs = (
        spark.read.schema(VIEW_SCHEMA)
        .json(str(log_dir))
        .where(PRESENT)
        .withColumn("segment", F.regexp_extract(F.input_file_name(), r"(segment-\d+\.jsonl)$", 1))
        .join(F.broadcast(bound), "segment")
        .withColumn("dropped", F.unix_micros("event_time") <= F.col("late_through"))
        .persist()
    )
    last = watermark[max(watermark)] or -(2**62)
    emitted = {
        key: count
        for key, count in counts_of(bare_counts(pairs.where(~F.col("dropped")), config)).items()
        if key[1] <= last
    }
    dropped = keys_of(bare_counts(pairs.where("dropped"), config))
    pairs.unpersist()
    return emitted, dropped


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
    log_dir = Path(config.lake) / "log"
    rejected = rejected_windows(spark, tables, config, scratch)
    truth = counts_of(tables.read(VISITORS_TRUTH.name))
    bare = counts_of(spark.read.parquet(str(bare_out)))
    wrong = differing(truth, bare, (truth.keys() | bare.keys()) - rejected)
    require(
        not wrong, f"batch: {len(wrong)} windows differ between {VISITORS_TRUTH.name} and bare Spark, e.g. {wrong[:3]}"
    )

    spark_stream = counts_of(spark.read.parquet(str(stream_out)))
    expected, spark_dropped = spark_kept(spark, log_dir, config, checkpoint, reports)
    wrong = differing(spark_stream, expected, spark_stream.keys() | expected.keys())
    require(
        not wrong,
        f"Spark's stream: {len(wrong)} windows differ from the counts over the lines it kept, e.g. {[(k, spark_stream.get(k), expected.get(k)) for k in wrong[:5]]}",
    )

    served = counts_of(tables.read(VISITORS_WINDOWS.at(prefix)))
    lab_late = keys_of(tables.read(VISITORS_LATE_EVENTS.at(prefix)))
    wrong = differing(served, truth, (truth.keys() | served.keys()) - lab_late)
    require(not wrong, f"lab stream: {len(wrong)} windows without late views differ from the truth, e.g. {wrong[:3]}")

    compared = spark_stream.keys() - lab_late - spark_dropped - rejected
    wrong = differing(served, spark_stream, compared)
    require(not wrong, f"streams: {len(wrong)} windows differ between the lab and Spark, e.g. {wrong[:3]}")
    return {
        "batch_windows_compared": len((truth.keys() | bare.keys()) - rejected),
        "batch_windows_with_rejected_lines": len(rejected),
        "spark_stream_windows": len(spark_stream),
        "spark_windows_with_dropped_views": len(spark_dropped),
        "lab_windows_with_late_views": len(lab_late),
        "stream_windows_compared": len(compared),
        "stream_windows_differing_outside_overlap": len(
            differing(served, spark_stream, spark_stream.keys() - compared)
        ),
    }


def main(argv: list[str] | None = None) -> int:
    args = bench_arguments(argv, __doc__.splitlines()[0], 200_000, "page views to generate (default 200,000)")

    def generate(lake: Path) -> dict:
        progress(f"generating {args.events:,} page views")
        return generate_page_views(
            PageViewParams(views=args.events, segment_interval=args.segment_minutes * 60_000_000), lake
        )

    run = run_four_jobs(
        args,
        pipeline="unique_visitors",
        name="visitors",
        generate=generate,
        bare_batch=bare_batch,
        bare_stream=bare_stream,
        batch_tables=VISITORS_BATCH_TABLES,
        run_batch=run_visitors_batch,
        run_speed=run_visitors_speed,
        check=check,
        checking="checking that the lab and bare Spark computed the same counts (the last run of each)",
    )
    return report(args, run)


def report(args, run: BenchRun) -> int:
    a = run.agreement
    return print_report(
        args,
        run,
        {"views": run.manifest["views"], "resends": run.manifest["duplicates"]},
        {
            "bare_batch": "bare Spark batch (read.json, dropDuplicates, count distinct)",
            "lab_batch": "lab batch truth (validation, first copies, members, dead letters)",
            "bare_stream": "bare Spark stream (dedup within watermark + count, drops late)",
            "lab_stream": "lab speed layer (late side output, state, exactly once)",
        },
        [
            f"agreement: batch {a['batch_windows_compared']:,} windows equal (excluded {a['batch_windows_with_rejected_lines']:,} "
            f"holding lines the lab dead-letters); Spark's stream = distinct counts over the lines it kept ({a['spark_stream_windows']:,} windows); "
            f"streams equal on {a['stream_windows_compared']:,} windows (excluded: Spark dropped a view in {a['spark_windows_with_dropped_views']:,}, "
            f"the lab had a late view in {a['lab_windows_with_late_views']:,}; {a['stream_windows_differing_outside_overlap']:,} of the excluded differ)"
        ],
    )


if __name__ == "__main__":
    exit_process(main())
