"""A ``PipelineReport`` as files: ``summary.md``, ``summary.json`` and ``error_over_time.png``.

Renderers only read the report: every figure printed is a field of it, or a sum of fields the
model has checked to agree. JSON follows the billing summary's conventions (exact seconds as
strings with six decimals, cost seconds as numbers, times ISO-8601 UTC ending in ``Z``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from . import formats
from .markdown import md_escape
from .model import Configuration
from .pipeline_model import PipelineReport, PipelineResult

__all__ = ["PipelineReportFiles", "render_pipeline_markdown", "pipeline_json", "error_plot_png", "write_pipeline_report", "verdict_line"]

_PATH_NAMES = {"speed": "speed layer", "streaming": "streaming job", "replay": "full replay", "batch": "batch recompute",
               "reconciliation": "reconciliation"}


def _seconds(value: Decimal | None) -> str:
    return "—" if value is None else formats.seconds(value)


def _kinds(counts) -> str:
    return ", ".join(f"{n:,} {kind}" for kind, n in counts.items()) or "none"


def verdict_line(report: PipelineReport, result: PipelineResult) -> str:
    """One line: what the configuration gets wrong, how late it gets things right, at what cost."""
    outputs = sum(report.truth.values())
    line = f"{result.configuration.label}: {result.wrong:,} of {result.compared:,} outputs wrong at the end ({_kinds(result.wrong_at_end)})"
    if result.wrong_before_batch is not None:
        line += f"; its speed layer served {sum(result.wrong_before_batch.values()):,} wrong until the batch landed ({_kinds(result.wrong_before_batch)})"
    never = sum(f.never for f in result.latency.values())
    line += f"; {outputs - never:,}/{outputs:,} truth outputs exactly right for good"
    line += f"; side output {_kinds(result.side_output)}"
    if result.absorbed is not None:
        line += f", absorbed {result.absorbed:,}"
    return line + f"; state peak {result.state_peak:,}; {result.cpu_seconds:.1f} CPU s"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|", *("| " + " | ".join(r) + " |" for r in rows)]


def render_pipeline_markdown(report: PipelineReport) -> str:
    results = report.results
    log = report.log
    lines = [
        f"# Lambda vs Kappa on {report.pipeline}",
        "",
        f"Run `{report.run_id.replace('`', '')}` · source {md_escape(report.source)} · {md_escape(report.rule)} · "
        f"generated {formats.utc(report.generated_at)}",
        "",
        f"The log: {log.lines:,} lines = {log.events:,} events + {log.duplicates:,} duplicates + {log.dead_letters:,} dead letters "
        f"+ {log.heartbeats:,} heartbeats. The truth (batch over the complete log): {_kinds(report.truth)}; {md_escape(report.due)}.",
        "",
        f"Processing time (the log's clock): the log ends at {formats.utc(report.log_end)}; Lambda's batch recompute of the whole "
        f"log lands at {formats.utc(report.batch_landing)}; every figure \"at the end\" is at {formats.utc(report.end)}.",
        "",
        "## Side by side",
        "",
    ]
    wrong_kinds = sorted({k for r in results for k in (*r.wrong_at_end, *(r.wrong_before_batch or {}))})
    side_kinds = list(dict.fromkeys(k for r in results for k in r.side_output))
    recon_kinds = list(dict.fromkeys(k for r in results for k in r.reconciliation))
    paths = list(dict.fromkeys(c.path for r in results for c in r.costs))
    each = lambda figure: [figure(r) for r in results]
    rows = [
        ["outputs compared at the end", *each(lambda r: f"{r.compared:,}")],
        ["**wrong at the end**", *each(lambda r: f"**{r.wrong:,}**")],
        *[[f"· {md_escape(kind)}", *each(lambda r, k=kind: f"{r.wrong_at_end.get(k, 0):,}")] for kind in wrong_kinds],
        ["served wrong until the batch landed", *each(lambda r: "—" if r.wrong_before_batch is None else f"{sum(r.wrong_before_batch.values()):,}")],
    ]
    for kind in report.truth:
        rows += [
            [f"{md_escape(kind)}: time until exactly right, median", *each(lambda r, k=kind: _seconds(r.latency[k].p50))],
            [f"{md_escape(kind)}: p95 / max", *each(lambda r, k=kind: f"{_seconds(r.latency[k].p95)} / {_seconds(r.latency[k].max)}")],
            [f"{md_escape(kind)}: never exactly right", *each(lambda r, k=kind: f"{r.latency[k].never:,} of {r.latency[k].outputs:,}")],
        ]
    rows += [[f"late, side output: {md_escape(kind)}", *each(lambda r, k=kind: f"{r.side_output.get(k, 0):,}")] for kind in side_kinds]
    rows += [
        ["late, absorbed by the allowed lateness", *each(lambda r: "—" if r.absorbed is None else f"{r.absorbed:,}")],
        ["duplicates set aside", *each(lambda r: f"{r.duplicates:,}")],
        ["dead letters", *each(lambda r: f"{r.dead_letters:,}")],
        ["state entries: peak / final", *each(lambda r: f"{r.state_peak:,} / {r.state_final:,}")],
    ]
    rows += [[f"cost: {_PATH_NAMES[path]}, CPU s (wall s)", *each(lambda r, p=path: "—" if r.cost(p) is None
                                                                 else f"{r.cost(p).cpu_seconds:.1f} ({r.cost(p).wall_seconds:.1f})")]
             for path in paths]
    rows += [
        ["cost: total CPU s (wall s)", *each(lambda r: f"{r.cpu_seconds:.1f} ({r.wall_seconds:.1f})")],
        *[[f"reconciliation: {md_escape(kind)}", *each(lambda r, k=kind: f"{r.reconciliation.get(k, 0):,}")] for kind in recon_kinds],
        ["reconciliation: unexplained", *each(lambda r: f"{r.unexplained:,}")],
    ]
    lines += _table(["", *each(lambda r: md_escape(r.configuration.label))], rows)
    lines += ["", "## What each architecture gets wrong", ""]
    lines += [f"- {md_escape(verdict_line(report, r))}" for r in results]
    if report.state_sizes:
        lines += ["", f"## State by state TTL ({md_escape(report.state_unit)}, after each micro-batch)", ""]
        lines += _table(["W", "L", "state TTL", "micro-batches", "peak", "final"],
                        [[s.watermark_delay, s.allowed_lateness, s.state_ttl, f"{s.micro_batches:,}", f"{s.peak:,}", f"{s.final:,}"]
                         for s in report.state_sizes])
    lines += ["", "## How it was measured", ""]
    lines += _table(["W", "L", "segments per micro-batch", "micro-batches (live)", "outputs served (live == replay)"],
                    [[s.watermark_delay, s.allowed_lateness, f"{s.segments_per_batch:,}", f"{s.micro_batches:,}", f"{s.outputs:,}"]
                     for s in report.streams])
    lines += ["", f"Compute seconds cover the {report.cost_scope}. The error over processing time (outputs due and served "
              f"wrong, sampled every {report.error_step}) is in `error_over_time.png` and `summary.json`. A state entry: "
              f"{md_escape(report.state_unit)}. Lambda at W and Kappa at (W, 0) read one stream: its late, state and "
              "duplicate figures are the same.", ""]
    return "\n".join(lines)


def _jsonable(value):
    if isinstance(value, Configuration):
        return {"key": value.key, "label": value.label, **{f.name: getattr(value, f.name) for f in dataclasses.fields(value)}}
    if dataclasses.is_dataclass(value):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dt.datetime):
        return formats.iso(value)
    if isinstance(value, Decimal):
        return formats.exact(value)
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value


def pipeline_json(report: PipelineReport) -> str:
    derived = {r.configuration.key: {"wrong_at_end": r.wrong, "cpu_seconds": r.cpu_seconds, "wall_seconds": r.wall_seconds,
                                     "verdict": verdict_line(report, r)} for r in report.results}
    return json.dumps({"report": _jsonable(report), "derived": derived}, indent=2, sort_keys=False) + "\n"


def error_plot_png(report: PipelineReport) -> bytes:
    """Outputs wrong over processing time, one step line per configuration (Lambda solid, Kappa dashed)."""
    from matplotlib.figure import Figure

    from .plots import _PALETTE, _literal

    figure = Figure(figsize=(8, 4))
    axes = figure.subplots()
    for index, result in enumerate(report.results):
        points = result.error_series
        axes.step([p.processing_time for p in points], [p.wrong for p in points], where="post",
                  color=_PALETTE[index % len(_PALETTE)], linestyle="-" if result.configuration.architecture == "lambda" else "--",
                  label=_literal(result.configuration.label))
    # The batch lands at a midnight, often hours after the log: the chart keeps to the log (and a
    # tenth more), and names the landing, where every Lambda line drops to 0.
    start = min((r.error_series[0].processing_time for r in report.results if r.error_series), default=report.log_end)
    right = report.log_end + (report.log_end - start) / 10
    if report.batch_landing <= right:
        axes.axvline(report.batch_landing, color="#7f7f7f", linewidth=0.8, linestyle=":", label="Lambda's batch lands")
    axes.set_xlim(start, max(right, start + dt.timedelta(seconds=1)))
    axes.set_xlabel(f"processing time (UTC); Lambda's batch lands at {formats.utc(report.batch_landing)}")
    axes.set_ylabel("outputs due and wrong")
    axes.set_title(_literal(f"{report.pipeline}: outputs wrong over processing time"))
    axes.legend(fontsize="small")
    figure.autofmt_xdate()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


@dataclass(frozen=True)
class PipelineReportFiles:
    summary_md: Path
    summary_json: Path
    error_plot: Path


def _publish(path: Path, data: bytes) -> Path:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
    return path


def write_pipeline_report(report: PipelineReport, out_dir: str | os.PathLike) -> PipelineReportFiles:
    """Render ``report`` into ``out_dir`` (created if missing; existing files replaced)."""
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    return PipelineReportFiles(
        summary_md=_publish(directory / "summary.md", render_pipeline_markdown(report).encode()),
        summary_json=_publish(directory / "summary.json", pipeline_json(report).encode()),
        error_plot=_publish(directory / "error_over_time.png", error_plot_png(report)),
    )
