"""The ``order_payments`` pipeline's commands (``lklab COMMAND --pipeline order_payments``).

generate: an order/payment log (``lklab.pipelines.order_payments.generator``); speed and replay: the stream,
live and as a Kappa replay (``lklab.pipelines.order_payments.stream``, with the join bound, watermark delay and
allowed lateness); batch: the truth (``lklab.pipelines.order_payments.batch``) checked against the generator's
oracle; reconcile: a stream against the truth and the finance audit (``lklab.pipelines.order_payments.reconcile``),
exit 3 when a difference is unexplained. ``compare`` is ``lklab.cli.pipeline_compare``.
"""

from __future__ import annotations

import argparse

from lklab.cli.console import FAILURE, UsageError, progress, spark_for, unexplained
from lklab.cli.options import config_from
from lklab.cli.stream_options import replay_name, stream_stop
from shared.durations import parse_duration

__all__ = ["COMMANDS", "cmd_generate", "cmd_speed", "cmd_batch", "cmd_replay", "cmd_reconcile"]


def _join_settings(config) -> str:
    """The settings the join's rows depend on, as the progress lines name them."""
    settings = config.describe()
    return (
        f"join bound {settings['join-bound']}, watermark delay {settings['watermark-delay']}, "
        f"allowed lateness {settings['allowed-lateness']}"
    )


def cmd_generate(args: argparse.Namespace) -> int:
    import shutil

    from lklab.pipelines.order_payments.generator import (
        OrderPaymentParams,
        generate_order_payments,
    )
    from shared.locks import whole_lake

    config = config_from(args)
    try:
        params = OrderPaymentParams(
            orders=args.events,
            seed=args.seed,
            span=parse_duration(args.span, name="span"),
            segment_interval=parse_duration(args.segment_interval, name="segment-interval"),
            retry_rate=args.duplicate_rate,
            malformed_rate=args.malformed_rate,
        )
        if args.overwrite:
            with whole_lake(config.lake):
                for part in ("log", "tables", "generator", "checkpoints", "reports"):
                    shutil.rmtree(config.lake / part, ignore_errors=True)
        manifest = generate_order_payments(params, config.lake).manifest
    except (ValueError, FileExistsError) as err:
        raise UsageError(str(err)) from None
    print(
        f"{manifest['orders']:,} orders, {manifest['payments']:,} payments, {manifest['retries']:,} retries, "
        f"{sum(manifest['dead_letters'].values()):,} malformed lines: {manifest['lines']:,} lines in "
        f"{manifest['segments']:,} segments -> {config.lake / 'log'}"
    )
    return 0


def cmd_speed(args: argparse.Namespace) -> int:
    from lklab.pipelines.order_payments.stream import run_payments_speed
    from lklab.pipelines.order_payments.tables import PAYMENTS_STREAM_METRICS

    config = config_from(args)
    stop = stream_stop(args)
    progress(f"order_payments stream on {config.lake / 'log'}: {_join_settings(config)}")
    with spark_for(config, "lklab-payments-speed") as spark:
        stream = run_payments_speed(
            spark, config, available_now=args.available_now, segments_per_batch=args.segments_per_batch, stop=stop
        )
        metrics = stream.tables.read_arrow(stream.table(PAYMENTS_STREAM_METRICS))
    total = {name: sum(metrics[name].to_pylist()) for name in metrics.column_names if name in _TOTALS}
    print(
        f"{metrics.num_rows} micro-batches: {total['input_lines']:,} lines = {total['on_time']:,} on time + {total['late']:,} late + "
        f"{total['duplicates']:,} duplicates + {total['dead_letters']:,} dead letters + {total['heartbeats']:,} heartbeats; "
        f"{total['matched']:,} matched, {total['unpaid']:,} unpaid, {total['orphans']:,} orphans"
    )
    return 0


_TOTALS = ("input_lines", "on_time", "late", "duplicates", "dead_letters", "heartbeats", "matched", "unpaid", "orphans")


def cmd_batch(args: argparse.Namespace) -> int:
    from lklab.pipelines.order_payments.batch import run_payments_batch
    from lklab.pipelines.order_payments.generator import load_order_payments
    from lklab.pipelines.order_payments.truth import join_truth

    config = config_from(args)
    with spark_for(config, "lklab-payments-batch") as spark:
        run = run_payments_batch(spark, config)
    print(
        f"segments 1..{run.last_segment}: {run.lines:,} lines = {run.orders:,} orders + {run.payments:,} payments + "
        f"{run.duplicates:,} duplicates + {run.dead_letters:,} dead letters + {run.heartbeats:,} heartbeats "
        f"({'conserved' if run.conserved else 'NOT CONSERVED'}); {run.matched:,} matched, {run.unpaid:,} unpaid, {run.orphans:,} orphans"
    )
    generated = load_order_payments(config.lake)
    agrees = None
    if generated is not None:
        oracle = join_truth(generated, config.join_bound)
        agrees = (len(oracle.matched), len(oracle.unpaid), len(oracle.orphans)) == (
            run.matched,
            run.unpaid,
            run.orphans,
        )
        print(
            f"generator's oracle: {len(oracle.matched):,} matched, {len(oracle.unpaid):,} unpaid, {len(oracle.orphans):,} orphans "
            f"({'agrees' if agrees else 'DIFFERS'})"
        )
    return 0 if run.conserved and agrees is not False else FAILURE


def cmd_replay(args: argparse.Namespace) -> int:
    from lklab.pipelines.order_payments.stream import PaymentsReplayExists, run_payments_replay

    config = config_from(args)
    prefix = replay_name(args)
    progress(f"order_payments replay '{args.name}': {_join_settings(config)}")
    with spark_for(config, f"lklab-payments-replay-{args.name}", PaymentsReplayExists) as spark:
        run = run_payments_replay(spark, config, args.name, replace=args.replace)
    print(
        f"replay {run.name}: {run.lines:,} lines over {run.segments:,} segments in {run.wall_seconds:.1f} s; "
        f"tables {prefix}payments_*"
    )
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from lklab.pipelines.order_payments.reconcile import PaymentsInputError, reconcile_payments, render_text
    from shared.catalog import StreamChoiceError

    config = config_from(args)
    with spark_for(config, "lklab-payments-reconcile", PaymentsInputError, StreamChoiceError, ValueError) as spark:
        found = reconcile_payments(spark, config, against=args.against)
    print(render_text(found))
    return unexplained(found.result.unexplained)


COMMANDS = {
    "generate": cmd_generate,
    "speed": cmd_speed,
    "batch": cmd_batch,
    "replay": cmd_replay,
    "reconcile": cmd_reconcile,
}
