"""``lklab compare --pipeline NAME`` on a declared pipeline: Lambda and Kappa on the user's own log.

**Runs.** The batch truth over the complete log (``truth.DeclaredTruth`` through the truth
runner), after a run over its first half that measures the batch's cost at a second size
(``comparison_runs.batch_path``). Then every stream setting the sweep needs — ``(W, 0)`` for Lambda's speed layer,
``(W, L)`` for each Kappa configuration — twice: live (the declaration's stream at that setting,
``segments_per_batch`` segments per micro-batch, into ``kappa/<plan>-w<W>-l<L>/``) and as a
replay on the executors (``kappa/<plan>-w<W>-l<L>-replay/``). The rule is cut-independent, so
both must hold the same windows, late rows, duplicates and dead letters: checked before anything
is measured. The live stream is reconciled against the truth (``reconcile.reconcile_declared``).
The swept settings replace the declaration's ``watermark-delay`` and ``allowed-lateness`` for
those runs only; the windows, fields and the other settings are the declaration's.

**Outputs** (``lklab.served_outputs``): one per (window, keys), its value the tuple
``(event_count, sum of each measure)``, due at the window's end. What the stream served over
time is rebuilt from its own tables on the log's clock: every first copy of an event the stream
did not send to its duplicates is counted, in each of its windows but those its late side output
holds, at the processing time of its line (``shared.clock.advance``); the value after the last
line must be the stream's window row (checked). A wrong output is ``missing`` (served nothing:
every event of it late), ``extra`` (served, not in the truth: an id the stream forgot past its
dedup horizon and counted again, say), ``undercounted`` or ``overcounted`` (by its count) or
``sums differ`` (its count right, a sum not).

**State.** The stream's state after each micro-batch (open windows plus remembered event ids)
is the rule's own, run again in the driver over the live run's micro-batches; its windows must
be the live run's (checked).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab import comparison_runs
from lklab.pipeline_assessment import MeasuredStream, Outputs, assessed_report, setting_of
from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.parse import parse_declared_lines
from lklab.pipelines.declared.reconcile import reconcile_declared
from lklab.pipelines.declared.rule import DeclaredState, declared_step
from lklab.pipelines.declared.stream import config_of, stream_rule
from lklab.pipelines.declared.tables import tables_of
from lklab.pipelines.declared.truth import DeclaredTruth
from lklab.pipelines.declared.window_counts import fixed_windows
from lklab.replay_runner import replay_on_executors
from lklab.report.pipeline_model import LogSummary, PipelineReport, StreamCheck
from lklab.served_outputs import timelines
from lklab.truth_runner import run_truth
from shared.clock import NO_TIME, ClockSettings, ClockState, advance, line_keys
from shared.config import LabConfig
from shared.durations import format_duration
from shared.log_clock import by_line, event_times, micros_or_unknown
from shared.log_source import raw_log
from shared.tables import Tables
from shared.windows import micros

__all__ = ["at_setting", "wrong_kind", "ParsedLog", "run_declared_comparison"]

Progress = Callable[[str], None]
_KINDS = ("windows",)
_COMPARE = "lklab compare"


def at_setting(d: Declaration, config: LabConfig) -> Declaration:
    """``d`` with ``config``'s watermark delay and allowed lateness: one stream setting of the sweep."""
    return dataclasses.replace(d, watermark_delay=config.watermark_delay, allowed_lateness=config.allowed_lateness)


def _window_keys(d: Declaration, table: pa.Table) -> list[tuple]:
    columns = [micros(table["window_start"]).tolist(), micros(table["window_end"]).tolist()]
    return list(zip(*columns, *(table[k].to_pylist() for k in d.keys)))


def _values(d: Declaration, table: pa.Table) -> dict[tuple, tuple]:
    """``(event_count, *sums)`` per window key of a window table (the truth's or a stream's)."""
    measures = [table[name].to_pylist() for name in ("event_count", *(m.name for m in d.measures))]
    return dict(zip(_window_keys(d, table), zip(*measures)))


def _rows(tables: Tables, prefix: str, table) -> set[tuple]:
    rows = tables.read_arrow(table.at(prefix))
    rows = rows.drop_columns([name for name in ("batch_id",) if name in rows.column_names])
    return set(tuple(r.values()) for r in rows.to_pylist())


def _stream_runs(d: Declaration) -> comparison_runs.StreamRuns:
    t = tables_of(d)
    compared = (t.windows, t.late, t.duplicates, t.dead_letter)
    return comparison_runs.StreamRuns(
        live=lambda spark, config, **options: stream_rule(at_setting(d, config)).run(spark, config, **options),
        replay=lambda spark, config, name: replay_on_executors(
            spark, config, stream_rule(at_setting(d, config)), name, replace=True
        ),
        rows=lambda tables, prefix: {table.name: _rows(tables, prefix, table) for table in compared},
        reconcile=lambda spark, config, against, _: reconcile_declared(spark, config, at_setting(d, config), against),
        metrics=t.stream_metrics,
    )


@dataclasses.dataclass(frozen=True)
class ParsedLog:
    """The whole log parsed as the stream parses it, in log order, with each line's processing
    time on the log's clock (microseconds; it depends on the ingest times alone)."""

    lines: pa.Table
    processing_time: np.ndarray

    @classmethod
    def read(cls, spark: SparkSession, d: Declaration, lake: str, last: int) -> ParsedLog:
        raw = raw_log(spark, lake, last, max_line_bytes=d.max_line_bytes).toArrow()
        lines = by_line(parse_declared_lines(d, raw))
        keys = line_keys(
            np.asarray(lines["segment"].to_numpy(), np.int64), np.asarray(lines["line_number"].to_numpy(), np.int64)
        )
        settings = ClockSettings(d.watermark_delay, d.watermark_interval)
        run = advance(ClockState(), settings, keys, micros_or_unknown(lines["ingest_time"]), event_times(lines))
        return cls(lines, run.processing_time)

    @property
    def end(self) -> int:
        return int(self.processing_time[-1]) if len(self.processing_time) else NO_TIME

    def micro_batches(self, segments_per_batch: int, last_segment: int) -> list[pa.Table]:
        """The lines cut as a live run reads the log: batch ``k`` holds segments
        ``k*n + 1 .. (k+1)*n`` (``shared.log_source``)."""
        batch_of = pc.divide(pc.subtract(self.lines["segment"], 1), segments_per_batch)
        return [self.lines.filter(pc.equal(batch_of, k)) for k in range(-(-last_segment // segments_per_batch))]


def _served(d: Declaration, log: ParsedLog, duplicates: pa.Table, late: pa.Table) -> dict[tuple, tuple]:
    """Per window key, the value served after each line that changed it (module docstring)."""
    window = fixed_windows(d, _COMPARE)
    resent = set(zip(duplicates["segment"].to_pylist(), duplicates["line_number"].to_pylist()))
    missed = set(
        zip(late["segment"].to_pylist(), late["line_number"].to_pylist(), micros(late["window_start"]).tolist())
    )
    lines = log.lines
    is_event = pc.and_(pc.is_null(lines["reject_reason"]), pc.invert(lines["heartbeat"])).to_numpy(zero_copy_only=False)
    names = (*d.keys, *(m.name for m in d.measures))
    columns = [lines[name].to_pylist() for name in ("segment", "line_number", *names)]
    times = micros_or_unknown(lines["event_time"])
    totals: dict[tuple, list] = {}
    changes = []
    for i in np.flatnonzero(is_event).tolist():
        segment, line_number, *values = (column[i] for column in columns)
        if (segment, line_number) in resent:
            continue
        keys, measures = values[: len(d.keys)], values[len(d.keys) :]
        for start in window.starts(int(times[i])):
            if (segment, line_number, start) in missed:
                continue
            key = (start, start + window.size, *keys)
            total = totals.setdefault(key, [0, *(0 for _ in measures)])
            total[0] += 1
            for j, value in enumerate(measures, start=1):
                total[j] += value
            changes.append((key, int(log.processing_time[i]), tuple(total)))
    return timelines(changes)


def _state_sizes(d: Declaration, batches: list[pa.Table], windows: dict[tuple, tuple]) -> tuple[int, int, int]:
    """(micro-batches, peak, final) state entries of the rule run over the live run's micro-batches;
    ``ValueError`` unless the windows it ends with are the live run's."""
    state, entries, served = DeclaredState(), [], {}
    for batch_id, lines in enumerate(batches):
        step = declared_step(d, lines, state, batch_id)
        state = step.state
        served.update(_values(d, step.windows))
        entries.append(len(state.windows) + len(state.seen))
    if served != windows:
        raise RuntimeError(f"{d.name}: the rule run in the driver ends with other windows than the live run")
    return len(entries), max(entries, default=0), entries[-1] if entries else 0


def wrong_kind(key: tuple, served, truth) -> str:
    """What is wrong with an output served as ``served`` whose truth is ``truth`` (``(count, *sums)`` or None)."""
    if served is None:
        return "missing"
    if truth is None:
        return "extra"
    if served[0] != truth[0]:
        return "undercounted" if served[0] < truth[0] else "overcounted"
    return "sums differ"


def _stream(
    d: Declaration,
    on: comparison_runs.Comparing,
    log: ParsedLog,
    setting: tuple[str, str],
    step: Progress,
) -> MeasuredStream:
    runs = comparison_runs.run_setting(on, setting, step, _stream_runs(d))
    live, reconciled, tables, t = runs.live, runs.reconciled, on.tables, tables_of(d)
    ran = at_setting(d, runs.config)
    windows = _values(d, tables.read_arrow(t.windows.at(live)))
    late = tables.read_arrow(t.late.at(live))
    duplicates = tables.read_arrow(t.duplicates.at(live))
    served = _served(ran, log, duplicates, late)
    if {key: timeline[-1][1] for key, timeline in served.items()} != windows:
        raise RuntimeError(
            f"stream W={setting[0]} L={setting[1]}: {t.windows.at(live)} is not what its events add up to"
        )
    step("state sizes: the rule over the live run's micro-batches")
    batches, peak, final = _state_sizes(ran, log.micro_batches(on.plan.segments_per_batch, on.last), windows)
    statuses = reconciled.statuses
    late_lines = set(zip(late["segment"].to_pylist(), late["line_number"].to_pylist()))
    return MeasuredStream(
        check=StreamCheck(*setting, on.plan.segments_per_batch, batches, len(windows)),
        served=served,
        side_output={"late events": len(late_lines), "late (event, window) rows": late.num_rows},
        late=frozenset(
            zip(late["segment"].to_pylist(), late["line_number"].to_pylist(), micros(late["window_start"]).tolist())
        ),
        duplicates=duplicates.num_rows,
        dead_letters=tables.read_arrow(t.dead_letter.at(live)).num_rows,
        state_peak=peak,
        state_final=final,
        live=runs.live_cost,
        replay=runs.replay_cost,
        reconciliation_cost=runs.reconciliation_cost,
        reconciliation={
            "windows explained by late events": reconciled.explained_late,
            "windows explained by unread segments": reconciled.explained_unread,
        },
        unexplained=reconciled.unexplained_count,
        reconciled_wrong=sum(statuses.values()) - statuses.get("match", 0),
    )


def run_declared_comparison(
    d: Declaration,
    spark: SparkSession,
    config: LabConfig,
    plan: comparison_runs.ComparisonPlan,
    *,
    source: str,
    progress: Progress = lambda _: None,
) -> PipelineReport:
    """Run every configuration of ``plan`` over ``config.lake``'s log of the pipeline ``d`` declares."""
    fixed_windows(d, _COMPARE)
    config = config_of(d, config)
    on = comparison_runs.Comparing.start(
        spark, config, plan, f"append your lines with 'lklab ingest --pipeline {d.name} FILE...' first"
    )
    configurations, tables = plan.configurations(), on.tables
    batch, batch_cost = comparison_runs.batch_path(
        config, on.last, lambda at, last: run_truth(spark, at, DeclaredTruth(d), last_segment=last), progress
    )
    progress("the log parsed in the driver, on its own clock")
    log = ParsedLog.read(spark, d, on.lake, on.last)
    settings = {setting_of(c): (c.watermark_delay, c.allowed_lateness) for c in configurations}
    streams = comparison_runs.each_setting(
        on,
        _stream_runs(d).live,
        settings,
        progress,
        lambda delay, lateness, step: _stream(d, on, log, (delay, lateness), step),
    )
    truth = _values(d, tables.read_arrow(tables_of(d).truth.name))
    keys = truth.keys() | {key for stream in streams.values() for key in stream.served}
    outputs = Outputs(truth, {key: key[1] for key in keys}, _KINDS, lambda key: "windows", wrong_kind)
    figures = batch.figures
    sums = "".join(f", the sum of {m.name}" for m in d.measures)
    described = {
        "pipeline": d.name,
        "source": source,
        "rule": f"declared: the count{sums} per {', '.join(d.keys)} in {d.window.describe()} windows "
        f"(declared watermark delay {format_duration(d.watermark_delay)})",
        "due": "a (window, keys) output is due at the window's end",
        "state_unit": "an open window or a remembered event id",
        "log": LogSummary(
            figures["lines"], figures["events"], figures["duplicates"], figures["dead_letters"], figures["heartbeats"]
        ),
        "state_sizes": (),
        "cost_scope": comparison_runs.cost_scope(config),
    }
    report = lambda: assessed_report(plan, outputs, streams, batch_cost, log.end, described)
    return on.measured(progress, report)
