"""A small comparison report built by hand, with the edge cases the renderers must get right.

Four configurations (Lambda, and Kappa at two lateness and two watermark settings), two
currencies with different minor units (USD 2, JPY 0), a sub-cent amount, a refund, ties
(exact-match rate; replay CPU) and an all-equal row (unexplained windows), an event with a
negative arrival delay, and text that must be escaped (an account id and the source).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D

from lklab.report.arrival import ArrivalDelay
from lklab.report.audit import FinanceAudit, LateBillingEvent
from lklab.report.gaps import GapHeatMap, WindowGap
from lklab.report.model import (
    Configuration,
    ConfigurationResult,
    ErrorPoint,
    LatencySummary,
    LateSummary,
    PathCost,
    ReconciliationSummary,
    Report,
)

ODD_ACCOUNT = 'acct-<b>&"x"'
LAMBDA = Configuration("lambda", "10s", "0")
KAPPA = Configuration("kappa", "10s", "0")
KAPPA_LATE = Configuration("kappa", "10s", "1h")
KAPPA_SLOW = Configuration("kappa", "1m", "0")


def at(day: int, hour: int, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 1, day, hour, minute, second, tzinfo=dt.timezone.utc)


def _latency(first: tuple, exact: tuple, never_exact: int, first_events: int) -> LatencySummary:
    return LatencySummary(
        windows=40,
        first_result_p50=first[0], first_result_p95=first[1], first_result_max=first[2], never_emitted=0,
        exact_p50=exact[0], exact_p95=exact[1], exact_max=exact[2], never_exact=never_exact,
        first_emission_events=first_events, truth_events=1000,
    )


TRUTH_MONEY = {"USD": D("2000.00"), "JPY": D("120000")}


def _recon(exact: int, served: dict) -> ReconciliationSummary:
    return ReconciliationSummary(
        windows_compared=40, windows_exact=exact, served_money=served, truth_money=TRUTH_MONEY,
        unexplained_windows=0, unexplained_money={},
    )


LATE_MONEY = {"USD": D("30.000001"), "JPY": D("1500")}

RESULTS = (
    ConfigurationResult(
        LAMBDA,
        error_series=(
            ErrorPoint(at(5, 10, 1), 3, {"USD": D("12.50")}),
            ErrorPoint(at(5, 10, 2), 2, {"USD": D("2.5"), "JPY": D("1200")}),
            ErrorPoint(at(6, 0, 5), 0, {}),
        ),
        latency=_latency((D("12.5"), D("70.25"), D("300")), (D("50400"), D("86000"), D("86400")), 0, 950),
        late=LateSummary(3, LATE_MONEY, 0, {}),
        costs=(PathCost("speed", 40.5, 60.25), PathCost("batch", 12.0, 8.5)),
        state_rows_max=120,
        reconciliation=_recon(40, TRUTH_MONEY),
    ),
    ConfigurationResult(
        KAPPA,
        error_series=(
            ErrorPoint(at(5, 10, 1), 3, {"USD": D("12.50")}),
            ErrorPoint(at(5, 10, 2), 2, {"USD": D("2.5"), "JPY": D("1200")}),
            ErrorPoint(at(6, 0, 5), 2, {"USD": D("2.5"), "JPY": D("1200")}),
        ),
        latency=_latency((D("12.5"), D("70.25"), D("300")), (D("12.5"), D("120"), D("200")), 2, 950),
        late=LateSummary(3, LATE_MONEY, 0, {}),
        costs=(PathCost("streaming", 35.25, 55.0), PathCost("replay", 20.125, 15.5)),
        state_rows_max=120,
        reconciliation=_recon(38, {"USD": D("1970.000001"), "JPY": D("108000")}),
    ),
    ConfigurationResult(
        KAPPA_LATE,
        error_series=(
            ErrorPoint(at(5, 10, 1), 3, {"USD": D("12.50")}),
            ErrorPoint(at(5, 10, 2), 1, {"JPY": D("1200")}),
            ErrorPoint(at(6, 0, 5), 0, {}),
        ),
        latency=_latency((D("12.5"), D("70.25"), D("300")), (D("40"), D("3600"), D("3600")), 0, 950),
        late=LateSummary(0, {}, 3, LATE_MONEY),
        costs=(PathCost("streaming", 50.75, 70.0), PathCost("replay", 24.5, 18.0)),
        state_rows_max=900,
        reconciliation=_recon(40, TRUTH_MONEY),
    ),
    ConfigurationResult(
        KAPPA_SLOW,
        error_series=(
            ErrorPoint(at(5, 10, 1), 2, {"USD": D("2.5")}),
            ErrorPoint(at(6, 0, 5), 1, {"USD": D("0.001234")}),
        ),
        latency=_latency((D("60"), D("130"), D("360")), (D("60"), D("130"), D("400")), 1, 990),
        late=LateSummary(2, {"USD": D("0.5"), "JPY": D("300")}, 0, {}),
        costs=(PathCost("streaming", 36.0, 56.0), PathCost("replay", 20.125, 15.25)),
        state_rows_max=130,
        reconciliation=_recon(39, {"USD": D("1998.00"), "JPY": D("114000")}),
    ),
)

HEAT_MAPS = (
    GapHeatMap(KAPPA.key, "USD", (
        WindowGap(at(5, 10, 0), at(5, 10, 1), "acct-1", D("12.50")),
        WindowGap(at(5, 10, 1), at(5, 10, 2), "acct-1", D("2.5")),
        WindowGap(at(5, 10, 0), at(5, 10, 1), ODD_ACCOUNT, D("0.001234")),
        WindowGap(at(5, 10, 2), at(5, 10, 3), "acct-2", D("7")),
    )),
    GapHeatMap(KAPPA.key, "JPY", (WindowGap(at(5, 10, 1), at(5, 10, 2), "acct-3", D("1200")),)),
)


def _late(configuration: Configuration, event_id: str, account: str, amount: str, currency: str,
          event_time: dt.datetime, ingest_time: dt.datetime, lateness: str, disposition: str) -> LateBillingEvent:
    window_start = event_time.replace(second=0)
    return LateBillingEvent(
        configuration.key, event_id, account, D(amount), currency, event_time, ingest_time, D(lateness),
        window_start, window_start + dt.timedelta(minutes=1), disposition,
    )


_LATE_ARRIVALS = (
    ("e-7", "acct-1", "25.000001", "USD", at(5, 10, 0, 30), at(5, 10, 40), "2340.000000"),
    ("e-9", ODD_ACCOUNT, "-5", "USD", at(5, 10, 0, 45), at(5, 11, 0), "3545.5"),
    ("e-11", "acct-3", "1500", "JPY", at(5, 10, 1, 5), at(5, 10, 30), "1735"),
)

AUDIT = FinanceAudit(tuple(
    _late(configuration, *arrival, disposition)
    for configuration, disposition in ((LAMBDA, "folded_in"), (KAPPA, "side_output"), (KAPPA_LATE, "absorbed"))
    for arrival in _LATE_ARRIVALS
))

ARRIVAL_DELAY = ArrivalDelay.of_delays(
    [D(s) for s in ("0.25", "0.5", "1", "2", "5", "30", "60", "600", "3600", "-1")]
)


def sample_report() -> Report:
    return Report(
        run_id="run-20260106T000500Z",
        source="billing <script>alert(1)</script>",
        window="tumbling 1m",
        generated_at=at(6, 0, 6),
        events=1000,
        arrival_delay=ARRIVAL_DELAY,
        results=RESULTS,
        heat_maps=HEAT_MAPS,
        audit=AUDIT,
    )
