"""Is the always-on speed layer keeping up? A check that reads the lake, not Spark.

The speed layer commits one ``stream_metrics`` row per micro-batch. From that table's rows and
its Delta commit history, and from the log itself, the check derives:

* **freshness**: seconds since the last commit to ``stream_metrics`` (wall clock);
* **backlog**: log segments published after the last one a micro-batch read, and how long the
  oldest of them has been waiting (seconds since it was published);
* **watermark lag**: the newest micro-batch's ``watermark_lag_seconds`` (its max ingest time
  minus the watermark it hands on): how far event time trails arrival.

A negative lag is not by itself a bad clock. The stream accepts an event dated up to
``max-clock-skew`` after its ingest time and hands on ``max event time - watermark-delay``, so
with the defaults (5m, 1m) an honest event can put the watermark up to 4 minutes ahead of
arrival: the **allowed lead** is ``max(0, max-clock-skew - watermark-delay)``, read from the
settings the checked table recorded (``shared.table_settings``; the lab's defaults where it
recorded none). A watermark further ahead than that can only come from a clock the stream did
not catch (a writer whose clock runs behind, a table built before ``max-clock-skew``): unhealthy,
and every event behind it is judged late.

The stream is **stalled** when it has not committed for longer than ``max_staleness`` *and*
a segment has waited at least that long: an idle stream over a quiet log is healthy, and a
segment published a second ago after a quiet hour is not a stall. The stream is **lagging**
when the watermark lag exceeds ``max_watermark_lag``, and **ahead** when the watermark leads
arrival by more than the allowed lead. No ``stream_metrics`` table at all is
unhealthy too. Durations are strings as everywhere in the lab (``90s``, ``10m``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from shared.catalog import STREAM_METRICS, tables_root
from shared.durations import MICROS_PER_SECOND, parse_duration
from shared.eventlog import EventLog

__all__ = [
    "StreamHealth",
    "SpeedLayerUnhealthy",
    "stream_health",
    "require_healthy_stream",
    "WatchedStream",
    "watched_streams",
    "streams_health",
    "require_healthy_streams",
]

DEFAULT_MAX_STALENESS = "10m"
DEFAULT_MAX_WATERMARK_LAG = "15m"


@dataclass(frozen=True)
class StreamHealth:
    """What the check saw. Seconds are wall-clock seconds; None where there is nothing to see."""

    table_path: str
    what: str
    checked_at: datetime
    last_commit_at: datetime | None
    freshness_seconds: float | None
    last_batch_id: int | None
    last_segment_read: int | None
    log_last_segment: int
    segments_behind: int
    oldest_unread_wait_seconds: float | None
    watermark_lag_seconds: float | None
    max_staleness_seconds: float
    max_watermark_lag_seconds: float
    max_watermark_lead_seconds: float
    reasons: tuple[str, ...]
    records_lag: bool = True

    @property
    def healthy(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict:
        """JSON-friendly: timestamps as ISO-8601 strings, plus ``healthy``."""
        out = asdict(self)
        for key in ("checked_at", "last_commit_at"):
            out[key] = None if out[key] is None else out[key].isoformat()
        out["reasons"] = list(self.reasons)
        out["healthy"] = self.healthy
        return out

    def describe(self) -> str:
        """A few lines for a task log or a terminal."""
        seconds = lambda value: "n/a" if value is None else f"{value:,.1f}s"
        lines = [
            f"{self.what} {'healthy' if self.healthy else 'UNHEALTHY'} ({self.table_path})",
            f"  last micro-batch: {self.last_batch_id if self.last_batch_id is not None else 'none'}, "
            f"committed {seconds(self.freshness_seconds)} ago (limit {seconds(self.max_staleness_seconds)})",
            f"  log: segment {self.log_last_segment}, read up to {self.last_segment_read or 0}, "
            f"{self.segments_behind} behind, oldest unread waiting {seconds(self.oldest_unread_wait_seconds)}",
            f"  watermark lag: {seconds(self.watermark_lag_seconds)} (limit {seconds(self.max_watermark_lag_seconds)}; "
            f"the watermark may lead arrival by {seconds(self.max_watermark_lead_seconds)})"
            if self.records_lag
            else "  watermark lag: not recorded by this stream (its metrics have no watermark_lag_seconds)",
        ]
        lines += [f"  - {reason}" for reason in self.reasons]
        return "\n".join(lines)


class SpeedLayerUnhealthy(RuntimeError):
    """The speed layer is stalled, lagging or has never committed; ``health`` says which."""

    def __init__(self, health: StreamHealth, others: tuple[StreamHealth, ...] = ()) -> None:
        super().__init__("\n".join(checked.describe() for checked in (health, *others)))
        self.health = health
        self.others = others


def _configured_lake() -> Path:
    from shared.config import load_config

    return load_config().lake


def _seconds(micros: int) -> float:
    return micros / MICROS_PER_SECOND


def _exact(seconds: float) -> str:
    """Seconds to the microsecond, without trailing zeros: ``240``, ``240.000001``."""
    return f"{seconds:,.6f}".rstrip("0").rstrip(".")


def _allowed_lead(lake: Path, table: str) -> tuple[int, str]:
    """How far (microseconds) the watermark of the stream writing ``table`` may lead arrival,
    and why: ``max(0, max-clock-skew - watermark-delay)`` as the table recorded them."""
    from shared.config import LabConfig
    from shared.table_settings import recorded
    from shared.tables import Tables

    settings = recorded(Tables(None, lake, "deltalake"), table)
    defaults = LabConfig().describe()
    skew, delay = (settings.get(key, defaults[key]) for key in ("max-clock-skew", "watermark-delay"))
    lead = max(0, parse_duration(skew, name="max-clock-skew") - parse_duration(delay, name="watermark-delay"))
    source = "its settings" if settings else "the lab's defaults (the table recorded no settings)"
    return lead, f"max-clock-skew {skew} less watermark-delay {delay}, {source}"


def stream_health(
    lake: str | Path | None = None,
    *,
    max_staleness: str = DEFAULT_MAX_STALENESS,
    max_watermark_lag: str = DEFAULT_MAX_WATERMARK_LAG,
    table: str = STREAM_METRICS.name,
    what: str = "speed layer",
    now: float | None = None,
) -> StreamHealth:
    """Check the stream writing one row per micro-batch to ``<lake>/tables/<table>`` (lake: the
    configured one); ``what`` names the stream in what the check says.

    The table needs ``batch_id`` and ``last_segment``; the watermark lag is checked where it
    records ``watermark_lag_seconds`` (a stream without a watermark records none).
    ``now`` is a Unix timestamp in seconds (default: the current time).
    """
    from deltalake import DeltaTable

    staleness_limit = _seconds(parse_duration(max_staleness, name="max-staleness"))
    lag_limit = _seconds(parse_duration(max_watermark_lag, name="max-watermark-lag"))
    lake = Path(lake) if lake is not None else _configured_lake()
    now = time.time() if now is None else now
    path = tables_root(lake) / table
    segments = EventLog(lake).segments()
    log_last = segments[-1].number if segments else 0

    last_commit_at = freshness = last_batch = last_read = lag = None
    records_lag = True
    lead, lead_rule = _allowed_lead(lake.resolve(), table)
    if DeltaTable.is_deltatable(str(path)):
        delta = DeltaTable(str(path))
        committed_ms = delta.history(1)[0]["timestamp"]
        last_commit_at = datetime.fromtimestamp(committed_ms / 1000, UTC)
        freshness = max(0.0, now - committed_ms / 1000)
        # Reading through the pyarrow dataset leaves Arrow threads that can abort the interpreter's
        # teardown; the lklab process ends through lklab.cli.process_exit for that reason.
        dataset = delta.to_pyarrow_dataset()
        records_lag = "watermark_lag_seconds" in dataset.schema.names
        columns = ["batch_id", "last_segment"] + (["watermark_lag_seconds"] if records_lag else [])
        rows = dataset.to_table(columns=columns)
        if rows.num_rows:
            newest = max(rows.to_pylist(), key=lambda row: row["batch_id"])
            last_batch, lag = newest["batch_id"], newest.get("watermark_lag_seconds")
            last_read = max((row for row in rows.column("last_segment").to_pylist() if row is not None), default=None)

    unread = [s for s in segments if s.number > (last_read or 0)]
    waiting = max(0.0, now - unread[0].path.stat().st_mtime) if unread else None

    reasons: list[str] = []
    if last_commit_at is None:
        reasons.append(f"no {table} table under {tables_root(lake)}: the {what} has not committed a micro-batch")
    elif freshness > staleness_limit and waiting is not None and waiting > staleness_limit:
        reasons.append(
            f"stalled: no micro-batch committed for {freshness:,.0f}s (limit {max_staleness}) "
            f"while {len(unread)} segment(s) wait, the oldest for {waiting:,.0f}s"
        )
    if lag is not None and lag > lag_limit:
        reasons.append(f"lagging: watermark lag {lag:,.0f}s exceeds {max_watermark_lag} (micro-batch {last_batch})")
    if lag is not None and -lag > _seconds(lead):
        reasons.append(
            f"ahead: the watermark is {_exact(-lag)}s ahead of the latest ingest time (micro-batch {last_batch}), "
            f"more than the {_exact(_seconds(lead))}s an accepted event can put it ahead ({lead_rule}): "
            "a clock the stream did not catch moved it, and every event behind it is judged late"
        )
    return StreamHealth(
        table_path=str(path),
        what=what,
        checked_at=datetime.fromtimestamp(now, UTC),
        last_commit_at=last_commit_at,
        freshness_seconds=freshness,
        last_batch_id=last_batch,
        last_segment_read=last_read,
        log_last_segment=log_last,
        segments_behind=len(unread),
        oldest_unread_wait_seconds=waiting,
        watermark_lag_seconds=lag,
        max_staleness_seconds=staleness_limit,
        max_watermark_lag_seconds=lag_limit,
        max_watermark_lead_seconds=_seconds(lead),
        reasons=tuple(reasons),
        records_lag=records_lag,
    )


def require_healthy_stream(
    lake: str | Path | None = None,
    *,
    max_staleness: str = DEFAULT_MAX_STALENESS,
    max_watermark_lag: str = DEFAULT_MAX_WATERMARK_LAG,
    table: str = STREAM_METRICS.name,
    now: float | None = None,
) -> StreamHealth:
    """``stream_health``, raising ``SpeedLayerUnhealthy`` (message: the description) when unhealthy."""
    health = stream_health(lake, max_staleness=max_staleness, max_watermark_lag=max_watermark_lag, table=table, now=now)
    if not health.healthy:
        raise SpeedLayerUnhealthy(health)
    return health


@dataclass(frozen=True)
class WatchedStream:
    """A pipeline's live stream as the check sees it: the pipeline, what the stream is called
    and its table of one row per micro-batch."""

    pipeline: str
    what: str
    metrics: str


def watched_streams(lake: str | Path | None = None) -> list[WatchedStream]:
    """The live streams to check in ``lake``: the default pipeline's always (it is the lab's
    speed layer), every other pipeline's once its stream has committed a micro-batch there (a
    pipeline whose stream never ran in this lake is not deployed in it, not stalled)."""
    from lklab.pipelines import DEFAULT, REGISTRY

    lake = Path(lake) if lake is not None else _configured_lake()
    watched = []
    for pipeline in REGISTRY.values():
        rule = pipeline.stream()
        if rule is None or rule.metrics is None:
            continue
        stream = WatchedStream(pipeline.name, rule.what, rule.metrics.name)
        if pipeline.name == DEFAULT or (tables_root(lake) / stream.metrics / "_delta_log").is_dir():
            watched.append(stream)
    return watched


def streams_health(
    lake: str | Path | None = None,
    *,
    max_staleness: str = DEFAULT_MAX_STALENESS,
    max_watermark_lag: str = DEFAULT_MAX_WATERMARK_LAG,
    now: float | None = None,
) -> list[tuple[WatchedStream, StreamHealth]]:
    """``stream_health`` of every ``watched_streams`` stream, with one ``now`` for all."""
    lake = Path(lake) if lake is not None else _configured_lake()
    now = time.time() if now is None else now
    return [
        (
            stream,
            stream_health(
                lake,
                max_staleness=max_staleness,
                max_watermark_lag=max_watermark_lag,
                table=stream.metrics,
                what=stream.what,
                now=now,
            ),
        )
        for stream in watched_streams(lake)
    ]


def require_healthy_streams(
    lake: str | Path | None = None,
    *,
    max_staleness: str = DEFAULT_MAX_STALENESS,
    max_watermark_lag: str = DEFAULT_MAX_WATERMARK_LAG,
    now: float | None = None,
) -> list[StreamHealth]:
    """``streams_health``, raising ``SpeedLayerUnhealthy`` for the first unhealthy stream once
    every stream was checked (its message: that stream's description, then the others')."""
    checked = [
        health
        for _, health in streams_health(lake, max_staleness=max_staleness, max_watermark_lag=max_watermark_lag, now=now)
    ]
    for health in checked:
        if not health.healthy:
            raise SpeedLayerUnhealthy(health, tuple(other for other in checked if other is not health))
    return checked
