"""The nightly pair on a lake of many days against the same pair on a lake of that one day.

A nightly run recomputes the new day (``lklab batch --date D``) and reconciles it
(``lklab reconcile --date D``). Its cost should follow the day, not the lake. Two lakes are
built: ``one`` holds the last day alone; ``many`` holds ``--days`` days, the last one the same.
Each day is its own generated log (``start`` at its midnight, a day of event time, seed
``--seed`` plus the day's number, so event ids never repeat across days), appended to the lake
in day order; the last day's segments are the same bytes in both lakes.

Before anything is timed, ``many`` has the batch truth of every earlier day, computed before
the last day was appended (as the earlier nights left it), and both lakes have the stream's
tables of every day they hold, derived from the log as ``benchmarks/stream_from_truth.py``
derives them (1% of events late, by a hash of ``event_id``; 20% of the retries counted, by a
hash of ``event_id`` and ``ingest_time``: the same lines in both lakes). Then, on each lake,
``lklab batch --date D`` and ``lklab reconcile --date D`` run as processes, ``--repeats`` times,
interleaved between the lakes, each repeat on a fresh copy of the lake as it was built (a
second batch on the same lake would find the day's segments read already); the medians of
wall and CPU seconds (the process and everything it started, read every 0.2 s) and their ratios
``many / one`` are printed with the 1-minute load average before and after each run.

The two nights must agree: the last day's ``batch_truth`` rows, and the per-window statuses,
sides and deltas of the last reconcile (``recon_diffs`` of its run) must be identical in both
lakes, else the script exits 1.

    .venv/bin/python benchmarks/nightly_bench.py [--days 30] [--events-per-day 20000]
        [--segment-minutes 10] [--repeats 1] [--keep DIR] [--json-out FILE]

At the defaults ``many`` holds 600,000 events (606,600 lines: 1% retries, 0.1% malformed) in
4,589 segments (a day's late arrivals spill past its 144th); on two cores at load 10-16 the
script took 21 minutes, most of it building the lakes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from process_runs import timed_run  # noqa: E402

DAY_SECONDS = 86_400
ENGINE = ["--table-engine", "deltalake"]


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_process(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> dict:
    """Run ``argv``; its wall and CPU seconds, exit code, and the 1-minute load before and after."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    run = timed_run(argv, env, str(cwd), ok)
    return {
        "seconds": run.seconds,
        "cpu_seconds": run.cpu_seconds,
        "exit": run.exit,
        "load_before": run.load_before,
        "load_after": run.load_after,
    }


def lklab(*args: str) -> list[str]:
    return [sys.executable, "-m", "lklab", *args, *ENGINE]


def day_of(number: int):
    from lklab.scenarios import EPOCH_START, SECOND

    return dt.datetime.fromtimestamp(EPOCH_START // SECOND + number * DAY_SECONDS, dt.UTC).date()


def generate_day(scratch: Path, number: int, args) -> list[Path]:
    """Day ``number``'s log, generated alone; its segments in order."""
    from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
    from lklab.scenarios import EPOCH_START, SECOND
    from shared.eventlog import EventLog

    lake = scratch / "days" / f"{number:03d}"
    if not (lake / "log").is_dir():
        params = GeneratorParams(
            events=args.events_per_day,
            accounts=args.accounts,
            start=EPOCH_START + number * DAY_SECONDS * SECOND,
            span=DAY_SECONDS * SECOND,
            segment_interval=args.segment_minutes * 60 * SECOND,
            seed=args.seed + number,
        )
        generate(params, lake)
    return [segment.path for segment in EventLog(lake).segments()]


def append_day(lake: Path, segments: list[Path]) -> None:
    """Link a day's segments after the lake's last one (segments never change: sharing is safe)."""
    from shared.eventlog import EventLog

    log = EventLog(lake)
    log.root.mkdir(parents=True, exist_ok=True)
    last = log.last_segment()
    for offset, path in enumerate(segments, start=1):
        os.link(path, log.segment_path(last + offset))


def derive_stream(lake: Path) -> None:
    """The stream's tables of every segment of ``lake`` (the module docstring), written once."""
    from stream_from_truth import LakeShape, stream_tables, write_stream_tables

    from shared.config import LabConfig
    from shared.eventlog import EventLog
    from shared.spark_session import spark_session
    from shared.tables import Tables

    config = LabConfig(lake=lake, table_engine="deltalake")
    spark = spark_session(config, "lklab-nightly-bench-stream")
    last = EventLog(lake).last_segment()
    # the log is generated already: only the behaviours' shares of the shape are read
    shape = LakeShape(events=0, accounts=0, late_share=0.01, counted_retry_share=0.2)
    stream = stream_tables(spark, lake, config, shape, last)
    write_stream_tables(Tables(spark, lake, config.table_engine), stream, last, stream["_parsed"].count())


def build_lakes(scratch: Path, args) -> tuple[dict[str, Path], dt.date, dict[str, int]]:
    last = args.days - 1
    lakes = {"one": scratch / "one", "many": scratch / "many"}
    progress(f"generating {args.days} days of {args.events_per_day:,} events")
    days = [generate_day(scratch, number, args) for number in range(args.days)]
    for number in range(last):
        append_day(lakes["many"], days[number])
    if last:
        first_day, before_last = day_of(0), day_of(last - 1)
        progress(f"many: batch truth of {first_day}..{before_last} (not timed)")
        run_process(
            lklab("batch", "--lake", str(lakes["many"]), "--from", str(first_day), "--to", str(before_last)), scratch
        )
    for lake in lakes.values():
        append_day(lake, days[last])
    sizes = {}
    for side, lake in lakes.items():
        progress(f"{side}: the stream's tables (not timed)")
        run_process([sys.executable, __file__, "--derive-stream", str(lake)], scratch)
        sizes[side] = len(list((lake / "log").glob("segment-*.jsonl")))
    return lakes, day_of(last), sizes


def fresh_copy(built: Path, lake: Path) -> None:
    """``lake`` as ``built`` left it: a repeat runs the same night on the same lake, not on the
    one the previous repeat wrote (whose batch would find the day's segments read already).
    The log's segments never change, so they are linked; everything else is copied."""

    def copy(source: str, target: str) -> None:
        if Path(source).parent.name == "log":
            os.link(source, target)
        else:
            shutil.copy2(source, target)

    shutil.rmtree(lake, ignore_errors=True)
    shutil.copytree(built, lake, copy_function=copy)


def last_day_rows(lake: Path, day: dt.date, run_id: str) -> dict[str, list]:
    """What the two nights must agree on: the day's truth rows and the reconcile's windows."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from shared.catalog import BATCH_TRUTH, tables_root

    def rows(name: str, where, drop: tuple[str, ...] = ()) -> list:
        table = DeltaTable(str(tables_root(lake) / name)).to_pyarrow_table()
        table = table.filter(where(table)).drop_columns(list(drop))
        return sorted(table.to_pylist(), key=lambda row: json.dumps(row, sort_keys=True, default=str))

    start = dt.datetime.combine(day, dt.time(), dt.UTC)
    in_day = lambda t: pc.and_(  # noqa: E731
        pc.greater_equal(t["window_start"], start), pc.less(t["window_start"], start + dt.timedelta(days=1))
    )
    return {
        "batch_truth": rows(BATCH_TRUTH.name, in_day),
        "recon_diffs": rows("recon_diffs", lambda t: pc.equal(t["run_id"], run_id), drop=("run_id",)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30, help="days in the larger lake (default 30)")
    parser.add_argument("--events-per-day", type=int, default=20_000, help="events a day (default 20,000)")
    parser.add_argument("--accounts", type=int, default=200, help="accounts (default 200)")
    parser.add_argument("--segment-minutes", type=int, default=10, help="ingest time per segment (default 10)")
    parser.add_argument("--seed", type=int, default=7, help="day N is generated with seed SEED+N (default 7)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of the pair on each lake (default 1)")
    parser.add_argument("--keep", default=None, help="build the lakes in this directory and keep them")
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--derive-stream", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.derive_stream:
        derive_stream(Path(args.derive_stream))
        return 0
    if args.days < 1 or args.events_per_day < 1 or args.repeats < 1:
        parser.error("--days, --events-per-day and --repeats must be at least 1")

    with tempfile.TemporaryDirectory(prefix="nightly-bench-") as temporary:
        scratch = Path(args.keep) if args.keep else Path(temporary)
        scratch.mkdir(parents=True, exist_ok=True)
        for side in ("one", "many"):
            shutil.rmtree(scratch / side, ignore_errors=True)
            shutil.rmtree(scratch / f"{side}.built", ignore_errors=True)
        lakes, day, segments = build_lakes(scratch, args)
        built = {side: lake.with_name(f"{side}.built") for side, lake in lakes.items()}
        for side, lake in lakes.items():
            lake.rename(built[side])
        runs: dict[str, dict[str, list[dict]]] = {side: {"batch": [], "reconcile": []} for side in lakes}
        run_ids: dict[str, str] = {}
        for repeat in range(1, args.repeats + 1):
            for side, lake in lakes.items():
                fresh_copy(built[side], lake)
                report = scratch / f"recon-{side}.json"
                commands = {
                    "batch": lklab("batch", "--lake", str(lake), "--date", str(day)),
                    "reconcile": lklab("reconcile", "--lake", str(lake), "--date", str(day), "--json-out", str(report)),
                }
                for step, command in commands.items():
                    run = run_process(command, scratch, ok=(0, 3))
                    runs[side][step].append(run)
                    progress(
                        f"run {repeat}/{args.repeats} {side} {step}: wall {run['seconds']:.1f}s, "
                        f"cpu {run['cpu_seconds']:.1f}s (load {run['load_before']:.2f} -> {run['load_after']:.2f})"
                    )
                run_ids[side] = json.loads(report.read_text())["run_id"]
        agreed = {side: last_day_rows(lake, day, run_ids[side]) for side, lake in lakes.items()}

    medians = {
        side: {
            step: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "cpu_seconds")} for step, rs in s.items()
        }
        for side, s in runs.items()
    }
    ratios = {
        step: {k: medians["many"][step][k] / medians["one"][step][k] for k in ("seconds", "cpu_seconds")}
        for step in ("batch", "reconcile")
    }
    differing = [name for name in agreed["one"] if agreed["one"][name] != agreed["many"][name]]
    exits = {side: [r["exit"] for r in s["reconcile"]] for side, s in runs.items()}
    print(
        f"the night: {day}, {args.events_per_day:,} events; lakes: one day ({segments['one']:,} segments), "
        f"{args.days} days ({segments['many']:,} segments); {args.repeats} run(s) of each, median; "
        f"{os.cpu_count()} cores"
    )
    for side in lakes:
        for step in ("batch", "reconcile"):
            loads = ", ".join(f"{r['load_before']:.2f}->{r['load_after']:.2f}" for r in runs[side][step])
            m = medians[side][step]
            print(f"{side:>4} {step:<9}: wall {m['seconds']:6.1f}s, cpu {m['cpu_seconds']:6.1f}s   load: {loads}")
    for step, ratio in ratios.items():
        print(f"ratio {args.days} days / 1 day, {step}: wall {ratio['seconds']:.2f}x, cpu {ratio['cpu_seconds']:.2f}x")
    counts = {name: len(rows) for name, rows in agreed["one"].items()}
    print(
        f"the two nights agree on the day's {counts['batch_truth']:,} batch_truth rows and "
        f"{counts['recon_diffs']:,} reconciled windows: {'yes' if not differing else 'NO: ' + ', '.join(differing)}"
        f"; reconcile exit codes {exits}"
    )
    if args.json_out:
        figures = {
            "day": str(day),
            "days": args.days,
            "events_per_day": args.events_per_day,
            "segments": segments,
            "runs": runs,
            "medians": medians,
            "ratios": ratios,
            "agree": not differing,
            "cores": os.cpu_count(),
        }
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    return 1 if differing or exits["one"] != exits["many"] else 0


if __name__ == "__main__":
    sys.exit(main())
