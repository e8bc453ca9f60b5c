"""A small comparison report built by hand, with the edge cases the renderers must get right.

Five configurations (Lambda, Kappa at two lateness and two watermark settings, and the
processing-time baseline, which has no stream: no late figures, costs, state or
reconciliation), two currencies with different minor units (USD 2, JPY 0), a sub-cent amount,
a refund, ties (exact-match rate; replay CPU) and an all-equal row (unexplained windows), a
window served but not in truth (the baseline's), an event with a negative arrival delay, and
text that must be escaped (an account id and the source). The figures agree with each other as
the model requires: exact at the end = 40 truth windows - never exact, wrong at the end =
compared - exact.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D

from lklab.report.arrival import ArrivalDelay
from lklab.report.audit import FinanceAudit, LateBillingEvent
from lklab.report.commit_time import CommitTime
from lklab.report.gaps import FinalGap, GapHeatMap
from lklab.report.model import (
    Configuration,
    ConfigurationResult,
    EndSummary,
    ErrorPoint,
    LatencySummary,
    LateSummary,
    PathCost,
    ReconciliationSummary,
    Report,
    StreamRun,
)
from lklab.report.scaling import CostScaling

ODD_ACCOUNT = 'acct-<b>&"x"'
LAMBDA = Configuration("lambda", "10s", "0")
KAPPA = Configuration("kappa", "10s", "0")
KAPPA_LATE = Configuration("kappa", "10s", "1h")
KAPPA_SLOW = Configuration("kappa", "1m", "0")
BASELINE = Configuration("processing-time")

# Each stream's CPU split over its micro-batches: fixed + per line x 4,000 lines is its CPU
# (40.5, 50.75, 36.0); W=1m costs twice as much per line, so it is the dearer one per day.
W10S_L0 = CostScaling(4_000, 3, 38.5, 0.0005, 0.0001)
W10S_L1H = CostScaling(4_000, 3, 48.75, 0.0005, 0.0001)
W1M_L0 = CostScaling(4_000, 3, 32.0, 0.001)
# the live runs' micro-batches from start to commit (one run serves Lambda and Kappa at W=10s L=0)
COMMIT_W10S_L0 = CommitTime(3, 4_000, 0.25, 0.75, 0.75)
COMMIT_W10S_L1H = CommitTime(3, 4_000, 0.5, 0.875, 1.0)


def at(day: int, hour: int, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 1, day, hour, minute, second, tzinfo=dt.UTC)


def _latency(
    first: tuple, final: tuple, exact: tuple, never_final: int, never_exact: int, when_final: int | None
) -> LatencySummary:
    return LatencySummary(
        windows=40,
        first_result_p50=first[0],
        first_result_p95=first[1],
        first_result_max=first[2],
        never_emitted=0,
        final_p50=final[0],
        final_p95=final[1],
        final_max=final[2],
        never_final=never_final,
        exact_p50=exact[0],
        exact_p95=exact[1],
        exact_max=exact[2],
        never_exact=never_exact,
        events_when_final=when_final,
        truth_events=1000,
    )


TRUTH_MONEY = {"USD": D("2000.00"), "JPY": D("120000")}
END = at(6, 0, 5)


def _end(exact: int, served: dict, compared: int = 40) -> EndSummary:
    return EndSummary(
        at=END, windows_compared=compared, windows_exact=exact, served_money=served, truth_money=TRUTH_MONEY
    )


def _recon(against: str) -> ReconciliationSummary:
    return ReconciliationSummary(against=against, unexplained_windows=0, unexplained_money={})


LATE_MONEY = {"USD": D("30.000001"), "JPY": D("1500")}  # |25.000001| + |-5|, 1500: _LATE_ARRIVALS
LATE_NET = {"USD": D("20.000001"), "JPY": D("1500")}
FIRST = (D("12.5"), D("70.25"), D("300"))

RESULTS = (
    ConfigurationResult(
        LAMBDA,
        error_series=(
            ErrorPoint(at(5, 10, 1), 3, {"USD": D("12.50")}),
            ErrorPoint(at(5, 10, 2), 2, {"USD": D("2.5"), "JPY": D("1200")}),
            ErrorPoint(END, 0, {}),
        ),
        latency=_latency(FIRST, (D("35"), D("48.5"), D("60")), (D("50400"), D("86000"), D("86400")), 1, 0, 950),
        end=_end(40, TRUTH_MONEY),
        late=LateSummary(3, LATE_MONEY, 0, {}, side_output_net=LATE_NET),
        costs=(
            PathCost("speed", 40.5, 60.25, W10S_L0, COMMIT_W10S_L0),
            PathCost("batch", 12.0, 8.5),
            PathCost("reconciliation", 20.25, 22.0),
        ),
        state_rows_max=120,
        reconciliation=_recon("kappa:t-w10s-l0"),
    ),
    ConfigurationResult(
        KAPPA,
        error_series=(
            ErrorPoint(at(5, 10, 1), 3, {"USD": D("12.50")}),
            ErrorPoint(at(5, 10, 2), 2, {"USD": D("2.5"), "JPY": D("1200")}),
            ErrorPoint(END, 2, {"USD": D("2.5"), "JPY": D("1200")}),
        ),
        latency=_latency(FIRST, (D("35"), D("48.5"), D("60")), (D("12.5"), D("120"), D("200")), 1, 2, 950),
        end=_end(38, {"USD": D("1970.000001"), "JPY": D("108000")}),
        late=LateSummary(3, LATE_MONEY, 0, {}, side_output_net=LATE_NET),
        costs=(PathCost("streaming", 40.5, 60.25, W10S_L0, COMMIT_W10S_L0), PathCost("replay", 20.125, 15.5)),
        state_rows_max=120,
        reconciliation=_recon("kappa:t-w10s-l0"),
    ),
    ConfigurationResult(
        KAPPA_LATE,
        error_series=(
            ErrorPoint(at(5, 10, 1), 3, {"USD": D("12.50")}),
            ErrorPoint(at(5, 10, 2), 1, {"JPY": D("1200")}),
            ErrorPoint(END, 0, {}),
        ),
        latency=_latency(FIRST, (D("35"), D("48.5"), D("60")), (D("40"), D("3600"), D("3600")), 1, 0, 950),
        end=_end(40, TRUTH_MONEY),
        late=LateSummary(0, {}, 3, LATE_MONEY, absorbed_net=LATE_NET),
        costs=(PathCost("streaming", 50.75, 70.0, W10S_L1H, COMMIT_W10S_L1H), PathCost("replay", 24.5, 18.0)),
        state_rows_max=900,
        reconciliation=_recon("kappa:t-w10s-l1h"),
    ),
    ConfigurationResult(
        KAPPA_SLOW,
        error_series=(
            ErrorPoint(at(5, 10, 1), 2, {"USD": D("2.5")}),
            ErrorPoint(END, 1, {"USD": D("0.001234")}),
        ),
        latency=_latency(
            (D("60"), D("130"), D("360")), (D("85.125"), D("98"), D("120")), (D("60"), D("130"), D("400")), 3, 1, 990
        ),
        end=_end(39, {"USD": D("1998.00"), "JPY": D("114000")}),
        late=LateSummary(
            2, {"USD": D("0.5"), "JPY": D("300")}, 0, {}, side_output_net={"USD": D("-0.5"), "JPY": D("300")}
        ),
        costs=(PathCost("streaming", 36.0, 56.0, W1M_L0), PathCost("replay", 20.125, 15.25)),
        state_rows_max=130,
        reconciliation=_recon("kappa:t-w1m-l0"),
    ),
    ConfigurationResult(
        BASELINE,
        error_series=(
            ErrorPoint(at(5, 10, 1), 6, {"USD": D("40")}),
            ErrorPoint(END, 5, {"USD": D("10.5"), "JPY": D("300")}),
        ),
        latency=_latency((D("0"), D("0"), D("0")), (D("0"), D("0"), D("0")), (D("0"), D("0"), D("0")), 0, 4, None),
        end=_end(36, TRUTH_MONEY, compared=41),
        late=None,
        costs=(),
        state_rows_max=None,
        reconciliation=None,
    ),
)

HEAT_MAPS = (
    GapHeatMap(
        KAPPA.key,
        "USD",
        (
            FinalGap(at(5, 10, 0), at(5, 10, 1), "acct-1", D("12.50")),
            FinalGap(at(5, 10, 1), at(5, 10, 2), "acct-1", D("2.5")),
            FinalGap(at(5, 10, 0), at(5, 10, 1), ODD_ACCOUNT, D("0.001234")),
            FinalGap(at(5, 10, 2), at(5, 10, 3), "acct-2", D("7")),
        ),
    ),
    GapHeatMap(KAPPA.key, "JPY", (FinalGap(at(5, 10, 1), at(5, 10, 2), "acct-3", D("1200")),)),
)


def _late(
    configuration: Configuration,
    event_id: str,
    account: str,
    amount: str,
    currency: str,
    event_time: dt.datetime,
    ingest_time: dt.datetime,
    lateness: str,
    disposition: str,
) -> LateBillingEvent:
    window_start = event_time.replace(second=0)
    return LateBillingEvent(
        configuration.key,
        event_id,
        account,
        D(amount),
        currency,
        event_time,
        ingest_time,
        D(lateness),
        window_start,
        window_start + dt.timedelta(minutes=1),
        disposition,
    )


_LATE_ARRIVALS = (
    ("e-7", "acct-1", "25.000001", "USD", at(5, 10, 0, 30), at(5, 10, 40), "2340.000000"),
    ("e-9", ODD_ACCOUNT, "-5", "USD", at(5, 10, 0, 45), at(5, 11, 0), "3545.5"),
    ("e-11", "acct-3", "1500", "JPY", at(5, 10, 1, 5), at(5, 10, 30), "1735"),
)

AUDIT = FinanceAudit(
    tuple(
        _late(configuration, *arrival, disposition)
        for configuration, disposition in ((LAMBDA, "folded_in"), (KAPPA, "side_output"), (KAPPA_LATE, "absorbed"))
        for arrival in _LATE_ARRIVALS
    )
)

ARRIVAL_DELAY = ArrivalDelay.of_delays([D(s) for s in ("0.25", "0.5", "1", "2", "5", "30", "60", "600", "3600", "-1")])


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
        streams=(StreamRun("10s", "0", 10, 3, 38), StreamRun("10s", "1h", 10, 3, 40), StreamRun("1m", "0", 10, 3, 39)),
        log_end=at(5, 11, 0),
        nightly_landings=(at(6, 0),),
        error_step="10s",
    )
