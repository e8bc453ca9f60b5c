"""``lklab compare --pipeline NAME`` for a pipeline that declares its ``Comparison``
(``lklab.pipelines.contract``), and its report under ``<lake>/reports/NAME/``.

The sweep is read as billing's (``lklab.cli.compare``: comma-separated ``--watermark-delay`` and
``--allowed-lateness``, the same defaults); a pipeline's own settings named in its
``Comparison.sweeps`` are swept too (``unique_visitors``' ``--state-ttl``: its state sizes only). ``--scenario`` is refused: generate the pipeline's log first with ``lklab
generate --pipeline NAME``.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from lklab.cli.compare import _sweep
from lklab.cli.console import UNHEALTHY, UsageError, progress, spark_for
from lklab.cli.options import config_from
from lklab.pipelines.contract import Pipeline

__all__ = ["compare_pipeline"]


def _list(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def compare_pipeline(args: argparse.Namespace, pipeline: Pipeline) -> int:
    """Run the comparison of ``pipeline`` over the lake's log, write its report, print a digest."""
    from lklab.comparison_runs import ComparisonPlan
    from shared.catalog import replay_prefix
    from shared.durations import parse_duration

    comparison = pipeline.compare
    if getattr(args, "scenario", None):
        raise UsageError(
            f"--scenario generates a billing log; for {pipeline.name} run 'lklab generate --pipeline {pipeline.name}' "
            "first, then compare"
        )
    sweeps: dict[str, tuple[str, ...]] = {}
    for key in comparison.sweeps:
        dest = key.replace("-", "_")
        values = _list(getattr(args, dest, None) or "")
        if values:
            sweeps[key] = values
            setattr(args, dest, None)
    delays, lateness = _sweep(args)
    config = config_from(args)
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
            processing_time=False,
        )
        replay_prefix(name)
        comparison.check(config)
    except ValueError as err:
        raise UsageError(str(err)) from None
    progress(f"{pipeline.name}: {len(plan.configurations())} configurations to run")
    with spark_for(config, f"lklab-compare-{pipeline.name}-{name}") as spark:
        report = comparison.run(spark, config, plan, sweeps, str(Path(config.lake).resolve()), progress)
    from lklab.report.pipeline_render import verdict_line, write_pipeline_report

    files = write_pipeline_report(report, Path(config.lake) / "reports" / name)
    print(f"report: {files.html}")
    print(f"summary: {files.summary_json}, {files.summary_md}; plot: {files.error_plot}")
    for result in report.results:
        print(f"  {verdict_line(report, result)}")
    return UNHEALTHY if any(r.unexplained for r in report.results) else 0
