"""The report's renderers on a hand-built report: exact figures, winners, escaping, round trips."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import re
from decimal import Decimal as D
from html.parser import HTMLParser

import pytest

from lklab.report import (
    ArrivalDelay,
    Configuration,
    ConfigurationResult,
    EndSummary,
    ErrorPoint,
    FinanceAudit,
    LatencySummary,
    LateSummary,
    ReconciliationSummary,
    Report,
    compare,
    formats,
    render_html,
    render_markdown,
    report_from_json,
    to_json,
    write_report,
)
from lklab.report.comparison import winners
from lklab.report.plots import PLOT_IDS
from lklab.report.summary_json import to_document
from tests.report_fixtures import KAPPA, ODD_ACCOUNT, at, sample_report


@pytest.fixture(scope="module")
def report():
    return sample_report()


@pytest.fixture(scope="module")
def page(report):
    return render_html(report)


class _ComparisonTable(HTMLParser):
    """``{metric: [(cell text, is winner), ...] + [better, best]}`` from ``table.comparison``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list] = {}
        self._metric = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-metric" in attrs:
            self._metric = attrs["data-metric"]
            self.rows[self._metric] = []
        elif tag == "td" and self._metric is not None:
            self._cell = ["", "winner" in (attrs.get("class") or "").split()]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[self._metric].append(tuple(self._cell))
            self._cell = None
        elif tag == "tr":
            self._metric = None


def comparison_cells(page: str) -> dict[str, list]:
    parser = _ComparisonTable()
    parser.feed(page)
    return parser.rows


# --- the side-by-side table --------------------------------------------------------------


def test_side_by_side_figures_and_winners(page):
    rows = comparison_cells(page)
    w = lambda text: (text, True)
    n = lambda text: (text, False)
    assert rows["windows exactly right at the end"] == [
        w("100.00%"),
        n("95.00%"),
        w("100.00%"),
        n("97.50%"),
        n("87.80%"),
        n("higher"),
        n("Lambda W=10s L=0, Kappa W=10s L=1h"),
    ]
    # 1970.000001 / 2000 is judged and shown at four places: 98.50%; a net total hides errors
    # that cancel (the baseline serves 100.00% with 5 windows wrong): it wins no star
    served = "net money served, share of the truth's net at the end ({}; errors of opposite sign cancel)"
    assert rows[served.format("USD")] == [
        n("100.00%"),
        n("98.50%"),
        n("100.00%"),
        n("99.90%"),
        n("100.00%"),
        n(""),
        n("not judged"),
    ]
    assert rows[served.format("JPY")][:5] == [n("100.00%"), n("90.00%"), n("100.00%"), n("95.00%"), n("100.00%")]
    # the baseline has no side output at all: not zero, not applicable
    assert rows["late money to side output, absolute (USD)"] == [
        n("30.000001"),
        n("30.000001"),
        w("0.00"),
        n("0.50"),
        n("—"),
        n("lower"),
        n("Kappa W=10s L=1h"),
    ]
    # net: 25.000001 - 5, as the finance audit sums it; no better or worse
    assert rows["late money to side output, net (USD)"][:5] == [
        n("20.000001"),
        n("20.000001"),
        n("0.00"),
        n("-0.50"),
        n("—"),
    ]
    assert rows["late money to side output, absolute (JPY)"][:5] == [n("1,500"), n("1,500"), w("0"), n("300"), n("—")]
    assert rows["money wrong at the end (USD)"][:5] == [w("0.00"), n("2.50"), w("0.00"), n("0.001234"), n("10.50")]
    # a three-way tie; a currency absent from the last point counts as zero
    assert rows["money wrong at the end (JPY)"][:5] == [w("0"), n("1,200"), w("0"), w("0"), n("300")]
    assert rows["CPU, full replay"] == [
        n("—"),
        w("20.125 s"),
        n("24.5 s"),
        w("20.125 s"),
        n("—"),
        n("lower"),
        n("Kappa W=10s L=0, Kappa W=1m L=0"),
    ]
    assert rows["unexplained windows"] == [n("0")] * 4 + [n("—"), n("lower"), n("all equal")]
    assert rows["CPU, speed layer"] == [n("40.5 s"), n("—"), n("—"), n("—"), n("—"), n("lower"), n("one value")]
    assert rows["CPU, reconciliation"][:5] == [n("20.25 s"), n("—"), n("—"), n("—"), n("—")]
    assert rows["late events absorbed"] == [n("0"), n("0"), n("3"), n("0"), n("—"), n(""), n("not judged")]
    assert rows["time until exactly right, median"][:5] == [n("50,400 s"), n("12.5 s"), n("40 s"), n("60 s"), w("0 s")]
    assert rows["time until final, median"][:5] == [n("35 s"), n("35 s"), n("35 s"), n("85.125 s"), w("0 s")]
    assert rows["windows never final"][:5] == [n("1"), n("1"), n("1"), n("3"), w("0")]
    # the live runs' own time to commit; W=1m's run recorded none (a lake from before it)
    assert rows["live micro-batch, start to commit, median"] == [
        w("0.25 s"),
        w("0.25 s"),
        n("0.5 s"),
        n("—"),
        n("—"),
        n("lower"),
        n("Lambda W=10s L=0, Kappa W=10s L=0"),
    ]
    assert rows["live micro-batch, start to commit, p95"][:3] == [w("0.75 s"), w("0.75 s"), n("0.875 s")]
    assert rows["completeness when final"][:5] == [n("95.00%"), n("95.00%"), n("95.00%"), w("99.00%"), n("—")]
    # Lambda: speed layer + batch + reconciliation, each as shown; Kappa: stream + replay
    assert rows["CPU, everything it runs"][:5] == [n("72.75 s"), n("60.625 s"), n("75.25 s"), w("56.125 s"), n("—")]
    assert rows["windows wrong at the end"][:5] == [w("0"), n("2"), w("0"), n("1"), n("5")]
    assert "unexplained money (USD)" not in rows  # no configuration has any
    assert "completeness at first emission" not in rows and "CPU, all paths but replay" not in rows


def test_winners_rule():
    assert winners((D(1), D(2), D(1)), "lower") == (0, 2)
    assert winners((D(1), D(2), None), "higher") == (1,)
    assert winners((3, 3, 3), "lower") == ()
    assert winners((3, None, None), "lower") == ()
    assert winners((1, 2), None) == ()


# --- escaping and self-containment ------------------------------------------------------


def test_html_escapes_every_text_from_the_data(page):
    assert "<script" not in page
    assert "billing &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("acct-&lt;b&gt;&amp;&quot;x&quot;") == 6  # account totals and events, three configurations
    assert ODD_ACCOUNT not in page
    assert "acct-&lt;b&gt;&amp;" in re.search(r'<svg id="plot-gaps-0".*?</svg>', page, re.S).group(0)


def test_html_is_self_contained(page):
    assert "<link" not in page and "@import" not in page
    assert re.findall(r'\b(?:src|href)="(?!#|data:)([^"]*)"', page) == [
        "late_events_audit.csv",
        "late_events_by_account.csv",
        "summary.json",
    ]
    assert set(re.findall(r"https?://[^\"' )]+", page)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }
    assert "default-src 'none'" in page


def test_plots_are_inline_svg_with_unique_ids(page):
    assert re.findall(r'<svg id="(plot-[\w-]+)"', page) == [*PLOT_IDS, "plot-gaps-0"]
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page


def test_method_states_the_runs_and_the_clock(page):
    method = re.search(r'<section id="method">.*?</section>', page, re.S).group(0)
    streams = re.findall(r"<tr><td[^>]*>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", method)
    assert streams == [("W=10s L=0", "10", "3", "38"), ("W=10s L=1h", "10", "3", "40"), ("W=1m L=0", "10", "3", "39")]
    assert "(landed: 2026-01-06T00:00:00Z)" in method and "at 2026-01-06T00:05:00Z" in method
    assert "processed at 2026-01-05T11:00:00Z" in method and "sampled every 10s" in method
    assert "no cost is shown for it" in method
    caption = re.search(r'<svg id="plot-error".*?</svg>\s*<figcaption>(.*?)</figcaption>', page, re.S).group(1)
    assert (
        "lands later, at 2026-01-06T00:00:00Z" in caption and "(2026-01-06T00:05:00Z): Lambda W=10s L=0: 0." in caption
    )


def test_audit_lists_the_largest_events_per_currency(report):
    page = render_html(report, audit_rows_shown=1)
    section = page[page.index('<details class="audit" data-config="kappa-w10s-l0"') :]
    section = section[: section.index("</details>")]
    events = re.findall(r'<table class="late-events">.*?</table>', section, re.S)[0]
    assert re.findall(r"<tr><td class=\"text\">(e-\d+)</td>", events) == ["e-11", "e-7"]  # JPY, then USD 25.000001
    assert "2 of 3 events: the largest by amount, at most 1 per currency." in section
    assert "3,545.5 s" not in events and "2,340 s" in events


def test_audit_rows_are_per_event_and_window():
    first = sample_report().audit.events[0]
    other_window = dataclasses.replace(
        first, window_start=first.window_end, window_end=first.window_end + dt.timedelta(minutes=1)
    )
    audit = FinanceAudit((first, other_window))  # sliding windows: late for two windows
    assert [(t.events, t.amount) for t in audit.currency_totals()] == [(2, 2 * first.amount)]
    with pytest.raises(ValueError, match="appears twice for one window"):
        FinanceAudit((first, first))


def test_audit_totals_per_currency_and_account(page):
    totals = re.search(r'<table class="currency-totals">.*?</table>', page, re.S).group(0)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", totals)
    assert cells[:14] == [
        "Lambda W=10s L=0",
        "JPY",
        "1",
        "1,500",
        "0",
        "0",
        "1,500",
        "Lambda W=10s L=0",
        "USD",
        "2",
        "20.000001",
        "0.00",
        "0.00",
        "20.000001",
    ]


# --- JSON -------------------------------------------------------------------------------


def test_json_round_trips_exactly(report):
    text = to_json(report)
    again = report_from_json(text)
    assert again == report
    assert to_json(again) == text
    assert isinstance(again.results[0].late.side_output_money["USD"], D)
    assert render_html(again) == render_html(report)
    assert render_markdown(again) == render_markdown(report)


def test_json_money_is_exact_strings_per_currency(report):
    document = json.loads(to_json(report))
    late = document["report"]["results"][0]["late"]
    assert late["side_output_money"] == {"JPY": "1500.000000", "USD": "30.000001"}
    event = document["report"]["audit"]["events"][1]
    assert event["amount"] == "-5.000000" and event["lateness_seconds"] == "3545.500000"
    assert event["event_time"] == "2026-01-05T10:00:45.000000Z"
    costs = document["report"]["results"][1]["costs"]
    assert costs[1] == {
        "path": "replay",
        "cpu_seconds": 20.125,
        "wall_seconds": 15.5,
        "scaling": None,
        "commit_time": None,
    }
    assert costs[0]["commit_time"] == {"batches": 3, "lines": 4000, "p50": 0.25, "p95": 0.75, "max": 0.75}
    assert costs[0]["scaling"] == {
        "lines": 4000,
        "points": 3,
        "fixed_cpu_seconds": 38.5,
        "cpu_seconds_per_line": 0.0005,
        "per_line_stderr": 0.0001,
        "over": "micro-batches",
    }


def test_json_carries_every_figure_of_the_side_by_side_table(report, page):
    document = to_document(report)
    rows = comparison_cells(page)
    derived = document["derived"]["comparison"]
    assert [r["metric"] for r in derived] == list(rows)
    for row in derived:
        shown = [text for text, _ in rows[row["metric"]][: len(report.results)]]
        values = [None if v is None else (v if isinstance(v, int) else D(v)) for v in row["values"]]
        assert [formats.value(v, row["unit"]) for v in values] == shown, row["metric"]
        marked = [i for i, (_, winner) in enumerate(rows[row["metric"]][: len(report.results)]) if winner]
        assert row["winners"] == marked, row["metric"]
    assert document["derived"]["configuration_keys"] == [
        "lambda-w10s-l0",
        "kappa-w10s-l0",
        "kappa-w10s-l1h",
        "kappa-w1m-l0",
        "processing-time",
    ]
    assert document["report"]["results"][4]["late"] is None and document["report"]["results"][4]["costs"] == []


def test_json_rejects_another_format():
    with pytest.raises(ValueError, match="not a comparison report"):
        report_from_json('{"format": "something else"}')


# --- Markdown and CSV -------------------------------------------------------------------


def test_markdown_digest(report):
    text = render_markdown(report)
    assert (
        "| windows exactly right at the end | **100.00%** ★ | 95.00% | **100.00%** ★ | 97.50% | 87.80% | higher |"
        in text
    )
    assert "| CPU, full replay | — | **20.125 s** ★ | 24.5 s | **20.125 s** ★ | — | lower |" in text
    assert "| unexplained windows | 0 | 0 | 0 | 0 | — | lower |" in text
    assert "| time until final, median | 35 s | 35 s | 35 s | 85.125 s | **0 s** ★ | lower |" in text
    assert "Figures at the end are at 2026-01-06T00:05:00Z." in text
    assert "(landed: 2026-01-06T00:00:00Z)" in text
    assert "| Kappa W=10s L=1h | USD | 2 | 20.000001 | 20.000001 | 0.00 | 0.00 |" in text
    assert "source billing &lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "p50 2 s, p99 3,600 s, p99.9 3,600 s, max 3,600 s" in text
    assert "Reconciliation: every difference between a stream and batch truth is explained" in text


def test_audit_csv_is_exact_and_complete(report, tmp_path):
    files = write_report(report, tmp_path)
    rows = list(csv.DictReader(io.StringIO(files.audit_csv.read_text(encoding="utf-8"))))
    assert len(rows) == 9
    assert rows[1] == {
        "configuration": "lambda-w10s-l0",
        "event_id": "e-9",
        "account_id": ODD_ACCOUNT,
        "currency": "USD",
        "amount": "-5.000000",
        "event_time": "2026-01-05T10:00:45.000000Z",
        "ingest_time": "2026-01-05T11:00:00.000000Z",
        "lateness_seconds": "3545.500000",
        "window_start": "2026-01-05T10:00:00.000000Z",
        "window_end": "2026-01-05T10:01:00.000000Z",
        "disposition": "folded_in",
    }
    totals = list(csv.DictReader(io.StringIO(files.account_totals_csv.read_text(encoding="utf-8"))))
    assert {
        "configuration": "kappa-w10s-l0",
        "account_id": "acct-1",
        "currency": "USD",
        "events": "1",
        "amount": "25.000001",
        "absorbed": "0.000000",
        "side_output": "25.000001",
        "folded_in": "0.000000",
    } in totals
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "late_events_audit.csv",
        "late_events_by_account.csv",
        "report.html",
        "summary.json",
        "summary.md",
    ]
    assert files.html.read_text(encoding="utf-8") == render_html(report)


# --- the model ----------------------------------------------------------------------------


def test_model_refuses_inexact_or_ambiguous_figures():
    with pytest.raises(ValueError, match="must be Decimal"):
        ErrorPoint(at(5, 10), 1, {"USD": 2.5})
    with pytest.raises(ValueError, match="more than 6 decimal places"):
        ErrorPoint(at(5, 10), 1, {"USD": D("0.0000001")})
    with pytest.raises(ValueError, match="not a currency code"):
        LateSummary(1, {"usd": D(1)}, 0, {})
    with pytest.raises(ValueError, match="timezone-aware"):
        ErrorPoint(dt.datetime(2026, 1, 5, 10), 1, {})
    with pytest.raises(ValueError, match="architecture 'delta'"):
        Configuration("delta", "10s", "0")
    with pytest.raises(ValueError, match="needs a unit"):
        Configuration("kappa", "10", "0")
    result = sample_report().results[0]
    with pytest.raises(ValueError, match="processing-time order"):
        dataclasses.replace(result, error_series=tuple(reversed(result.error_series)))
    with pytest.raises(ValueError, match="unknown configuration keys"):
        dataclasses.replace(sample_report(), results=sample_report().results[:1])
    with pytest.raises(ValueError, match="no watermark"):
        Configuration("processing-time", "1m", "0")


def test_model_refuses_figures_that_disagree():
    kappa = sample_report().results[1]  # 40 truth windows, 2 never exact, 38 of 40 exact, 2 wrong at the end
    with pytest.raises(ValueError, match="39 windows exact at the end, but 40 truth windows of which 2 never exact"):
        dataclasses.replace(kappa, end=dataclasses.replace(kappa.end, windows_exact=39))
    with pytest.raises(ValueError, match="1 windows wrong at the end, but 40 compared and 38 exact"):
        dataclasses.replace(kappa, error_series=(*kappa.error_series[:-1], ErrorPoint(kappa.end.at, 1, {})))
    with pytest.raises(ValueError, match="the error series ends at"):
        dataclasses.replace(kappa, error_series=kappa.error_series[:-1])
    with pytest.raises(ValueError, match="different ends"):
        moved = dataclasses.replace(kappa, end=dataclasses.replace(kappa.end, at=at(6, 0, 6)), error_series=())
        dataclasses.replace(sample_report(), results=(sample_report().results[0], moved, *sample_report().results[2:]))


def test_configuration_names():
    assert KAPPA.key == "kappa-w10s-l0" and KAPPA.label == "Kappa W=10s L=0"
    assert Configuration("kappa", "1m", "1h").allowed_lateness_seconds == D(3600)
    baseline = Configuration("processing-time")
    assert (baseline.key, baseline.label, baseline.is_baseline) == ("processing-time", "Processing-time windows", True)


def test_latency_quantiles_are_nearest_rank():
    first = [D(s) for s in ("1", "2", "3", "4", "5", "6", "7", "8", "9", "10")] + [None]
    final = [D("45")] * 9 + [D("46.5"), None]
    exact = [D("30")] * 5 + [None] * 6
    summary = LatencySummary.of_windows(first, final, exact, events_when_final=90, truth_events=100)
    assert (summary.windows, summary.first_result_p50, summary.first_result_p95, summary.first_result_max) == (
        11,
        D(5),
        D(10),
        D(10),
    )
    assert (summary.final_p50, summary.final_p95, summary.final_max, summary.never_final) == (
        D(45),
        D("46.5"),
        D("46.5"),
        1,
    )
    assert (summary.never_emitted, summary.exact_p50, summary.never_exact) == (1, D(30), 6)
    with pytest.raises(ValueError, match="different numbers of windows"):
        LatencySummary.of_windows(first, final[:3], exact, events_when_final=None, truth_events=100)


def test_arrival_delay_quantiles():
    delay = ArrivalDelay.of_delays([D(s) for s in range(1, 101)])
    assert (delay.at("0.07"), delay.at("0.5"), delay.at("0.99"), delay.at("1")) == (D(7), D(50), D(99), D(100))
    assert delay.non_positive == 0 and ArrivalDelay.of_delays([]).quantiles == ()


def test_heat_map_picks_the_top_offenders(report):
    usd = report.heat_maps[0]
    accounts, windows, values = usd.grid(accounts=2, windows=2)
    assert accounts == ("acct-1", "acct-2")
    assert windows == ((at(5, 10, 0), at(5, 10, 1)), (at(5, 10, 2), at(5, 10, 3)))
    assert values == [[D("12.50"), D(0)], [D(0), D(7)]]


def test_comparison_follows_the_report_order(report):
    comparison = compare(report)
    assert comparison.configurations == report.configurations
    assert {row.group for row in comparison.rows} == {"correctness", "latency", "cost"}


def test_a_report_with_nothing_to_draw_still_renders(tmp_path):
    bare = Report(
        run_id="r-1",
        source="billing",
        window="tumbling 1m",
        generated_at=at(6, 0),
        events=0,
        arrival_delay=ArrivalDelay.of_delays([]),
        results=(
            ConfigurationResult(
                KAPPA,
                (),
                LatencySummary.of_windows([], [], [], 0, 0),
                EndSummary(at(6, 0), 0, 0, {}, {}),
                LateSummary(0, {}, 0, {}),
                (),
                0,
                ReconciliationSummary("kappa:r-1", 0, {}),
            ),
        ),
        heat_maps=(),
        audit=FinanceAudit(()),
    )
    files = write_report(bare, tmp_path)
    page = files.html.read_text(encoding="utf-8")
    assert "<svg" not in page
    for note in (
        "No watermark figures.",
        "No error series.",
        "No arrival delays.",
        "No gaps recorded.",
        "No late billing events.",
    ):
        assert note in page
    assert report_from_json(files.summary_json.read_text(encoding="utf-8")) == bare
    assert files.audit_csv.read_text(encoding="utf-8").count("\n") == 1  # the header only


def test_unexplained_differences_are_flagged(report):
    broken = dataclasses.replace(
        report.results[1],
        reconciliation=dataclasses.replace(
            report.results[1].reconciliation, unexplained_windows=1, unexplained_money={"USD": D("0.01")}
        ),
    )
    flagged = dataclasses.replace(report, results=(report.results[0], broken, *report.results[2:]))
    assert '<p class="alarm" id="unexplained">Unexplained differences in: Kappa W=10s L=0.</p>' in render_html(flagged)
    assert "**Unexplained differences in: Kappa W=10s L=0.**" in render_markdown(flagged)
    rows = comparison_cells(render_html(flagged))
    assert rows["unexplained windows"][:4] == [("0", True), ("1", False), ("0", True), ("0", True)]
    assert rows["unexplained money (USD)"][:4] == [("0.00", True), ("0.01", False), ("0.00", True), ("0.00", True)]


def test_data_is_shown_literally_in_plots_and_never_evaluated_in_csv(report, tmp_path):
    """An id that matplotlib would take for mathematics is drawn as written; CSV cells that a
    spreadsheet would evaluate as a formula are neutralised, amounts stay numbers."""
    from lklab.report.gaps import FinalGap, GapHeatMap
    from lklab.report.plots import gap_heat_map

    odd = r"acct$\frac$"
    svg = gap_heat_map(
        GapHeatMap(KAPPA.key, "USD", (FinalGap(at(5, 10, 0), at(5, 10, 1), odd, D("3")),)), "plot-gaps-9"
    )
    assert odd in svg

    events = tuple(
        dataclasses.replace(e, account_id='=HYPERLINK("http://x")', event_id=f"@{e.event_id}")
        for e in report.audit.events
    )
    files = write_report(dataclasses.replace(report, audit=FinanceAudit(events)), tmp_path)
    rows = list(csv.DictReader(io.StringIO(files.audit_csv.read_text(encoding="utf-8"))))
    assert {r["account_id"] for r in rows} == {'\'=HYPERLINK("http://x")'}
    assert all(r["event_id"].startswith("'@e-") for r in rows)
    assert "-5.000000" in [r["amount"] for r in rows]
    totals = list(csv.DictReader(io.StringIO(files.account_totals_csv.read_text(encoding="utf-8"))))
    assert {r["account_id"] for r in totals} == {'\'=HYPERLINK("http://x")'}


def test_html_escapes_the_run_in_the_title_and_header(report):
    """Text reaches the page through the templates escaped as ``html.escape`` does."""
    page = render_html(dataclasses.replace(report, run_id="r<&>\"'1", source="s'1"))
    assert "<title>Lambda vs Kappa — r&lt;&amp;&gt;&quot;&#x27;1</title>" in page
    assert '<p class="meta" id="meta">Run r&lt;&amp;&gt;&quot;&#x27;1 · source s&#x27;1 · tumbling 1m windows' in page


def test_json_heat_map_cells_are_window_account_and_gap(report):
    cell = json.loads(to_json(report))["report"]["heat_maps"][0]["cells"][0]
    assert cell == {
        "window_start": "2026-01-05T10:00:00.000000Z",
        "window_end": "2026-01-05T10:01:00.000000Z",
        "account_id": "acct-1",
        "gap": "12.500000",
    }


def test_gaps_are_one_figure_per_configuration_with_a_panel_per_currency(page):
    gaps = re.search(r'<section id="gaps">.*?</section>', page, re.S).group(0)
    assert gaps.count("<svg") == 1  # Kappa W=10s L=0: USD and JPY in one figure
    figure = re.search(r'<svg id="plot-gaps-0".*?</svg>', gaps, re.S).group(0)
    assert "gap (USD)" in figure and "gap (JPY)" in figure
    assert "drawn from its start to its end" in figure
    caption = re.search(r"<figcaption>(.*?)</figcaption>", gaps, re.S).group(1)
    assert caption.startswith("Kappa W=10s L=0: |served − truth| of each window when it was declared final")
    assert "the 10 accounts with the largest gaps" in caption and "the 30 with the largest gaps" in caption
    assert caption.endswith("(windows with a gap: USD 4, JPY 1).")
