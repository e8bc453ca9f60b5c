"""``lklab compare --pipeline unique_visitors|order_payments``: the comparison of a pipeline other
than billing, and its report under ``<lake>/reports/NAME/``.

The sweep is read as billing's (``lklab.cli.compare``: comma-separated ``--watermark-delay`` and
``--allowed-lateness``, the same defaults); ``unique_visitors`` also sweeps ``--state-ttl`` (its
state sizes only). ``--scenario`` is refused: generate the pipeline's log first with ``lklab
generate --pipeline NAME``.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from lklab.cli.compare import _sweep
from lklab.cli.console import UNHEALTHY, UsageError, progress, spark_for
from lklab.cli.options import config_from

__all__ = ["compare_pipeline"]


def _list(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def compare_pipeline(args: argparse.Namespace, pipeline: str) -> int:
    """Run the comparison of ``pipeline`` over the lake's log, write its report, print a digest."""
    from lklab.experiment import ComparisonPlan
    from shared.catalog import replay_prefix
    from shared.distinct_urls import require_fixed
    from shared.durations import parse_duration

    if getattr(args, "scenario", None):
        raise UsageError(
            f"--scenario generates a billing log; for {pipeline} run 'lklab generate --pipeline {pipeline}' first, "
            "then compare"
        )
    ttls = _list(args.state_ttl) if pipeline == "unique_visitors" and getattr(args, "state_ttl", None) else ()
    if ttls:
        args.state_ttl = None
    delays, lateness = _sweep(args)
    config = config_from(args)
    name = args.name or dt.datetime.now(dt.UTC).strftime("compare-%Y%m%d-%H%M%S")
    try:
        for ttl in ttls:
            parse_duration(ttl, name="state-ttl")
        plan = ComparisonPlan(
            name=name,
            watermark_delays=_list(delays),
            allowed_lateness=_list(lateness),
            segments_per_batch=args.segments_per_batch,
            error_step=args.error_step,
            processing_time=False,
        )
        replay_prefix(name)
        if pipeline == "unique_visitors":
            require_fixed(config.window)
    except ValueError as err:
        raise UsageError(str(err)) from None
    progress(f"{pipeline}: {len(plan.configurations())} configurations to run")
    with spark_for(config, f"lklab-compare-{pipeline}-{name}") as spark:
        if pipeline == "unique_visitors":
            from lklab.visitors_comparison import run_visitors_comparison

            report = run_visitors_comparison(
                spark, config, plan, state_ttls=ttls, source=str(Path(config.lake).resolve()), progress=progress
            )
        else:
            from lklab.payments_comparison import run_payments_comparison

            report = run_payments_comparison(
                spark, config, plan, source=str(Path(config.lake).resolve()), progress=progress
            )
    from lklab.report.pipeline_render import verdict_line, write_pipeline_report

    files = write_pipeline_report(report, Path(config.lake) / "reports" / name)
    print(f"report: {files.html}")
    print(f"summary: {files.summary_json}, {files.summary_md}; plot: {files.error_plot}")
    for result in report.results:
        print(f"  {verdict_line(report, result)}")
    return UNHEALTHY if any(r.unexplained for r in report.results) else 0
