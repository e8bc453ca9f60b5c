"""``lklab compare`` and ``lklab demo``: run the comparison of Lambda and Kappa and write its report."""

from __future__ import annotations

import argparse
from pathlib import Path

from lklab.cli.console import UNHEALTHY, UsageError, command_session, progress
from lklab.cli.generate import generate_log
from lklab.cli.options import DEFAULT_DELAYS, DEFAULT_LATENESS, config_from, lake_windows
from shared.config import LabConfig


def cmd_demo(args: argparse.Namespace) -> int:
    sweep = _sweep(args)
    config = config_from(args)
    _regenerate(args, config)
    return _compare(args, config, args.scenario, sweep)


def _regenerate(args: argparse.Namespace, config: LabConfig) -> None:
    """Generate the scenario over the lake: over a lake the lab generated itself and no speed
    layer reads, without asking; over anything else only with ``--overwrite``."""
    from lklab.pipelines.billing_windows.generator import unreplaceable

    reason = unreplaceable(config.lake)
    if reason and not args.overwrite:
        raise UsageError(f"{config.lake} {reason}; pass --overwrite to replace it, or choose another --lake")
    args.overwrite = True
    generate_log(args, config)


def _sweep(args: argparse.Namespace) -> tuple[str, str]:
    """Take the swept lists off ``args`` so the configuration sees single values only."""
    delays, lateness = args.watermark_delay or DEFAULT_DELAYS, args.allowed_lateness or DEFAULT_LATENESS
    args.watermark_delay = args.allowed_lateness = None
    return delays, lateness


def _compare(args: argparse.Namespace, config: LabConfig, source: str, sweep: tuple[str, str]) -> int:
    import datetime as dt

    from lklab.pipelines.billing_windows.comparison import ComparisonPlan, run_comparison
    from lklab.report import write_report

    name = args.name or dt.datetime.now(dt.UTC).strftime("compare-%Y%m%d-%H%M%S")
    try:
        plan = ComparisonPlan(
            name=name,
            watermark_delays=tuple(v.strip() for v in sweep[0].split(",") if v.strip()),
            allowed_lateness=tuple(v.strip() for v in sweep[1].split(",") if v.strip()),
            segments_per_batch=args.segments_per_batch,
            error_step=args.error_step,
        )
        from shared.catalog import replay_prefix

        replay_prefix(name)
    except ValueError as err:
        raise UsageError(str(err)) from None
    progress(f"starting Spark ({config.spark_master}); {len(plan.configurations())} configurations to run")
    spark, stop_spark = command_session(config, f"lklab-compare-{name}")
    try:
        report = run_comparison(spark, config, plan, source=source, progress=progress)
    finally:
        stop_spark()
    files = write_report(report, Path(config.lake) / "reports" / name)
    print(f"report: {files.html}")
    print(f"summary: {files.summary_json}, {files.summary_md}; audit: {files.audit_csv}")
    from lklab.report import formats

    for result in report.results:
        end, latency, late, recon = result.end, result.latency, result.late, result.reconciliation
        final = "never" if latency.final_p50 is None else formats.seconds(latency.final_p50)
        line = (
            f"  {result.configuration.label}: {end.windows_exact:,}/{end.windows_compared:,} windows exact at the end; "
            f"time until final, median {final}"
        )
        if late is not None:
            line += f"; side output {late.side_output_events:,}, absorbed {late.absorbed_events:,}"
        if recon is not None:
            line += f"; unexplained {recon.unexplained_windows}"
        print(line)
    unexplained = [r for r in report.results if r.reconciliation and not r.reconciliation.explained]
    return UNHEALTHY if unexplained else 0


def compare_config(args: argparse.Namespace) -> LabConfig:
    """The settings a comparison runs with. On the lake's own log, the windows and line
    settings its batch truth and speed layer were built with, where no flag is given (the
    comparison recomputes ``batch_truth``; a contradicting flag is refused, exit 2, naming both
    values); with ``--scenario`` the lake is generated anew and the flags alone count."""
    config = config_from(args)
    return config if args.scenario else lake_windows(config, "a comparison recomputes its batch truth")


def cmd_compare(args: argparse.Namespace) -> int:
    sweep = _sweep(args)
    config = compare_config(args)
    if args.scenario:
        _regenerate(args, config)
        return _compare(args, config, args.scenario, sweep)
    return _compare(args, config, str(Path(config.lake).resolve()), sweep)
