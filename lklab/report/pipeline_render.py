"""A ``PipelineReport`` as files: ``report.html``, ``summary.md``, ``summary.json`` and ``error_over_time.png``.

Renderers only read the report: every figure printed is a field of it, or a sum of fields the
model has checked to agree, and the page and the digest take their words and tables from
``pipeline_tables``. JSON follows the billing summary's conventions (exact seconds as strings
with six decimals, cost seconds as numbers, times ISO-8601 UTC ending in ``Z``).
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
from .decision import decide, headline_table
from .markdown import answer_lines, md_escape
from .model import Configuration
from .pipeline_html import render_pipeline_html
from .pipeline_model import PipelineReport
from .pipeline_tables import (
    Table,
    audit_links,
    clock_sentence,
    log_sentence,
    side_by_side,
    state_by_ttl,
    stream_checks,
    verdict_line,
)
from .publish import publish

__all__ = [
    "PipelineReportFiles",
    "render_pipeline_markdown",
    "render_pipeline_html",
    "pipeline_json",
    "error_plot_png",
    "write_pipeline_report",
    "verdict_line",
]


def _table(table: Table) -> list[str]:
    def cells(row: tuple[str, ...], strong: bool = False) -> str:
        return "| " + " | ".join(f"**{md_escape(c)}**" if strong else md_escape(c) for c in row) + " |"

    return [
        cells(table.header),
        "|---" + "|---:" * (len(table.header) - 1) + "|",
        *(cells(r.cells, r.strong) for r in table.rows),
    ]


def render_pipeline_markdown(report: PipelineReport, directory: str | os.PathLike | None = None) -> str:
    """``summary.md``; ``directory``: where it goes, which the audit links are relative to."""
    lines = [
        f"# Lambda vs Kappa on {report.pipeline}",
        "",
        f"Run `{report.run_id.replace('`', '')}` · source {md_escape(report.source)} · {md_escape(report.rule)} · "
        f"generated {formats.utc(report.generated_at)}",
        "",
        md_escape(log_sentence(report)),
        "",
        md_escape(clock_sentence(report)),
        "",
        *answer_lines(decide(report)),
        "## Side by side",
        "",
        *_table(side_by_side(report)),
        "",
        "## What each architecture gets wrong",
        "",
        *(f"- {md_escape(verdict_line(report, r))}" for r in report.results),
    ]
    states = state_by_ttl(report)
    if states.rows:
        lines += [
            "",
            f"## State by state TTL ({md_escape(report.state_unit)}, after each micro-batch)",
            "",
            *_table(states),
        ]
    audits = audit_links(report, directory)
    if audits:
        lines += [
            "",
            "## Finance audit",
            "",
            "What each live stream's reconciliation gave finance (Lambda and Kappa at W read one "
            "stream), one CSV per stream setting:",
            "",
        ]
        lines += [
            f"- {md_escape(a.stream)}: [{md_escape(a.href)}]({a.href}), {formats.count(a.rows)} rows" for a in audits
        ]
    lines += ["", "## How it was measured", "", *_table(stream_checks(report))]
    lines += [
        "",
        f"Compute seconds cover the {report.cost_scope}. The error over processing time (outputs due and served "
        f"wrong, sampled every {report.error_step}) is in `error_over_time.png` and `summary.json`. A state entry: "
        f"{md_escape(report.state_unit)}. Lambda at W and Kappa at (W, 0) read one stream: its late, state and "
        "duplicate figures are the same.",
        "",
    ]
    return "\n".join(lines)


def _jsonable(value):
    if isinstance(value, Configuration):
        return {
            "key": value.key,
            "label": value.label,
            **{f.name: getattr(value, f.name) for f in dataclasses.fields(value)},
        }
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
    derived = {
        r.configuration.key: {
            "wrong_at_end": r.wrong,
            "cpu_seconds": r.cpu_seconds,
            "wall_seconds": r.wall_seconds,
            "verdict": verdict_line(report, r),
        }
        for r in report.results
    }
    decision = decide(report)
    header, rows = headline_table(decision)
    answer = {
        "decision": _jsonable(decision),
        "headline_table": {"header": list(header), "rows": [list(r) for r in rows]},
    }
    document = {"report": _jsonable(report), "derived": derived, "answer": answer}
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def error_plot_png(report: PipelineReport) -> bytes:
    """Outputs wrong over processing time, one step line per configuration (Lambda solid, Kappa dashed)."""
    from matplotlib.figure import Figure

    from .plots import _PALETTE, _literal

    figure = Figure(figsize=(8, 4))
    axes = figure.subplots()
    for index, result in enumerate(report.results):
        points = result.error_series
        axes.step(
            [p.processing_time for p in points],
            [p.wrong for p in points],
            where="post",
            color=_PALETTE[index % len(_PALETTE)],
            linestyle="-" if result.configuration.architecture == "lambda" else "--",
            label=_literal(result.configuration.label),
        )
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
    """Where ``write_pipeline_report`` put each file."""

    html: Path
    summary_md: Path
    summary_json: Path
    error_plot: Path


def write_pipeline_report(report: PipelineReport, out_dir: str | os.PathLike) -> PipelineReportFiles:
    """Render ``report`` into ``out_dir`` (created if missing; existing files replaced)."""
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    plot = error_plot_png(report)
    return PipelineReportFiles(
        summary_md=publish(directory / "summary.md", render_pipeline_markdown(report, directory)),
        summary_json=publish(directory / "summary.json", pipeline_json(report)),
        error_plot=publish(directory / "error_over_time.png", plot),
        html=publish(directory / "report.html", render_pipeline_html(report, plot, directory)),
    )
