"""Hand-made ``parse_page_views`` rows for the ``unique_visitors`` tests (no Spark), and a
runner that feeds them to the stream step micro-batch by micro-batch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from lklab.pipelines.unique_visitors.parse import PARSED_SCHEMA
from lklab.pipelines.unique_visitors.state import VisitorState, state_from_table, state_table
from lklab.pipelines.unique_visitors.step import VISITOR_WINDOW_SCHEMA, visitors_step

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
SECOND = 1_000_000


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def seconds_of(moment: datetime) -> int:
    return int((moment - BASE).total_seconds())


def url(name: str) -> str:
    return f"https://shop.example/{name}"


def row(segment: int, number: int, kind: str, *, event_id=None, user="u1", page="home", seconds=0, ingest=None) -> dict:
    """One parsed line: ``kind`` is view, heartbeat or bad (a dead letter)."""
    line = dict(
        segment=segment,
        line_number=number,
        event_id=None,
        user_id=None,
        url=None,
        event_time=None,
        ingest_time=None if ingest is None else at(ingest),
        raw_line="{}",
        reject_reason=None,
        reject_detail=None,
        heartbeat=kind == "heartbeat",
    )
    if kind == "view":
        line.update(event_id=event_id, user_id=user, url=url(page), event_time=at(seconds))
    elif kind == "bad":
        line.update(raw_line="{", reject_reason="not_json")
    return line


def segment_rows(
    segment: int, views: list[dict], *, ingest: float | None = None, bad: int = 0, heartbeat: bool = False
) -> list[dict]:
    """One segment ingested at ``ingest`` (default ``10_000 + segment`` seconds): views
    ``{id, t, user?, url?}``, then ``bad`` dead letters, then a heartbeat if asked."""
    ingest = 10_000 + segment if ingest is None else ingest
    rows = [
        row(
            segment,
            n,
            "view",
            event_id=v["id"],
            user=v.get("user", "u1"),
            page=v.get("url", "home"),
            seconds=v["t"],
            ingest=ingest,
        )
        for n, v in enumerate(views, start=1)
    ]
    rows += [row(segment, len(rows) + n, "bad", ingest=ingest) for n in range(1, bad + 1)]
    if heartbeat:
        rows.append(row(segment, len(rows) + 1, "heartbeat", ingest=ingest))
    return rows


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=PARSED_SCHEMA)


def run(settings, batches: list[pa.Table], *, restart_after: int | None = None):
    """Every micro-batch through ``visitors_step``; ``restart_after``: the state goes through its
    table form after that batch, as a new process would read it."""
    state, steps = VisitorState.empty(), []
    for batch_id, lines in enumerate(batches):
        step = visitors_step(lines, state, settings, batch_id)
        state = step.state
        if restart_after == batch_id:
            state = state_from_table(state_table(state))
        steps.append(step)
    return steps


def served(steps) -> dict[tuple, tuple]:
    """The windows as served after the last batch: the last row of each, batch ids aside."""
    rows = {}
    for step in steps:
        for r in step.windows.to_pylist():
            rows[(seconds_of(r["window_start"]), seconds_of(r["window_end"]), r["user_id"])] = (
                r["distinct_urls"],
                r["status"],
                r["updated_processing_time"],
            )
    return rows


def served_table(steps) -> pa.Table:
    """The last row served for each window, as a table."""
    last = {}
    for step in steps:
        for r in step.windows.to_pylist():
            last[(r["window_start"], r["window_end"], r["user_id"])] = r
    return pa.Table.from_pylist(list(last.values()), schema=VISITOR_WINDOW_SCHEMA)


def concat(steps, name: str) -> pa.Table:
    return pa.concat_tables([getattr(step, name) for step in steps])
