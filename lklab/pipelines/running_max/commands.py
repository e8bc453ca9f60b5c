"""The ``running_max`` pipeline's command handlers (``lklab COMMAND --pipeline running_max``).

Each is a few lines over a runner that knows no pipeline: ``speed`` and ``replay`` run the
stream rule (``stream.MAX_RULE``) through ``lklab.live_stream`` and ``lklab.replay_runner``,
``batch`` runs the truth rule through ``lklab.truth_runner``, ``reconcile`` diffs the two with
``reconciliation.keyed_diff``.
"""

from __future__ import annotations

import argparse

from lklab.cli.console import FAILURE, UsageError, spark_for, unexplained
from lklab.cli.options import config_from
from lklab.cli.stream_options import replay_name, stream_stop

__all__ = ["COMMANDS"]

_COUNTS = ("input_lines", "readings", "duplicates", "dead_letters", "heartbeats")


def _conservation(figures: dict) -> str:
    lines, parts = figures["lines"], [figures[k] for k in ("readings", "duplicates", "dead_letters", "heartbeats")]
    kept = "conserved" if lines == sum(parts) else "NOT CONSERVED"
    return (
        f"{lines:,} lines = {parts[0]:,} readings + {parts[1]:,} duplicates + {parts[2]:,} dead letters + "
        f"{parts[3]:,} heartbeats ({kept})"
    )


def cmd_generate(args: argparse.Namespace) -> int:
    from lklab.pipelines.running_max.generator import ReadingParams, generate_readings
    from shared.durations import parse_duration

    config = config_from(args)
    try:
        params = ReadingParams(
            readings=args.events,
            keys=args.accounts,
            seed=args.seed,
            segment_interval=parse_duration(args.segment_interval, name="segment-interval"),
            duplicate_rate=args.duplicate_rate,
            malformed_rate=args.malformed_rate,
        )
        made = generate_readings(params, config.lake, overwrite=args.overwrite)
    except (ValueError, FileExistsError) as err:
        raise UsageError(str(err)) from None
    print(
        f"{made['readings']:,} readings, {made['duplicates']:,} resends, {made['malformed']:,} malformed lines: "
        f"{made['lines']:,} lines in {made['segments']:,} segments -> {config.lake / 'log'}"
    )
    return 0


def _stream_summary(stream) -> str:
    from lklab.pipelines.running_max.tables import MAX_STREAM, MAX_STREAM_METRICS

    metrics = stream.tables.read_arrow(stream.table(MAX_STREAM_METRICS))
    totals = {name: sum(metrics[name].to_pylist()) for name in _COUNTS}
    figures = {**totals, "lines": totals["input_lines"]}
    keys = stream.tables.read_arrow(stream.table(MAX_STREAM)).num_rows
    return f"{metrics.num_rows} micro-batches: {_conservation(figures)}; {keys:,} keys in {stream.table(MAX_STREAM)}"


def cmd_speed(args: argparse.Namespace) -> int:
    from lklab.live_stream import run_live
    from lklab.pipelines.running_max.stream import MAX_RULE

    config = config_from(args)
    stop = stream_stop(args)
    with spark_for(config, "lklab-max-speed") as spark:
        stream = run_live(
            spark,
            config,
            MAX_RULE,
            available_now=args.available_now,
            segments_per_batch=args.segments_per_batch,
            stop=stop,
        )
        print(_stream_summary(stream))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from lklab.kappa_replay import ReplayExists
    from lklab.pipelines.running_max.stream import MAX_RULE
    from lklab.replay_runner import replay_live

    config = config_from(args)
    replay_name(args)
    with spark_for(config, f"lklab-max-replay-{args.name}", ReplayExists) as spark:
        stream = replay_live(spark, config, MAX_RULE, args.name, replace=args.replace)
        print(f"replay {args.name}: {_stream_summary(stream)}")
    return 0


def cmd_batch(args: argparse.Namespace) -> int:
    from lklab.pipelines.running_max.tables import MAX_TRUTH
    from lklab.pipelines.running_max.truth import MAX_TRUTH_RULE
    from lklab.truth_runner import run_truth

    config = config_from(args)
    with spark_for(config, "lklab-max-batch") as spark:
        run = run_truth(spark, config, MAX_TRUTH_RULE)
    line = _conservation(dict(run.figures))
    print(f"{MAX_TRUTH.name}: from segments 1..{run.last_segment}; {line}; {run.wall_seconds:.1f} s wall")
    return 0 if "(conserved)" in line else FAILURE


def cmd_reconcile(args: argparse.Namespace) -> int:
    from lklab.pipelines.running_max.reconcile import reconcile_max, render_text
    from shared.catalog import StreamChoiceError, stream_prefix

    config = config_from(args)
    try:
        stream_prefix(args.against)
    except (StreamChoiceError, ValueError) as err:
        raise UsageError(str(err)) from None
    with spark_for(config, "lklab-max-reconcile") as spark:
        result = reconcile_max(spark, config, args.against)
    print(render_text(result))
    return unexplained(len(result.unexplained), "a key whose maximum differs with no unread reading of it")


COMMANDS = {
    "generate": cmd_generate,
    "speed": cmd_speed,
    "batch": cmd_batch,
    "replay": cmd_replay,
    "reconcile": cmd_reconcile,
}
