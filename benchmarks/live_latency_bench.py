"""The speed layer's live latency as it records it, against the same latency seen from outside.

An always-on speed layer (``run_speed``, this process's Spark session) reads a fresh log while
this script appends ``--segments`` segments, one event each, ``--rate`` a second. For each
segment the script takes the time before and after the append (the segment is published between
them) and polls the window rows (``speed_aggregates``, every ``--poll`` seconds) until its event
is counted. It then prints, over the segments' lines:

* from outside: the wait from the append's return to the event seen counted (nearest-rank p50,
  p95, max; the poll adds up to ``--poll``);
* as recorded: the ``stream_metrics`` rows' ``latency_*`` figures (per micro-batch), their
  highest p95 (what ``lklab health`` shows), ``duration_seconds`` (the step alone), and
  ``committed_at - started_at`` (the batch from its start to its commit: the rest of a line's
  wait is the trigger and the backlog before it).

The first micro-batches wait for the query to start: ``--skip`` leaves the first segments out of
a second line of figures (the steady state).

    .venv/bin/python benchmarks/live_latency_bench.py [--segments 60] [--rate 1] [--poll 0.05]
        [--segments-per-batch N] [--trigger "1 second"] [--skip 20] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)
from deltalake import DeltaTable  # noqa: E402

from lklab.pipelines.billing_windows.speed import run_speed  # noqa: E402
from reconciliation.result import nearest_rank  # noqa: E402
from shared.catalog import tables_root  # noqa: E402
from shared.config import LabConfig  # noqa: E402
from shared.eventlog import EventLog  # noqa: E402
from shared.live_latency import start_to_commit  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def quantile(values: list[float], q: str) -> float:
    return nearest_rank(sorted(values), q)


def counted(path: str) -> int:
    if not DeltaTable.is_deltatable(path):
        return 0
    return sum(DeltaTable(path).to_pyarrow_table(columns=["event_count"])["event_count"].to_pylist())


def line(number: int) -> str:
    moment = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    fields = {"event_id": f"e-{number}", "account_id": "acct-1", "event_type": "charge", "amount": "10.00"}
    return json.dumps({**fields, "currency": "USD", "event_time": moment})


def run(args: argparse.Namespace) -> dict:
    lake = Path(tempfile.mkdtemp(prefix="live-latency-")) / "lake"
    config = LabConfig(lake=lake, table_engine="deltalake")
    spark = spark_session(config, "live-latency-bench")
    stop, failure = threading.Event(), []

    def stream() -> None:
        try:
            run_speed(
                spark, config, stop=stop, segments_per_batch=args.segments_per_batch, trigger_interval=args.trigger
            )
        except Exception as err:
            failure.append(err)

    runner = threading.Thread(target=stream, daemon=True)
    runner.start()
    log, aggregates = EventLog(lake), str(tables_root(lake) / "speed_aggregates")
    appended, seen, order = {}, {}, []

    def poll() -> None:
        for index in range(len(seen), counted(aggregates)):
            seen[order[index]] = time.time()

    progress(f"appending {args.segments} segments, {args.rate} a second, into {lake}")
    for number in range(args.segments):
        started = time.time()
        segment = log.append([line(number)])
        appended[segment.number] = (started, time.time())
        order.append(segment.number)
        while time.time() < started + 1 / args.rate:
            poll()
            time.sleep(args.poll)
    deadline = time.time() + 120
    while len(seen) < len(order) and time.time() < deadline and not failure:
        poll()
        time.sleep(args.poll)
    stop.set()
    runner.join(timeout=120)
    if failure or len(seen) < len(order):
        raise SystemExit(f"the stream did not count every event: {failure or len(seen)}")

    rows = DeltaTable(str(tables_root(lake) / "stream_metrics")).to_pyarrow_table().to_pylist()
    rows = [row for row in rows if row["first_segment"] is not None]
    figures = {}
    for name, skip in (("all", 0), ("steady", args.skip)):
        kept = order[skip:]
        outside = [seen[number] - appended[number][1] for number in kept]
        batches = [row for row in rows if row["first_segment"] >= kept[0]]
        figures[name] = {
            "segments": len(kept),
            "outside_p50": quantile(outside, "0.5"),
            "outside_p95": quantile(outside, "0.95"),
            "outside_max": max(outside),
            "micro_batches": len(batches),
            "batch_p50_median": quantile([row["latency_p50_seconds"] for row in batches], "0.5"),
            "batch_p95_highest": max(row["latency_p95_seconds"] for row in batches),
            "batch_max": max(row["latency_max_seconds"] for row in batches),
            "step_seconds_p50": quantile([row["duration_seconds"] for row in batches], "0.5"),
            "start_to_commit_p50": quantile(
                own := [start_to_commit(row["started_at"], row["committed_at"]) for row in batches], "0.5"
            ),
            "start_to_commit_max": max(own),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=60)
    parser.add_argument("--rate", type=float, default=1.0, help="segments appended a second")
    parser.add_argument("--poll", type=float, default=0.05)
    parser.add_argument("--segments-per-batch", type=int, default=None, help="default: the speed layer's")
    parser.add_argument("--trigger", default="1 second")
    parser.add_argument("--skip", type=int, default=20, help="segments left out of the steady state")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    figures = run(args)
    for name, f in figures.items():
        print(
            f"{name}: {f['segments']} segments in {f['micro_batches']} micro-batches; from outside (append "
            f"returned -> event seen counted) p50 {f['outside_p50']:.3f}s p95 {f['outside_p95']:.3f}s max "
            f"{f['outside_max']:.3f}s; recorded: median batch p50 {f['batch_p50_median']:.3f}s, highest batch p95 "
            f"{f['batch_p95_highest']:.3f}s, max {f['batch_max']:.3f}s; step p50 {f['step_seconds_p50']:.3f}s; a batch "
            f"from its start to its commit p50 {f['start_to_commit_p50']:.3f}s max {f['start_to_commit_max']:.3f}s"
        )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
