"""``lklab compare`` and ``lklab demo``: the comparison of Lambda and Kappa on a pipeline that
declares its ``Comparison`` (``lklab.pipelines.contract``), and its report under
``<lake>/reports/NAME/``.

The sweep: comma-separated ``--watermark-delay`` and ``--allowed-lateness`` (defaults
``DEFAULT_DELAYS`` and ``DEFAULT_LATENESS``, or the pipeline's ``Comparison.sweep``), and the pipeline's own settings named in its
``Comparison.sweeps`` (``unique_visitors``' ``--state-ttl``: its state sizes only). With
``--scenario`` (``lklab demo`` always, on the default pipeline) the pipeline's ``generate`` job
first writes that scenario over the lake, where its ``Comparison.generates``; elsewhere
``--scenario`` is refused: generate the pipeline's log first with ``lklab generate --pipeline
NAME``. Without it the comparison runs on the lake's log as it is.

The report's first screen recommends a configuration by ``--target-completeness`` and prices
each architecture at ``--events-per-second`` (``lklab.report.decision``). The console shows the
progress and the summary; the inner streams' records per micro-batch go to
``<report>/streams.log`` (and to stderr as well with ``--verbose``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
from pathlib import Path

from lklab.cli.console import UNHEALTHY, UsageError, progress, spark_for
from lklab.cli.options import DEFAULT_DELAYS, DEFAULT_LATENESS, config_from, generate_request, target_completeness
from lklab.cli.pipeline_jobs import announce, app_name
from lklab.cli.stream_output import records_to_file
from lklab.pipelines import DEFAULT, REGISTRY, find
from lklab.pipelines.contract import Pipeline

__all__ = ["compare_pipeline", "compare_config", "cmd_demo"]


def _list(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _sweep(args: argparse.Namespace, defaults: tuple[str, str] | None) -> tuple[str, str]:
    """Take the swept lists off ``args`` so the configuration sees single values only."""
    default_delays, default_lateness = defaults or (DEFAULT_DELAYS, DEFAULT_LATENESS)
    delays, lateness = args.watermark_delay or default_delays, args.allowed_lateness or default_lateness
    args.watermark_delay = args.allowed_lateness = None
    return delays, lateness


def compare_config(args: argparse.Namespace, pipeline: Pipeline | None = None):
    """The settings a comparison runs with: the flags, as the pipeline's ``Comparison.prepare``
    settles them (billing, on the lake's own log: the windows and line settings its batch truth
    and speed layer were built with, where no flag gives them; a contradicting flag is refused,
    exit 2, naming both values)."""
    from lklab.cli.pipelines import selected_pipeline

    pipeline = pipeline or selected_pipeline(args)
    config = config_from(args)
    try:
        return pipeline.compare.prepare(config, getattr(args, "scenario", None))
    except ValueError as err:
        raise UsageError(str(err)) from None


def _regenerate(args: argparse.Namespace, pipeline: Pipeline, config) -> None:
    """Generate the scenario over the lake: over a lake the pipeline finds nothing to lose in, without
    asking; over anything else only with ``--overwrite``."""
    reason = pipeline.compare.generates(config.lake)
    if reason and not args.overwrite:
        raise UsageError(f"{config.lake} {reason}; pass --overwrite to replace it, or choose another --lake")
    request = dataclasses.replace(generate_request(args), overwrite=True)
    try:
        pipeline.jobs().generate(config, request)
    except (ValueError, FileExistsError) as err:
        raise UsageError(str(err)) from None


def _publish(report, directory: Path) -> tuple[str, bool]:
    """A ``PipelineReport``'s files, and what to print: where they are and each configuration's verdict."""
    from lklab.report.pipeline_render import verdict_line, write_pipeline_report

    files = write_pipeline_report(report, directory)
    lines = [f"report: {files.html}", f"summary: {files.summary_json}, {files.summary_md}; plot: {files.error_plot}"]
    lines += [f"  {verdict_line(report, result)}" for result in report.results]
    return "\n".join(lines), any(r.unexplained for r in report.results)


def compare_pipeline(args: argparse.Namespace, pipeline: Pipeline) -> int:
    """Run the comparison of ``pipeline`` (over the scenario ``--scenario`` generates first, or the
    lake's log), write its report, print a digest; exit 3 when a configuration left a difference unexplained."""
    from lklab.comparison_runs import ComparisonPlan
    from shared.catalog import replay_prefix
    from shared.durations import parse_duration

    comparison = pipeline.compare
    scenario = getattr(args, "scenario", None)
    if scenario and comparison.generates is None:
        generating = [p.name for p in REGISTRY.values() if p.compare is not None and p.compare.generates is not None]
        raise UsageError(
            f"--scenario generates a log for {' or '.join(generating)} only; {pipeline.name} is compared on the "
            f"lake's log as it is: write it first with {comparison.writes_log or repr(f'lklab generate --pipeline {pipeline.name}')}"
        )
    sweeps: dict[str, tuple[str, ...]] = {}
    for key in comparison.sweeps:
        dest = key.replace("-", "_")
        values = _list(getattr(args, dest, None) or "")
        if values:
            sweeps[key] = values
            setattr(args, dest, None)
    delays, lateness = _sweep(args, comparison.sweep)
    config = compare_config(args, pipeline)
    target = target_completeness(getattr(args, "target_completeness", "99.5%"))
    rate = getattr(args, "events_per_second", 1_000.0)
    if not rate > 0:
        raise UsageError(f"--events-per-second {rate}: a rate above zero, e.g. 1000")
    if scenario:
        _regenerate(args, pipeline, config)
    name = args.name or dt.datetime.now(dt.UTC).strftime("compare-%Y%m%d-%H%M%S")
    try:
        for key, values in sweeps.items():
            for value in values:
                parse_duration(value, name=key)
        plan = ComparisonPlan(
            name=name,
            watermark_delays=_list(delays),
            allowed_lateness=_list(lateness),
            segments_per_batch=args.segments_per_batch,
            error_step=args.error_step,
            processing_time=comparison.processing_time,
        )
        replay_prefix(name)
        comparison.check(config)
    except ValueError as err:
        raise UsageError(str(err)) from None
    jobs, count = pipeline.jobs(), len(plan.configurations())
    own = f"{pipeline.name}: {count} configurations to run"
    announce(pipeline, jobs, "compare", config, {"name": name, "configurations": count}, own)
    source = scenario or str(Path(config.lake).resolve())
    directory = Path(config.lake) / "reports" / name
    streams_log = directory / "streams.log"
    streams_log.unlink(missing_ok=True)
    rule = pipeline.stream()
    quiet = (
        records_to_file(rule.logger, streams_log, getattr(args, "verbose", False)) if rule else contextlib.nullcontext()
    )
    with quiet, spark_for(config, f"{app_name(pipeline, jobs, 'compare')}-{name}") as spark:
        report = comparison.run(spark, config, plan, sweeps, source, progress)
        curve = _watermark_curve(pipeline, spark, config, plan)
    report = dataclasses.replace(report, target_completeness=target, events_per_second=rate, watermark_curve=curve)
    publish = comparison.publish or _publish
    text, unhealthy = publish(report, directory)
    print(text)
    print(_answer(report, streams_log if streams_log.exists() else None))
    return UNHEALTHY if unhealthy else 0


def _watermark_curve(pipeline: Pipeline, spark, config, plan):
    """The advisor's exact curve at no allowed lateness (Lambda's speed layer, and Kappa without
    lateness), the swept delays on it, for the report's first screen; None for a pipeline the
    advisor does not serve (its check says why, in a progress line)."""
    from lklab.advisor_render import watermark_curve
    from lklab.watermark_advisor import advise
    from shared.durations import parse_duration

    if pipeline.advise is None:
        return None
    try:
        advised = pipeline.advise.prepare(config)
        pipeline.advise.check(advised)
    except ValueError as err:
        progress(f"no watermark curve in the report: {err}")
        return None
    progress("the watermark curve: every delay, exact, from one pass over the log")
    log = pipeline.advise.read(spark, advised, 0, progress)
    advice = advise(log, {delay: parse_duration(delay) for delay in plan.watermark_delays})
    return watermark_curve(advice, "lklab advise: every delay from one pass over the log, allowed lateness 0")


def _answer(report, streams_log: Path | None) -> str:
    """The report's first screen in words: the recommendation and each architecture's cost."""
    from lklab.report.decision import decide

    decision = decide(report)
    lines = [decision.rule, *(f"- {sentence}" for sentence in decision.sentences)]
    if streams_log is not None:
        lines.append(f"the streams' records per micro-batch: {streams_log}")
    return "\n".join(lines)


def cmd_demo(args: argparse.Namespace) -> int:
    """``lklab demo``: generate a scenario and compare over it, on the default pipeline."""
    return compare_pipeline(args, find(DEFAULT))
