"""``lklab advise``: the watermark delay's whole trade-off on the lake's log, exact, and the delay to choose.

The pipeline selected reads its log for the advisor (its ``Advising``,
``lklab.pipelines.contract``; a pipeline without one is refused, exit 2, naming those that have
one); ``lklab.watermark_advisor`` computes the curve, the delays asked for
(``--watermark-delay 10s,45s,3m``, names kept as written) and the recommendation
(``--target-completeness 99.5%`` and/or ``--latency-budget 2m`` on the p95 time until final);
``lklab.advisor_render`` prints it, writes ``--json-out`` and the plot: beside the JSON
(``.png``), else ``<lake>/reports/advise-<UTC time>/watermark-curve.png``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from lklab.cli.console import UsageError, progress, spark_for
from lklab.cli.options import config_from, target_completeness
from lklab.pipelines import REGISTRY

__all__ = ["cmd_advise", "add_advise_options"]


def add_advise_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the advice")
    group.description = (
        "--watermark-delay takes a comma-separated list here: the curve gets a point at exactly each; "
        "--allowed-lateness is the one the stream would run with (default: the pipeline's)"
    )
    group.add_argument("--target-completeness", help="recommend the smallest delay reaching it, e.g. 99.5%% or 0.995")
    group.add_argument("--latency-budget", help="p95 time until final to stay within, e.g. 2m")
    group.add_argument("--points", type=int, default=40, help="delays on the curve, evenly spaced (default 40)")
    group.add_argument("--json-out", help="write the advice as JSON to this file (the plot beside it, .png)")


def _advising(args: argparse.Namespace):
    from lklab.cli.pipelines import check_declarations, selected_pipeline

    pipeline = selected_pipeline(args)
    if pipeline.advise is None:
        having = [p.name for p in REGISTRY.values() if p.advise is not None]
        declared = sorted(check_declarations(args))
        where = ", ".join([*having, *declared])
        raise UsageError(
            f"{pipeline.name} has no event-time windows for the watermark advisor; valid: {where} "
            "(declared pipelines with tumbling or sliding windows)"
        )
    return pipeline


def cmd_advise(args: argparse.Namespace) -> int:
    """Compute the advice, print it, write the JSON and the plot."""
    from lklab.advisor_render import to_json, to_text, write_plot
    from lklab.watermark_advisor import advise
    from shared.durations import parse_duration

    pipeline = _advising(args)
    try:
        asked = {
            d.strip(): parse_duration(d.strip(), name="watermark-delay")
            for d in (args.watermark_delay or "").split(",")
            if d.strip()
        }
        lateness = (
            None if args.allowed_lateness is None else parse_duration(args.allowed_lateness, name="allowed-lateness")
        )
        budget = None if args.latency_budget is None else parse_duration(args.latency_budget, name="latency-budget")
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.points < 2:
        raise UsageError(f"--points {args.points}: valid: 2 or more")
    target = None if args.target_completeness is None else target_completeness(args.target_completeness)
    args.watermark_delay = None  # a list here: the configuration takes none
    config = config_from(args)
    try:
        config = pipeline.advise.prepare(config)
        pipeline.advise.check(config)
    except ValueError as err:
        raise UsageError(str(err)) from None
    progress(f"{pipeline.name}: the watermark delay's trade-off on {Path(config.lake).resolve()}")
    with spark_for(config, f"lklab-{pipeline.name}-advise", ValueError) as spark:
        log = pipeline.advise.read(spark, config, lateness, progress)
    advice = advise(log, asked, target=target, budget=budget, points=args.points)
    source = str(Path(config.lake).resolve())
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(to_json(advice, source), indent=2) + "\n")
        plot = out.with_suffix(".png")
    else:
        name = dt.datetime.now(dt.UTC).strftime("advise-%Y%m%d-%H%M%S")
        plot = Path(config.lake) / "reports" / name / "watermark-curve.png"
    write_plot(advice, plot)
    print(to_text(advice))
    print(f"plot: {plot}" + (f"; JSON: {args.json_out}" if args.json_out else ""))
    return 0
