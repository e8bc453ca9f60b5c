"""The ``unique_visitors`` pipeline's commands (``lklab COMMAND --pipeline unique_visitors``).

generate: a page-view log (``lklab.pipelines.unique_visitors.generator``; ``--accounts`` is the number of
users); speed: the stream (``lklab.pipelines.unique_visitors.speed``); batch: the truth
(``lklab.pipelines.unique_visitors.batch``); replay: a Kappa replay (``lklab.pipelines.unique_visitors.replay``); reconcile: a
stream against the truth (``lklab.pipelines.unique_visitors.reconcile``), exit 3 when a difference is
unexplained. ``compare`` is ``lklab.cli.pipeline_compare``.
"""

from __future__ import annotations

import argparse

from lklab.cli.console import FAILURE, UsageError, progress, spark_for, unexplained
from lklab.cli.options import config_from
from lklab.cli.stream_options import replay_name, stream_stop

__all__ = ["COMMANDS", "cmd_generate", "cmd_speed", "cmd_batch", "cmd_replay", "cmd_reconcile"]


def _config(args: argparse.Namespace):
    """The configuration, refused unless its windows are tumbling or sliding."""
    from lklab.pipelines.unique_visitors.rule import require_fixed

    config = config_from(args)
    try:
        require_fixed(config.window)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return config


def cmd_generate(args: argparse.Namespace) -> int:
    from lklab.pipelines.unique_visitors.generator import PageViewParams, generate_page_views
    from shared.durations import parse_duration

    config = config_from(args)
    try:
        params = PageViewParams(
            scenario=args.scenario,
            views=args.events,
            seed=args.seed,
            span=parse_duration(args.span, name="span"),
            users=args.accounts,
            duplicate_rate=args.duplicate_rate,
            malformed_rate=args.malformed_rate,
            segment_interval=parse_duration(args.segment_interval, name="segment-interval"),
        )
        manifest = generate_page_views(params, config.lake, overwrite=args.overwrite)
    except (ValueError, FileExistsError) as err:
        raise UsageError(str(err)) from None
    print(
        f"{manifest['views']:,} page views, {manifest['duplicates']:,} resends, {sum(manifest['dead_letters'].values()):,} "
        f"malformed lines: {manifest['lines']:,} lines in {manifest['segments']:,} segments -> {config.lake / 'log'}"
    )
    return 0


def cmd_speed(args: argparse.Namespace) -> int:
    from lklab.pipelines.unique_visitors.speed import run_visitors_speed
    from lklab.pipelines.unique_visitors.tables import VISITORS_SEEN, VISITORS_STREAM_METRICS
    from shared.eventlog import format_timestamp

    config = _config(args)
    stop = stream_stop(args)
    progress(
        f"unique_visitors speed layer on {config.lake / 'log'}: {config.window.describe()} windows, "
        f"state TTL {config.describe()['state-ttl']}"
    )
    with spark_for(config, "lklab-visitors-speed") as spark:
        layer = run_visitors_speed(
            spark, config, available_now=args.available_now, segments_per_batch=args.segments_per_batch, stop=stop
        )
        metrics = layer.sink.tables.read_arrow(layer.sink.name(VISITORS_STREAM_METRICS)).sort_by("batch_id")
        seen = layer.sink.tables.read_arrow(layer.sink.name(VISITORS_SEEN))
    totals = {
        name: sum(metrics[name].to_pylist())
        for name in ("input_lines", "views", "duplicates", "dead_letters", "new_urls", "late_pairs")
    }
    print(
        f"{metrics.num_rows} micro-batches: {totals['input_lines']:,} lines = {totals['views']:,} views + {totals['duplicates']:,} "
        f"duplicates + {totals['dead_letters']:,} dead letters (+ heartbeats); {totals['new_urls']:,} URLs counted, "
        f"{totals['late_pairs']:,} late (side output)"
    )
    if metrics.num_rows:
        as_of = format_timestamp(seen["as_of"][0].as_py()) if seen.num_rows else "-"
        print(
            f"{VISITORS_SEEN.name}: {seen.num_rows:,} URLs seen by {len(set(seen['user_id'].to_pylist())):,} users within the state TTL "
            f"{config.describe()['state-ttl']}, as of {as_of}; state: {metrics['state_entries'][-1].as_py():,} member entries"
        )
    return 0


def cmd_batch(args: argparse.Namespace) -> int:
    from lklab.pipelines.unique_visitors.batch import run_visitors_batch
    from lklab.pipelines.unique_visitors.tables import VISITORS_TRUTH

    config = _config(args)
    with spark_for(config, "lklab-visitors-batch") as spark:
        run = run_visitors_batch(spark, config)
    print(
        f"{VISITORS_TRUTH.name}: {run.windows:,} (window, user) rows, {run.members:,} members, from segments 1..{run.last_segment}\n"
        f"{run.lines:,} lines = {run.views:,} views + {run.duplicates:,} duplicates + {run.dead_letters:,} dead letters + "
        f"{run.heartbeats:,} heartbeats ({'conserved' if run.conserved else 'NOT CONSERVED'}); {run.wall_seconds:.1f} s wall"
    )
    return 0 if run.conserved else FAILURE


def cmd_replay(args: argparse.Namespace) -> int:
    from lklab.pipelines.unique_visitors.replay import ReplayExists, run_visitors_replay
    from shared.catalog import tables_root

    config = _config(args)
    prefix = replay_name(args)
    with spark_for(config, f"lklab-visitors-replay-{args.name}", ReplayExists) as spark:
        run = run_visitors_replay(spark, config, args.name, replace=args.replace)
    print(
        f"replay {run.name}: {run.lines:,} lines over {run.segments:,} segments in one step; {run.wall_seconds:.1f} s wall, "
        f"{run.cpu_seconds:.1f} CPU seconds ({run.cost_scope}); tables under {tables_root(config.lake) / prefix}"
    )
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from lklab.pipelines.unique_visitors.reconcile import VisitorsReconcileInputError, reconcile_visitors, render_text
    from shared.catalog import StreamChoiceError, stream_prefix

    config = _config(args)
    try:
        stream_prefix(args.against)
    except (StreamChoiceError, ValueError) as err:
        raise UsageError(str(err)) from None
    with spark_for(config, "lklab-visitors-reconcile", VisitorsReconcileInputError) as spark:
        reconciled = reconcile_visitors(spark, config, against=args.against)
    print(render_text(reconciled))
    return unexplained(
        reconciled.result.reasons().get("unexplained", 0),
        "a URL in the stream's or the truth's members only, no side output explaining it",
    )


COMMANDS = {
    "generate": cmd_generate,
    "speed": cmd_speed,
    "batch": cmd_batch,
    "replay": cmd_replay,
    "reconcile": cmd_reconcile,
}
