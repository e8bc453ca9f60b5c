"""``report.html``: one self-contained page that opens from disk with no network.

Styles are inline, figures are inline SVG, and there is no script at all; a
Content-Security-Policy forbids loading anything else, so a stray external reference shows up
as a blocked load instead of a silent request. All text from the data is escaped. Long tables
sit in ``<details>``; the audit lists the largest events and points to the CSV for all of them.
"""

from __future__ import annotations

from html import escape

from . import formats, plots
from .audit import FinanceAudit
from .comparison import Comparison, compare
from .model import Report

__all__ = ["AUDIT_ROWS_SHOWN", "render_html"]

AUDIT_ROWS_SHOWN = 200
_WINNER = ' class="winner" title="best in this row"'

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;margin:0 auto;max-width:1180px;padding:0 20px 40px}
h1{font-size:1.6em;margin:.8em 0 .2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.meta{color:#555;margin:.2em 0}nav a{margin-right:1em}
table{border-collapse:collapse;margin:.6em 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e4e4e4;padding:.25em .6em;text-align:right;vertical-align:top}
th:first-child,td:first-child,td.text,th.text{text-align:left}
thead th{background:#f4f4f6;position:sticky;top:0}tr.group th{background:#fafafa;text-align:left;font-weight:600}
td.winner{background:#e6f4ea;font-weight:600}td.winner::after{content:" \\2605";color:#137333}
.note{color:#555;font-size:.92em}.alarm{background:#fce8e6;border-left:4px solid #c5221f;padding:.5em .8em}
.ok{background:#e6f4ea;border-left:4px solid #137333;padding:.5em .8em}
figure{margin:1em 0}svg.plot{max-width:100%;height:auto}figcaption{color:#555;font-size:.92em}
td.time{white-space:nowrap}details{margin:.5em 0}summary{cursor:pointer;font-weight:600}
"""

_SECTIONS = (
    ("side-by-side", "Side by side"),
    ("tradeoff", "Completeness vs watermark delay"),
    ("error", "Error over processing time"),
    ("arrival", "How late events arrive"),
    ("gaps", "Where the first answers were wrong"),
    ("audit", "Finance audit"),
    ("definitions", "How to read the numbers"),
)


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _figure(svg: str | None, caption: str, empty: str) -> str:
    if svg is None:
        return f'<p class="note">{_e(empty)}</p>'
    return f"<figure>{svg}<figcaption>{_e(caption)}</figcaption></figure>"


def _comparison_table(comparison: Comparison) -> str:
    configurations = comparison.configurations
    head = "".join(f'<th scope="col" data-config="{_e(c.key)}">{_e(c.label)}</th>' for c in configurations)
    lines = [f'<table class="comparison"><thead><tr><th class="text">metric</th>{head}'
             '<th class="text">better</th><th class="text">best</th></tr></thead><tbody>']
    group = None
    for row in comparison.rows:
        if row.group != group:
            group = row.group
            lines.append(f'<tr class="group"><th colspan="{len(configurations) + 3}">{_e(group)}</th></tr>')
        cells = "".join(
            f'<td data-config="{_e(c.key)}"{_WINNER if i in row.winners else ""}>{_e(formats.value(v, row.unit))}</td>'
            for i, (c, v) in enumerate(zip(configurations, row.values))
        )
        present = [v for v in row.values if v is not None]
        if row.better is None:
            best = "not judged"
        elif row.winners:
            best = ", ".join(configurations[i].label for i in row.winners)
        else:
            best = "all equal" if len(present) > 1 else "one value"
        lines.append(f'<tr data-metric="{_e(row.metric)}"><th scope="row" class="text">{_e(row.metric)}</th>{cells}'
                     f'<td class="text">{_e(row.better or "")}</td><td class="text best">{_e(best)}</td></tr>')
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _reconciliation_banner(report: Report) -> str:
    bad = [r.configuration.label for r in report.results
           if r.reconciliation.unexplained_windows or any(r.reconciliation.unexplained_money.values())]
    if bad:
        return f'<p class="alarm" id="unexplained">Unexplained differences in: {_e(", ".join(bad))}.</p>'
    return '<p class="ok" id="unexplained">Reconciliation: every difference from batch truth is explained ' \
           "(unexplained windows and money are zero in every configuration).</p>"


def _arrival_figures(report: Report) -> str:
    delay = report.arrival_delay
    quoted = [(label, delay.at(p)) for label, p in (("p50", "0.5"), ("p99", "0.99"), ("p99.9", "0.999"), ("max", "1"))]
    facts = ", ".join(f"{label} {formats.seconds(v)}" for label, v in quoted if v is not None)
    skew = f" Events that arrived no later than their event time (not drawn): {formats.count(delay.non_positive)}." \
        if delay.non_positive else ""
    return f'<p class="note" id="arrival-quantiles">{formats.count(delay.events)} events; {_e(facts)}.{_e(skew)}</p>'


def _audit_section(report: Report, audit: FinanceAudit, limit: int) -> str:
    parts = [f'<p class="note">Every late billing event is in <a href="late_events_audit.csv">late_events_audit.csv</a> '
             f'({formats.count(len(audit.events))} rows), totals per account in '
             f'<a href="late_events_by_account.csv">late_events_by_account.csv</a>. '
             "Net amounts are signed (refunds negative). Below the totals per currency, each configuration "
             f"opens to its totals per account and, per currency, its {limit} largest events by amount.</p>"]
    labels = {c.key: c.label for c in report.configurations}
    currency_rows = "".join(
        f'<tr><td class="text">{_e(labels[t.configuration])}</td><td class="text">{_e(t.currency)}</td>'
        f"<td>{formats.count(t.events)}</td><td>{formats.money(t.amount, t.currency)}</td>"
        f"<td>{formats.money(t.absorbed, t.currency)}</td><td>{formats.money(t.side_output, t.currency)}</td>"
        f"<td>{formats.money(t.folded_in, t.currency)}</td></tr>"
        for t in sorted(audit.currency_totals(), key=lambda t: list(labels).index(t.configuration))
    )
    if currency_rows:
        parts.append('<table class="currency-totals"><thead><tr><th class="text">configuration</th>'
                     '<th class="text">currency</th><th>late events</th><th>net amount</th><th>absorbed</th>'
                     f"<th>side output</th><th>folded in</th></tr></thead><tbody>{currency_rows}</tbody></table>")
    for configuration in report.configurations:
        events = audit.of(configuration.key)
        if not events:
            continue
        totals = audit.account_totals(configuration.key)
        rows = "".join(
            f'<tr><td class="text">{_e(t.account_id)}</td><td class="text">{_e(t.currency)}</td>'
            f"<td>{formats.count(t.events)}</td><td>{formats.money(t.amount, t.currency)}</td>"
            f"<td>{formats.money(t.absorbed, t.currency)}</td><td>{formats.money(t.side_output, t.currency)}</td>"
            f"<td>{formats.money(t.folded_in, t.currency)}</td></tr>"
            for t in totals
        )
        shown = audit.largest(configuration.key, limit)
        event_rows = "".join(
            f'<tr><td class="text">{_e(e.event_id)}</td><td class="text">{_e(e.account_id)}</td>'
            f"<td>{formats.money(e.amount, e.currency)}</td><td class=\"text\">{_e(e.currency)}</td>"
            f'<td class="text time">{formats.utc(e.event_time)}</td><td class="text time">{formats.utc(e.ingest_time)}</td>'
            f"<td>{formats.seconds(e.lateness_seconds)}</td>"
            f'<td class="text time">{formats.utc(e.window_start)} –<br>{formats.utc(e.window_end)}</td>'
            f'<td class="text">{_e(e.disposition)}</td></tr>'
            for e in shown
        )
        parts.append(
            f'<details class="audit" data-config="{_e(configuration.key)}"><summary>{_e(configuration.label)}: '
            f"{formats.count(len(events))} late events, {formats.count(len(totals))} account totals</summary>"
            '<table class="account-totals"><thead><tr><th class="text">account</th><th class="text">currency</th>'
            "<th>events</th><th>net amount</th><th>absorbed</th><th>side output</th><th>folded in</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            f'<p class="note">{formats.count(len(shown))} of {formats.count(len(events))} events: the largest by '
            f"amount, at most {limit} per currency.</p>"
            '<table class="late-events"><thead><tr><th class="text">event</th><th class="text">account</th>'
            '<th>amount</th><th class="text">currency</th><th class="text">event time</th><th class="text">ingest time</th>'
            '<th>lateness</th><th class="text">window</th><th class="text">disposition</th></tr></thead>'
            f"<tbody>{event_rows}</tbody></table></details>"
        )
    if len(parts) == 1:
        parts.append('<p class="note">No late billing events.</p>')
    return "\n".join(parts)


_DEFINITIONS = (
    ("Processing time", "the ingest time the log had reached: a day of traffic replays in minutes, so latency is "
                        "measured on the simulated clock, from the window's end."),
    ("Windows wrong", "windows that have ended whose served total differs from batch truth (or is missing)."),
    ("Money wrong", "the sum of |served − truth| over those windows, per currency; currencies are never added together."),
    ("Completeness at first emission", "events counted in each window's first served result, over events in truth."),
    ("Late money", "gross: the sum of |amount| of late events, per currency. Side output: dropped by the stream; "
                   "absorbed: applied within the allowed lateness; folded in: restored by the batch recompute."),
    ("Best (\u2605)", "the best value of a row; every tied configuration is marked; no mark when all are equal, "
                      "when fewer than two configurations have a value, or for rows that are not judged."),
)


def render_html(report: Report, audit_rows_shown: int = AUDIT_ROWS_SHOWN) -> str:
    """The report page as a string (UTF-8 when written)."""
    comparison = compare(report)
    heat_maps = "".join(
        _figure(plots.gap_heat_map(h, f"plot-gaps-{n}"),
                f"{report.result(h.configuration_key).configuration.label}, {h.currency}: |first served − truth| per "
                f"window for the accounts with the largest gaps (windows with a gap: {formats.count(len(h.cells))}).",
                f"{h.currency}: no window had a gap.")
        for n, h in enumerate(report.heat_maps)
    ) or '<p class="note">No gaps recorded.</p>'
    sections = {
        "side-by-side": _reconciliation_banner(report) + _comparison_table(comparison)
        + f'<p class="note">CPU seconds cover the {_e(report.cost_scope)}.</p>',
        "tradeoff": _figure(plots.completeness_tradeoff(report),
                            "Share of events in each window's first result; one line per architecture and allowed lateness.",
                            "No completeness figures."),
        "error": _figure(plots.error_over_time(report),
                         "After each micro-batch: windows wrong and money wrong per currency (Lambda solid, Kappa dashed).",
                         "No error series."),
        "arrival": _arrival_figures(report) + _figure(plots.arrival_delay_cdf(report),
                                                      "Cumulative share of events by arrival delay; grey lines at 1 minute and 1 hour.",
                                                      "No arrival delays."),
        "gaps": heat_maps,
        "audit": _audit_section(report, report.audit, audit_rows_shown),
        "definitions": "<dl>" + "".join(f"<dt>{_e(t)}</dt><dd>{_e(d)}</dd>" for t, d in _DEFINITIONS) + "</dl>",
    }
    body = "\n".join(f'<section id="{sid}"><h2>{_e(title)}</h2>\n{sections[sid]}\n</section>' for sid, title in _SECTIONS)
    nav = " ".join(f'<a href="#{sid}">{_e(title)}</a>' for sid, title in _SECTIONS)
    meta = (f"Run {_e(report.run_id)} · source {_e(report.source)} · {_e(report.window)} windows · "
            f"{formats.count(report.events)} events · generated {formats.utc(report.generated_at)}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Lambda vs Kappa — {_e(report.run_id)}</title>
<style>{_CSS}</style></head>
<body>
<header><h1>Lambda vs Kappa on one log</h1><p class="meta" id="meta">{meta}</p><nav>{nav}</nav></header>
{body}
<footer class="note"><p>Every figure on this page is in <a href="summary.json">summary.json</a>.</p></footer>
</body></html>
"""
