"""The watermark advisor on a log small enough to work out by hand (no Spark).

Tumbling windows of 60s, allowed lateness 0, ``watermark-interval`` 0 (the watermark moves
after every line). Times in seconds; ``M``: the largest event time of the lines before (what a
line is judged by, ``W = M - delay``); ``M*``: including the line (``W* = M* - delay``)::

    line  p    event time  window     amount   M      M*
    0     100  10          [0,60)     5 USD    -      10
    1     101  70          [60,120)   7 USD    10     70
    2     102  50          [0,60)     3 EUR    70     70
    3     103  130         [120,180)  2 USD    70     130
    4     104  40          [0,60)     11 USD   130    130
    5     105  heartbeat                       130    130
    6     106  100         [60,120)   13 EUR   130    130
    7     107  190         [180,240)  1 USD    130    190
    8     108  resend of line 0 (event time 10)  190    190

A pair is late when ``delay <= M - window_end``: line 2 up to 10s, line 4 up to 70s, line 6 up
to 10s; lines 0 (``M`` unknown), 1, 3 and 7 never.
"""

from decimal import Decimal

import numpy as np
import pytest

from lklab.watermark_advisor import SECOND, AdvisorLog, Amounts, advise, curve_delays, point_at
from shared.clock import NO_TIME, line_keys

S = SECOND
P = [100, 101, 102, 103, 104, 105, 106, 107, 108]
E = [10, 70, 50, 130, 40, None, 100, 190, 10]
EVENTS = [0, 1, 2, 3, 4, 6, 7]  # the first copies' lines
ENDS = [60, 120, 60, 180, 60, 120, 240]
USD = [5, 7, 0, 2, 11, 0, 1]
EUR = [0, 0, 3, 0, 0, 13, 0]


def the_log(horizon: int = 3600 * S) -> AdvisorLog:
    windows = sorted(set(ENDS))
    return AdvisorLog.of(
        keys=line_keys(np.ones(len(P), np.int64), np.arange(len(P))),
        ingest=np.array(P, np.int64) * S,
        event_time=np.array([NO_TIME if e is None else e * S for e in E], np.int64),
        watermark_interval=0,
        pair_line=np.array(EVENTS),
        pair_window=np.array([windows.index(end) for end in ENDS]),
        window_end=np.array(windows, np.int64) * S,
        amounts={"USD": Amounts(np.array(USD) * 10**6, 6), "EUR": Amounts(np.array(EUR) * 10**6, 6)},
        allowed_lateness=0,
        dedup_horizon=horizon,
        copies=(np.array([8]), np.array([0]), np.array([10 * S])),
    )


def test_no_delay():
    point = point_at(the_log(), 0)
    # late: line 2 (EUR 3), line 4 (USD 11), line 6 (EUR 13)
    assert (point.late_events, dict(point.late_money)) == (3, {"USD": Decimal(11), "EUR": Decimal(16)})
    # [0,60): opened at line 0, M* reaches 60 at line 1 -> final at p 101, 41s after its end,
    #   holding line 0 only (2 and 4 late); [60,120): final at line 3 (M* 130 >= 120), p 103,
    #   before its end, holding line 1 (6 late); [120,180): final at line 7 (M* 190), holding
    #   line 3; [180,240): M* never reaches 240
    assert (point.windows, point.never_final) == (4, 1)
    assert (point.events_when_final, point.final_window_events, point.truth_events) == (3, 6, 7)
    assert point.completeness == Decimal("0.5")
    assert (point.final_p50, point.final_p95, point.final_max) == (0, 41, 41)  # of [0, 0, 41]
    # absolute money held when final: USD 5 + 7 + 2, EUR none; of USD 25 and EUR 16 in those windows
    assert dict(point.money_when_final) == {"USD": 14, "EUR": 0}
    assert dict(point.final_window_money) == {"USD": 25, "EUR": 16}


def test_a_delay_at_a_pair_s_bound_still_makes_it_late():
    # line 2 and 6 are late up to 10s inclusive (W = 70 - 10 = 60 >= their end 60)
    assert point_at(the_log(), 10 * S).late_events == 3
    assert point_at(the_log(), 10 * S + 1).late_events == 1


def test_thirty_seconds():
    point = point_at(the_log(), 30 * S)
    assert (point.late_events, dict(point.late_money)) == (1, {"USD": Decimal(11)})
    # [0,60): M* >= 90 first at line 3, p 103 (43s after 60), holding lines 0 and 2;
    # [60,120): M* >= 150 at line 7, p 107, holding lines 1 and 6; [120,180) and [180,240):
    # M* never reaches 210 nor 270
    assert (point.events_when_final, point.final_window_events) == (4, 5)
    assert (point.final_p50, point.final_p95, point.never_final) == (0, 43, 2)


def test_past_the_widest_lateness_nothing_is_late_and_the_end_leaves_windows_open():
    log = the_log()
    assert log.widest == 70 * S + 1  # line 4: M 130 - its window's end 60
    point = point_at(log, 71 * S)
    assert point.late_events == 0 and point.late_money == {}
    # only [0,60) becomes final (M* >= 131 at line 7, p 107: 47s), holding all three of its events
    assert (point.never_final, point.events_when_final, point.final_window_events) == (3, 3, 3)
    assert point.completeness == 1 and point.final_p95 == 47


def test_a_resend_past_the_dedup_horizon_makes_small_delays_inexact():
    # line 8 is judged by M 190; its first copy's M is unknown, its event time 10: with a horizon
    # of 60s it is recognised only while 10 >= 190 - delay - 60, from a delay of 120s
    assert the_log(60 * S).exact_from == 120 * S
    assert not point_at(the_log(60 * S), 119 * S).exact and point_at(the_log(60 * S), 120 * S).exact
    assert the_log().exact_from == 0  # an hour's horizon recognises it at every delay


def test_the_curve_holds_the_asked_delays_and_recommends_the_smallest_reaching_the_target():
    advice = advise(the_log(), {"10s": 10 * S, "45s": 45 * S, "3m": 180 * S}, target=Decimal("0.8"))
    delays = [p.watermark_delay for p in advice.curve]
    assert delays[0] == 0 and 180 * S in delays and delays == sorted(delays)
    assert set(curve_delays(the_log())) <= set(delays)
    assert advice.points["45s"].late_events == 1 and advice.points["3m"].late_events == 0
    # 3/6 up to 10s; past it lines 2 and 6 are on time and [120,180) is never final: 4/5 (line 4
    # late in [0,60), final at p 103), so the smallest whole second reaching 80% is 11s
    rec = advice.recommended
    assert rec.met and rec.point.watermark_delay == 11 * S and rec.point.completeness == Decimal("0.8")


def test_a_latency_budget_gives_the_largest_delay_within_it():
    # p95 time until final: 41s at 0, 43s past 10s up to 70s ([0,60) final at line 3), 47s past
    # 70s ([0,60) final at line 7): the largest whole second within 45s is 70s
    advice = advise(the_log(), budget=45 * S)
    rec = advice.recommended
    assert rec.met and rec.point.watermark_delay == 70 * S and rec.point.final_p95 == 43
    assert point_at(the_log(), rec.point.watermark_delay + S).final_p95 > 45


@pytest.mark.parametrize("interval", [1, 10])
def test_ticks_hold_back_the_line_s_own_tick(interval):
    # every line in one tick of 10s from p 100 to 108: nothing before the tick, so M is unknown
    # for every line and nothing is late at any delay; with 1s ticks, as with no ticks
    built = AdvisorLog.of(
        keys=line_keys(np.ones(len(P), np.int64), np.arange(len(P))),
        ingest=np.array(P, np.int64) * S,
        event_time=np.array([NO_TIME if e is None else e * S for e in E], np.int64),
        watermark_interval=interval * S,
        pair_line=np.array(EVENTS),
        pair_window=np.array([sorted(set(ENDS)).index(end) for end in ENDS]),
        window_end=np.array(sorted(set(ENDS)), np.int64) * S,
        amounts={},
        allowed_lateness=0,
        dedup_horizon=3600 * S,
    )
    assert point_at(built, 0).late_events == (0 if interval == 10 else 3)
