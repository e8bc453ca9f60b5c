"""``lklab compare --pipeline order_payments``: Lambda and Kappa on one order/payment log.

**Runs.** The batch truth over the complete log (``run_payments_batch``), after a run over its
first half that measures the batch's cost at a second size (``comparison_runs.batch_path``).
Then, per stream
setting ``(W, L)`` (watermark delay, allowed lateness), the stream twice: live
(``run_payments_speed``, ``segments_per_batch`` segments per micro-batch, into
``kappa/<plan>-w<W>-l<L>/``) and as a replay (``lklab.replay_runner.replay_on_executors`` into
``kappa/<plan>-w<W>-l<L>-replay/``); their rows must agree (the join is cut-independent) before
anything is measured. The live stream is reconciled against the truth (``reconcile_payments``),
which writes its finance audit to ``reports/payments-<plan>-w<W>-l<L>/payments_audit.csv``; the
stream's ``StreamCheck`` carries that file, and the report links it.
Lambda at ``W`` is the stream at ``(W, 0)`` plus the batch correction; Kappa at ``(W, L)`` is that
stream alone. The events its allowed lateness *absorbed* are those late at ``(W, 0)`` and not at
``(W, L)``: each joined instead of going to the side output.

**Outputs** (``lklab.served_outputs``), keyed by log lines: a matched pair (order line, payment
line), due at the payment's time (the later event of a pair); an unpaid order, due when its
interval closes (``order_time + bound``); an orphan payment, due at its time (no order arriving
in event time after it can pay it). When the stream served each: a pair at the processing time
of its later line; an unpaid order or orphan at the processing time of the line after which
the watermark ``W*`` passed its hold (``event_time + bound + allowed_lateness``,
``JoinSettings.released_at``), which is the line the stream closed it on — read from the log's clock (``shared.clock``, the stream's own settings) and
checked against the ``watermark`` the row recorded. A wrong output is a ``missed match``, an
``extra match``, ``wrongly unpaid`` / ``wrongly orphan`` (the stream reported it, the truth has
a match) or ``unpaid not reported`` / ``orphan not reported`` (late, or still pending at the end).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab import comparison_runs
from lklab.pipeline_assessment import MeasuredStream, Outputs, assessed_report, setting_of
from lklab.pipelines.order_payments.batch import run_payments_batch
from lklab.pipelines.order_payments.parse import parse_order_lines
from lklab.pipelines.order_payments.reconcile import reconcile_payments
from lklab.pipelines.order_payments.rule import JoinSettings
from lklab.pipelines.order_payments.stream import PAYMENTS_RULE, join_settings, run_payments_speed
from lklab.pipelines.order_payments.tables import (
    PAYMENTS_DEAD_LETTER,
    PAYMENTS_DUPLICATES,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_MATCHED,
    PAYMENTS_ORPHANS,
    PAYMENTS_ROWS,
    PAYMENTS_STREAM_METRICS,
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_TRUTH_UNPAID,
    PAYMENTS_UNPAID,
)
from lklab.replay_runner import replay_on_executors
from lklab.report.pipeline_model import AuditFile, LogSummary, PipelineReport, StreamCheck
from lklab.served_outputs import timelines
from shared.clock import NO_TIME, ClockSettings, ClockState, advance, line_keys
from shared.config import LabConfig
from shared.durations import parse_duration
from shared.events import HEARTBEAT_FIELD
from shared.log_source import raw_log
from shared.tables import Tables
from shared.windows import micros

__all__ = ["run_payments_comparison"]

Progress = Callable[[str], None]
_KINDS = ("matched", "unpaid", "orphan")
_WRONG = {
    ("matched", False): "missed match",
    ("matched", True): "extra match",
    ("unpaid", False): "unpaid not reported",
    ("unpaid", True): "wrongly unpaid",
    ("orphan", False): "orphan not reported",
    ("orphan", True): "wrongly orphan",
}


def _lines(table: pa.Table, prefix: str = "") -> list[tuple[int, int]]:
    return list(zip(table[f"{prefix}segment"].to_pylist(), table[f"{prefix}line_number"].to_pylist()))


class LogClock:
    """The log's clock at one watermark delay: per line (in log order) its processing time and
    ``W*``, as the stream ran it (``lklab.pipelines.order_payments.rule.join_step`` feeds ``advance`` alike)."""

    def __init__(self, parsed: pa.Table, settings: ClockSettings) -> None:
        self.keys = line_keys(parsed["segment"].to_numpy(), parsed["line_number"].to_numpy())
        is_event = pc.and_(pc.is_null(parsed["reject_reason"]), pc.invert(parsed[HEARTBEAT_FIELD])).to_numpy(
            zero_copy_only=False
        )
        ingest = parsed["ingest_time"].cast(pa.int64()).fill_null(NO_TIME).to_numpy(zero_copy_only=False)
        events = parsed["event_time"].cast(pa.int64()).fill_null(NO_TIME).to_numpy(zero_copy_only=False)
        run = advance(ClockState(), settings, self.keys, ingest, np.where(is_event, events, NO_TIME))
        self.processing_time, self.watermark_after = run.processing_time, run.watermark_after

    def at_line(self, lines: list[tuple[int, int]]) -> np.ndarray:
        """Processing time of each line."""
        keys = line_keys(
            np.array([s for s, _ in lines], dtype=np.int64), np.array([n for _, n in lines], dtype=np.int64)
        )
        return self.processing_time[np.searchsorted(self.keys, keys)]

    def closing(self, holds: np.ndarray, recorded: np.ndarray, what: str) -> np.ndarray:
        """Processing time of the line after which ``W* > hold`` (the line the stream closed
        each on), checked against the ``W*`` the stream ``recorded`` on the row."""
        at = np.searchsorted(self.watermark_after, holds, side="right")
        if len(at) and (at.max() >= len(self.keys) or not np.array_equal(self.watermark_after[at], recorded)):
            raise RuntimeError(f"the {what} rows were closed at other watermarks than the log's clock gives")
        return self.processing_time[at]


def _row_sets(tables: Tables, prefix: str) -> dict[str, set]:
    found = {}
    for table in PAYMENTS_ROWS:
        rows = tables.read_arrow(table.at(prefix)).drop_columns(["batch_id"])
        found[table.name] = set(tuple(r.values()) for r in rows.to_pylist())
    return found


def _served(tables: Tables, prefix: str, clock: LogClock, settings: JoinSettings) -> dict:
    matched = tables.read_arrow(PAYMENTS_MATCHED.at(prefix))
    pairs = list(zip(_lines(matched, "order_"), _lines(matched, "payment_")))
    later = [max(order, payment) for order, payment in pairs]
    changes = [(("matched", o, p), t, True) for (o, p), t in zip(pairs, clock.at_line(later).tolist())]
    for kind, table in (("unpaid", PAYMENTS_UNPAID), ("orphan", PAYMENTS_ORPHANS)):
        rows = tables.read_arrow(table.at(prefix))
        closed = clock.closing(settings.released_at(micros(rows["event_time"])), micros(rows["watermark"]), kind)
        changes += [((kind, line), t, True) for line, t in zip(_lines(rows), closed.tolist())]
    return timelines(changes)


_RUNS = comparison_runs.StreamRuns(
    live=run_payments_speed,
    replay=lambda spark, config, name: replay_on_executors(spark, config, PAYMENTS_RULE, name, replace=True),
    rows=_row_sets,
    reconcile=lambda spark, config, against, name: reconcile_payments(spark, config, against=against, run=name),
    metrics=PAYMENTS_STREAM_METRICS,
)


def _stream(
    on: comparison_runs.Comparing, delay: str, lateness: str, clock: LogClock, step: Progress
) -> MeasuredStream:
    runs = comparison_runs.run_setting(on, (delay, lateness), step, _RUNS)
    live, reconciled, run_config, tables = runs.live, runs.reconciled, runs.config, on.tables
    ours = _row_sets(tables, live)
    metrics = tables.read_arrow(PAYMENTS_STREAM_METRICS.at(live)).sort_by("batch_id")
    state = metrics["state_rows"].to_pylist()
    late = tables.read_arrow(PAYMENTS_LATE_EVENTS.at(live))
    late_kinds = late["kind"].to_pylist()
    served = _served(tables, live, clock, join_settings(run_config))
    audit_csv = reconciled.audit_csv.resolve()
    audit = AuditFile(str(audit_csv), reconciled.audit_rows) if audit_csv.exists() else None
    return MeasuredStream(
        check=StreamCheck(delay, lateness, on.plan.segments_per_batch, metrics.num_rows, len(served), audit),
        served=served,
        side_output={"late orders": late_kinds.count("order"), "late payments": late_kinds.count("payment")},
        late=frozenset(_lines(late)),
        duplicates=len(ours[PAYMENTS_DUPLICATES.name]),
        dead_letters=len(ours[PAYMENTS_DEAD_LETTER.name]),
        state_peak=max(state, default=0),
        state_final=state[-1] if state else 0,
        live=runs.live_cost,
        replay=runs.replay_cost,
        reconciliation_cost=runs.reconciliation_cost,
        reconciliation=reconciled.result.by_reason,
        unexplained=reconciled.result.unexplained,
        reconciled_wrong=len(reconciled.result.differences),
    )


def _outputs(tables: Tables, streams: dict, bound: int, events: dict) -> Outputs:
    """The truth's pairs, unpaid orders and orphans; due times from the events' times
    (``events``: line -> event time of every valid line)."""
    matched = tables.read_arrow(PAYMENTS_TRUTH_MATCHED.name)
    values = {("matched", o, p): True for o, p in zip(_lines(matched, "order_"), _lines(matched, "payment_"))}
    values.update({("unpaid", line): True for line in _lines(tables.read_arrow(PAYMENTS_TRUTH_UNPAID.name))})
    values.update({("orphan", line): True for line in _lines(tables.read_arrow(PAYMENTS_TRUTH_ORPHANS.name))})
    keys = values.keys() | {key for stream in streams.values() for key in stream.served}
    due = {
        key: events[key[2]] if key[0] == "matched" else events[key[1]] + (bound if key[0] == "unpaid" else 0)
        for key in keys
    }
    return Outputs(values, due, _KINDS, lambda key: key[0], lambda key, served, truth: _WRONG[(key[0], truth is None)])


def run_payments_comparison(
    spark: SparkSession,
    config: LabConfig,
    plan: comparison_runs.ComparisonPlan,
    *,
    source: str,
    progress: Progress = lambda _: None,
) -> PipelineReport:
    """Run every configuration of ``plan`` over ``config.lake``'s order/payment log and measure them."""
    on = comparison_runs.Comparing.start(spark, config, plan, "run 'lklab generate --pipeline order_payments' first")
    configurations, tables = plan.configurations(), on.tables
    batch, batch_cost = comparison_runs.batch_path(
        config, on.last, lambda at, last: run_payments_batch(spark, at, last), progress
    )
    raw = (
        raw_log(spark, on.lake, on.last, max_line_bytes=config.max_line_bytes)
        .toArrow()
        .sort_by([("segment", "ascending"), ("line_number", "ascending")])
    )
    parsed = parse_order_lines(raw, config.max_clock_skew)
    valid = parsed.filter(pc.is_valid(parsed["event_time"]))
    events = dict(zip(_lines(valid), micros(valid["event_time"]).tolist()))

    settings = {setting_of(c): (c.watermark_delay, c.allowed_lateness) for c in configurations}
    clocks = {}

    def measured(delay: str, lateness: str, step: Progress) -> MeasuredStream:
        key = parse_duration(delay)
        if key not in clocks:  # the clock depends on the delay alone
            clocks[key] = LogClock(parsed, ClockSettings(key, config.watermark_interval))
        return _stream(on, delay, lateness, clocks[key], step)

    streams = comparison_runs.each_setting(on, _RUNS.live, settings, progress, measured)

    outputs = _outputs(tables, streams, config.join_bound, events)
    log_end = int(next(iter(clocks.values())).processing_time[-1])
    described = {
        "pipeline": "order_payments",
        "source": source,
        "rule": f"a payment matches an order of its order_id paid within {config.describe()['join-bound']} of it",
        "due": "a pair is due at its payment's time, an unpaid order when its interval closes, an orphan at its time",
        "state_unit": "state rows (held orders and payments, remembered first copies)",
        "log": LogSummary(
            batch.lines, batch.orders + batch.payments, batch.duplicates, batch.dead_letters, batch.heartbeats
        ),
        "state_sizes": (),
        "cost_scope": comparison_runs.cost_scope(config),
    }
    report = lambda: assessed_report(plan, outputs, streams, batch_cost, log_end, described)
    return on.measured(progress, report)
