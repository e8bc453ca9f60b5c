"""The days a reconciliation run covers, from its ``batch_truth`` events.

The events are stand-ins with the attributes Airflow's own events carry (``extra``,
``source_dag_run.logical_date``, ``source_dag_id``, ``source_run_id``, ``timestamp``); the
scheduler test in ``test_airflow_run.py`` feeds the function Airflow's real ones.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from lklab.batch_events import days_to_reconcile, event_days

UTC = dt.UTC
AT = dt.datetime(2026, 1, 6, 0, 5, tzinfo=UTC)


@dataclass
class Event:
    extra: dict = field(default_factory=dict)
    source_dag_run: SimpleNamespace | None = None
    source_dag_id: str | None = None
    source_run_id: str | None = None
    timestamp: dt.datetime = AT


def batch_event(logical_date: dt.datetime, run_id: str = "scheduled") -> Event:
    """An event ``batch_recompute`` emitted: the run's logical date names its day."""
    return Event(
        source_dag_run=SimpleNamespace(logical_date=logical_date), source_dag_id="batch_recompute", source_run_id=run_id
    )


def test_a_batch_event_covers_the_day_of_its_runs_logical_date():
    assert event_days(batch_event(dt.datetime(2026, 1, 5, tzinfo=UTC))) == [dt.date(2026, 1, 5)]
    # The day is the UTC day: 01:00 in Paris on the 6th is still the 5th in UTC.
    paris = dt.timezone(dt.timedelta(hours=1))
    assert event_days(batch_event(dt.datetime(2026, 1, 6, 0, 30, tzinfo=paris))) == [dt.date(2026, 1, 5)]


def test_days_in_the_extra_win_over_the_source_run():
    posted = Event(extra={"days": ["2026-01-03", "2026-01-04"], "from_rest_api": True})
    assert event_days(posted) == [dt.date(2026, 1, 3), dt.date(2026, 1, 4)]
    tagged = batch_event(dt.datetime(2026, 1, 5, tzinfo=UTC))
    tagged.extra = {"days": ["2026-01-01"]}
    assert event_days(tagged) == [dt.date(2026, 1, 1)]


def test_several_events_cover_every_day_once_oldest_first():
    events = {
        "batch_truth": [
            batch_event(dt.datetime(2026, 1, 5, tzinfo=UTC), "run-5"),
            batch_event(dt.datetime(2026, 1, 3, tzinfo=UTC), "run-3"),
            batch_event(dt.datetime(2026, 1, 5, tzinfo=UTC), "rerun-5"),  # the same day again
            Event(extra={"days": ["2026-01-04", "2026-01-03"]}),
        ]
    }
    days = days_to_reconcile(events, logical_date=None)  # asset-triggered runs have no logical date
    assert days == [dt.date(2026, 1, 3), dt.date(2026, 1, 4), dt.date(2026, 1, 5)]


def test_a_run_without_events_covers_its_logical_date():
    assert days_to_reconcile({}, dt.datetime(2026, 1, 5, tzinfo=UTC)) == [dt.date(2026, 1, 5)]
    with pytest.raises(ValueError, match="no batch_truth event and no logical date"):
        days_to_reconcile({}, None)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            Event(extra={"from_rest_api": True}),
            r"batch_truth event of 2026-01-06T00:05:00Z \(posted by hand\) names no day",
        ),
        (Event(extra={"days": "2026-01-05"}), "extra 'days' must be a non-empty list of YYYY-MM-DD, got '2026-01-05'"),
        (Event(extra={"days": []}), "extra 'days' must be a non-empty list"),
        (Event(extra={"days": ["05/01/2026"]}), r"extra 'days' must be YYYY-MM-DD dates, got \['05/01/2026'\]"),
        (
            Event(
                source_dag_run=SimpleNamespace(logical_date=None),
                source_dag_id="batch_recompute",
                source_run_id="manual",
            ),
            r"\(batch_recompute/manual\) names no day",
        ),
    ],
)
def test_an_event_that_names_no_day_is_refused_by_name(event, message):
    with pytest.raises(ValueError, match=message):
        days_to_reconcile({"batch_truth": [event]}, dt.datetime(2026, 1, 5, tzinfo=UTC))
