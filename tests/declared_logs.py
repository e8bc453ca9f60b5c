"""A declared pipeline's log, by both paths: the stream's step walked over it micro-batch by
micro-batch (Arrow, no Spark), and the batch truth through the truth runner (Spark, Delta).

``walk`` cuts the log's lines, in log order, before each index it is given: the same rows must
come out whatever the cut (``rule.declared_step``'s contract). What it returns is what the
stream's tables would hold once the sink has merged every micro-batch: the windows by
``(window_start, window_end, keys)``, the latest totals winning; the late rows, duplicates and
dead letters appended; the metrics' counts summed. ``run_batch`` writes the log to a lake and
runs ``DeclaredTruth`` as ``lklab batch`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.parse import parse_declared_lines
from lklab.pipelines.declared.rule import DeclaredState, declared_step, state_from_table, state_table
from lklab.pipelines.declared.tables import METRIC_COUNTS, tables_of
from shared.log_clock import by_line

RAW_SCHEMA = pa.schema(
    [
        pa.field("segment", pa.int64()),
        pa.field("line_number", pa.int64()),
        pa.field("raw_line", pa.string()),
        pa.field("line_bytes", pa.int64()),
    ]
)


def raw_lines(segments: Sequence[Sequence[str]]) -> pa.Table:
    """The log's raw lines as its readers give them: segments and lines numbered from 1."""
    rows = [
        {"segment": s, "line_number": n, "raw_line": line, "line_bytes": None}
        for s, lines in enumerate(segments, start=1)
        for n, line in enumerate(lines, start=1)
    ]
    return pa.Table.from_pylist(rows, RAW_SCHEMA)


def segment_cuts(segments: Sequence[Sequence[str]], boundaries: Sequence[int]) -> list[int]:
    """Line indices of the cuts before segments ``boundaries`` (numbered from 1)."""
    starts, line = {}, 0
    for number, lines in enumerate(segments, start=1):
        starts[number] = line
        line += len(lines)
    return [starts[b] for b in boundaries]


@dataclass(frozen=True)
class StreamRows:
    """What the stream's tables hold after the walk (the module docstring)."""

    windows: dict[tuple, list]  # (start, end, *keys) -> [event_count, *sums]
    late: list[dict]
    duplicates: list[dict]
    dead_letters: list[dict]
    counts: dict[str, int]
    batches: int

    def comparable(self) -> tuple:
        """Everything but the ``batch_id`` each row was written by (a cut moves it)."""
        without = lambda rows: sorted(
            (tuple(sorted((k, v) for k, v in r.items() if k != "batch_id")) for r in rows), key=repr
        )
        return self.windows, without(self.late), without(self.duplicates), without(self.dead_letters), self.counts


def walk(d: Declaration, parsed: pa.Table, cuts: Sequence[int] = (), *, restart: bool = False) -> StreamRows:
    """``declared_step`` over ``parsed`` (in log order), a micro-batch ending before each of
    ``cuts``; with ``restart``, the state between micro-batches is the one a restarted stream
    reads back from its committed rows (``state_table``, then ``state_from_table``)."""
    parsed = by_line(parsed)
    bounds = sorted({0, *(c for c in cuts if 0 < c < parsed.num_rows), parsed.num_rows})
    state, windows, late, duplicates, dead_letters = DeclaredState(), {}, [], [], []
    counts = dict.fromkeys(METRIC_COUNTS, 0)
    for batch_id, (start, end) in enumerate(zip(bounds, bounds[1:])):
        batch = declared_step(d, parsed.slice(start, end - start), state, batch_id)
        state = state_from_table(d, state_table(d, batch.state)) if restart else batch.state
        for row in batch.windows.to_pylist():
            key = (row["window_start"], row["window_end"], *(row[k] for k in d.keys))
            windows[key] = [row["event_count"], *(row[m.name] for m in d.measures)]
        late += batch.late.to_pylist()
        duplicates += batch.duplicates.to_pylist()
        dead_letters += batch.dead_letters.to_pylist()
        (metrics,) = batch.metrics.to_pylist()
        for name in METRIC_COUNTS:
            counts[name] += metrics[name]
    return StreamRows(windows, late, duplicates, dead_letters, counts, len(bounds) - 1)


def stream_of(
    d: Declaration, segments: Sequence[Sequence[str]], cuts: Sequence[int] = (), *, restart: bool = False
) -> StreamRows:
    return walk(d, parse_declared_lines(d, raw_lines(segments)), cuts, restart=restart)


@dataclass(frozen=True)
class BatchRows:
    """What the truth's tables hold, as Arrow, and the run's figures and last segment read."""

    truth: pa.Table
    duplicates: pa.Table
    dead_letters: pa.Table
    figures: dict
    last_segment: int


def write_log(lake: Path, segments: Sequence[Sequence[str]]) -> None:
    """Each segment appended as it is (no ingest time stamped: the lines carry theirs)."""
    from shared.eventlog import EventLog

    log = EventLog(lake)
    for lines in segments:
        log.append(lines, stamp=False)


def run_batch(spark, lake: Path, d: Declaration) -> BatchRows:
    """``DeclaredTruth`` through the truth runner over the log under ``lake``, as ``lklab batch``
    runs it (the declaration's settings in the command's configuration)."""
    from lklab.pipelines.declared.stream import config_of
    from lklab.pipelines.declared.truth import DeclaredTruth
    from lklab.truth_runner import run_truth
    from shared.config import load_config
    from shared.tables import Tables

    config = config_of(d, load_config(None, {"lake": str(lake), "table-engine": "deltalake"}, environ={}))
    run = run_truth(spark, config, DeclaredTruth(d))
    tables, t = Tables(spark, lake, "deltalake"), tables_of(d)
    read = lambda table: tables.read_arrow(table.name)
    return BatchRows(
        read(t.truth), read(t.batch_duplicates), read(t.batch_dead_letter), dict(run.figures), run.last_segment
    )


def truth_windows(d: Declaration, truth: pa.Table) -> dict[tuple, list]:
    """The truth's rows as ``StreamRows.windows`` holds the stream's."""
    return {
        (r["window_start"], r["window_end"], *(r[k] for k in d.keys)): [
            r["event_count"],
            *(r[m.name] for m in d.measures),
        ]
        for r in truth.to_pylist()
    }
