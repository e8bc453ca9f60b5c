"""The first screen's answer (``lklab.report.decision``) on the hand-built reports: the rule, the
costs that scale, the curve slot, and the same figures in the page, the digest and the JSON."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from decimal import Decimal as D
from html.parser import HTMLParser

import pytest

from lklab.report import render_html, render_markdown, report_from_json, to_json
from lklab.report.curve import CurvePoint, WatermarkCurve
from lklab.report.decision import decide, headline_table
from lklab.report.pipeline_render import pipeline_json, render_pipeline_html, render_pipeline_markdown
from lklab.report.scaling import CostScaling, fit_micro_batches, fit_runs
from tests.pipeline_report_fixtures import sample_pipeline_report
from tests.report_fixtures import sample_report


class _Headline(HTMLParser):
    """The rows of ``table.headline`` as text cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._inside = self._cell = False

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("class", "headline") in attrs:
            self._inside = True
        elif self._inside and tag == "tr":
            self.rows.append([])
        elif self._inside and tag in ("th", "td"):
            self._cell = True
            self.rows[-1].append("")

    def handle_data(self, data):
        if self._cell:
            self.rows[-1][-1] += data

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self._cell = False
        elif tag == "table":
            self._inside = False


def headline_cells(page: str) -> list[list[str]]:
    parser = _Headline()
    parser.feed(page)
    return parser.rows


# --- the rule ------------------------------------------------------------------------------


def test_no_configuration_reaches_the_default_target_so_the_most_complete_is_recommended():
    decision = decide(sample_report())
    # completeness when final: Lambda and Kappa at W=10s 95%, Kappa W=1m 99%: none reaches 99.5%
    assert decision.recommended == "kappa-w1m-l0"
    assert decision.headline == ("lambda-w10s-l0", "kappa-w1m-l0")
    assert decision.rule.startswith("No swept configuration reaches 99.50% completeness when final")


def test_the_cheapest_per_day_among_those_reaching_the_target():
    report = dataclasses.replace(sample_report(), target_completeness=D("0.95"))
    decision = decide(report)
    # per day at 1,000 events/s (86.4 million lines): W=10s L=0 38.5 + 0.0005 x 86.4M = 43,238.5 s;
    # W=1m 32 + 0.001 x 86.4M = 86,432 s; Lambda adds its batch (12) and reconciliation (20.25)
    kappa = decision.candidate("kappa-w10s-l0")
    assert kappa.cpu_per_day == pytest.approx(43_238.5)
    assert decision.candidate("kappa-w1m-l0").cpu_per_day == pytest.approx(86_432)
    lam = decision.candidate("lambda-w10s-l0")
    assert lam.cpu_per_day == pytest.approx(43_238.5 + 12 + 20.25)
    assert lam.unsplit == ("batch", "reconciliation") and lam.per_day_lower_bound
    assert decision.recommended == "kappa-w10s-l0"
    assert decision.headline == ("lambda-w10s-l0", "kappa-w10s-l0")
    assert decision.rule.startswith("Recommended: Kappa W=10s L=0, the cheapest of the 4 swept configurations")
    slower = decide(dataclasses.replace(report, target_completeness=D("0.99")))
    assert slower.recommended == "kappa-w1m-l0"


def test_the_rate_prices_the_day():
    decision = decide(dataclasses.replace(sample_report(), events_per_second=10.0))
    # 864,000 lines a day: 38.5 + 432 s for the stream at W=10s L=0
    assert decision.candidate("kappa-w10s-l0").cpu_per_day == pytest.approx(470.5)
    header, rows = headline_table(decision)
    assert [r for r in rows if r[0].startswith("CPU per day")][0][0] == "CPU per day at 10 events/s"


def test_the_headline_table_and_sentences():
    header, rows = headline_table(decide(sample_report()))
    assert header == ("", "Lambda W=10s L=0", "Kappa W=1m L=0")
    assert dict((r[0], r[1:]) for r in rows) == {
        "exactly right at the end": ("100.00%", "97.50%"),
        "completeness when final": ("95.00%", "99.00%"),
        "time until final, median / p95": ("35 s / 48.5 s", "85.125 s / 98 s"),
        "money wrong at the end (USD)": ("0.00", "0.001234"),
        "CPU per million lines": ("≥ 500.0 s ± 100.0", "1,000.0 s"),
        # Lambda's ± 100 s per million lines over the 86.4 million lines of a day: ± 8,640 s, 2.4 h
        "CPU per day at 1,000 events/s": ("at least 12.0 ± 2.4 CPU-h", "24.0 CPU-h"),
        "CPU on this log": ("72.8 s", "56.1 s"),
    }
    sentences = decide(sample_report()).sentences
    assert sentences[0].startswith(
        "Lambda W=10s L=0 would cost this log 72.8 CPU s; at 1,000 events/s at least 12.0 ± 2.4 CPU-h a day"
    )
    assert "a full replay of this log took 20.1 CPU s" in sentences[1]


def test_rejects_a_target_or_rate_out_of_range():
    with pytest.raises(ValueError, match="a fraction above 0 and at most 1"):
        dataclasses.replace(sample_report(), target_completeness=D("99.5"))
    with pytest.raises(ValueError, match="a rate above zero"):
        dataclasses.replace(sample_report(), events_per_second=0.0)


# --- costs that scale ------------------------------------------------------------------------


def test_a_fit_over_micro_batches_splits_fixed_and_per_line():
    # step seconds = 0.5 + 0.001 x lines: 100, 200, 700 lines; 2.5 s of steps, 1 s grows with lines
    batches = [(100, 0.6), (200, 0.7), (700, 1.2)]
    scaling = fit_micro_batches(10.0, batches)
    assert scaling.lines == 1000 and scaling.points == 3 and scaling.over == "micro-batches"
    assert scaling.cpu_seconds_per_line == pytest.approx(10.0 * (1.0 / 2.5) / 1000)
    assert scaling.fixed_cpu_seconds == pytest.approx(6.0)
    assert scaling.per_line_stderr == pytest.approx(0.0, abs=1e-12)  # the points lie on the line
    assert scaling.cpu_seconds(1000) == pytest.approx(10.0)
    assert fit_micro_batches(10.0, [(100, 0.6), (100, 0.7)]) is None  # one size: no slope
    assert fit_micro_batches(10.0, [(100, None), (200, None)]) is None  # steps not timed
    assert fit_micro_batches(10.0, [(100, 0.9), (200, 0.5)]).cpu_seconds_per_line == 0  # falling: all fixed
    with pytest.raises(ValueError, match="not negative"):
        CostScaling(10, 1, -1.0, 0.0)


def test_a_fit_over_runs_splits_fixed_and_per_line():
    # CPU seconds = 2 + 0.001 x lines: a run over 1,000 lines took 3 s, one over 3,000 lines 5 s
    scaling = fit_runs([(1_000, 3.0), (3_000, 5.0)])
    assert (scaling.lines, scaling.points, scaling.over) == (4_000, 2, "runs")
    assert scaling.fixed_cpu_seconds == pytest.approx(2.0)
    assert scaling.per_million_lines == pytest.approx(1_000.0)
    assert scaling.per_line_stderr is None  # two runs: the line through both, no residual to judge it by
    assert scaling.cpu_seconds(86_400_000) == pytest.approx(2.0 + 86_400.0)
    # a third run 0.5 s above the line: slope (1,000 x 1.1667 + 1,000 x 0.8333) / 2,000,000 = 0.001,
    # intercept 4.1667 - 2 = 2.1667; residuals -1/6, 1/3, -1/6: sqrt((1/6) / 2,000,000) per line
    noisy = fit_runs([(1_000, 3.0), (2_000, 4.5), (3_000, 5.0)])
    assert noisy.cpu_seconds_per_line == pytest.approx(0.001)
    assert noisy.fixed_cpu_seconds == pytest.approx(13 / 6)
    assert noisy.per_million_stderr == pytest.approx((1 / 12_000_000) ** 0.5 * 1_000_000)
    # below the origin: the line through it, b = (1,000 x 0.5 + 3,000 x 4.5) / (1,000² + 3,000²) = 0.0014
    through_origin = fit_runs([(1_000, 0.5), (3_000, 4.5)])
    assert (through_origin.fixed_cpu_seconds, through_origin.cpu_seconds_per_line) == pytest.approx((0.0, 0.0014))
    falling = fit_runs([(1_000, 5.0), (3_000, 4.0)])  # the larger run cheaper: all fixed, the mean
    assert (falling.fixed_cpu_seconds, falling.cpu_seconds_per_line) == (4.5, 0.0)
    assert fit_runs([(1_000, 3.0), (1_000, 3.5)]) is None  # one size: no line
    assert fit_runs([(1_000, 3.0)]) is None


def _with_costs(report, key: str, **scalings):
    """``report`` with the named paths of configuration ``key`` split as given."""
    results = []
    for r in report.results:
        if r.configuration.key == key:
            costs = tuple(dataclasses.replace(c, scaling=scalings.get(c.path, c.scaling)) for c in r.costs)
            r = dataclasses.replace(r, costs=costs)
        results.append(r)
    return dataclasses.replace(report, results=tuple(results))


def test_a_batch_split_over_runs_leaves_only_the_reconciliation_at_this_logs_cost():
    # the batch: 2 s fixed + 0.001 s a line over two runs; 86.4 million lines a day at 1,000 events/s
    runs = fit_runs([(1_000, 3.0), (3_000, 5.0)])
    report = _with_costs(sample_report(), "lambda-w10s-l0", batch=runs)
    lam = decide(report).candidate("lambda-w10s-l0")
    assert lam.unsplit == ("reconciliation",) and lam.per_day_lower_bound
    # speed 38.5 + 0.0005 x 86.4M; batch 2 + 0.001 x 86.4M; the reconciliation once, 20.25 s
    assert lam.cpu_per_day == pytest.approx(38.5 + 43_200 + 2 + 86_400 + 20.25)
    assert lam.cpu_per_million_lines == pytest.approx(500 + 1_000)
    # the batch's two runs give no standard error: the speed layer's, ± 100 s, is all that is known
    assert (lam.cpu_per_million_stderr, lam.stderr_complete) == (pytest.approx(100.0), False)
    header, rows = headline_table(decide(report))
    assert dict((r[0], r[1:]) for r in rows)["CPU per million lines"][0] == "≥ 1,500.0 s ± ≥ 100.0"
    split = _with_costs(report, "lambda-w10s-l0", reconciliation=fit_runs([(1_000, 1.0), (2_000, 1.5)]))
    whole = decide(split).candidate("lambda-w10s-l0")
    assert whole.unsplit == () and not whole.per_day_lower_bound
    assert whole.cpu_per_day == pytest.approx(38.5 + 43_200 + 2 + 86_400 + 0.5 + 0.0005 * 86_400_000)


def test_costs_per_day_within_their_standard_errors_leave_the_choice_to_cpu_on_this_log():
    report = dataclasses.replace(sample_report(), target_completeness=D("0.95"))
    # Lambda's speed layer a little cheaper a line than Kappa W=10s L=0's stream: per day 38.5 +
    # 0.00049 x 86.4M + 12 + 20.25 = 42,406.75 s against Kappa's 43,238.5 s
    cheaper = lambda stderr: CostScaling(4_000, 3, 38.5, 0.00049, stderr)  # noqa: E731
    noisy = decide(_with_costs(report, "lambda-w10s-l0", speed=cheaper(0.0001)))
    assert noisy.candidate("lambda-w10s-l0").cpu_per_day == pytest.approx(42_406.75)
    # 831.75 s apart, each ± 8,640 s (0.0001 s a line x 86.4M): not told apart, and Kappa's 60.6 CPU
    # s on this log against Lambda's 72.8 decide
    assert noisy.recommended == "kappa-w10s-l0"
    assert noisy.rule.startswith(
        "Recommended: Kappa W=10s L=0, the cheapest of the 4 swept configurations (CPU per day at 1,000 "
        "events/s, and CPU on this log among those whose costs per day differ by less than the standard error "
        "of their difference) whose completeness when final reaches 95.00%"
    )
    # ± 8.64 s each (every stream's slope known to 0.0000001 s a line): 831.75 s tells them apart,
    # and the cheaper per day is recommended
    sharp = _with_costs(report, "lambda-w10s-l0", speed=cheaper(0.0000001))
    for key, fixed in (("kappa-w10s-l0", 38.5), ("kappa-w10s-l1h", 48.75)):
        sharp = _with_costs(sharp, key, streaming=CostScaling(4_000, 3, fixed, 0.0005, 0.0000001))
    sharp_report = sharp
    sharp = decide(sharp)
    assert sharp.recommended == "lambda-w10s-l0"
    assert sharp.rule.startswith(
        "Recommended: Lambda W=10s L=0, the cheapest of the 4 swept configurations (CPU per day at 1,000 "
        "events/s) whose"
    )
    # Lambda's batch fit through two runs (no standard error) beside its noisy speed layer: its cost
    # per day is still known only to ± 8,640 s, so 38.5 + 42,336 + 1 + 20.25 = 42,395.75 s against
    # Kappa's sharp 43,238.5 s tells them no more apart than before, and CPU on this log decides
    flat_batch = fit_runs([(1_000, 1.0), (3_000, 1.0)])
    partly = _with_costs(sharp_report, "lambda-w10s-l0", speed=cheaper(0.0001), batch=flat_batch)
    partly = decide(partly)
    lam = partly.candidate("lambda-w10s-l0")
    assert lam.cpu_per_day == pytest.approx(42_395.75) and not lam.stderr_complete
    assert lam.cpu_per_day_stderr == pytest.approx(8_640.0)
    assert partly.recommended == "kappa-w10s-l0"
    assert "(CPU per day at 1,000 events/s, and CPU on this log among those" in partly.rule


def test_a_stream_whose_line_fell_shows_its_cost_per_day_with_the_slopes_error():
    # step seconds fall as the micro-batches grow (slope -0.002 s a line): no share grows with the
    # lines (all 9 CPU s fixed), but the slope is known only to its standard error: residuals 0.1,
    # -0.2, 0.1 around the line, sqrt(0.06 / 1 / 20,000) s a line of step time = 0.0017321 s, x 9 / 3 s
    # CPU a step second = 0.0051962 s of CPU a line, x 86.4 million lines a day = 448,950 s = 124.7 CPU-h
    fell = fit_micro_batches(9.0, [(100, 1.3), (200, 0.8), (300, 0.9)])
    assert (fell.fixed_cpu_seconds, fell.cpu_seconds_per_line) == (9.0, 0.0)
    assert fell.per_line_stderr == pytest.approx((0.06 / 20_000) ** 0.5 * 3)
    decision = decide(_with_costs(sample_report(), "kappa-w1m-l0", streaming=fell))
    kappa = decision.candidate("kappa-w1m-l0")
    assert kappa.cpu_per_day == pytest.approx(9.0)
    assert kappa.cpu_per_day_stderr == pytest.approx((0.06 / 20_000) ** 0.5 * 3 * 86_400_000)
    header, rows = headline_table(decision)
    assert dict((r[0], r[1:]) for r in rows)["CPU per day at 1,000 events/s"][1] == "0.0 ± 124.7 CPU-h"
    assert "at 1,000 events/s about 0.0 ± 124.7 CPU-h a day (streaming job)" in decision.sentences[1]


def test_the_method_says_how_each_path_was_measured_and_the_replays_split():
    replay = fit_micro_batches(20.125, [(100, 0.6), (200, 0.7), (700, 1.2)])
    report = _with_costs(sample_report(), "lambda-w10s-l0", batch=fit_runs([(1_000, 3.0), (3_000, 5.0)]))
    report = _with_costs(report, "kappa-w1m-l0", replay=replay)
    decision = decide(report)
    assert decision.method.startswith("How costs were measured: CPU seconds of each path, split into a fixed part")
    assert (
        " In this report the speed layer was split over its micro-batches; the nightly batch was split over its "
        "runs; the reconciliation was measured at one size (one reconciliation per stream setting, over the whole "
        "log; a second size would reconcile every stream again); the streaming job was split over its "
        "micro-batches; the full replay was split in some configurations and measured at one size in others."
    ) in decision.method
    # the replay: 10.0625 s of its 20.125 grow with its 1,000 lines (0.4 of its step time), the rest fixed
    assert decision.sentences[1].endswith(
        "a full replay of this log took 20.1 CPU s (12.1 s fixed + 8,050.0 s per million lines)."
    )
    assert "line falls" not in decision.method  # every split here grows with the lines
    falling = _with_costs(report, "lambda-w10s-l0", batch=fit_runs([(1_000, 5.0), (3_000, 4.0)]))
    assert (
        decide(falling).method.count(
            " Where a line falls (the smaller runs or micro-batches cost as much or more, e.g. a path's first run "
            "paying the session's warm-up), the path counts as all fixed: here the nightly batch in 1 of "
        )
        == 1
    )
    assert decision.method in html.unescape(render_html(report))
    assert "the nightly batch was split over its runs" in render_markdown(report)


# --- the curve's slot --------------------------------------------------------------------------


def _curve() -> WatermarkCurve:
    return WatermarkCurve(
        (
            CurvePoint("0", 40, {"USD": D("120.5")}, D("0.9"), D(0), D(0)),
            CurvePoint("10s", 12, {"USD": D("30")}, D("0.95"), D(10), D(12)),
            CurvePoint("5m", 0, {}, D("1"), D(300), D(300)),
        ),
        source="lklab advise",
    )


def test_the_curve_slot_round_trips_and_is_drawn():
    report = dataclasses.replace(sample_report(), watermark_curve=_curve())
    assert report_from_json(to_json(report)) == report
    page = render_html(report)
    figure = re.search(r'<svg id="plot-decision".*?</figure>', page, re.S).group(0)
    assert "advisor" in figure and "the line: lklab advise" in figure
    assert "the exact curve over every delay is not in this report" in render_html(sample_report())
    with pytest.raises(ValueError, match="increasing delay"):
        WatermarkCurve((CurvePoint("5m", 0), CurvePoint("10s", 1)))


def test_the_advisors_smallest_delay_reaching_the_target_is_named_and_marked():
    """At a 95% target the curve's first point reaching it is 10s; at 99.9% none but 5m; a
    pipeline's page judges another figure than the curve's and leaves the curve out."""
    decision = decide(dataclasses.replace(sample_report(), watermark_curve=_curve(), target_completeness=D("0.95")))
    assert decision.advised.watermark_delay == "10s"
    assert "the smallest watermark delay of the curve whose completeness when final reaches 95.00% is 10s" in (
        decision.rule
    )
    assert "(time until final, median / p95: 10 s / 12 s; 12 late (event, window) pairs)" in decision.rule
    page = render_html(dataclasses.replace(sample_report(), watermark_curve=_curve(), target_completeness=D("0.95")))
    assert "advisor: 10s reaches the target" in page
    late = decide(dataclasses.replace(sample_report(), watermark_curve=_curve(), target_completeness=D("0.999")))
    assert late.advised.watermark_delay == "5m"
    pipeline = decide(dataclasses.replace(sample_pipeline_report(), watermark_curve=_curve()))
    assert pipeline.curve is None and pipeline.advised is None and "advisor" not in pipeline.rule


# --- one answer in every file --------------------------------------------------------------


def test_billing_page_digest_and_json_print_the_same_answer():
    report = sample_report()
    page, digest = render_html(report), render_markdown(report)
    document = json.loads(to_json(report))
    table = document["derived"]["headline_table"]
    assert headline_cells(page) == [table["header"], *table["rows"]]
    for row in table["rows"]:
        assert "| " + " | ".join(row) + " |" in digest
    decision = document["derived"]["decision"]
    assert decision["recommended"] == "kappa-w1m-l0" and decision["target"] == "0.995000"
    assert decision["rule"] in page.replace("&#x27;", "'") and decision["rule"] in digest
    assert digest.index("## The answer") < digest.index("## Side by side")
    sections = re.findall(r'<section id="([\w-]+)"', page)
    assert sections[0] == "decision"


def test_pipeline_page_digest_and_json_print_the_same_answer(tmp_path):
    report = sample_pipeline_report(tmp_path)
    page = render_pipeline_html(report, b"png", tmp_path)
    digest = render_pipeline_markdown(report, tmp_path)
    answer = json.loads(pipeline_json(report))["answer"]
    table = answer["headline_table"]
    assert headline_cells(page) == [table["header"], *table["rows"]]
    for row in table["rows"]:
        assert "| " + " | ".join(row) + " |" in digest
    # outputs exactly right at the end: Lambda 100% after its batch, Kappa W=10m 100%, W=0s 66.67%
    assert answer["decision"]["criterion"] == "outputs exactly right at the end"
    assert answer["decision"]["recommended"] == "kappa-w10m-l0"
    assert table["header"] == ["", "Lambda W=0s L=0", "Kappa W=10m L=0"]
    assert re.findall(r'<section id="([\w-]+)"', page)[0] == "decision"
