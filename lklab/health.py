"""Is the always-on speed layer keeping up? A check that reads the lake, not Spark.

The speed layer commits one ``stream_metrics`` row per micro-batch. From that table's rows and
its Delta commit history, and from the log itself, the check derives:

* **freshness**: seconds since the last commit to ``stream_metrics`` (wall clock);
* **backlog**: log segments published after the last one a micro-batch read, and how long the
  oldest of them has been waiting (seconds since it was published);
* **watermark lag**: the newest micro-batch's ``watermark_lag_seconds`` (its max ingest time
  minus the watermark it hands on): how far event time trails arrival;
* **live latency** over the micro-batches committed in the last ``latency_window``
  (``shared.live_latency``: per line, from its segment's publication to its batch's commit):
  how many batches, the highest of their p50s and of their p95s, and the largest wait. The
  highest batch p95 bounds the window's p95 over all its lines from above (every batch has at
  least 95% of its lines at or below its own p95), so a window whose batches keep their p95
  under ``max_latency`` has its lines' p95 under it too; the check counts the batches over it.

A negative lag is not by itself a bad clock. The stream accepts an event dated up to
``max-clock-skew`` after its ingest time and hands on ``max event time - watermark-delay``, so
with the defaults (5m, 1m) an honest event can put the watermark up to 4 minutes ahead of
arrival: the **allowed lead** is ``max(0, max-clock-skew - watermark-delay)``, read from the
settings the checked table recorded (``shared.table_settings``; the lab's defaults where it
recorded none). A watermark further ahead than that can only come from a clock the stream did
not catch (a writer whose clock runs behind, a table built before ``max-clock-skew``): unhealthy,
and every event behind it is judged late.

The stream is **idle** when it has read every segment of the log and waits for the next: healthy,
however long ago its last micro-batch or the log's last append was (both are reported), and
whatever its watermark lag. Its watermark moves only when a line arrives, so after the traffic
stops the lag stays where the last lines left it (the late arrivals at the end of a log can leave
it hours behind) with nothing left to read; the windows its state table still holds open are
listed, the ones a heartbeat (``lklab.heartbeats``, appended by an always-on stream to a quiet
log) would close.

The stream is **stalled** when it has not committed for longer than ``max_staleness`` *and*
a segment has waited at least that long: a segment published a second ago after a quiet hour is
not a stall. The stream is **lagging** when it is behind (unread segments) and the watermark lag
exceeds ``max_watermark_lag``, and **ahead** when the watermark leads arrival by more than the
allowed lead, and **slow** when it is behind and a micro-batch of the latency window had its
p95 over ``max_latency`` (while idle, a slow batch is shown, not an alarm: it read a backlog
that is gone, such as a log written before the stream started). No ``stream_metrics`` table at
all is unhealthy too. A lake that is not there (no
directory, or one holding neither ``log/`` nor ``tables/``) is no verdict at all but an error,
``NoLake``: a mistyped path must not read as a stream that never ran. Durations are strings as
everywhere in the lab (``90s``, ``10m``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from shared.catalog import LATENCY_COLUMNS, STREAM_METRICS, tables_root
from shared.durations import MICROS_PER_SECOND, format_duration, parse_duration
from shared.eventlog import EventLog
from shared.live_latency import start_to_commit

__all__ = [
    "StreamHealth",
    "LiveLatency",
    "live_latency",
    "NoLake",
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
DEFAULT_MAX_LATENCY = "2m"
DEFAULT_LATENCY_WINDOW = "10m"
LATENCY_READ = LATENCY_COLUMNS[:4]  # committed_at and the line latencies (started_at came later)


@dataclass(frozen=True)
class LiveLatency:
    """The live latency of the micro-batches committed in the last ``window_seconds``: how many
    (``batches``, those that measured a line), the highest batch p50 and p95, the largest wait,
    and how many batches had a p95 over ``limit_seconds``; and the longest of those batches from
    its start to its commit (``started_at``: what a batch itself took, the rest of a wait is the
    backlog before it). Seconds; None: no batch measured (or none recorded its start)."""

    window_seconds: float
    limit_seconds: float
    batches: int
    p50_highest: float | None
    p95_highest: float | None
    max: float | None
    over_limit: int
    commit_highest: float | None = None  # the longest batch from its start to its commit

    @property
    def slow(self) -> bool:
        return self.over_limit > 0

    def describe(self) -> str:
        window = f"the last {setting(self.window_seconds)}"
        if not self.batches:
            return f"  live latency: no micro-batch measured in {window}"
        flag = f"; {self.over_limit:,} over the {setting(self.limit_seconds)} limit" if self.slow else ""
        own = (
            ""
            if self.commit_highest is None
            else f"; a batch from its start to its commit: at most {self.commit_highest:,.2f}s"
        )
        return (
            f"  live latency, {self.batches:,} micro-batch(es) in {window}: p50 at most {self.p50_highest:,.2f}s, "
            f"p95 at most {self.p95_highest:,.2f}s (the highest batch figures), max {self.max:,.2f}s "
            f"(limit on a batch's p95: {setting(self.limit_seconds)}{flag}){own}"
        )


def setting(seconds: float | None) -> str:
    """A limit as the duration it was given as (``2m``, ``15m``, ``500ms``; ``n/a``: none)."""
    return "n/a" if seconds is None else format_duration(round(seconds * 1_000_000))


def _since(now: float, published: float | None) -> float | None:
    """Seconds from a segment's publication (``EventLog.published_at``, the clock the live
    latency counts from) to ``now``; None when the segment left the disk meanwhile."""
    return None if published is None else max(0.0, now - published)


def live_latency(rows: list[dict], now: float, window_seconds: float, limit_seconds: float) -> LiveLatency:
    """``LiveLatency`` of metrics ``rows`` (``committed_at`` as datetimes, the three latency
    columns, ``started_at`` where recorded) committed in ``(now - window_seconds, now]``."""
    since = now - window_seconds
    recent = [
        row
        for row in rows
        if row.get("committed_at") is not None
        and row["committed_at"].timestamp() > since
        and row.get("latency_p95_seconds") is not None
    ]
    highest = lambda name: max((row[name] for row in recent), default=None)
    own = [
        start_to_commit(row["started_at"], row["committed_at"]) for row in recent if row.get("started_at") is not None
    ]
    return LiveLatency(
        window_seconds=window_seconds,
        limit_seconds=limit_seconds,
        batches=len(recent),
        p50_highest=highest("latency_p50_seconds"),
        p95_highest=highest("latency_p95_seconds"),
        max=highest("latency_max_seconds"),
        over_limit=sum(row["latency_p95_seconds"] > limit_seconds for row in recent),
        commit_highest=max(own, default=None),
    )


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
    log_quiet_seconds: float | None = None
    open_windows: tuple[tuple[str, str], ...] | None = None
    latency: LiveLatency | None = None  # None: the stream's metrics record no live latency

    @property
    def idle(self) -> bool:
        """The stream has committed and read the whole log: it waits for the next segment."""
        return self.last_commit_at is not None and self.segments_behind == 0

    @property
    def healthy(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict:
        """JSON-friendly: timestamps as ISO-8601 strings, plus ``healthy``."""
        out = asdict(self)
        for key in ("checked_at", "last_commit_at"):
            out[key] = None if out[key] is None else out[key].isoformat()
        out["reasons"] = list(self.reasons)
        out["open_windows"] = None if self.open_windows is None else [list(w) for w in self.open_windows]
        if self.latency is not None:
            out["latency"]["slow"] = self.latency.slow
        out["healthy"] = self.healthy
        out["idle"] = self.idle
        return out

    def describe(self) -> str:
        """A few lines for a task log or a terminal."""
        seconds = lambda value: "n/a" if value is None else f"{value:,.1f}s"
        verdict = ("healthy" if self.healthy else "UNHEALTHY") + (", idle" if self.idle else "")
        lines = [
            f"{self.what} {verdict} ({self.table_path})",
            f"  last micro-batch: {self.last_batch_id if self.last_batch_id is not None else 'none'}, "
            f"committed {seconds(self.freshness_seconds)} ago (limit {setting(self.max_staleness_seconds)})",
            f"  log: segment {self.log_last_segment}, read up to {self.last_segment_read or 0}, "
            f"{self.segments_behind} behind, oldest unread waiting {seconds(self.oldest_unread_wait_seconds)}",
            f"  watermark lag: {seconds(self.watermark_lag_seconds)} (limit {setting(self.max_watermark_lag_seconds)}; "
            f"the watermark may lead arrival by {setting(self.max_watermark_lead_seconds)})"
            if self.records_lag
            else "  watermark lag: not recorded by this stream (its metrics have no watermark_lag_seconds)",
        ]
        if self.latency is not None:
            lines.append(self.latency.describe())
        if self.idle:
            lines += self._idle_lines()
        lines += [f"  - {reason}" for reason in self.reasons]
        return "\n".join(lines)

    def _idle_lines(self) -> list[str]:
        seconds = lambda value: "n/a" if value is None else f"{value:,.0f}s"
        lines = [
            f"  idle: read the whole log; last micro-batch {seconds(self.freshness_seconds)} ago, "
            f"the log's last append {seconds(self.log_quiet_seconds)} ago"
        ]
        if self.open_windows:
            shown = ", ".join(f"[{start}, {end})" for start, end in self.open_windows[:3])
            more = f" and {len(self.open_windows) - 3:,} more" if len(self.open_windows) > 3 else ""
            lines.append(f"  open windows a heartbeat would close: {len(self.open_windows):,}: {shown}{more}")
        elif self.open_windows is not None:
            lines.append("  open windows: none")
        if self.watermark_lag_seconds is not None and self.watermark_lag_seconds > self.max_watermark_lag_seconds:
            lines.append("  the watermark lag over its limit is no alarm while idle: no segment waits to be read")
        if self.latency is not None and self.latency.slow:
            lines.append(
                "  the live latency over its limit is no alarm while idle: the backlog it waited behind is read"
            )
        return lines


class NoLake(ValueError):
    """The lake checked is not there: no directory, or one holding neither a log nor tables."""


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


def require_lake(lake: Path) -> None:
    """Raise ``NoLake`` naming ``lake`` unless it is a directory holding a log or tables."""
    if not lake.is_dir():
        raise NoLake(f"lake {lake}: no such directory")
    if not (EventLog(lake).root.is_dir() or tables_root(lake).is_dir()):
        raise NoLake(f"lake {lake}: holds no lake (neither log/ nor tables/ under it)")


def _open_windows(path: Path) -> tuple[tuple[str, str], ...] | None:
    """The windows the state table at ``path`` holds open, oldest first, as ISO-8601 strings
    (``window_start``, ``window_end``): its rows that have a window, but not the ones whose
    ``status`` says final where it has one. None: no such table, or a state without windows."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(path)):
        return None
    dataset = DeltaTable(str(path)).to_pyarrow_dataset()
    names = dataset.schema.names
    if not {"window_start", "window_end"} <= set(names):
        return None
    columns = ["window_start", "window_end"] + (["status"] if "status" in names else [])
    held = {
        (row["window_start"], row["window_end"])
        for row in dataset.to_table(columns=columns).to_pylist()
        if row["window_start"] is not None and row.get("status", "open") == "open"
    }
    iso = lambda moment: moment.isoformat().replace("+00:00", "Z") if hasattr(moment, "isoformat") else str(moment)
    return tuple((iso(start), iso(end)) for start, end in sorted(held))


def _state_of(metrics: str) -> str | None:
    """The state table of the registered pipeline's stream whose metrics table is ``metrics``."""
    from lklab.pipelines import REGISTRY

    for pipeline in REGISTRY.values():
        rule = pipeline.stream()
        if rule is not None and rule.metrics is not None and rule.metrics.name == metrics:
            return rule.layout[-1].table.name
    return None


def stream_health(
    lake: str | Path | None = None,
    *,
    max_staleness: str = DEFAULT_MAX_STALENESS,
    max_watermark_lag: str = DEFAULT_MAX_WATERMARK_LAG,
    table: str = STREAM_METRICS.name,
    state: str | None = None,
    what: str = "speed layer",
    now: float | None = None,
    max_latency: str = DEFAULT_MAX_LATENCY,
    latency_window: str = DEFAULT_LATENCY_WINDOW,
) -> StreamHealth:
    """Check the stream writing one row per micro-batch to ``<lake>/tables/<table>`` (lake: the
    configured one; ``NoLake`` when it is not there); ``what`` names the stream in what the
    check says, ``state`` is its state table, whose open windows an idle stream reports (None:
    the state of the registered pipeline's stream whose metrics ``table`` is, if any).

    The table needs ``batch_id`` and ``last_segment``; the watermark lag is checked where it
    records ``watermark_lag_seconds`` (a stream without a watermark records none), the live
    latency of the batches committed in the last ``latency_window`` where it records it.
    ``now`` is a Unix timestamp in seconds (default: the current time).
    """
    from deltalake import DeltaTable

    staleness_limit = _seconds(parse_duration(max_staleness, name="max-staleness"))
    lag_limit = _seconds(parse_duration(max_watermark_lag, name="max-watermark-lag"))
    latency_limit = _seconds(parse_duration(max_latency, name="max-latency"))
    latency_span = _seconds(parse_duration(latency_window, name="latency-window"))
    lake = Path(lake) if lake is not None else _configured_lake()
    require_lake(lake)
    now = time.time() if now is None else now
    path = tables_root(lake) / table
    log = EventLog(lake)
    segments = log.segments()
    log_last = segments[-1].number if segments else 0

    last_commit_at = freshness = last_batch = last_read = lag = latency = None
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
        records_latency = set(LATENCY_READ) <= set(dataset.schema.names)
        read = [*LATENCY_READ, *(["started_at"] if "started_at" in dataset.schema.names else [])]
        columns = ["batch_id", "last_segment"] + (["watermark_lag_seconds"] if records_lag else [])
        rows = dataset.to_table(columns=columns + (read if records_latency else []))
        if records_latency:
            latency = live_latency(rows.select(read).to_pylist(), now, latency_span, latency_limit)
        if rows.num_rows:
            newest = max(rows.to_pylist(), key=lambda row: row["batch_id"])
            last_batch, lag = newest["batch_id"], newest.get("watermark_lag_seconds")
            last_read = max((row for row in rows.column("last_segment").to_pylist() if row is not None), default=None)

    unread = [s for s in segments if s.number > (last_read or 0)]
    waiting = _since(now, log.published_at(unread[0].number)) if unread else None
    quiet = _since(now, log.published_at(segments[-1].number)) if segments else None
    idle = last_commit_at is not None and not unread
    state = state if state is not None else _state_of(table)
    open_windows = _open_windows(tables_root(lake) / state) if idle and state is not None else None

    reasons: list[str] = []
    if last_commit_at is None:
        reasons.append(f"no {table} table under {tables_root(lake)}: the {what} has not committed a micro-batch")
    elif freshness > staleness_limit and waiting is not None and waiting > staleness_limit:
        reasons.append(
            f"stalled: no micro-batch committed for {freshness:,.0f}s (limit {max_staleness}) "
            f"while {len(unread)} segment(s) wait, the oldest for {waiting:,.0f}s"
        )
    if lag is not None and lag > lag_limit and not idle:
        reasons.append(f"lagging: watermark lag {lag:,.0f}s exceeds {max_watermark_lag} (micro-batch {last_batch})")
    if latency is not None and latency.slow and not idle:
        reasons.append(
            f"slow: {latency.over_limit:,} of the {latency.batches:,} micro-batch(es) of the last {latency_window} "
            f"had a p95 live latency over {max_latency} (the highest {latency.p95_highest:,.1f}s)"
        )
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
        log_quiet_seconds=quiet,
        open_windows=open_windows,
        latency=latency,
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
    its table of one row per micro-batch and its state table."""

    pipeline: str
    what: str
    metrics: str
    state: str | None = None


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
        stream = WatchedStream(pipeline.name, rule.what, rule.metrics.name, rule.layout[-1].table.name)
        if pipeline.name == DEFAULT or (tables_root(lake) / stream.metrics / "_delta_log").is_dir():
            watched.append(stream)
    return watched


def streams_health(
    lake: str | Path | None = None,
    *,
    max_staleness: str = DEFAULT_MAX_STALENESS,
    max_watermark_lag: str = DEFAULT_MAX_WATERMARK_LAG,
    now: float | None = None,
    max_latency: str = DEFAULT_MAX_LATENCY,
    latency_window: str = DEFAULT_LATENCY_WINDOW,
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
                state=stream.state,
                what=stream.what,
                now=now,
                max_latency=max_latency,
                latency_window=latency_window,
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
    max_latency: str = DEFAULT_MAX_LATENCY,
    latency_window: str = DEFAULT_LATENCY_WINDOW,
) -> list[StreamHealth]:
    """``streams_health``, raising ``SpeedLayerUnhealthy`` for the first unhealthy stream once
    every stream was checked (its message: that stream's description, then the others')."""
    checked = [
        health
        for _, health in streams_health(
            lake,
            max_staleness=max_staleness,
            max_watermark_lag=max_watermark_lag,
            now=now,
            max_latency=max_latency,
            latency_window=latency_window,
        )
    ]
    for health in checked:
        if not health.healthy:
            raise SpeedLayerUnhealthy(health, tuple(other for other in checked if other is not health))
    return checked
