"""The commands of a pipeline that declares its ``Jobs`` (``lklab.pipelines.contract``): one
handler per command, for every such pipeline.

Each handler reads the flags into the configuration (``config_from``), lets the pipeline refuse
a configuration it cannot serve (``Jobs.check``: exit 2), opens the command's Spark session,
runs the job and prints what it reports; the exit code follows the ``Outcome``: 1 when it
``failed``, 3 when a difference is ``unexplained`` (after the verdict line an orchestrator
quotes), 0 otherwise. The errors the pipeline names in ``Jobs.refused`` are bad input (exit 2).
"""

from __future__ import annotations

import argparse

from lklab.cli.console import FAILURE, UsageError, progress, spark_for, unexplained
from lklab.cli.options import config_from, generate_request
from lklab.cli.stream_options import replay_name, stream_stop
from lklab.pipelines.contract import Handler, Jobs, Outcome, Pipeline

__all__ = ["handler_for"]


def _config(args: argparse.Namespace, jobs: Jobs):
    config = config_from(args)
    try:
        jobs.check(config)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return config


def _exit(outcome: Outcome) -> int:
    print(outcome.text)
    if outcome.failed:
        return FAILURE
    return unexplained(outcome.unexplained, outcome.why)


def _generate(args: argparse.Namespace, pipeline: Pipeline, jobs: Jobs) -> int:
    config, request = config_from(args), generate_request(args)
    try:
        print(jobs.generate(config, request))
    except (ValueError, FileExistsError) as err:
        raise UsageError(str(err)) from None
    return 0


def _speed(args: argparse.Namespace, pipeline: Pipeline, jobs: Jobs) -> int:
    config = _config(args, jobs)
    stop = stream_stop(args)
    described = jobs.describe(config)
    progress(f"{pipeline.name} stream on {config.lake / 'log'}" + (f": {described}" if described else ""))
    with spark_for(config, f"lklab-{pipeline.name}-speed", *jobs.refused) as spark:
        outcome = jobs.speed(
            spark, config, available_now=args.available_now, segments_per_batch=args.segments_per_batch, stop=stop
        )
    return _exit(outcome)


def _batch(args: argparse.Namespace, pipeline: Pipeline, jobs: Jobs) -> int:
    config = _config(args, jobs)
    with spark_for(config, f"lklab-{pipeline.name}-batch", *jobs.refused) as spark:
        outcome = jobs.batch(spark, config)
    return _exit(outcome)


def _replay(args: argparse.Namespace, pipeline: Pipeline, jobs: Jobs) -> int:
    config = _config(args, jobs)
    replay_name(args)
    described = jobs.describe(config)
    progress(f"{pipeline.name} replay '{args.name}'" + (f": {described}" if described else ""))
    with spark_for(config, f"lklab-{pipeline.name}-replay-{args.name}", *jobs.refused) as spark:
        outcome = jobs.replay(spark, config, args.name, replace=args.replace)
    return _exit(outcome)


def _reconcile(args: argparse.Namespace, pipeline: Pipeline, jobs: Jobs) -> int:
    from shared.catalog import StreamChoiceError, stream_prefix

    config = _config(args, jobs)
    try:
        stream_prefix(args.against)
    except (StreamChoiceError, ValueError) as err:
        raise UsageError(str(err)) from None
    with spark_for(config, f"lklab-{pipeline.name}-reconcile", *jobs.refused) as spark:
        outcome = jobs.reconcile(spark, config, args.against)
    return _exit(outcome)


_HANDLERS = {"generate": _generate, "speed": _speed, "batch": _batch, "replay": _replay, "reconcile": _reconcile}


def handler_for(pipeline: Pipeline, command: str) -> Handler | None:
    """The handler of ``command`` for ``pipeline`` (None: it declares no such job)."""
    jobs = pipeline.jobs()
    if command not in _HANDLERS or getattr(jobs, command) is None:
        return None
    run = _HANDLERS[command]

    def handler(args: argparse.Namespace) -> int:
        return run(args, pipeline, jobs)

    handler.__qualname__ = handler.__name__ = f"{pipeline.name}_{command}"
    return handler
