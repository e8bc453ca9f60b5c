"""The scenario generator: deterministic, realistic skew, counts it can vouch for."""

import hashlib
import json

import numpy as np
import pytest

from lklab.generator_params import from_request
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.contract import GenerateRequest
from lklab.pipelines.unique_visitors.generator import PageViewParams
from shared.eventlog import EventLog


def digest(lake):
    log = EventLog(lake)
    return hashlib.sha256(b"".join(s.path.read_bytes() for s in log.segments())).hexdigest()


def test_same_seed_same_log_other_seed_other_log(tmp_path):
    params = GeneratorParams(events=3_000, seed=11)
    generate(params, tmp_path / "a")
    generate(params, tmp_path / "b")
    generate(GeneratorParams(events=3_000, seed=12), tmp_path / "c")
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != digest(tmp_path / "c")


def test_refuses_to_mix_into_an_existing_log(tmp_path):
    generate(GeneratorParams(events=100), tmp_path)
    with pytest.raises(FileExistsError, match="already holds a log"):
        generate(GeneratorParams(events=100), tmp_path)
    generate(GeneratorParams(events=50, duplicate_rate=0, malformed_rate=0), tmp_path, overwrite=True)
    assert sum(len(EventLog.read_lines(s.path)) for s in EventLog(tmp_path).segments()) == 50


def test_log_is_in_ingest_order_and_counts_add_up(tmp_path):
    generated = generate(GeneratorParams(events=5_000, duplicate_rate=0.02, malformed_rate=0.01), tmp_path)
    manifest = generated.manifest
    lines = [line for s in EventLog(tmp_path).segments() for line in EventLog.read_lines(s.path)]
    assert len(lines) == manifest["lines"] == 5_000 + 100 + 50
    assert manifest["duplicates"] == 100 and sum(manifest["dead_letters"].values()) == 50
    ingest = [json.loads(l)["ingest_time"] for l in lines if l.startswith("{") and l.endswith("}")]
    assert ingest == sorted(ingest)
    assert json.loads((tmp_path / "generator" / "manifest.json").read_text()) == manifest


@pytest.mark.parametrize("scenario", ["billing", "clickstream", "outage"])
def test_delays_have_a_long_tail(tmp_path, scenario):
    """p50 of seconds, p99 of minutes or more, p99.9 of hours."""
    events = generate(GeneratorParams(scenario=scenario, events=200_000), tmp_path).events
    delays = (events.ingest_times - events.event_times) / 1e6
    p50, p99, p999 = np.percentile(delays, [50, 99, 99.9])
    assert 0.5 <= p50 < 10
    assert p99 >= 60
    assert p999 >= 3_600
    assert delays.min() >= 0


def test_clickstream_hiccup_holds_a_fifth_of_one_minute_for_90s(tmp_path):
    params = GeneratorParams(scenario="clickstream", events=100_000)
    events = generate(params, tmp_path).events
    minute = params.start + (int(params.span * 0.4) // 60_000_000) * 60_000_000
    inside = (events.event_times >= minute) & (events.event_times < minute + 60_000_000)
    held = (events.ingest_times - events.event_times)[inside] >= 90_000_000
    assert 0.15 < held.mean() < 0.27


def test_outage_holds_one_region_then_drains(tmp_path):
    params = GeneratorParams(scenario="outage", events=50_000)
    events = generate(params, tmp_path).events
    region = np.array([int(a[-4:]) % 4 == 0 for a in events.accounts.tolist()])
    begin = params.start + (int(params.span * 0.3) // 60_000_000) * 60_000_000
    during = (events.event_times >= begin) & (events.event_times < begin + 2 * 3_600_000_000)
    assert (events.ingest_times[region & during] >= begin + 2 * 3_600_000_000).all()
    assert np.median((events.ingest_times - events.event_times)[~region & during]) < 10_000_000


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="valid: billing, clickstream, outage"):
        GeneratorParams(scenario="iot")
    with pytest.raises(ValueError, match="duplicate-rate must be between 0 and 1"):
        GeneratorParams(duplicate_rate=2)


def test_params_are_filled_from_the_generate_options_by_name():
    request = GenerateRequest("outage", 500, 3, 3_600_000_000, 9, 0.2, 0.05, 30_000_000, overwrite=True)
    params = from_request(GeneratorParams, request)
    assert (params.scenario, params.events, params.accounts, params.duplicate_rate) == ("outage", 500, 9, 0.2)
    assert params.start == GeneratorParams().start  # no option sets it
    views = from_request(PageViewParams, request, views="events", users="accounts")
    assert (views.views, views.users, views.pages) == (500, 9, PageViewParams().pages)
    with pytest.raises(TypeError, match="view='events' names no parameter"):
        from_request(PageViewParams, request, view="events")
