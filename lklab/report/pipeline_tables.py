"""The words and tables of a pipeline comparison's report, shared by ``summary.md`` and ``report.html``.

Every figure is formatted once, here, from the ``PipelineReport``: cells and sentences are plain
text, which the Markdown renderer escapes for a table cell and the HTML template for the page,
so both files show the same figures in the same words. Links to the finance audits are relative
to the directory the report is written into (the reports folder moves as a whole), or ``file:``
URIs when no directory is given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

from . import formats
from .model import PATH_NAMES
from .pipeline_model import PipelineReport, PipelineResult

__all__ = [
    "Row",
    "Table",
    "AuditLink",
    "verdict_line",
    "log_sentence",
    "clock_sentence",
    "side_by_side",
    "state_by_ttl",
    "stream_checks",
    "audit_links",
]


@dataclass(frozen=True)
class Row:
    """A table row's cells, the first naming the row; ``strong``: the row to read first."""

    cells: tuple[str, ...]
    strong: bool = False


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class AuditLink:
    """The finance audit of the live stream at ``stream`` (``W=30s L=0``): ``href`` to it, ``rows``."""

    stream: str
    href: str
    rows: int


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


def log_sentence(report: PipelineReport) -> str:
    log = report.log
    return (
        f"The log: {log.lines:,} lines = {log.events:,} events + {log.duplicates:,} duplicates + {log.dead_letters:,} dead letters "
        f"+ {log.heartbeats:,} heartbeats. The truth (batch over the complete log): {_kinds(report.truth)}; {report.due}."
    )


def clock_sentence(report: PipelineReport) -> str:
    return (
        f"Processing time (the log's clock): the log ends at {formats.utc(report.log_end)}; Lambda's batch recompute of the whole "
        f'log lands at {formats.utc(report.batch_landing)}; every figure "at the end" is at {formats.utc(report.end)}.'
    )


def side_by_side(report: PipelineReport) -> Table:
    """Every configuration's figures, one column each."""
    results = report.results
    wrong_kinds = sorted({k for r in results for k in (*r.wrong_at_end, *(r.wrong_before_batch or {}))})
    side_kinds = list(dict.fromkeys(k for r in results for k in r.side_output))
    recon_kinds = list(dict.fromkeys(k for r in results for k in r.reconciliation))
    paths = list(dict.fromkeys(c.path for r in results for c in r.costs))

    def row(name: str, figure, strong: bool = False) -> Row:
        return Row((name, *(figure(r) for r in results)), strong)

    def cost(r: PipelineResult, path: str) -> str:
        spent = r.cost(path)
        return "—" if spent is None else f"{spent.cpu_seconds:.1f} ({spent.wall_seconds:.1f})"

    def commit(r: PipelineResult) -> str:
        timed = r.commit_time
        return "—" if timed is None else f"{_seconds(timed.p50)} / {_seconds(timed.p95)}"

    timed_rows = (
        [row("live micro-batch, start to commit: median / p95", commit)] if any(r.commit_time for r in results) else []
    )

    rows = [
        row("outputs compared at the end", lambda r: f"{r.compared:,}"),
        row("wrong at the end", lambda r: f"{r.wrong:,}", strong=True),
        *(row(f"· {kind}", lambda r, k=kind: f"{r.wrong_at_end.get(k, 0):,}") for kind in wrong_kinds),
        row(
            "served wrong until the batch landed",
            lambda r: "—" if r.wrong_before_batch is None else f"{sum(r.wrong_before_batch.values()):,}",
        ),
    ]
    for kind in report.truth:
        rows += [
            row(f"{kind}: time until exactly right, median", lambda r, k=kind: _seconds(r.latency[k].p50)),
            row(f"{kind}: p95 / max", lambda r, k=kind: f"{_seconds(r.latency[k].p95)} / {_seconds(r.latency[k].max)}"),
            row(
                f"{kind}: never exactly right", lambda r, k=kind: f"{r.latency[k].never:,} of {r.latency[k].outputs:,}"
            ),
        ]
    rows += [row(f"late, side output: {kind}", lambda r, k=kind: f"{r.side_output.get(k, 0):,}") for kind in side_kinds]
    rows += [
        row("late, absorbed by the allowed lateness", lambda r: "—" if r.absorbed is None else f"{r.absorbed:,}"),
        row("duplicates set aside", lambda r: f"{r.duplicates:,}"),
        row("dead letters", lambda r: f"{r.dead_letters:,}"),
        row("state entries: peak / final", lambda r: f"{r.state_peak:,} / {r.state_final:,}"),
        *timed_rows,
        *(row(f"cost: {PATH_NAMES[path]}, CPU s (wall s)", lambda r, p=path: cost(r, p)) for path in paths),
        row("cost: total CPU s (wall s)", lambda r: f"{r.cpu_seconds:.1f} ({r.wall_seconds:.1f})"),
        *(row(f"reconciliation: {kind}", lambda r, k=kind: f"{r.reconciliation.get(k, 0):,}") for kind in recon_kinds),
        row("reconciliation: unexplained", lambda r: f"{r.unexplained:,}"),
    ]
    return Table(("", *(r.configuration.label for r in results)), tuple(rows))


def state_by_ttl(report: PipelineReport) -> Table:
    """The live streams' state at each state TTL (no rows when the sweep had one TTL)."""
    return Table(
        ("W", "L", "state TTL", "micro-batches", "peak", "final"),
        tuple(
            Row(
                (
                    s.watermark_delay,
                    s.allowed_lateness,
                    s.state_ttl,
                    f"{s.micro_batches:,}",
                    f"{s.peak:,}",
                    f"{s.final:,}",
                )
            )
            for s in report.state_sizes
        ),
    )


def stream_checks(report: PipelineReport) -> Table:
    """Each stream setting's runs, live and replayed."""
    return Table(
        ("W", "L", "segments per micro-batch", "micro-batches (live)", "outputs served (live == replay)"),
        tuple(
            Row(
                (
                    s.watermark_delay,
                    s.allowed_lateness,
                    f"{s.segments_per_batch:,}",
                    f"{s.micro_batches:,}",
                    f"{s.outputs:,}",
                )
            )
            for s in report.streams
        ),
    )


def _href(path: str, directory: Path | None) -> str:
    if directory is None:
        return Path(path).as_uri()
    return quote(os.path.relpath(path, directory.resolve()))


def audit_links(report: PipelineReport, directory: str | os.PathLike | None = None) -> tuple[AuditLink, ...]:
    """The finance audits of the live streams, linked from ``directory`` (where the report goes)."""
    base = None if directory is None else Path(directory)
    return tuple(
        AuditLink(f"W={s.watermark_delay} L={s.allowed_lateness}", _href(s.audit.path, base), s.audit.rows)
        for s in report.streams
        if s.audit is not None
    )
