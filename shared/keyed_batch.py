"""A micro-batch of the step on the executors, as the sink takes it, without gathering it.

``shared.keyed_speed``'s operators emit a micro-batch as ``(key, kind, blob)`` cells. One Spark
job reads them (``keyed_batch``): the cells of rows that grow with the traffic or the state (the
dead letters, duplicates and late events, and the state: one ``stream_state`` row per clock,
remembered copy and window, as the driver step writes it) are written by the tasks as Parquet
files beside their tables (``shared.staged_files``); the small ones come to the driver (the
clock's figures, lines per segment, each bucket's tally and counts, and the window changes,
which the sink merges). ``KeyedBatch`` then gives each table's rows as ``StagedFiles`` for the
sink to commit, or an empty Arrow table when the batch has none of them (the sink skips it, or
creates the table from it in the first micro-batch).

What the driver holds of a micro-batch is its segments, currencies, buckets and window changes,
not its lines or the state. Rows are written in the order the tasks hold them, not in log order
(a Delta table has no order; readers sort).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from shared.arrow_blobs import BLOB_SCHEMA, decode
from shared.keyed_speed import COUNTS_SCHEMA, in_order
from shared.speed import DEAD_LETTER_SCHEMA, DUPLICATE_SCHEMA, LATE_SCHEMA, WINDOW_CHANGE_SCHEMA
from shared.staged_files import STAGED_SCHEMA, StagedFiles, Target, stage, staged, staging_folder
from shared.stream_metrics import SEGMENTS_SCHEMA, BatchTotals, add_tallies
from shared.stream_state import STATE_SCHEMA, state_part

__all__ = ["WRITTEN", "KeyedBatch", "keyed_batch"]

# The tables whose rows the tasks write, by the kind of their cells (``state``: three kinds).
WRITTEN = {
    "dead_letters": DEAD_LETTER_SCHEMA,
    "duplicates": DUPLICATE_SCHEMA,
    "late_events": LATE_SCHEMA,
    "state": STATE_SCHEMA,
}
_STATE_KINDS = {"state_clock": "clock", "state_remembered": "remembered", "state_windows": "window"}
_WINDOW_ORDER = [(name, "ascending") for name in ("window_start", "window_end", "account_id", "currency")]


def _as_state(kind: str, table: pa.Table) -> pa.Table:
    return state_part(STATE_SCHEMA, "kind", _STATE_KINDS[kind], table)


def _table_of(kind: str) -> str:
    return "state" if kind in _STATE_KINDS else kind


@dataclass(frozen=True)
class KeyedBatch:
    """One micro-batch from ``keyed_speed``: ``written`` (each of ``WRITTEN``'s tables' rows:
    ``StagedFiles``, or an empty table), ``totals`` (a ``BatchTotals``: what its
    ``stream_metrics`` row is made of), ``open_windows`` (windows held open after it), its
    ``window_changes`` and ``ran_in``, the micro-batch the clock ran in."""

    written: Mapping[str, StagedFiles | pa.Table]
    totals: BatchTotals
    open_windows: int
    window_changes: pa.Table
    ran_in: int

    def of(self, batch_id: int) -> KeyedBatch:
        """The batch, once it is micro-batch ``batch_id``'s (``RuntimeError`` when the clock ran
        in another)."""
        if self.ran_in != batch_id:
            raise RuntimeError(f"micro-batch {batch_id}: its rows are micro-batch {self.ran_in}'s")
        return self


def _all(parts: dict[str, list[pa.Table]], kind: str, schema: pa.Schema) -> pa.Table:
    tables = [table.cast(schema) for table in parts.get(kind, [])]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def keyed_batch(cells: DataFrame, roots: Mapping[str, Path]) -> KeyedBatch:
    """A micro-batch's cells from ``keyed_speed``, in one Spark job: ``WRITTEN``'s rows staged as
    files in their tables' folders (``roots``, by ``WRITTEN``'s names), the rest read here."""
    folders = {name: staging_folder(roots[name]) for name in WRITTEN}
    targets = {kind: Target(folders[kind], WRITTEN[kind]) for kind in ("dead_letters", "duplicates", "late_events")}
    targets |= {kind: Target(folders["state"], STATE_SCHEMA, _as_state) for kind in _STATE_KINDS}
    small = cells.mapInArrow(stage(targets), from_arrow_schema(BLOB_SCHEMA)).toArrow()
    parts: dict[str, list[pa.Table]] = {}
    for kind, blob in zip(small["kind"].to_pylist(), small["blob"].to_pylist()):
        parts.setdefault(kind, []).append(decode(blob))
    if "batch" not in parts:
        raise RuntimeError("a micro-batch without the clock's figures: the clock did not run in it")
    figures = parts["batch"][0].to_pylist()[0]
    named = _all(parts, "staged", STAGED_SCHEMA).to_pylist()
    written: dict[str, StagedFiles | pa.Table] = {}
    for name, schema in WRITTEN.items():
        written[name] = staged(folders[name], schema, [row for row in named if _table_of(row["kind"]) == name])
    counts = _all(parts, "counts", COUNTS_SCHEMA)
    counted = {name: int(pc.sum(counts[name]).as_py() or 0) for name in COUNTS_SCHEMA.names}
    totals = BatchTotals(
        segments=_all(parts, "segments", SEGMENTS_SCHEMA).sort_by("segment"),
        state_rows=counted["state_rows"],
        tally=add_tallies(parts.get("tally", [])),
        **{name: value for name, value in figures.items() if name != "batch_id"},  # the clock's
    )
    changes = _all(parts, "window_changes", WINDOW_CHANGE_SCHEMA)
    return KeyedBatch(written, totals, counted["open_windows"], in_order([changes], _WINDOW_ORDER), figures["batch_id"])
