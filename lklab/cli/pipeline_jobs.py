"""The commands of every pipeline (``lklab.pipelines.contract``): one handler per command,
``generate``, ``speed``, ``batch``, ``replay`` and ``reconcile``, whichever pipeline runs them
(``compare``: ``lklab.cli.compare``).

Each handler reads the flags into the configuration (``config_from``), lets the pipeline refuse
a configuration it cannot serve (``Jobs.check``: exit 2), checks the command's own flags, reads
the flags the pipeline's job takes (``Jobs.takes``), lets the pipeline settle the configuration
before Spark starts (``Jobs.prepare``: exit 2 on bad input), prints the command's progress line
(``Jobs.announce``, or the command line's own), opens the command's Spark session, runs the job
and prints what it reports; the exit code follows the ``Outcome``: 1 when it ``failed``, 3 when
a difference is ``unexplained`` or a verdict is given (after the verdict lines an orchestrator
quotes), 0 otherwise. A batch or a replay of an empty log is refused before Spark starts. The
runners' refusals (a replay name taken, a reconcile's input missing, an unknown stream) and the
errors the pipeline names in ``Jobs.refused`` are bad input (exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from lklab.cli.console import FAILURE, UNHEALTHY, UsageError, progress, spark_for, unexplained
from lklab.cli.options import config_from, days_from, generate_request
from lklab.cli.stream_options import replay_name, stream_stop
from lklab.cli.stream_output import stream_output
from lklab.pipelines.contract import Handler, Jobs, Outcome, Pipeline
from shared.eventlog import EventLog

__all__ = ["handler_for", "app_name", "announce", "ONE_JOB_COMMANDS"]


def _refused(jobs: Jobs) -> tuple[type[Exception], ...]:
    """The errors that are bad input (exit 2): the runners' own, then the pipeline's."""
    from lklab.replay_runner import ReplayExists
    from reconciliation.reconcile import ReconcileInputError
    from shared.catalog import StreamChoiceError

    return (ReplayExists, ReconcileInputError, StreamChoiceError, *jobs.refused)


def _config(args: argparse.Namespace, jobs: Jobs):
    config = config_from(args)
    try:
        jobs.check(config)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return config


def _taken(args: argparse.Namespace, jobs: Jobs) -> dict[str, Any]:
    """The flags of ``args.command`` the pipeline's job takes (``Jobs.takes``), by the name it takes them as."""
    options: dict[str, Any] = {}
    for key in jobs.takes:
        if key == "days":
            if hasattr(args, "date"):
                options["days"] = days_from(args)
        elif hasattr(args, key):
            options[key] = getattr(args, key)
    return options


# The commands that run one job and exit, whose driver JVM stops at C1 (``shared.jvm_compilers``):
# True where the job's work grows with the log (then only while the log is small). ``lklab.spark_task``
# chooses so for the DAG tasks that run them (``spark_jobs/<command>_job.py``).
ONE_JOB_COMMANDS = {"batch": True, "replay": True, "reconcile": False}


def _require_log(pipeline: Pipeline, config, what: str) -> None:
    """Bad input (exit 2), said before Spark starts: a batch or a replay of a lake whose log holds
    no segment. (The runners refuse it too, for the callers that hold a session already.)"""
    from lklab.commands import command_line
    from shared.eventlog import written_log

    try:
        written_log(config.lake, f"{what} (run '{command_line(pipeline.name, 'generate')}' first)")
    except ValueError as err:
        raise UsageError(str(err)) from None


def _prepare(command: str, jobs: Jobs, config, options: dict[str, Any]):
    try:
        return jobs.prepare(command, config, options)
    except ValueError as err:
        raise UsageError(str(err)) from None


def app_name(pipeline: Pipeline, jobs: Jobs, command: str) -> str:
    """The name of the Spark application ``command`` runs on ``pipeline`` (``Jobs.app``)."""
    return f"{jobs.app or f'lklab-{pipeline.name}'}-{command}"


def announce(pipeline: Pipeline, jobs: Jobs, command: str, config, options: dict[str, Any], own: str | None) -> None:
    """The progress line ``command`` starts with: the pipeline's (``Jobs.announce``), else ``own``."""
    line = jobs.announce(command, config, options) if jobs.announce is not None else own
    if line:
        progress(line)


def _described(pipeline: Pipeline, jobs: Jobs, config, heading: str) -> str:
    described = jobs.describe(config)
    return f"{pipeline.name} {heading}" + (f": {described}" if described else "")


def _exit(command: str, outcome: Outcome) -> int:
    if outcome.text:
        print(outcome.text)
    if outcome.failed:
        return FAILURE
    for verdict in outcome.verdicts:
        print(f"lklab {command}: {verdict}", file=sys.stderr)
    if outcome.verdicts:
        return UNHEALTHY
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
    rule = pipeline.stream()
    options = {"available_now": args.available_now, "segments_per_batch": args.segments_per_batch, "stop": stop}
    options.update(_taken(args, jobs))
    config = _prepare("speed", jobs, config, options)
    announce(
        pipeline, jobs, "speed", config, options, _described(pipeline, jobs, config, f"stream on {config.lake / 'log'}")
    )
    log_format = args.log_format or ("text" if sys.stderr.isatty() else "json")
    segments = EventLog(config.lake).last_segment() if args.available_now else None
    shown = stream_output(rule.logger, log_format, args.quiet, segments) if rule else contextlib.nullcontext()
    with shown, spark_for(config, app_name(pipeline, jobs, "speed"), *_refused(jobs)) as spark:
        outcome = jobs.speed(spark, config, **options)
    return _exit("speed", outcome)


def _batch(args: argparse.Namespace, pipeline: Pipeline, jobs: Jobs) -> int:
    config = _config(args, jobs)
    options = _taken(args, jobs)
    config = _prepare("batch", jobs, config, options)
    _require_log(pipeline, config, "no batch to run")
    announce(pipeline, jobs, "batch", config, options, None)
    with spark_for(
        config, app_name(pipeline, jobs, "batch"), *_refused(jobs), one_job=True, log_bound=ONE_JOB_COMMANDS["batch"]
    ) as spark:
        outcome = jobs.batch(spark, config, **options)
    return _exit("batch", outcome)


def _replay(args: argparse.Namespace, pipeline: Pipeline, jobs: Jobs) -> int:
    config = _config(args, jobs)
    replay_name(args)
    options = {"replace": args.replace, **_taken(args, jobs)}
    config = _prepare("replay", jobs, config, {"name": args.name, **options})
    _require_log(pipeline, config, "nothing to replay")
    announce(
        pipeline,
        jobs,
        "replay",
        config,
        {"name": args.name, **options},
        _described(pipeline, jobs, config, f"replay '{args.name}'"),
    )
    with spark_for(
        config,
        f"{app_name(pipeline, jobs, 'replay')}-{args.name}",
        *_refused(jobs),
        one_job=True,
        log_bound=ONE_JOB_COMMANDS["replay"],
    ) as spark:
        outcome = jobs.replay(spark, config, args.name, **options)
    return _exit("replay", outcome)


def _reconcile(args: argparse.Namespace, pipeline: Pipeline, jobs: Jobs) -> int:
    from shared.catalog import StreamChoiceError, stream_prefix

    config = _config(args, jobs)
    options = _taken(args, jobs)
    try:
        stream_prefix(args.against)
    except (StreamChoiceError, ValueError) as err:
        raise UsageError(str(err)) from None
    config = _prepare("reconcile", jobs, config, {"against": args.against, **options})
    announce(pipeline, jobs, "reconcile", config, {"against": args.against, **options}, None)
    with spark_for(
        config,
        app_name(pipeline, jobs, "reconcile"),
        *_refused(jobs),
        one_job=True,
        log_bound=ONE_JOB_COMMANDS["reconcile"],
    ) as spark:
        outcome = jobs.reconcile(spark, config, args.against, **options)
    return _exit("reconcile", outcome)


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
