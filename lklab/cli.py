"""``lklab``: the command line of the Lambda-Kappa Lab.

Exit codes: 0 success, 2 bad usage or bad input (the message names the bad value and the valid
ones), 1 a failure while running (one line; ``LKLAB_DEBUG=1`` shows the traceback), 3 the run
worked and found a problem (an unhealthy speed layer, an unexplained reconciliation gap).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable

from shared.config import SETTINGS, ConfigError, LabConfig, load_config
from shared.durations import parse_duration

__all__ = ["main"]

USAGE, FAILURE, UNHEALTHY = 2, 1, 3
DEFAULT_DELAYS, DEFAULT_LATENESS = "30s,5m", "0,30m"


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _config(args: argparse.Namespace) -> LabConfig:
    flags = {key: getattr(args, key.replace("-", "_"), None) for key in SETTINGS}
    try:
        return load_config(args.config, flags)
    except ConfigError as err:
        raise UsageError(str(err)) from None


def _common(parser: argparse.ArgumentParser, windows: bool = True) -> None:
    parser.add_argument("--lake", help="lake directory (default ./lake, env LKLAB_LAKE)")
    parser.add_argument("--config", help="TOML configuration file (default ./lklab.toml if present)")
    if windows:
        group = parser.add_argument_group("windows and time")
        group.add_argument("--window-kind", help="tumbling | sliding | session (default tumbling)")
        group.add_argument("--window-size", help="window length, e.g. 2m (default 1m)")
        group.add_argument("--window-slide", help="sliding windows: start every, e.g. 30s")
        group.add_argument("--session-gap", help="session windows: inactivity that ends one (default 5m)")
        group.add_argument("--watermark-delay", help="how far the watermark trails the max event time (default 1m)")
        group.add_argument("--watermark-interval", help="the watermark moves once per tick of this much processing time "
                           "(ingest time), ticks aligned to the epoch (default 1s; 0: after every line)")
        group.add_argument("--allowed-lateness", help="how long after the watermark a window still takes events (default 0s)")
        group.add_argument("--dedup-horizon", help="how long an event_id is remembered by the stream (default 1h)")
        group.add_argument("--heartbeat-interval", help="always-on speed layer: append a heartbeat after the log has been "
                           "quiet this long, so open windows still become final (default 1m; 0: never)")
        group.add_argument("--max-clock-skew", help="an event time this much ahead of its ingest time is a dead letter, "
                           "event_time_in_future (default 5m)")
        group.add_argument("--max-line-bytes", help="a longer log line is a dead letter, line_too_long (default 1048576)")
        group.add_argument("--spark-master", help="Spark master URL (default local[2])")
        group.add_argument("--driver-memory", help="heap of the Spark driver this command starts, e.g. 8g (default 4g; "
                           "local mode runs the executors in it too; ignored under spark-submit, which takes --driver-memory)")
        group.add_argument("--table-engine", help="auto | deltalake | delta-spark (default auto)")


def _add_days(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("days (UTC day of window_start)")
    group.add_argument("--date", help="one day, YYYY-MM-DD")
    group.add_argument("--from", dest="date_from", help="first day of a range (with --to)")
    group.add_argument("--to", dest="date_to", help="last day of a range (with --from)")


def _command(sub, name: str, summary: str, example: str) -> argparse.ArgumentParser:
    return sub.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _add_compare_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("comparison")
    group.description = (
        "--watermark-delay and --allowed-lateness take comma-separated lists to sweep here "
        f"(default {DEFAULT_DELAYS} and {DEFAULT_LATENESS})"
    )
    group.add_argument("--segments-per-batch", type=int, default=10,
                       help="segments per micro-batch of the live streams: their rows do not depend on it, their cost does (default 10)")
    group.add_argument("--error-step", default="10s", help="sample the error over processing time every this much (default 10s)")
    group.add_argument("--name", help="report name: <lake>/reports/NAME/ (default compare-<UTC time>)")


def _add_generate_options(
    parser: argparse.ArgumentParser, events_default: int, *, span: str = "6h", segment_interval: str = "1m", scenario: str | None = "billing"
) -> None:
    from lklab.scenarios import SCENARIOS

    if scenario is None:
        parser.add_argument("--scenario", help=f"generate this scenario first: {' | '.join(SCENARIOS)} (default: use the lake's log)")
    else:
        parser.add_argument("--scenario", default=scenario, help=f"{' | '.join(SCENARIOS)} (default {scenario})")
    parser.add_argument("--events", type=int, default=events_default, help=f"number of real events (default {events_default:,})")
    parser.add_argument("--seed", type=int, default=7, help="random seed: the same seed writes the same log (default 7)")
    parser.add_argument("--span", default=span, help=f"event-time span of the traffic (default {span})")
    parser.add_argument("--accounts", type=int, default=40, help="number of accounts (default 40)")
    parser.add_argument("--duplicate-rate", type=float, default=0.01, help="share of events resent by a retry (default 0.01)")
    parser.add_argument("--malformed-rate", type=float, default=0.001, help="share of extra malformed lines (default 0.001)")
    parser.add_argument("--segment-interval", default=segment_interval, help=f"ingest time covered by one log segment (default {segment_interval})")
    parser.add_argument("--overwrite", action="store_true", help="replace the lake's existing log and tables")


def _generate(args: argparse.Namespace, config: LabConfig) -> dict:
    from lklab.generator import GeneratorParams, generate

    try:
        params = GeneratorParams(
            scenario=args.scenario,
            events=args.events,
            seed=args.seed,
            span=parse_duration(args.span, name="span"),
            accounts=args.accounts,
            duplicate_rate=args.duplicate_rate,
            malformed_rate=args.malformed_rate,
            segment_interval=parse_duration(args.segment_interval, name="segment-interval"),
        )
        generated = generate(params, config.lake, overwrite=args.overwrite, progress=_progress)
    except (ValueError, FileExistsError) as err:
        raise UsageError(str(err)) from None
    manifest = generated.manifest
    _progress(
        f"log written: {manifest['lines']:,} lines in {manifest['segments']:,} segments under "
        f"{config.lake / 'log'} ({manifest['generate_seconds']}s)"
    )
    return manifest


def cmd_generate(args: argparse.Namespace) -> int:
    config = _config(args)
    manifest = _generate(args, config)
    delays = manifest["delay_seconds"]
    print(
        f"{manifest['events']:,} events, {manifest['duplicates']:,} retries, "
        f"{sum(manifest['dead_letters'].values()):,} malformed lines -> {config.lake / 'log'}\n"
        f"arrival delay p50 {delays['p50']:.1f}s, p99 {delays['p99']:.0f}s, "
        f"p99.9 {delays['p99_9']:.0f}s, max {delays['max']:.0f}s"
    )
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from shared.eventlog import EventLog, holds_no_line
    from shared.locks import appender

    config = _config(args)
    missing = [name for name in args.files if not Path(name).is_file()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    empty = [name for name in args.files if holds_no_line(name)]
    if empty:
        raise UsageError(f"empty file (no line to append): {', '.join(empty)}; nothing was appended")
    log = EventLog(config.lake)
    with appender(config.lake):
        for name in args.files:
            segment = log.append_file(name)
            print(f"{name} -> segment {segment.number} ({segment.path})")
    return 0


def _days(args: argparse.Namespace):
    from shared.partitions import DayRange

    try:
        return DayRange.of(getattr(args, "date", None), getattr(args, "date_from", None), getattr(args, "date_to", None))
    except ValueError as err:
        raise UsageError(str(err)) from None


def _run_batch(config: LabConfig, days=None, refresh: bool = False) -> int:
    from lklab.generator import load_events
    from lklab.summary import batch_summary, render_text
    from lklab.truth import write_truth
    from shared.spark_session import spark_session
    from shared.tables import Tables
    from shared.partitions import DayRange
    from shared.table_settings import SettingsConflict, batch_settings, record, require
    from spark_jobs.batch_job import PositionError, run_batch

    try:  # batch_truth holds the settings its rows were built with: refuse to mix in others
        require(_settings_tables(config), ["batch_truth"], batch_settings(config))
    except SettingsConflict as err:
        raise UsageError(str(err)) from None
    _progress(f"starting Spark ({config.spark_master})")
    spark = spark_session(config, "lklab-batch")
    _progress("batch recompute: parse, validate, dedup, window, aggregate")
    try:
        try:
            run = run_batch(spark, config, days or DayRange(), refresh=refresh)
        except PositionError as err:
            raise UsageError(str(err)) from None
        generated = load_events(config.lake)
        if generated is not None:
            _progress(f"ground truth for {config.window.describe()} windows, computed without Spark")
            write_truth(generated, config.window, config.lake)
        summary = batch_summary(Tables(spark, config.lake, config.table_engine), run, config.window.describe())
    finally:
        spark.stop()
    record(_settings_tables(config), ["batch_truth"], batch_settings(config))
    print(render_text(summary))
    return 0 if run.conserved and summary.matches_generator_truth is not False else FAILURE


def cmd_batch(args: argparse.Namespace) -> int:
    return _run_batch(_config(args), _days(args), args.refresh)


def cmd_demo(args: argparse.Namespace) -> int:
    sweep = _sweep(args)
    config = _config(args)
    _regenerate(args, config)
    return _compare(args, config, args.scenario, sweep)


def _regenerate(args: argparse.Namespace, config: LabConfig) -> None:
    """Generate the scenario over the lake: over a lake the lab generated itself and no speed
    layer reads, without asking; over anything else only with ``--overwrite``."""
    from lklab.generator import unreplaceable

    reason = unreplaceable(config.lake)
    if reason and not args.overwrite:
        raise UsageError(f"{config.lake} {reason}; pass --overwrite to replace it, or choose another --lake")
    args.overwrite = True
    _generate(args, config)


def _sweep(args: argparse.Namespace) -> tuple[str, str]:
    """Take the swept lists off ``args`` so the configuration sees single values only."""
    delays, lateness = args.watermark_delay or DEFAULT_DELAYS, args.allowed_lateness or DEFAULT_LATENESS
    args.watermark_delay = args.allowed_lateness = None
    return delays, lateness


def _compare(args: argparse.Namespace, config: LabConfig, source: str, sweep: tuple[str, str]) -> int:
    import datetime as dt

    from lklab.experiment import ComparisonPlan, run_comparison
    from lklab.report import write_report
    from shared.spark_session import spark_session

    name = args.name or dt.datetime.now(dt.timezone.utc).strftime("compare-%Y%m%d-%H%M%S")
    try:
        plan = ComparisonPlan(
            name=name,
            watermark_delays=tuple(v.strip() for v in sweep[0].split(",") if v.strip()),
            allowed_lateness=tuple(v.strip() for v in sweep[1].split(",") if v.strip()),
            segments_per_batch=args.segments_per_batch,
            error_step=args.error_step,
        )
        from spark_jobs.replay_job import replay_prefix

        replay_prefix(name)
    except ValueError as err:
        raise UsageError(str(err)) from None
    _progress(f"starting Spark ({config.spark_master}); {len(plan.configurations())} configurations to run")
    spark = spark_session(config, f"lklab-compare-{name}")
    try:
        report = run_comparison(spark, config, plan, source=source, progress=_progress)
    finally:
        spark.stop()
    files = write_report(report, Path(config.lake) / "reports" / name)
    print(f"report: {files.html}")
    print(f"summary: {files.summary_json}, {files.summary_md}; audit: {files.audit_csv}")
    from lklab.report import formats

    for result in report.results:
        end, latency, late, recon = result.end, result.latency, result.late, result.reconciliation
        final = "never" if latency.final_p50 is None else formats.seconds(latency.final_p50)
        line = (f"  {result.configuration.label}: {end.windows_exact:,}/{end.windows_compared:,} windows exact at the end; "
                f"time until final, median {final}")
        if late is not None:
            line += f"; side output {late.side_output_events:,}, absorbed {late.absorbed_events:,}"
        if recon is not None:
            line += f"; unexplained {recon.unexplained_windows}"
        print(line)
    unexplained = [r for r in report.results if r.reconciliation and not r.reconciliation.explained]
    return UNHEALTHY if unexplained else 0


def cmd_compare(args: argparse.Namespace) -> int:
    sweep = _sweep(args)
    config = _config(args)
    if args.scenario:
        _regenerate(args, config)
        return _compare(args, config, args.scenario, sweep)
    return _compare(args, config, str(Path(config.lake).resolve()), sweep)


def cmd_speed(args: argparse.Namespace) -> int:
    import signal
    import threading

    from shared.spark_session import spark_session
    from shared.table_settings import SettingsConflict
    from spark_jobs.speed_job import run_speed

    config = _config(args)
    if args.segments_per_batch < 1:
        raise UsageError(f"--segments-per-batch must be at least 1, got {args.segments_per_batch}")
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _progress(f"speed layer on {config.lake / 'log'}: {config.window.describe()} windows, "
              f"watermark delay {config.describe()['watermark-delay']}, allowed lateness {config.describe()['allowed-lateness']}")
    spark = spark_session(config, "lklab-speed")
    try:
        try:
            layer = run_speed(
                spark, config, available_now=args.available_now, segments_per_batch=args.segments_per_batch, stop=stop
            )
        except SettingsConflict as err:
            raise UsageError(str(err)) from None
        name = layer.table("stream_metrics")
        metrics = layer.tables.read_arrow(name) if layer.tables.exists(name) else None
    finally:
        # Stopping Spark shuts down the foreachBatch callback server before the interpreter exits.
        spark.stop()
    if metrics is not None and metrics.num_rows:
        totals = {c: sum(metrics[c].to_pylist()) for c in ("input_lines", "on_time", "late", "duplicates", "dead_letters")}
        print(
            f"{metrics.num_rows} micro-batches: {totals['input_lines']:,} lines = {totals['on_time']:,} on time + "
            f"{totals['late']:,} late (side output) + {totals['duplicates']:,} duplicates + "
            f"{totals['dead_letters']:,} dead letters"
        )
    return 0


def _lake_windows(config: LabConfig, purpose: str) -> LabConfig:
    """``config`` with the windows and line settings the lake's batch truth and speed layer were
    built with, where the user gave none (both must agree; a contradicting flag is refused)."""
    from shared.table_settings import LINE_KEYS, SettingsConflict, adopt, agreed

    tables = _settings_tables(config)
    try:
        windows = agreed(tables, ["batch_truth", "speed_aggregates"], ("window-kind", "window-size", "window-slide", "session-gap", *LINE_KEYS))
        return adopt(config, windows, f"the lake's tables ({purpose})")
    except SettingsConflict as err:
        raise UsageError(str(err)) from None


def _settings_tables(config: LabConfig):
    """The lake's tables, for reading what they recorded (no Spark needed)."""
    from shared.tables import Tables

    return Tables(None, config.lake, "deltalake")


def cmd_replay(args: argparse.Namespace) -> int:
    from shared.spark_session import spark_session
    from spark_jobs.replay_job import ReplayExists, replay_prefix, run_replay

    config = _lake_windows(_config(args), "a replay is compared with them")
    try:
        replay_prefix(args.name)
    except ValueError as err:
        raise UsageError(str(err)) from None
    settings = config.describe()
    _progress(f"Kappa replay '{args.name}' over {config.lake / 'log'}: watermark delay {settings['watermark-delay']}, "
              f"allowed lateness {settings['allowed-lateness']}")
    spark = spark_session(config, f"lklab-replay-{args.name}")
    try:
        run = run_replay(spark, config, args.name, replace=args.replace, history=args.history)
    except ReplayExists as err:
        raise UsageError(str(err)) from None
    finally:
        spark.stop()
    print(
        f"replay {run.name}: {run.lines:,} lines over {run.segments:,} segments; "
        f"{run.wall_seconds:.1f} s wall, {run.cpu_seconds:.1f} CPU seconds ({run.cost_scope}); "
        f"tables under {Path(config.lake) / 'tables' / 'kappa' / run.name}"
    )
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from reconciliation.reconcile import ReconcileInputError, reconcile, stream_prefix
    from reconciliation.render import render_json, render_text
    from reconciliation.tolerance import Tolerance, parse_tolerance
    from shared.spark_session import spark_session
    from spark_jobs.batch_job import PositionError

    config = _config(args)
    days = _days(args)
    if args.against == "speed":
        config = _adopt_stream(config, "", "the speed layer")
    elif args.against.startswith("kappa:"):
        config = _adopt_stream(config, f"kappa/{args.against.split(':', 1)[1]}/", f"replay {args.against.split(':', 1)[1]}")
    try:
        stream_prefix(args.against)
        tolerance = Tolerance(parse_tolerance(args.abs_tol, "abs-tol"), parse_tolerance(args.rel_tol, "rel-tol"))
        max_money = parse_tolerance(args.max_unexplained, "max-unexplained")
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.max_unexplained_events < 0:
        raise UsageError(f"--max-unexplained-events must be >= 0, got {args.max_unexplained_events}")
    _progress(f"starting Spark ({config.spark_master})")
    spark = spark_session(config, "lklab-reconcile")
    _progress(f"reconciling {args.against} against batch_truth for {days.describe()}: diff, attribution, side-output fold")
    try:
        result = reconcile(spark, config, days, against=args.against, tolerance=tolerance)
    except (ReconcileInputError, PositionError) as err:
        raise UsageError(str(err)) from None
    finally:
        spark.stop()
    rendered = render_json(result)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(rendered + "\n")
    print(rendered if args.json else render_text(result))
    breaches = result.breaches(max_money, args.max_unexplained_events)
    for breach in breaches:
        print(f"lklab reconcile: UNEXPLAINED GAP: {breach}", file=sys.stderr)
    return UNHEALTHY if breaches else 0


def _adopt_stream(config: LabConfig, prefix: str, source: str) -> LabConfig:
    """``config`` with the settings a stream's tables and the batch truth recorded."""
    from shared.table_settings import LINE_KEYS, SettingsConflict, adopt, agreed

    tables = _settings_tables(config)
    try:
        windows = agreed(tables, ["batch_truth", f"{prefix}speed_aggregates"], ("window-kind", "window-size", "window-slide", "session-gap", *LINE_KEYS))
        stream = agreed(tables, [f"{prefix}speed_aggregates"])
        return adopt(config, {**stream, **windows}, source)
    except SettingsConflict as err:
        raise UsageError(str(err)) from None


def cmd_health(args: argparse.Namespace) -> int:
    import json

    from lklab.health import stream_health

    config = _config(args)
    try:
        health = stream_health(config.lake, max_staleness=args.max_staleness, max_watermark_lag=args.max_watermark_lag)
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(json.dumps(health.as_dict(), indent=2) if args.json else health.describe())
    return 0 if health.healthy else UNHEALTHY


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lklab",
        description="Run Lambda and Kappa side by side on one event log and measure the difference.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = _command(
        sub, "demo", "Generate a scenario and compare Lambda and Kappa over it (the main job); prints where the report is.",
        "lklab demo",
    )
    _common(demo)
    _add_generate_options(demo, 3_000, span="2h", segment_interval="1m")
    _add_compare_options(demo)
    demo.set_defaults(handler=cmd_demo)

    compare = _command(
        sub, "compare", "Lambda vs Kappa on one log: sweep watermark delays and allowed lateness, write the report.",
        "lklab compare --scenario billing --events 20000 --watermark-delay 10s,1m,10m --allowed-lateness 0,1h",
    )
    _common(compare)
    _add_generate_options(compare, 3_000, span="2h", segment_interval="1m", scenario=None)
    _add_compare_options(compare)
    compare.set_defaults(handler=cmd_compare)

    generate = _command(
        sub, "generate", "Write a deterministic scenario log and its ground truth.",
        "lklab generate --scenario billing --events 1000000 --seed 7 --lake ./lake",
    )
    _common(generate)
    _add_generate_options(generate, 100_000)
    generate.set_defaults(handler=cmd_generate)

    ingest = _command(
        sub, "ingest", "Append JSON-lines files to the log, one segment per file (bad lines kept; an empty file is refused "
        "with exit 2 before anything is appended).",
        "lklab ingest events-1.jsonl events-2.jsonl --lake ./lake",
    )
    _common(ingest, windows=False)
    ingest.add_argument("files", nargs="+", metavar="FILE", help="JSON-lines file(s), appended in the order given")
    ingest.set_defaults(handler=cmd_ingest)

    batch = _command(
        sub, "batch", "Recompute the per-window truth from the complete log with Spark.",
        "lklab batch --date 2026-01-31   (or --from 2026-01-01 --to 2026-01-31; no date: every window)",
    )
    _common(batch)
    _add_days(batch)
    batch.add_argument("--refresh", action="store_true", help="read up to the log's current end, not the position recorded for these days")
    batch.set_defaults(handler=cmd_batch)

    speed = _command(
        sub, "speed", "Run the streaming speed layer over the log (always on; SIGTERM stops it after the current micro-batch).",
        "lklab speed --available-now --watermark-delay 30s --allowed-lateness 5m",
    )
    _common(speed)
    speed.add_argument("--available-now", action="store_true", help="process everything in the log, then exit")
    speed.add_argument("--segments-per-batch", type=int, default=1, help="segments per micro-batch (default 1: the watermark advances as the traffic did)")
    speed.set_defaults(handler=cmd_speed)

    replay = _command(
        sub, "replay", "Kappa replay: re-run the streaming job over the whole log into kappa/RUN/ tables of its own.",
        "lklab replay --name lateness-1h --allowed-lateness 1h",
    )
    _common(replay)
    replay.add_argument("--name", required=True, help="run name: its tables are kappa/NAME/...")
    replay.add_argument("--replace", action="store_true", help="delete an existing replay of that name first")
    replay.add_argument("--history", action="store_true", help="also write window_history: every change of a window row, "
                        "line by line, at its processing time")
    replay.set_defaults(handler=cmd_replay)

    reconcile = _command(
        sub, "reconcile", "Diff a stream against batch_truth, explain every gap, fold the late side output back in "
        "(exit 3 when the unexplained gap exceeds the threshold).",
        "lklab reconcile --date 2026-01-05 --against kappa:lateness-1h --json-out recon.json",
    )
    _common(reconcile)
    _add_days(reconcile)
    reconcile.add_argument("--against", default="speed", help="speed | kappa:RUN (default speed)")
    reconcile.add_argument("--abs-tol", default="0", help="absolute money tolerance per window (default 0: exact)")
    reconcile.add_argument("--rel-tol", default="0", help="relative money tolerance, a fraction of the truth (default 0)")
    reconcile.add_argument("--max-unexplained", default="0", help="unexplained money per currency that is still acceptable (default 0)")
    reconcile.add_argument("--max-unexplained-events", type=int, default=0, help="unexplained events per currency still acceptable (default 0)")
    reconcile.add_argument("--json", action="store_true", help="print the JSON summary instead of text")
    reconcile.add_argument("--json-out", help="also write the JSON summary to this file")
    reconcile.set_defaults(handler=cmd_reconcile)

    health = _command(
        sub, "health", "Is the speed layer keeping up? Freshness, backlog and watermark lag (exit 3 when unhealthy).",
        "lklab health --max-staleness 10m --max-watermark-lag 15m",
    )
    _common(health, windows=False)
    health.add_argument("--max-staleness", default="10m", help="no commit for this long while segments wait is a stall (default 10m)")
    health.add_argument("--max-watermark-lag", default="15m", help="watermark lag beyond this is lagging (default 15m)")
    health.add_argument("--json", action="store_true", help="print the check as JSON")
    health.set_defaults(handler=cmd_health)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    handler: Callable[[argparse.Namespace], int] = args.handler
    from shared.locks import LockHeld

    try:
        return handler(args)
    except (UsageError, LockHeld) as err:
        print(f"lklab {args.command}: {err}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print(f"lklab {args.command}: interrupted", file=sys.stderr)
        return FAILURE
    except Exception as err:  # a failure while running: one clear line, details on request
        print(f"lklab {args.command}: failed: {type(err).__name__}: {err}", file=sys.stderr)
        if os.environ.get("LKLAB_DEBUG"):
            raise
        return FAILURE


if __name__ == "__main__":
    sys.exit(main())
