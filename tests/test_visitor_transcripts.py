"""``unique_visitors`` transcripts through the stream step and the batch rule, with exact rows.

Each ``tests/transcripts/unique_visitors/*.yaml`` lists page views per log segment (``t`` in
seconds after ``BASE``; ``url`` a page name), the settings, and what must come out: the served
windows, the late side output (with ``adds_url``), duplicates, the corrected counts with their
verdict, the truth, and optionally the state's entries after each batch and the seen set.

Segment ``k`` is ingested at ``10_000 + k`` seconds unless it says ``ingest``; the log ends
with a heartbeat one second after the last segment, so the watermark takes the last segment in.
Every transcript runs one segment per micro-batch and the whole log as one micro-batch (the
same rows), and the truth comes from the batch rule and from the oracle (the same counts).
"""

from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml

from lklab.pipelines.unique_visitors.generator import GeneratedViews
from lklab.pipelines.unique_visitors.parse import PAGE_VIEW_COLUMNS, PAYLOAD_COLUMNS
from lklab.pipelines.unique_visitors.reconcile_rule import reconcile_distinct
from lklab.pipelines.unique_visitors.rule import distinct_url_counts_table, distinct_url_members_table
from lklab.pipelines.unique_visitors.state import seen_set
from lklab.pipelines.unique_visitors.step import VisitorSettings
from lklab.pipelines.unique_visitors.truth import truth_counts as oracle_counts
from shared.dedup import mark_duplicates_table
from shared.durations import parse_duration
from shared.windows import micros, window_spec
from tests.visitor_lines import (
    concat,
    row,
    run,
    seconds_of,
    segment_rows,
    served,
    served_table,
    table,
    url,
)

TRANSCRIPTS = sorted(Path(__file__).parent.joinpath("transcripts", "unique_visitors").glob("*.yaml"))


def settings_of(values: dict) -> VisitorSettings:
    duration = lambda key, default: parse_duration(values.get(key, default), name=key)
    slide = values.get("window-slide")
    spec = window_spec(
        values["window-kind"],
        size=duration("window-size", "1m"),
        slide=None if slide is None else parse_duration(slide),
        gap=1,
    )
    return VisitorSettings(
        spec,
        duration("watermark-delay", "1m"),
        duration("allowed-lateness", "0"),
        duration("dedup-horizon", "1h"),
        state_ttl=duration("state-ttl", "24h"),
    )


def batches_of(segments: list) -> list[pa.Table]:
    """One parsed table per segment, and the closing heartbeat."""
    batches, ingest = [], 10_000
    for index, segment in enumerate(segments, start=1):
        views, ingest = (
            (segment["views"], segment["ingest"]) if isinstance(segment, dict) else (segment, 10_000 + index)
        )
        batches.append(table(segment_rows(index, views, ingest=ingest)))
    batches.append(table([row(len(segments) + 1, 1, "heartbeat", ingest=ingest + 1)]))
    return batches


def late_rows(late: pa.Table) -> list:
    return sorted(
        [
            r["event_id"],
            seconds_of(r["window_start"]),
            seconds_of(r["window_end"]),
            seconds_of(r["watermark"]),
            r["lateness_seconds"],
            r["adds_url"],
        ]
        for r in late.to_pylist()
    )


def first_copies(batches: list[pa.Table]) -> pa.Table:
    """The log's page views, first copies only: the batch view (``shared.dedup`` over all)."""
    lines = pa.concat_tables(batches)
    views = lines.filter(pc.and_(pc.is_null(lines["reject_reason"]), pc.invert(lines["heartbeat"])))
    marked = mark_duplicates_table(views.select(list(PAGE_VIEW_COLUMNS)), PAYLOAD_COLUMNS)
    return marked.filter(pa.array(~marked["is_duplicate"].to_numpy(zero_copy_only=False)))


@pytest.fixture(params=TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def transcript(request):
    return yaml.safe_load(request.param.read_text())


def test_transcript_through_the_stream_and_the_batch_rule(transcript):
    settings, expect = settings_of(transcript["settings"]), transcript["expect"]
    batches = batches_of(transcript["segments"])
    steps = run(settings, batches)

    windows = served(steps)
    assert sorted([*key, n, status] for key, (n, status, _) in windows.items()) == sorted(
        [s, e, u, n, status] for s, e, u, n, status in expect["windows"]
    )
    assert late_rows(concat(steps, "late")) == sorted(
        [i, s, e, w, Decimal(x), adds] for i, s, e, w, x, adds in expect["late"]
    )
    assert sorted(concat(steps, "duplicates")["event_id"].to_pylist()) == sorted(expect.get("duplicates", []))
    if "state_entries" in expect:
        assert [step.state_entries for step in steps] == expect["state_entries"]
    if "seen" in expect:
        assert [[r["user_id"], r["url"]] for r in seen_set(steps[-1].state).to_pylist()] == [
            [u, url(p)] for u, p in expect["seen"]
        ]

    # the whole log in one micro-batch: the same windows, members and side output
    whole = run(settings, [pa.concat_tables(batches)])
    assert served(whole) == windows
    assert late_rows(concat(whole, "late")) == late_rows(concat(steps, "late"))
    member_keys = lambda ss: sorted(
        map(tuple, concat(ss, "members").select(["window_start", "user_id", "url", "event_id"]).to_pylist())
    )
    assert member_keys(whole) == member_keys(steps)

    firsts = first_copies(batches)
    truth_members = distinct_url_members_table(settings.window, firsts)
    truth = distinct_url_counts_table(truth_members)
    as_rows = lambda t: sorted(
        [seconds_of(r["window_start"]), seconds_of(r["window_end"]), r["user_id"], r["distinct_urls"]]
        for r in t.to_pylist()
    )
    assert as_rows(truth) == sorted(expect["truth"])
    oracle = GeneratedViews(
        event_ids=np.array(firsts["event_id"].to_pylist()),
        users=np.array(firsts["user_id"].to_pylist()),
        urls=np.array(firsts["url"].to_pylist()),
        event_times=micros(firsts["event_time"]),
        ingest_times=micros(firsts["ingest_time"]),
    )
    assert as_rows(oracle_counts(oracle, settings.window)) == as_rows(truth)

    result = reconcile_distinct(
        served_table(steps),
        concat(steps, "members"),
        concat(steps, "late"),
        truth_members,
        read_through=len(batches),
        dead_letters=concat(steps, "dead_letters"),
        stream_duplicates=concat(steps, "duplicates"),
    )
    assert result.proven
    corrected = sorted(
        [seconds_of(r["window_start"]), seconds_of(r["window_end"]), r["user_id"], r["corrected"], r["verdict"]]
        for r in result.windows.to_pylist()
    )
    assert corrected == sorted(expect["corrected"])
