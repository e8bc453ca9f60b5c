"""``lklab compare --pipeline unique_visitors``: Lambda and Kappa on one page-view log.

**Runs.** The batch truth over the complete log (``run_visitors_batch``), after a run over
its first half that measures the batch's cost at a second size (``comparison_runs.batch_path``).
Then every
stream setting the sweep needs — ``(W, 0)`` for Lambda's speed layer, ``(W, L)`` for each Kappa
configuration — twice: live (``run_visitors_speed``, ``segments_per_batch`` segments per
micro-batch, into ``kappa/<plan>-w<W>-l<L>/``: its cost is the stream's, its metrics give the
state after each micro-batch) and as a replay (``lklab.replay_runner.replay_on_executors`` into
``kappa/<plan>-w<W>-l<L>-replay/``: Kappa's reprocessing cost). The step is cut-independent, so
both must hold the same windows and members: checked before anything is measured. The live
stream is reconciled against the truth (``reconcile_visitors``).

**Outputs** (``lklab.served_outputs``): one per (window, user), its distinct URL count, due at
the window's end. What a stream served over time comes from its ``visitors_members``: each URL
counted, with ``added_at``, the processing time of the view that added it, so the count served
at ``t`` is the members added by ``t``. A wrong output is ``undercounted`` (late views of URLs
it never counted: the side output), ``overcounted``, ``missing`` (served nothing: every view
late) or ``extra`` (served, not in the truth).

**State TTL.** What is served never depends on the state TTL; the state does, and the report
shows how. The configurations are measured at the first of ``state_ttls`` (default: the
configured TTL, then ``DEFAULT_STATE_TTLS``, a sweep from an hour down to a minute). For the
state-size table each stream setting runs the stream step again at every TTL, in the driver,
over the log parsed once and cut into the live run's micro-batches (``segments_per_batch``
segments each): micro-batches, peak and final entries after a batch. At the measured TTL these
must be the live run's own figures, and at every TTL the members counted must be the live run's
(checked). That costs one parse of the log plus a step per micro-batch per TTL, not a stream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab import comparison_runs
from lklab.pipeline_assessment import MeasuredStream, Outputs, assessed_report, setting_of
from lklab.pipelines.unique_visitors.batch import run_visitors_batch
from lklab.pipelines.unique_visitors.parse import PARSED_SCHEMA, parse_page_views
from lklab.pipelines.unique_visitors.reconcile import reconcile_visitors
from lklab.pipelines.unique_visitors.speed import replay_visitors, run_visitors_speed, visitor_settings
from lklab.pipelines.unique_visitors.state import VisitorState, state_from_table
from lklab.pipelines.unique_visitors.step import visitors_step
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_DEAD_LETTER,
    VISITORS_DUPLICATES,
    VISITORS_LATE_EVENTS,
    VISITORS_MEMBERS,
    VISITORS_STATE,
    VISITORS_STREAM_METRICS,
    VISITORS_TRUTH,
    VISITORS_WINDOWS,
)
from lklab.report.pipeline_model import LogSummary, PipelineReport, StateSize, StreamCheck
from lklab.served_outputs import timelines
from shared.catalog import replay_prefix
from shared.config import LabConfig
from shared.durations import format_duration, parse_duration
from shared.eventlog import EventLog
from shared.log_source import raw_log
from shared.tables import Tables
from shared.windows import micros

__all__ = ["DEFAULT_STATE_TTLS", "default_state_ttls", "run_visitors_comparison"]

Progress = Callable[[str], None]
DEFAULT_STATE_TTLS = ("1h", "10m", "1m")  # swept after the configured TTL when no TTL is given
_KINDS = ("windows",)


def _window_keys(table: pa.Table) -> list[tuple]:
    return list(
        zip(micros(table["window_start"]).tolist(), micros(table["window_end"]).tolist(), table["user_id"].to_pylist())
    )


def _rows(tables: Tables, prefix: str, table, *drop: str) -> set[tuple]:
    rows = tables.read_arrow(table.at(prefix))
    rows = rows.drop_columns([name for name in drop if name in rows.column_names])
    return set(tuple(r.values()) for r in rows.to_pylist())


def _state_sizes(tables: Tables, prefix: str) -> tuple[int, int, int]:
    """(micro-batches, peak, final) state entries of a live run."""
    entries = tables.read_arrow(VISITORS_STREAM_METRICS.at(prefix)).sort_by("batch_id")["state_entries"].to_pylist()
    return len(entries), max(entries, default=0), entries[-1] if entries else 0


def _served(members: pa.Table) -> dict[tuple, tuple]:
    """Per (window, user): the count served after each member was added, on the log's clock."""
    added: dict[tuple, list[int]] = {}
    for key, moment in zip(_window_keys(members), micros(members["added_at"]).tolist()):
        added.setdefault(key, []).append(moment)
    return timelines(
        (key, moment, count) for key, moments in added.items() for count, moment in enumerate(sorted(moments), start=1)
    )


_DROPPED = ((VISITORS_WINDOWS, ("updated_batch_id",)), (VISITORS_MEMBERS, ("batch_id",)))
_RUNS = comparison_runs.StreamRuns(
    live=run_visitors_speed,
    replay=lambda spark, config, name: replay_visitors(spark, config, name, replace=True),
    rows=lambda tables, prefix: {table.name: _rows(tables, prefix, table, *drop) for table, drop in _DROPPED},
    reconcile=lambda spark, config, against, _: reconcile_visitors(spark, config, against=against),
    metrics=VISITORS_STREAM_METRICS,
)


def _stream(on: comparison_runs.Comparing, delay: str, lateness: str, step: Progress) -> MeasuredStream:
    runs = comparison_runs.run_setting(on, (delay, lateness), step, _RUNS)
    live, reconciled, tables = runs.live, runs.reconciled, on.tables
    verdicts, compared = reconciled.result.verdicts(), reconciled.result.windows

    served = _served(tables.read_arrow(VISITORS_MEMBERS.at(live)))
    windows = tables.read_arrow(VISITORS_WINDOWS.at(live))
    if {k: t[-1][1] for k, t in served.items()} != dict(
        zip(_window_keys(windows), windows["distinct_urls"].to_pylist())
    ):
        raise RuntimeError(
            f"stream W={delay} L={lateness}: {VISITORS_WINDOWS.at(live)} does not serve the count of its members"
        )
    late = tables.read_arrow(VISITORS_LATE_EVENTS.at(live))
    adds = sum(late["adds_url"].to_pylist())
    batches, peak, final = _state_sizes(tables, live)
    return MeasuredStream(
        check=StreamCheck(delay, lateness, on.plan.segments_per_batch, batches, windows.num_rows),
        served=served,
        side_output={"new URL": adds, "URL already counted": late.num_rows - adds},
        late=frozenset(
            zip(late["segment"].to_pylist(), late["line_number"].to_pylist(), micros(late["window_start"]).tolist())
        ),
        duplicates=tables.read_arrow(VISITORS_DUPLICATES.at(live)).num_rows,
        dead_letters=tables.read_arrow(VISITORS_DEAD_LETTER.at(live)).num_rows,
        state_peak=peak,
        state_final=final,
        live=runs.live_cost,
        replay=runs.replay_cost,
        reconciliation_cost=runs.reconciliation_cost,
        reconciliation={f"windows {v}": n for v, n in verdicts.items()},
        unexplained=reconciled.result.reasons().get("unexplained", 0),
        reconciled_wrong=sum(s != t for s, t in zip(compared["served"].to_pylist(), compared["truth"].to_pylist())),
    )


def _wrong_kind(key: tuple, served, truth) -> str:
    if served is None:
        return "missing"
    if truth is None:
        return "extra"
    return "undercounted" if served < truth else "overcounted"


def _outputs(tables: Tables, streams: dict) -> Outputs:
    truth = tables.read_arrow(VISITORS_TRUTH.name)
    values = dict(zip(_window_keys(truth), truth["distinct_urls"].to_pylist()))
    keys = values.keys() | {key for stream in streams.values() for key in stream.served}
    return Outputs(values, {key: key[1] for key in keys}, _KINDS, lambda key: "windows", _wrong_kind)


def default_state_ttls(configured: int) -> tuple[str, ...]:
    """The configured TTL, then the ``DEFAULT_STATE_TTLS`` other than it."""
    return (format_duration(configured), *[ttl for ttl in DEFAULT_STATE_TTLS if parse_duration(ttl) != configured])


def _parsed_log(spark: SparkSession, config: LabConfig, lake: str) -> pa.Table:
    """The whole log parsed (``PARSED_SCHEMA``), in log order, in the driver."""
    raw = raw_log(spark, lake, EventLog(lake).last_segment(), max_line_bytes=config.max_line_bytes)
    parsed = raw.transform(parse_page_views, max_clock_skew=config.max_clock_skew).toArrow()
    return (
        parsed.select(PARSED_SCHEMA.names)
        .cast(PARSED_SCHEMA)
        .sort_by([("segment", "ascending"), ("line_number", "ascending")])
    )


def _micro_batches(parsed: pa.Table, segments_per_batch: int, last_segment: int) -> list[pa.Table]:
    """``parsed`` (sorted by line) cut as a live run reads the log: batch ``k`` holds segments
    ``k*n + 1 .. (k+1)*n`` (``shared.log_source``)."""
    batch_of = pc.divide(pc.subtract(parsed["segment"], 1), segments_per_batch)
    return [parsed.filter(pc.equal(batch_of, k)) for k in range(-(-last_segment // segments_per_batch))]


def _member_keys(members: pa.Table) -> set[tuple]:
    return set(
        zip(
            *[
                members[name].to_pylist()
                for name in ("window_start", "window_end", "user_id", "url", "segment", "line_number")
            ]
        )
    )


def _ttl_sizes(
    config: LabConfig,
    tables: Tables,
    plan: comparison_runs.ComparisonPlan,
    batches: list[pa.Table],
    setting: tuple[str, str],
    ttls: tuple[str, ...],
    step: Progress,
) -> list[StateSize]:
    """The state sizes of ``setting`` at each of ``ttls``, the stream step run in the driver over
    the live run's micro-batches; the first TTL's must be the live run's, every TTL's members too."""
    delay, lateness = setting
    live = replay_prefix(f"{plan.name}-w{delay}-l{lateness}")
    counted = _member_keys(tables.read_arrow(VISITORS_MEMBERS.at(live)))
    sizes = []
    for ttl in ttls:
        step(f"state at TTL {ttl}")
        settings = visitor_settings(
            dataclasses.replace(
                config,
                watermark_delay=parse_duration(delay),
                allowed_lateness=parse_duration(lateness),
                state_ttl=parse_duration(ttl),
            )
        )
        state, entries, members = VisitorState.empty(), [], []
        for batch_id, lines in enumerate(batches):
            stepped = visitors_step(lines, state, settings, batch_id)
            state = stepped.state
            entries.append(stepped.state_entries)
            members.append(stepped.members)
        if _member_keys(pa.concat_tables(members)) != counted:
            raise RuntimeError(f"stream W={delay} L={lateness}: state TTL {ttl} changed the URLs counted")
        sizes.append(
            StateSize(delay, lateness, ttl, len(entries), max(entries, default=0), entries[-1] if entries else 0)
        )
    if dataclasses.astuple(sizes[0])[3:] != _state_sizes(tables, live):
        raise RuntimeError(
            f"stream W={delay} L={lateness}: the stream step in the driver held {sizes[0]} state entries, "
            f"the live run {_state_sizes(tables, live)}"
        )
    return sizes


def run_visitors_comparison(
    spark: SparkSession,
    config: LabConfig,
    plan: comparison_runs.ComparisonPlan,
    *,
    state_ttls: tuple[str, ...] = (),
    source: str,
    progress: Progress = lambda _: None,
) -> PipelineReport:
    """Run every configuration of ``plan`` over ``config.lake``'s page-view log and measure them.
    ``state_ttls``: durations as written; the first is the one measured (default: ``config``'s,
    then the ``DEFAULT_STATE_TTLS`` other than it)."""
    on = comparison_runs.Comparing.start(spark, config, plan, "run 'lklab generate --pipeline unique_visitors' first")
    ttls = tuple(state_ttls) or default_state_ttls(config.state_ttl)
    for ttl in ttls:
        parse_duration(ttl, name="state-ttl")
    config = dataclasses.replace(config, state_ttl=parse_duration(ttls[0]))
    on = dataclasses.replace(on, config=config)  # every run at the TTL measured
    configurations, tables = plan.configurations(), on.tables
    batch, batch_cost = comparison_runs.batch_path(
        config, on.last, lambda at, last: run_visitors_batch(spark, at, last), progress
    )
    batches = _micro_batches(_parsed_log(spark, config, on.lake), plan.segments_per_batch, on.last)
    settings = {setting_of(c): (c.watermark_delay, c.allowed_lateness) for c in configurations}
    sizes = []

    def measured(delay: str, lateness: str, step: Progress) -> MeasuredStream:
        stream = _stream(on, delay, lateness, step)
        sizes.extend(_ttl_sizes(config, tables, plan, batches, (delay, lateness), ttls, step))
        return stream

    streams = comparison_runs.each_setting(on, _RUNS.live, settings, progress, measured)

    outputs = _outputs(tables, streams)
    state = state_from_table(
        tables.read_arrow(
            VISITORS_STATE.at(
                replay_prefix(
                    f"{plan.name}-w{configurations[0].watermark_delay}-l{configurations[0].allowed_lateness}-replay"
                )
            )
        )
    )
    log_end = state.clock.processing_time
    described = {
        "pipeline": "unique_visitors",
        "source": source,
        "rule": f"distinct URLs per user in {config.window.describe()} windows",
        "due": "a (window, user) count is due at the window's end",
        "state_unit": "member entries (window, user, URL) held",
        "log": LogSummary(batch.lines, batch.views, batch.duplicates, batch.dead_letters, batch.heartbeats),
        "state_sizes": tuple(sizes),
        "cost_scope": comparison_runs.cost_scope(config),
    }
    report = lambda: assessed_report(plan, outputs, streams, batch_cost, log_end, described)
    return on.measured(progress, report)
