"""``summary.md``: the digest a person reads in a terminal or a pull request.

The side-by-side table with the best of each row in bold and starred, the reconciliation
verdict, the arrival delay quantiles and the late money per configuration and currency; the
figures and per-account detail stay in ``report.html`` and the CSV files.
"""

from __future__ import annotations

from . import formats
from .comparison import compare
from .decision import Decision, decide, headline_table
from .model import Report

__all__ = ["render_markdown", "answer_lines", "md_escape"]

_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|#"})


def md_escape(text: object) -> str:
    """Text safe in a Markdown table cell: HTML-like and Markdown characters neutralised."""
    escaped = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.translate(_SPECIAL).replace("\n", " ")


def _table(header: list[str], rows: list[list[str]], align: list[str]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def answer_lines(decision: Decision) -> list[str]:
    """``## The answer``: the rule and its pick, the headline table, one sentence per architecture,
    how the costs were measured."""
    header, rows = headline_table(decision)
    lines = ["## The answer", "", md_escape(decision.rule), ""]
    if rows and len(header) > 1:
        lines += _table(
            [md_escape(h) for h in header],
            [[md_escape(cell) for cell in row] for row in rows],
            ["l", *["r"] * (len(header) - 1)],
        )
        lines.append("")
    lines += [f"- {md_escape(sentence)}" for sentence in decision.sentences]
    return [*lines, "", md_escape(decision.method), ""]


def render_markdown(report: Report) -> str:
    comparison = compare(report)
    configurations = report.configurations
    lines = [
        "# Lambda vs Kappa on one log",
        "",
        f"Run `{report.run_id.replace('`', '')}` · source {md_escape(report.source)} · {md_escape(report.window)} windows · "
        f"{formats.count(report.events)} events · generated {formats.utc(report.generated_at)}",
        "",
        *answer_lines(decide(report)),
    ]
    bad = [r.configuration.label for r in report.results if r.reconciliation and not r.reconciliation.explained]
    lines += [
        f"**Unexplained differences in: {md_escape(', '.join(bad))}.**"
        if bad
        else "Reconciliation: every difference between a stream and batch truth is explained "
        "(unexplained is zero everywhere).",
        "",
    ]

    lines += ["## Side by side", "", "★ marks the best value of a row (every tied one); none when all are equal.", ""]
    rows = []
    group = None
    for row in comparison.rows:
        if row.group != group:
            group = row.group
            rows.append([f"**{group}**"] + [""] * (len(configurations) + 1))
        cells = [md_escape(formats.value(v, row.unit)) for v in row.values]
        cells = [f"**{c}** ★" if i in row.winners else c for i, c in enumerate(cells)]
        rows.append([md_escape(row.metric), *cells, row.better or "—"])
    lines += _table(
        ["metric", *(md_escape(c.label) for c in configurations), "better"],
        rows,
        ["l", *["r"] * len(configurations), "l"],
    )
    landings = ", ".join(formats.utc(t) for t in report.nightly_landings) or "none"
    lines += [
        "",
        f"Figures at the end are at {formats.utc(report.end)}. Processing time is the log's clock (ingest time made "
        "monotone in log order); latency is measured from each window's end at the resolution of a line. Lambda's "
        f"nightly recompute lands at each UTC midnight (landed: {landings}) and from then on Lambda serves its rows "
        "for every window starting before it. Costs: Lambda's speed layer, batch recomputes and reconciliation; "
        "Kappa's streaming job and a separately measured full replay; none for processing-time windows (computed by "
        f"the measurement, not run). CPU seconds cover the {md_escape(report.cost_scope)}.",
        "",
    ]

    delay = report.arrival_delay
    quoted = [(label, delay.at(p)) for label, p in (("p50", "0.5"), ("p99", "0.99"), ("p99.9", "0.999"), ("max", "1"))]
    lines += [
        "## How late events arrive",
        "",
        f"{formats.count(delay.events)} events; arrival delay (ingest − event time) "
        + ", ".join(f"{label} {formats.seconds(v)}" for label, v in quoted if v is not None)
        + ".",
        "",
    ]

    lines += ["## Finance audit: late billing events", ""]
    labels = {c.key: c.label for c in configurations}
    totals = sorted(report.audit.currency_totals(), key=lambda t: list(labels).index(t.configuration))
    if totals:
        lines += _table(
            ["configuration", "currency", "late events", "net amount", "absorbed", "side output", "folded in"],
            [
                [
                    md_escape(labels[t.configuration]),
                    t.currency,
                    formats.count(t.events),
                    *(formats.money(m, t.currency) for m in (t.amount, t.absorbed, t.side_output, t.folded_in)),
                ]
                for t in totals
            ],
            ["l", "l", "r", "r", "r", "r", "r"],
        )
        lines.append("")
    else:
        lines += ["No late billing events.", ""]
    lines += [
        "Every late event: `late_events_audit.csv`; totals per account: `late_events_by_account.csv`; "
        "figures and detail: `report.html`; every number: `summary.json`.",
        "",
    ]
    return "\n".join(lines)
