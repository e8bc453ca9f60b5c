"""Reconciliation of two ~1,000,000-row aggregate tables: the lab against datacompy, same process.

The pair is ``batch_truth`` and ``speed_aggregates`` of one lake (``stream_from_truth``): a
``billing`` log with many accounts and 1-minute tumbling windows, the batch recompute run short
of the log's end, and speed-layer tables derived from the log with known late events, retries
counted beyond the dedup horizon and unread segments. Four timings on that pair:

* datacompy: ``PandasCompare(truth, stream, join_columns=<window key>, abs_tol=0, rel_tol=0)``
  and its ``report()``. Timed from the Delta tables on disk: loading them into pandas (delta-rs
  to Arrow to pandas) is included and also shown apart.
* the lab's diff, as billing's reconcile runs it: the checksums that split off the windows whose
  rows agree (``split_agreeing``, from ``SPLIT_FROM_WINDOWS`` windows), ``compare_windows`` on the others (full outer join as one
  aggregation, status, deltas under the tolerance rule) and the per-currency figures of both
  (``explained_windows``, ``currency_figures``), timed from the same Delta tables (read with the
  lab's ``Tables``).
* bare Spark: the same two tables' files, one full outer join on the window key, a status per
  window, the statuses counted per currency with both sides' money summed: the floor for any
  diff that Spark computes (no deltas, no explanations, no corrected side, no tolerance rule);
* bare Spark writing, as Parquet, each compared window's row (both sides, the two deltas, the
  status: the full outer join above) and the stream's windows with the late events' totals
  folded in: what a reconcile listing every window writes, with no attribution, explanations,
  second diff of the folded side or Delta commits (the lab's ``recon_diffs`` lists only the
  windows that differ or that a reason explains); the two writes are also shown apart;
* the lab's full ``reconcile(against="speed")``: the diff plus attributing every differing
  (line, window) pair to a reason (from the lines both sides recorded as late, duplicate or
  dead letter, and the log segments between their two positions), folding the side output into
  ``corrected_aggregates`` and explaining what still separates it from the truth, corrections,
  figures, and writing ``recon_diffs``, ``recon_runs``, ``recon_corrections`` and
  ``corrected_aggregates``. The peak resident memory of the process tree (this driver, its JVM
  with the local executors, the Python workers) during it is printed too.

datacompy compares ``DECIMAL`` amounts after converting them to float (its documented rule);
the lab compares them exactly. The three diffs must agree on every window's status, and the full
reconcile must attribute exactly the lines the lake was built with, leaving nothing
unexplained; the script fails otherwise. A small lake built the same way is run through all
five first (JVM, JIT, Python workers, imports).

    .venv/bin/python benchmarks/reconcile_bench.py [--events N] [--accounts A] [--rounds R] [--scratch DIR] [--json-out FILE]

The five are timed ``R`` times (default 3), in rounds, each round on a fresh copy of the built
lake; every figure printed is a median over the rounds.

``--split-sizes`` runs another mode instead: billing's reconcile with the windows that agree
split off (``reconciliation.agreeing``) and with every window compared, interleaved, ``R`` rounds
each after an unmeasured one, on lakes of about 13,000, 106,000 and 247,000 windows of truth:
where the split starts to pay (``SPLIT_FROM_WINDOWS``).

``--differing-pairs W`` runs another mode instead (``differing_pairs``): pairs of ``W`` windows
differing in 0.5%, 2% and 10% of them, each timed in the same session, interleaved, through bare
Spark's full outer join, the lab's ``keyed_diff`` (full join), the lab's ``range_diff``
(checksums by a join of key and row hashes, the full join of the differing keys only) and
datacompy's ``SparkSQLCompare``, with the ratios to bare Spark's time. ``--rounds R`` (default 3):
bare Spark and the lab's diffs are timed ``R`` times each, interleaved, and their medians
compared; datacompy once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import pandas as pd  # noqa: E402
import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)
from deltalake import DeltaTable  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from lklab.pipelines.billing_windows.reconcile import reconcile  # noqa: E402
from reconciliation.agreeing import SPLIT_FROM_WINDOWS, split_agreeing  # noqa: E402
from reconciliation.diff import DIFF_STATUSES, compare_windows, side_rows  # noqa: E402
from reconciliation.metrics import currency_figures, explained_windows, join_explanations  # noqa: E402
from reconciliation.result import Reconciliation  # noqa: E402
from reconciliation.tables import CORRECTED_AGGREGATES
from reconciliation.tolerance import Tolerance  # noqa: E402
from shared.aggregation import WINDOW_KEY  # noqa: E402
from shared.catalog import BATCH_TRUTH, LATE_EVENTS, SPEED_AGGREGATES, tables_root  # noqa: E402
from shared.config import LabConfig  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402
from shared.tables import Tables  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from differing_pairs import time_pair  # noqa: E402
from scratch_dir import scratch_dir  # noqa: E402
from stream_from_truth import DerivedLake, LakeShape, build_lake  # noqa: E402
from stream_runs import PeakMemory  # noqa: E402

NO_EXPLANATIONS = "window_start timestamp, window_end timestamp, account_id string, currency string, corrected boolean, reason string, events long, money decimal(38,6)"
NO_LATE_EVENTS = "currency string, amount decimal(20,6), lateness_seconds decimal(20,6)"


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def lab_diff(spark: SparkSession, lake: Path) -> tuple[float, dict[str, int]]:
    """Seconds for the diff and per-currency figures from the Delta tables; statuses counted."""
    tables = Tables(spark, lake, "deltalake")
    started = time.perf_counter()
    truth, stream = tables.read(BATCH_TRUTH.name), tables.read(SPEED_AGGREGATES.name)
    agreeing = split_agreeing(truth, stream, [])
    parts = [
        side_rows(truth, truth_count="event_count", truth_amount="amount_total"),
        side_rows(stream, stream_count="event_count", stream_amount="amount_total"),
    ]
    if agreeing:
        parts = [agreeing.disputed(part) for part in parts]
    none = spark.createDataFrame([], NO_EXPLANATIONS)
    # read once, by the one aggregation of the figures: nothing to cache
    windows = explained_windows(join_explanations(compare_windows(parts, Tolerance()), none))
    figures, _ = currency_figures(
        windows, spark.createDataFrame([], NO_LATE_EVENTS), agreeing=agreeing.truth_totals if agreeing else None
    )
    seconds = time.perf_counter() - started
    return seconds, {s: sum(c.status_counts[s] for c in figures) for s in DIFF_STATUSES}


def _compared(truth: DataFrame, stream: DataFrame) -> DataFrame:
    """Every window of the full outer join on the window key: both sides and the status."""
    joined = truth.alias("t").join(stream.alias("s"), list(WINDOW_KEY), "full_outer")
    t, s = (lambda c: F.col(f"t.{c}")), (lambda c: F.col(f"s.{c}"))
    status = (
        F.when(s("event_count").isNull(), "missing_in_stream")
        .when(t("event_count").isNull(), "extra_in_stream")
        .when((t("event_count") == s("event_count")) & (t("amount_total") == s("amount_total")), "match")
        .otherwise("value_mismatch")
    )
    return joined.select(
        *WINDOW_KEY,
        t("event_count").alias("truth_count"),
        t("amount_total").alias("truth_amount"),
        s("event_count").alias("stream_count"),
        s("amount_total").alias("stream_amount"),
        status.alias("status"),
    )


def bare_spark_diff(spark: SparkSession, lake: Path) -> tuple[float, dict[str, int]]:
    """Seconds for bare Spark doing the diff's core: read both tables' Parquet files, one full
    outer join on the window key, a status per window and the statuses counted per currency
    with both sides' money summed (no deltas, no explanations, no corrected side)."""
    tables = Tables(spark, lake, "deltalake")
    started = time.perf_counter()
    truth = tables.read(BATCH_TRUTH.name).select(*WINDOW_KEY, "event_count", "amount_total")
    stream = tables.read(SPEED_AGGREGATES.name).select(*WINDOW_KEY, "event_count", "amount_total")
    rows = (
        _compared(truth, stream)
        .groupBy("currency", "status")
        .agg(F.count(F.lit(1)).alias("windows"), F.sum("truth_amount"), F.sum("stream_amount"))
        .collect()
    )
    seconds = time.perf_counter() - started
    counts = {name: 0 for name in DIFF_STATUSES}
    for row in rows:
        counts[row["status"]] += row["windows"]
    return seconds, counts


def _diff_rows(truth: DataFrame, stream: DataFrame) -> DataFrame:
    """Every window of the full outer join with both sides, the deltas (stream minus truth) and the status."""
    delta = lambda side: F.coalesce(F.col(f"stream_{side}"), F.lit(0)) - F.coalesce(F.col(f"truth_{side}"), F.lit(0))
    return _compared(truth, stream).select(
        *WINDOW_KEY,
        "truth_count",
        "truth_amount",
        "stream_count",
        "stream_amount",
        delta("count").alias("count_delta"),
        delta("amount").alias("amount_delta"),
        "status",
    )


def bare_spark_writes(spark: SparkSession, lake: Path, out: Path) -> tuple[float, float, int]:
    """Seconds for bare Spark writing the diff's rows, then the stream folded with its late events, as
    Parquet under ``out`` (overwritten); and the number of diff rows written."""
    tables = Tables(spark, lake, "deltalake")
    started = time.perf_counter()
    truth = tables.read(BATCH_TRUTH.name).select(*WINDOW_KEY, "event_count", "amount_total")
    stream = tables.read(SPEED_AGGREGATES.name).select(*WINDOW_KEY, "event_count", "amount_total")
    _diff_rows(truth, stream).write.mode("overwrite").parquet(str(out / "diffs"))
    diff_seconds = time.perf_counter() - started
    started = time.perf_counter()
    late = (
        tables.read(LATE_EVENTS.name)
        .groupBy(*WINDOW_KEY)
        .agg(
            F.count(F.lit(1)).alias("event_count"),
            F.sum("amount").cast(stream.schema["amount_total"].dataType).alias("amount_total"),
        )
    )
    folded = (
        stream.unionByName(late)
        .groupBy(*WINDOW_KEY)
        .agg(F.sum("event_count").alias("event_count"), F.sum("amount_total").alias("amount_total"))
    )
    folded.write.mode("overwrite").parquet(str(out / "folded"))
    fold_seconds = time.perf_counter() - started
    return diff_seconds, fold_seconds, spark.read.parquet(str(out / "diffs")).count()


def load_pandas(lake: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    read = lambda name: DeltaTable(str(tables_root(lake) / name)).to_pyarrow_dataset().to_table().to_pandas()
    return read(BATCH_TRUTH.name), read(SPEED_AGGREGATES.name)


def datacompy_compare(truth: pd.DataFrame, stream: pd.DataFrame) -> tuple[float, dict[str, int]]:
    """Seconds for ``PandasCompare`` and its report; statuses in the lab's vocabulary."""
    from datacompy import PandasCompare

    started = time.perf_counter()
    compare = PandasCompare(
        truth, stream, join_columns=list(WINDOW_KEY), abs_tol=0, rel_tol=0, df1_name="truth", df2_name="stream"
    )
    compare.report()
    seconds = time.perf_counter() - started
    both = compare.intersect_rows
    matching = int((both["event_count_match"] & both["amount_total_match"]).sum())
    return seconds, {
        "match": matching,
        "value_mismatch": len(both) - matching,
        "missing_in_stream": len(compare.df1_unq_rows),
        "extra_in_stream": len(compare.df2_unq_rows),
    }


def lab_reconcile(
    spark: SparkSession, lake: Path, split_from_windows: int | None = None
) -> tuple[float, Reconciliation, PeakMemory]:
    with PeakMemory() as memory:
        started = time.perf_counter()
        config = LabConfig(lake=lake, table_engine="deltalake")
        result = reconcile(spark, config, against="speed", split_from_windows=split_from_windows)
        seconds = time.perf_counter() - started
    return seconds, result, memory


def explained_events(result: Reconciliation, corrected: bool = False) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in result.currencies:
        for e in c.corrected_explained if corrected else c.explained:
            out[e.reason] = out.get(e.reason, 0) + e.events
    return out


def check(result: Reconciliation, built: DerivedLake, ours: dict, theirs: dict) -> list[str]:
    """What does not agree with the known answer (empty: everything does)."""
    problems = []
    if ours != theirs:
        problems.append(f"the two diffs disagree: lab {ours}, datacompy {theirs}")
    expected = {
        "late": built.late_events_read_by_batch,
        "duplicate": -built.counted_retries_read_by_batch,
        "unread": -built.stream_lines_beyond_batch,
    }
    found = explained_events(result)
    if {r: n for r, n in found.items() if n} != {r: n for r, n in expected.items() if n}:
        problems.append(f"attributed events {found}, the lake was built with {expected}")
    if result.unexplained_events or any(
        c.unexplained_money or c.corrected_unexplained_money for c in result.currencies
    ):
        problems.append(f"unexplained events {result.unexplained_events}")
    return problems


def _round(spark: SparkSession, lake: Path, built: DerivedLake, label: str) -> dict:
    """One timing of each of the five on ``lake`` (the reconcile writes into it), checked."""
    progress(f"{label}: lab diff + per-currency figures")
    diff_seconds, ours = lab_diff(spark, lake)
    progress(f"{label}: bare Spark diff (full outer join, statuses per currency)")
    bare_seconds, bare_statuses = bare_spark_diff(spark, lake)
    progress(f"{label}: bare Spark writing the diff's rows and the folded stream")
    floor_diff, floor_fold, floor_rows = bare_spark_writes(spark, lake, lake.parent / f"{lake.name}-bare-writes")
    progress(f"{label}: datacompy (load into pandas, compare, report)")
    started = time.perf_counter()
    truth_pd, stream_pd = load_pandas(lake)
    load_seconds = time.perf_counter() - started
    compare_seconds, theirs = datacompy_compare(truth_pd, stream_pd)
    del truth_pd, stream_pd
    progress(f"{label}: lab full reconcile")
    reconcile_seconds, result, memory = lab_reconcile(spark, lake)
    listed = DeltaTable(str(tables_root(lake) / "recon_diffs")).to_pyarrow_table(columns=["status"]).num_rows
    problems = check(result, built, ours, theirs)
    if bare_statuses != ours:
        problems.append(f"bare Spark's statuses {bare_statuses} differ from the lab's {ours}")
    if floor_rows != sum(ours.values()):
        problems.append(f"bare Spark wrote {floor_rows:,} diff rows, the lab compared {sum(ours.values()):,} windows")
    if problems:
        raise SystemExit("reconcile_bench: " + "; ".join(problems))
    return {
        "statuses": ours,
        "recon_diffs_rows": listed,
        "result": result,
        "memory": memory,
        "seconds": {
            "lab_diff": diff_seconds,
            "lab_reconcile": reconcile_seconds,
            "bare_spark_diff": bare_seconds,
            "bare_spark_writes": floor_diff + floor_fold,
            "bare_spark_writes_diff_rows": floor_diff,
            "bare_spark_writes_folded_stream": floor_fold,
            "datacompy_load": load_seconds,
            "datacompy_compare": compare_seconds,
            "datacompy": load_seconds + compare_seconds,
        },
    }


def run(spark: SparkSession, lake: Path, shape: LakeShape, measured: bool, rounds: int = 1) -> dict:
    """Build the lake, then ``rounds`` rounds of the five, each on a fresh copy of the built lake
    (a reconcile rerun on unchanged inputs writes nothing, so it would time less work); the
    figures are each measure's median over the rounds."""
    built = build_lake(spark, lake, shape, progress if measured else (lambda message: None))
    pristine = lake.parent / f"{lake.name}.built"
    if rounds > 1:
        shutil.copytree(lake, pristine)
    taken = []
    for number in range(rounds):
        if number:
            shutil.rmtree(lake)
            shutil.copytree(pristine, lake)
        label = "measured" if measured else "warm-up"
        taken.append(_round(spark, lake, built, f"{label} {number + 1}/{rounds}" if rounds > 1 else label))
    seconds = {name: statistics.median(t["seconds"][name] for t in taken) for name in taken[0]["seconds"]}
    last = taken[-1]
    result, memory = last["result"], max((t["memory"] for t in taken), key=lambda m: m.tree)
    datacompy_seconds, diff_seconds, bare_seconds = (
        seconds["datacompy"],
        seconds["lab_diff"],
        seconds["bare_spark_diff"],
    )
    return {
        "lake": built.__dict__,
        "rounds": rounds,
        "statuses": last["statuses"],
        "recon_diffs_rows": last["recon_diffs_rows"],
        "explained_events": explained_events(result),
        "corrected_explained_events": explained_events(result, corrected=True),
        "corrected_equals_truth": result.corrected_equals_truth,
        "unexplained_events": result.unexplained_events,
        "seconds": seconds,
        "seconds_each_round": [t["seconds"] for t in taken],
        "peak_rss_mib": {"process_tree": memory.tree / 2**20, "largest_process": memory.largest / 2**20},
        "driver_memory": LabConfig(lake=lake).driver_memory,
        "ratio_datacompy_to_lab_diff": datacompy_seconds / diff_seconds,
        "ratio_datacompy_to_lab_reconcile": datacompy_seconds / seconds["lab_reconcile"],
        "ratio_lab_diff_to_bare_spark": diff_seconds / bare_seconds,
        "ratio_datacompy_to_bare_spark": datacompy_seconds / bare_seconds,
        "ratio_bare_spark_writes_to_datacompy": seconds["bare_spark_writes"] / datacompy_seconds,
    }


DIFFERING_SHARES = (0.005, 0.02, 0.10)


def differing_pairs_mode(windows: int, scratch: str | None, rounds: int = 3) -> int:
    """The ``--differing-pairs`` mode: a warm-up pair, then each share's pair, timed and printed."""
    with scratch_dir("reconcile-bench-pairs-", scratch) as root:
        spark = spark_session(LabConfig(lake=Path(root), table_engine="deltalake"), "lklab-reconcile-bench-pairs")
        progress("warm-up: a 20,000-window pair through all four")
        time_pair(spark, Path(root) / "warm", 0.02, 20_000)
        measured = []
        for share in DIFFERING_SHARES:
            progress(f"measured: {windows:,} windows, {share:.1%} differing")
            measured.append(time_pair(spark, Path(root) / f"pair-{share}", share, windows, rounds))
        spark.stop()
    print(f"bare Spark and the lab: the median of {rounds} interleaved rounds each; datacompy: one run")
    print(
        "share differing | windows | bare Spark full join | lab keyed_diff (full join) | lab range_diff | datacompy SparkSQLCompare"
    )
    for p in measured:
        ratio = lambda seconds: f"{seconds:6.1f}s ({seconds / p.bare_join:.2f}x)"
        print(
            f"{p.share:6.1%} | {p.windows:,} | {p.bare_join:6.1f}s | {ratio(p.lab_full_join)} | "
            f"{ratio(p.lab_range_diff)}, {p.keys_joined:,} keys joined | {ratio(p.datacompy)}"
        )
        print(f"         statuses (all four agree): {p.statuses}")
    print(f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


# (events, accounts, hours) of the lakes ``--split-sizes`` reconciles: about 13,000, 106,000 and
# 247,000 windows of truth, around the split's threshold
SPLIT_LAKES = ((20_000, 500, 2), (125_000, 2_000, 24), (300_000, 5_000, 24))


def split_sizes_mode(scratch: str | None, rounds: int = 3) -> int:
    """The ``--split-sizes`` mode: billing's reconcile with the agreeing windows split off and
    with every window compared, interleaved, on lakes around ``SPLIT_FROM_WINDOWS``."""
    measured = []
    with scratch_dir("reconcile-bench-split-", scratch) as root:
        spark = spark_session(LabConfig(lake=Path(root), table_engine="deltalake"), "lklab-reconcile-bench-split")
        for events, accounts, hours in SPLIT_LAKES:
            source = Path(root) / f"lake-{events}"
            progress(f"building a lake: {events:,} events, {accounts:,} accounts over {hours} h")
            built = build_lake(spark, source, LakeShape(events, accounts, span_hours=hours, unread_segments=5))
            times: dict[str, list[float]] = {"every window": [], "split": []}
            # one unmeasured reconcile of each kind first (the first lake's warms the session)
            for r in range(rounds + 1):
                for kind in ("split", "every window") if r % 2 else ("every window", "split"):
                    lake = Path(root) / "copy"
                    shutil.rmtree(lake, ignore_errors=True)
                    shutil.copytree(source, lake)
                    seconds, _, _ = lab_reconcile(spark, lake, 0 if kind == "split" else sys.maxsize)
                    if r:
                        times[kind].append(seconds)
                    progress(f"{built.truth_windows:,} windows, {kind}: {seconds:.1f}s{'' if r else ' (unmeasured)'}")
            measured.append((built.truth_windows, {k: statistics.median(v) for k, v in times.items()}))
            shutil.rmtree(source)
        spark.stop()
    print(
        f"billing's reconcile, the median of {rounds} interleaved rounds each, every round on a fresh copy of the lake"
    )
    print(
        f"windows of truth | every window compared | the split | split / every (taken from {SPLIT_FROM_WINDOWS:,} windows)"
    )
    for windows, median in measured:
        every, split = median["every window"], median["split"]
        print(f"{windows:,} | {every:.1f}s | {split:.1f}s | {split / every:.2f}x")
    print(f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events",
        type=int,
        default=1_300_000,
        help="events to generate (default 1,300,000: about 1,000,000 windows with 20,000 accounts over 24 h)",
    )
    parser.add_argument("--accounts", type=int, default=20_000, help="accounts (default 20,000)")
    parser.add_argument(
        "--scratch",
        default=None,
        help="directory for the temporary lakes, made if missing (default: the system's temp dir)",
    )
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    parser.add_argument(
        "--differing-pairs",
        type=int,
        default=None,
        metavar="W",
        help="instead: pairs of W windows differing in 0.5%%, 2%%, 10%% of them, four diffs of each",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of the five timings on fresh copies of the lake, medians (default 3); with --differing-pairs: "
        "interleaved rounds of bare Spark and the lab's diffs",
    )
    parser.add_argument(
        "--split-sizes",
        action="store_true",
        help="instead: the reconcile with and without the agreeing windows split off, on three lakes around "
        "the split's threshold",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.split_sizes:
        return split_sizes_mode(args.scratch, args.rounds)
    if args.differing_pairs is not None:
        if args.differing_pairs < 1:
            parser.error("--differing-pairs must be at least 1")
        return differing_pairs_mode(args.differing_pairs, args.scratch, args.rounds)
    if args.events < 1 or args.accounts < 1:
        parser.error("--events and --accounts must be at least 1")

    with scratch_dir("reconcile-bench-", args.scratch) as scratch:
        spark = spark_session(LabConfig(lake=Path(scratch), table_engine="deltalake"), "lklab-reconcile-bench")
        progress("warm-up: a 20,000-event lake through all three")
        run(
            spark,
            Path(scratch) / "warm",
            LakeShape(events=20_000, accounts=500, span_hours=2, unread_segments=5),
            measured=False,
        )
        progress(f"building the measured lake: {args.events:,} events, {args.accounts:,} accounts")
        figures = run(
            spark,
            Path(scratch) / "lake",
            LakeShape(events=args.events, accounts=args.accounts),
            measured=True,
            rounds=args.rounds,
        )
        spark.stop()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2, default=str) + "\n")

    lake, s = figures["lake"], figures["seconds"]
    print(f"every time below: the median of {figures['rounds']} rounds, each on a fresh copy of the lake")
    print(
        f"lake: {lake['lines']:,} log lines in {lake['segments']:,} segments; batch read 1..{lake['batch_last_segment']:,}"
    )
    print(
        f"pair: {BATCH_TRUTH.name} {lake['truth_windows']:,} rows, {SPEED_AGGREGATES.name} {lake['stream_windows']:,} rows"
    )
    print(f"statuses (lab = datacompy): {figures['statuses']}")
    print(f"attributed events by reason: {figures['explained_events']}; unexplained: {figures['unexplained_events']}")
    print(
        f"{CORRECTED_AGGREGATES.name} equals truth: {figures['corrected_equals_truth']} "
        f"(still separated by {figures['corrected_explained_events']})"
    )
    print(
        f"datacompy PandasCompare + report, from Delta:  {s['datacompy']:7.1f}s  "
        f"(load into pandas {s['datacompy_load']:.1f}s, compare + report {s['datacompy_compare']:.1f}s)"
    )
    print(f"lab diff + per-currency figures, from Delta:   {s['lab_diff']:7.1f}s")
    print(
        f"bare Spark full outer join + statuses, from the same files: {s['bare_spark_diff']:7.1f}s "
        f"(lab diff {figures['ratio_lab_diff_to_bare_spark']:.2f}x its time; datacompy / bare Spark {figures['ratio_datacompy_to_bare_spark']:.2f}x)"
    )
    print(
        f"bare Spark writing every window's diff row and the folded stream, Parquet: {s['bare_spark_writes']:7.1f}s "
        f"(diff rows {s['bare_spark_writes_diff_rows']:.1f}s, folded stream {s['bare_spark_writes_folded_stream']:.1f}s; "
        f"{figures['ratio_bare_spark_writes_to_datacompy']:.2f}x datacompy's time)"
    )
    print(
        f"lab full reconcile (diff, attribution, fold, writes): {s['lab_reconcile']:7.1f}s "
        f"({s['lab_reconcile'] / s['datacompy']:.2f}x datacompy's time; recon_diffs lists {figures['recon_diffs_rows']:,} windows)"
    )
    rss = figures["peak_rss_mib"]
    print(
        f"peak RSS during the full reconcile: {rss['process_tree']:,.0f} MiB process tree, "
        f"{rss['largest_process']:,.0f} MiB largest process (the JVM; driver-memory {figures['driver_memory']})"
    )
    print(f"ratio datacompy / lab diff (time):       {figures['ratio_datacompy_to_lab_diff']:.2f}x")
    print(
        f"ratio datacompy / lab reconcile (time):  {figures['ratio_datacompy_to_lab_reconcile']:.2f}x; "
        f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
