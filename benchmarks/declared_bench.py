"""A declared pipeline against billing over the very same log lines, same process.

One generated billing log (``billing``, 1% retries) is read by two pipelines in one lake:
``billing_windows`` (hand-written: Spark's string functions and variant type in the batch and
the stream's query) and ``billing_declared``, a TOML section naming billing's own fields, so it
reads the same lines into the same windows::

    event-id = "event_id", event-time = "event_time",
    keys = ["account_id", "currency"] (currency: values = the ISO 4217 codes billing accepts),
    measures.amount = "decimal(20,6)", billing's window size and watermark delay.

No ``ingest-time`` is declared: a declared pipeline takes a line's own ``ingest_time`` (the
field every billing line carries) when it declares none, which is the same reading.

The generator's malformed lines are left out (``malformed_rate=0``): three of its ten kinds (a
JSON number as the amount, a positive refund, an unknown ``event_type``) break rules of billing
a declaration cannot state, and each is a spoiled copy of a real event's line, so the two
pipelines would keep different events. Every other line is the same work for both: parsed,
validated, deduplicated by ``event_id`` (the first copy in log order), windowed and summed.

Three paths, each billing's then the declared pipeline's, interleaved, after one unmeasured run
of all six (JVM, JIT, Python workers, delta-rs):

* **batch**: the batch truth (``run_batch`` against ``run_truth(DeclaredTruth)``), each on a
  lake without its truth's tables, so every write really happens;
* **speed**: the speed layer over the whole log with ``Trigger.AvailableNow`` and
  ``--segments-per-batch`` segments per micro-batch (billing's ``run_speed`` against
  ``stream_rule(d).run``), each run with tables and a checkpoint of its own;
* **replay**: the Kappa replay into ``kappa/RUN/`` (billing's ``run_replay``, which computes the
  whole log's rows in parallel, against ``replay_on_executors`` walking the declared stream's
  rule micro-batch by micro-batch, ``--segments-per-batch`` segments each).

Before any speed is printed, each path's totals are compared: the number of windows, the events
counted and the sum of the amount over every window (for the streams also over the late side
output). The figures are printed only when they are equal: the comparison is then of equal work.

Per path: the median wall seconds of each side, lines/s, and declared / billing in lines per
second (above 1: the declared pipeline is faster), with the 1-minute load average before and
after every run.

    .venv/bin/python benchmarks/declared_bench.py [--events N] [--repeats R] [--segments-per-batch S]
        [--paths batch,speed,replay] [--scratch DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc  # noqa: E402
import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)
from scratch_dir import scratch_dir  # noqa: E402

from lklab.pipelines.billing_windows.batch import run_batch  # noqa: E402
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate  # noqa: E402
from lklab.pipelines.billing_windows.replay import run_replay  # noqa: E402
from lklab.pipelines.billing_windows.speed import run_speed  # noqa: E402
from lklab.pipelines.declared.declaration import load_declaration  # noqa: E402
from lklab.pipelines.declared.stream import config_of, stream_rule  # noqa: E402
from lklab.pipelines.declared.tables import tables_of  # noqa: E402
from lklab.pipelines.declared.truth import DeclaredTruth  # noqa: E402
from lklab.replay_runner import replay_on_executors  # noqa: E402
from lklab.truth_runner import run_truth  # noqa: E402
from shared.catalog import BATCH_TABLES, BATCH_TRUTH, LATE_EVENTS, SPEED_AGGREGATES  # noqa: E402
from shared.config import LabConfig  # noqa: E402
from shared.currencies import CURRENCY_CODES  # noqa: E402
from shared.durations import format_duration  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402
from shared.tables import Tables  # noqa: E402

PIPELINE = "billing_declared"
PATHS = ("batch", "speed", "replay")
SIDES = ("billing", "declared")


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def declaration_text(config: LabConfig) -> str:
    """Billing's line format and windows as a declared pipeline's TOML section."""
    currencies = ", ".join(f'"{code}"' for code in CURRENCY_CODES)
    return f"""
[pipelines.{PIPELINE}]
kind = "windowed"
event-id = "event_id"
event-time = "event_time"
keys = ["account_id", "currency"]
window-size = "{format_duration(config.window_size)}"
watermark-delay = "{format_duration(config.watermark_delay)}"

[pipelines.{PIPELINE}.measures]
amount = "decimal(20,6)"

[pipelines.{PIPELINE}.fields.currency]
values = [{currencies}]
"""


def totals(tables: Tables, windows: str, amount: str, late: str | None = None) -> dict:
    """Windows, events and the amount's sum of a windows table (and of its late side output)."""
    rows = tables.read_arrow(windows)
    figures = {
        "windows": rows.num_rows,
        "events": pc.sum(rows["event_count"]).as_py() or 0,
        "amount": str(pc.sum(rows[amount]).as_py() or Decimal(0)),
    }
    if late is not None:
        late_rows = tables.read_arrow(late)
        figures["late_events"] = late_rows.num_rows
        figures["late_amount"] = str(pc.sum(late_rows["amount"]).as_py() or Decimal(0))
    return figures


class Bench:
    """The six jobs over one lake, each returning its totals."""

    def __init__(self, spark, config: LabConfig, declaration, segments_per_batch: int) -> None:
        self.spark = spark
        self.config = config
        self.declaration = declaration
        self.declared_config = config_of(declaration, config)
        self.segments_per_batch = segments_per_batch
        self.tables = Tables(spark, config.lake, config.table_engine)
        self.declared_tables = tables_of(declaration)

    def _drop(self, names) -> None:
        for name in names:
            shutil.rmtree(self.tables.path(name), ignore_errors=True)

    def billing_batch(self, run: str) -> dict:
        self._drop(table.name for table in BATCH_TABLES)
        run_batch(self.spark, self.config, whole_log=True)
        return totals(self.tables, BATCH_TRUTH.name, "amount_total")

    def declared_batch(self, run: str) -> dict:
        self._drop(table.name for table in self.declared_tables.batch)
        run_truth(self.spark, self.declared_config, DeclaredTruth(self.declaration))
        return totals(self.tables, self.declared_tables.truth.name, "amount")

    def billing_speed(self, run: str) -> dict:
        stream = run_speed(
            self.spark,
            self.config,
            available_now=True,
            segments_per_batch=self.segments_per_batch,
            app_id=f"billing-{run}",
            prefix=f"billing_{run}_",
        )
        return totals(self.tables, stream.table(SPEED_AGGREGATES), "amount_total", stream.table(LATE_EVENTS))

    def declared_speed(self, run: str) -> dict:
        stream = stream_rule(self.declaration).run(
            self.spark,
            self.declared_config,
            available_now=True,
            segments_per_batch=self.segments_per_batch,
            app_id=f"declared-{run}",
            prefix=f"declared_{run}_",
        )
        t = self.declared_tables
        return totals(self.tables, stream.table(t.windows), "amount", stream.table(t.late))

    def billing_replay(self, run: str) -> dict:
        replayed = run_replay(self.spark, self.config, "billing", replace=True)
        prefix = replayed.prefix
        return totals(self.tables, SPEED_AGGREGATES.at(prefix), "amount_total", LATE_EVENTS.at(prefix))

    def declared_replay(self, run: str) -> dict:
        replayed = replay_on_executors(
            self.spark,
            self.declared_config,
            stream_rule(self.declaration),
            "declared",
            replace=True,
            segments_per_batch=self.segments_per_batch,
        )
        t = self.declared_tables
        return totals(self.tables, t.windows.at(replayed.prefix), "amount", t.late.at(replayed.prefix))

    def job(self, path: str, side: str):
        return getattr(self, f"{side}_{path}")


def load() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events to generate (default 200,000)")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs of each side; the median is reported")
    parser.add_argument(
        "--segments-per-batch", type=int, default=15, help="segments per micro-batch of the streams (default 15)"
    )
    parser.add_argument("--paths", default=",".join(PATHS), help=f"which paths to time (default {','.join(PATHS)})")
    parser.add_argument(
        "--scratch", default=None, help="directory for the temporary lake (default: the system's temp dir)"
    )
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args(argv)
    paths = tuple(p for p in args.paths.split(",") if p)
    if args.events < 1 or args.repeats < 1 or args.segments_per_batch < 1:
        parser.error("--events, --repeats and --segments-per-batch must be at least 1")
    if not paths or set(paths) - set(PATHS):
        parser.error(f"--paths: {args.paths!r}; valid: a comma-separated list of {', '.join(PATHS)}")

    loads = [load()]
    with scratch_dir("declared-bench-", args.scratch) as scratch:
        lake = Path(scratch) / "lake"
        progress(f"generating {args.events:,} events (no malformed lines: see the docstring)")
        params = GeneratorParams(events=args.events, malformed_rate=0.0)
        manifest = generate(params, lake, progress=progress).manifest
        config = LabConfig(lake=lake, table_engine="deltalake")
        config_file = Path(scratch) / "lklab.toml"
        config_file.write_text(declaration_text(config))
        declaration = load_declaration(PIPELINE, config_file)
        spark = spark_session(config, "lklab-declared-bench")
        bench = Bench(spark, config, declaration, args.segments_per_batch)

        progress(f"warm-up: one unmeasured run of each of {len(paths) * 2} jobs")
        checks = {path: {} for path in paths}
        for path in paths:
            for side in SIDES:
                started = time.perf_counter()
                checks[path][side] = bench.job(path, side)("warmup")
                progress(f"warm-up: {path} {side} {time.perf_counter() - started:.1f}s (load {load():.1f})")
        seconds = {path: {side: [] for side in SIDES} for path in paths}
        for repeat in range(1, args.repeats + 1):
            for path in paths:
                for side in SIDES:
                    before = load()
                    started = time.perf_counter()
                    checks[path][side] = bench.job(path, side)(f"run{repeat}")
                    wall = time.perf_counter() - started
                    loads += [before, load()]
                    seconds[path][side].append(wall)
                    progress(
                        f"run {repeat}/{args.repeats}: {path} {side} {wall:.1f}s "
                        f"(load {before:.1f} -> {loads[-1]:.1f}; {checks[path][side]['events']:,} events)"
                    )
        spark.stop()

    lines, segments = manifest["lines"], manifest["segments"]
    figures = {
        "log": {
            "lines": lines,
            "events": manifest["events"],
            "retries": manifest["duplicates"],
            "segments": segments,
        },
        "repeats": args.repeats,
        "segments_per_batch": args.segments_per_batch,
        "declaration": declaration_text(config).strip(),
        "load_average": {"min": min(loads), "max": max(loads), "end": load()},
        "cores": os.cpu_count(),
    }
    print(
        f"log: {lines:,} lines ({manifest['events']:,} events, {manifest['duplicates']:,} retries), "
        f"{segments:,} segments; streams {args.segments_per_batch} segments per micro-batch; "
        f"{args.repeats} measured run(s) of each, median"
    )
    equal = True
    for path in paths:
        billing, declared = checks[path]["billing"], checks[path]["declared"]
        same = billing == declared
        equal = equal and same
        shown = ", ".join(
            f"{key} {value:,}" if isinstance(value, int) else f"{key} {value}" for key, value in billing.items()
        )
        print(f"check {path:6s}: {'equal' if same else 'DIFFER'}: billing {shown}")
        if not same:
            print(f"             declared {declared}")
        figures[path] = {"totals": checks[path], "equal": same}
    if not equal:
        print("the totals differ: not the same work, no speed is printed")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
        return 1

    for path in paths:
        medians = {side: statistics.median(seconds[path][side]) for side in SIDES}
        ratio = medians["billing"] / medians["declared"]  # lines per second, declared / billing
        figures[path].update(
            {
                "seconds": seconds[path],
                "median_seconds": medians,
                "lines_per_second": {side: lines / medians[side] for side in SIDES},
                "ratio_declared_to_billing": ratio,
            }
        )
        print(
            f"{path:6s}: billing {medians['billing']:6.1f}s {lines / medians['billing']:8,.0f} lines/s | "
            f"declared {medians['declared']:6.1f}s {lines / medians['declared']:8,.0f} lines/s | "
            f"declared / billing {ratio:.2f}x"
        )
    print(
        f"load average (1 min) around the runs {figures['load_average']['min']:.1f}-{figures['load_average']['max']:.1f}, "
        f"{figures['load_average']['end']:.1f} at the end, on {os.cpu_count()} cores"
    )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
