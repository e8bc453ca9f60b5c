"""What the ``billing_windows`` commands run (``lklab COMMAND``, the default pipeline), and what
each reports. The command line does the rest (``lklab.cli.pipeline_jobs``), as for every pipeline.

generate: a scenario's log and its manifest (``generator``); speed: the always-on speed layer
(``speed``); batch: the truth for the days asked (``batch``), with the generator's NumPy truth
when the lake's events are generated (``truth``) and its summary (``summary``); replay: a Kappa
replay (``replay``), with ``--history`` its window history; reconcile: a stream against the
truth for the days asked (``reconciliation.reconcile``), with money tolerances, thresholds and
a JSON summary; compare: ``comparison`` and its report (``lklab.report``).

Before Spark starts (``prepare``), a replay and a comparison of the lake's log take the windows
and line settings the lake's batch truth and speed layer were built with where no flag gives
them, and a reconciliation the settings of the stream it reads; a contradicting flag is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lklab.pipelines.contract import OPTIONS, GenerateRequest, Jobs, Outcome

__all__ = [
    "jobs",
    "lake_windows",
    "adopt_stream",
    "compare",
    "prepare_comparison",
    "publish_comparison",
    "unreplaceable",
]

_log = logging.getLogger(__name__)
_WINDOW_KEYS = ("window-kind", "window-size", "window-slide", "session-gap")


def _settings_tables(config):
    """The lake's tables, for reading what they recorded (no Spark needed)."""
    from shared.tables import Tables

    return Tables(None, config.lake, "deltalake")


def lake_windows(config, purpose: str):
    """``config`` with the windows and line settings the lake's batch truth and speed layer were
    built with, where the user gave none (both must agree; a contradicting flag is refused:
    ``SettingsConflict``)."""
    from shared import catalog
    from shared.table_settings import LINE_KEYS, adopt, agreed

    windows = agreed(
        _settings_tables(config),
        [catalog.BATCH_TRUTH.name, catalog.SPEED_AGGREGATES.name],
        (*_WINDOW_KEYS, *LINE_KEYS),
    )
    return adopt(config, windows, f"the lake's tables ({purpose})")


def adopt_stream(config, prefix: str, source: str):
    """``config`` with the settings a stream's tables (under ``prefix``) and the batch truth recorded."""
    from shared import catalog
    from shared.table_settings import LINE_KEYS, adopt, agreed

    tables = _settings_tables(config)
    windows = agreed(
        tables,
        [catalog.BATCH_TRUTH.name, catalog.SPEED_AGGREGATES.at(prefix)],
        (*_WINDOW_KEYS, *LINE_KEYS),
    )
    stream = agreed(tables, [catalog.SPEED_AGGREGATES.at(prefix)])
    return adopt(config, {**stream, **windows}, source)


def _stream_settings(config) -> str:
    settings = config.describe()
    return f"watermark delay {settings['watermark-delay']}, allowed lateness {settings['allowed-lateness']}"


def _thresholds(options: Mapping[str, Any]):
    """The reconciliation's tolerance and the unexplained money still acceptable (``ValueError``: a bad value)."""
    from reconciliation.tolerance import Tolerance, parse_tolerance

    tolerance = Tolerance(
        parse_tolerance(options["abs_tol"], "abs-tol"), parse_tolerance(options["rel_tol"], "rel-tol")
    )
    return tolerance, parse_tolerance(options["max_unexplained"], "max-unexplained")


def prepare(command: str, config, options: Mapping[str, Any]):
    """The configuration ``command`` runs with, settled before Spark starts (``Jobs.prepare``)."""
    if command == "speed":
        from lklab.pipelines.billing_windows.speed import require_its_own_step

        require_its_own_step(config)
        return config
    if command == "replay":
        from lklab.pipelines.billing_windows.speed import SPEED_RULE
        from lklab.replay_runner import replay_lock
        from shared.locks import refuse_if_held

        config = lake_windows(config, "a replay is compared with them")
        refuse_if_held(config.lake.resolve(), replay_lock(SPEED_RULE, options["name"]))  # a running one
        return config
    if command == "reconcile":
        from shared import catalog

        _thresholds(options)
        prefix = catalog.stream_prefix(options["against"])
        config = adopt_stream(config, prefix, f"replay {catalog.replay_name(prefix)}" if prefix else "the speed layer")
        if options["max_unexplained_events"] < 0:
            raise ValueError(f"--max-unexplained-events must be >= 0, got {options['max_unexplained_events']}")
    return config


def announce(command: str, config, options: Mapping[str, Any]) -> str | None:
    """The progress line ``command`` starts with (``Jobs.announce``)."""
    if command == "speed":
        return f"speed layer on {config.lake / 'log'}: {config.window.describe()} windows, {_stream_settings(config)}"
    if command == "replay":
        return f"Kappa replay '{options['name']}' over {config.lake / 'log'}: {_stream_settings(config)}"
    if command == "compare":
        return f"starting Spark ({config.spark_master}); {options['configurations']} configurations to run"
    return f"starting Spark ({config.spark_master})"


def _write_log(config, request: GenerateRequest) -> dict:
    """Write the scenario's log and manifest; the manifest."""
    from lklab.generator_params import from_request
    from lklab.pipelines.billing_windows.generator import GeneratorParams, generate

    params = from_request(GeneratorParams, request)
    manifest = generate(params, config.lake, overwrite=request.overwrite, progress=_log.info).manifest
    _log.info(
        f"log written: {manifest['lines']:,} lines in {manifest['segments']:,} segments under "
        f"{config.lake / 'log'} ({manifest['generate_seconds']}s)"
    )
    return manifest


def generate(config, request: GenerateRequest) -> str:
    manifest = _write_log(config, request)
    delays = manifest["delay_seconds"]
    return (
        f"{manifest['events']:,} events, {manifest['duplicates']:,} retries, "
        f"{sum(manifest['dead_letters'].values()):,} malformed lines -> {config.lake / 'log'}\n"
        f"arrival delay p50 {delays['p50']:.1f}s, p99 {delays['p99']:.0f}s, "
        f"p99.9 {delays['p99_9']:.0f}s, max {delays['max']:.0f}s"
    )


def speed(spark, config, *, available_now: bool, segments_per_batch: int | None, stop) -> Outcome:
    from lklab.pipelines.billing_windows.speed import run_speed
    from shared import catalog

    layer = run_speed(spark, config, available_now=available_now, segments_per_batch=segments_per_batch, stop=stop)
    name = layer.table(catalog.STREAM_METRICS)
    metrics = layer.tables.read_arrow(name) if layer.tables.exists(name) else None
    if metrics is None or not metrics.num_rows:
        return Outcome("")
    totals = {c: sum(metrics[c].to_pylist()) for c in ("input_lines", "on_time", "late", "duplicates", "dead_letters")}
    return Outcome(
        f"{metrics.num_rows} micro-batches: {totals['input_lines']:,} lines = {totals['on_time']:,} on time + "
        f"{totals['late']:,} late (side output) + {totals['duplicates']:,} duplicates + "
        f"{totals['dead_letters']:,} dead letters"
    )


def batch(spark, config, *, days, refresh: bool, whole_log: bool = False) -> Outcome:
    """The batch recompute of ``days``, its summary, and the generator's ground truth when there is one."""
    from lklab.pipelines.billing_windows.batch import run_batch
    from lklab.pipelines.billing_windows.generator import load_events
    from lklab.pipelines.billing_windows.summary import batch_summary, render_text
    from lklab.pipelines.billing_windows.truth import events_digest, truth_written_for, write_truth
    from shared.tables import Tables

    _log.info("batch recompute: parse, validate, dedup, window, aggregate")
    run = run_batch(spark, config, days, refresh=refresh, whole_log=whole_log)
    digest = events_digest(config.lake)
    if digest is not None and truth_written_for(config.window, config.lake, digest):
        _log.info(f"ground truth for {config.window.describe()} windows: already written for these generated events")
    elif digest is not None:
        _log.info(f"ground truth for {config.window.describe()} windows, computed without Spark")
        write_truth(load_events(config.lake), config.window, config.lake, digest)
    summary = batch_summary(Tables(spark, config.lake, config.table_engine), run, config.window)
    return Outcome(render_text(summary), failed=not (run.conserved and summary.matches_generator_truth is not False))


def replay(spark, config, name: str, *, replace: bool, history: bool) -> Outcome:
    from lklab.pipelines.billing_windows.replay import run_replay
    from shared.catalog import replay_prefix, tables_root

    run = run_replay(spark, config, name, replace=replace, history=history)
    return Outcome(
        f"replay {run.name}: {run.lines:,} lines over {run.segments:,} segments; "
        f"{run.wall_seconds:.1f} s wall, {run.cpu_seconds:.1f} CPU seconds ({run.cost_scope}); "
        f"tables under {tables_root(config.lake) / replay_prefix(run.name)}"
    )


def reconcile(
    spark,
    config,
    against: str,
    *,
    days,
    abs_tol: str,
    rel_tol: str,
    max_unexplained: str,
    max_unexplained_events: int,
    json: bool,
    json_out: str | None,
) -> Outcome:
    """The stream against the batch truth for ``days``: text (or the JSON summary, also written to
    ``json_out``); a verdict line per threshold the unexplained gap exceeds."""
    from pathlib import Path

    from lklab.pipelines.billing_windows.reconcile import reconcile as reconcile_days
    from reconciliation.render import render_json, render_text
    from shared import catalog

    tolerance, max_money = _thresholds({"abs_tol": abs_tol, "rel_tol": rel_tol, "max_unexplained": max_unexplained})
    _log.info(
        f"reconciling {against} against {catalog.BATCH_TRUTH.name} for {days.describe()}: "
        "diff, attribution, side-output fold"
    )
    result = reconcile_days(spark, config, days, against=against, tolerance=tolerance)
    rendered = render_json(result)
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(rendered + "\n")
    breaches = result.breaches(max_money, max_unexplained_events)
    return Outcome(
        rendered if json else render_text(result),
        verdicts=tuple(f"UNEXPLAINED GAP: {breach}" for breach in breaches),
    )


def _refused() -> tuple[type[Exception], ...]:
    from shared.batch_runs import PositionError

    return (PositionError,)


def jobs() -> Jobs:
    return Jobs.of(
        generate,
        speed,
        batch,
        replay,
        reconcile,
        refused=_refused(),
        takes=OPTIONS,  # every option beyond the common ones is billing's (the days, tolerances, JSON ...)
        prepare=prepare,
        announce=announce,
        app="lklab",
    )


# lklab compare (``Comparison``)


def compare(spark, config, plan, sweeps, source: str, progress):
    from lklab.pipelines.billing_windows.comparison import run_comparison

    return run_comparison(spark, config, plan, source=source, progress=progress)


def prepare_comparison(config, scenario: str | None):
    """On the lake's own log, the windows and line settings its batch truth and speed layer were
    built with, where no flag gives them (the comparison recomputes ``batch_truth``); with a
    scenario the lake is generated anew and the flags alone count."""
    return config if scenario else lake_windows(config, "a comparison recomputes its batch truth")


def unreplaceable(lake) -> str | None:
    from lklab.pipelines.billing_windows.generator import unreplaceable as reason

    return reason(lake)


def publish_comparison(report, directory) -> tuple[str, bool]:
    """Write the comparison's report under ``directory``; what to print, and whether a
    configuration's reconciliation left a gap unexplained."""
    from lklab.report import formats, write_report

    files = write_report(report, directory)
    lines = [f"report: {files.html}", f"summary: {files.summary_json}, {files.summary_md}; audit: {files.audit_csv}"]
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
        lines.append(line)
    unexplained = any(r.reconciliation and not r.reconciliation.explained for r in report.results)
    return "\n".join(lines), unexplained
