"""The one exactly-once micro-batch sink of every live stream and every replay written as one.

A stream's micro-batch ends in several Delta commits, one per table it writes; a process may
die between any two of them. ``StreamSink.commit`` makes the whole micro-batch land once:

* every write is a Delta commit tagged ``(app_id, batch_id)`` (an app transaction) and is
  skipped when the table already holds that tag, so a micro-batch replayed after a crash
  commits nothing twice;
* the outputs are committed side by side (a thread per table), the **state last**: the state
  table is the commit point. A table may be held back to be written after the other outputs,
  its rows finished then (``commit``'s ``after_outputs``: the live runner stamps the metrics row
  with the moment the outputs were committed). A micro-batch whose state is committed (``committed``) is done
  whole and skipped; one whose state is not starts again from the state before it;
* a table without rows in a micro-batch gets no commit once it exists (there is nothing a
  replay could repeat, and most micro-batches have no side output); the first micro-batch
  creates every table, so a reader finds each table from then on;
* each write sits between the crash points ``before:<table>`` and ``after:<table>``
  (``lklab.crash_points``), so the tests can kill the process anywhere in a micro-batch;
* the settings the rows were built with are required of the tables before the first write
  (``require_settings``: ``SettingsConflict`` for tables built with others) and recorded on
  every table after the first micro-batch (``shared.table_settings``).

What differs between streams is declared: the tables in commit order (``SinkTable``: append,
merge by keys, or overwrite), the state table last.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lklab.crash_points import committing
from shared import catalog
from shared.eventlog import format_timestamp
from shared.table_settings import record, require
from shared.tables import Rows, Tables

__all__ = ["APPEND", "MERGE", "OVERWRITE", "SinkTable", "StreamSink", "stream_layout"]

APPEND, MERGE, OVERWRITE = "append", "merge", "overwrite"


@dataclass(frozen=True)
class SinkTable:
    """One table a micro-batch writes: ``write`` is ``append`` (new rows), ``merge`` (rows
    keyed by ``keys`` updated or inserted; a boolean ``_delete`` column, false when absent,
    deletes; only windows ending at or after the batch's earliest ``window_end`` are read) or
    ``overwrite`` (the table replaced by the rows: a snapshot such as the state)."""

    table: catalog.Table
    write: str = APPEND
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.write not in (APPEND, MERGE, OVERWRITE):
            raise ValueError(f"write: {self.write!r} is not valid; valid: {APPEND}, {MERGE}, {OVERWRITE}")
        if (self.write == MERGE) != bool(self.keys):
            raise ValueError(f"{self.table.name}: keys go with write='{MERGE}' and only with it")


def stream_layout(
    tables: Sequence[catalog.Table],
    *,
    merged: Mapping[catalog.Table, tuple[str, ...]] | None = None,
    snapshots: Collection[catalog.Table] = (),
) -> tuple[SinkTable, ...]:
    """A stream's layout from its tables in commit order (``tables``, as its pipeline lists
    them): the last, the state, is overwritten, as is each of ``snapshots``; each table of
    ``merged`` is merged by the keys it maps to; every other table is appended."""
    merged = merged or {}
    unknown = [table.name for table in (*merged, *snapshots) if table not in tables[:-1]]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not among the stream's tables before its state")

    def entry(table: catalog.Table) -> SinkTable:
        if table in merged:
            return SinkTable(table, MERGE, merged[table])
        return SinkTable(table, OVERWRITE if table in snapshots else APPEND)

    return (*(entry(table) for table in tables[:-1]), SinkTable(tables[-1], OVERWRITE))


@dataclass
class StreamSink:
    """A stream's tables under ``prefix``, written once per ``(app_id, batch_id)``; ``layout``
    in commit order, the state (the commit point) last."""

    tables: Tables
    prefix: str
    app_id: str
    layout: tuple[SinkTable, ...]
    settings: Mapping[str, str]
    _recorded: bool = field(default=False, init=False)
    _writers: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.layout or self.layout[-1].write != OVERWRITE:
            raise ValueError("a sink's last table is its state, written with write='overwrite'")

    @property
    def state(self) -> catalog.Table:
        return self.layout[-1].table

    @property
    def commit_order(self) -> tuple[catalog.Table, ...]:
        return tuple(entry.table for entry in self.layout)

    def name(self, table: catalog.Table) -> str:
        """The name of ``table`` under the sink's prefix."""
        return table.at(self.prefix)

    def names(self) -> list[str]:
        return [self.name(table) for table in self.commit_order]

    def require_settings(self) -> None:
        """Refuse tables built with other settings (``SettingsConflict``)."""
        require(self.tables, self.names(), self.settings)

    def committed(self, batch_id: int) -> bool:
        """Micro-batch ``batch_id`` landed whole (its state is committed)."""
        return self.tables.already_committed(self.name(self.state), self.app_id, batch_id)

    def read_state(self) -> pa.Table | None:
        """The state's rows as committed (None: no micro-batch has committed yet)."""
        name = self.name(self.state)
        return self.tables.read_arrow(name) if self.tables.exists(name) else None

    def commit(
        self,
        batch_id: int,
        rows: Mapping[catalog.Table, Rows],
        *,
        after_outputs: tuple[catalog.Table, Callable[[pa.Table], pa.Table]] | None = None,
    ) -> None:
        """Commit micro-batch ``batch_id``'s ``rows`` (one table of rows per table of the
        layout: ``shared.tables.Rows``, an Arrow table, a Spark frame whose tasks write its rows,
        or files tasks wrote, ``shared.staged_files``; the last two only with rows): the outputs
        side by side, then the state. ``after_outputs``: ``(table,
        finish)``, an output written once the others are committed, its rows ``finish(rows)``."""
        missing = [table.name for table in self.commit_order if table not in rows]
        if missing:
            raise ValueError(f"micro-batch {batch_id} has no rows for {', '.join(missing)}")
        *outputs, state = self.layout
        held = next((entry for entry in outputs if after_outputs and entry.table == after_outputs[0]), None)
        if after_outputs and held is None:
            raise ValueError(f"{after_outputs[0].name}: not among the stream's outputs")
        together = [entry for entry in outputs if entry is not held]
        if self._writers is None and together:
            self._writers = ThreadPoolExecutor(max_workers=len(together), thread_name_prefix="lklab-commit")
        done = [self._writers.submit(self._write, batch_id, entry, rows[entry.table]) for entry in together]
        for future in done:
            future.result()
        if held is not None:
            self._write(batch_id, held, after_outputs[1](rows[held.table]))
        self._write(batch_id, state, rows[state.table])
        if not self._recorded:
            record(self.tables, self.names(), self.settings)
            self._recorded = True

    def close(self) -> None:
        if self._writers is not None:
            self._writers.shutdown()
            self._writers = None

    def _write(self, batch_id: int, entry: SinkTable, rows: Rows) -> None:
        name = self.name(entry.table)
        with committing(batch_id, entry.table.name):
            if entry.write == OVERWRITE:
                self.tables.overwrite(name, rows, app_id=self.app_id, version=batch_id)
            elif _has_rows(rows) or not self.tables.exists(name):
                if entry.write == APPEND:
                    added = bool(entry.table.added)  # a table written before its newer columns takes them
                    self.tables.append(name, rows, app_id=self.app_id, version=batch_id, add_columns=added)
                else:
                    self._merge(name, entry.keys, rows, batch_id)

    def _merge(self, name: str, keys: tuple[str, ...], rows: pa.Table, batch_id: int) -> None:
        if "_delete" not in rows.column_names:
            rows = rows.append_column("_delete", pa.array([False] * rows.num_rows, pa.bool_()))
        windowed = rows.num_rows and "window_end" in rows.column_names
        since = format_timestamp(pc.min(rows["window_end"]).as_py()) if windowed else None
        self.tables.upsert(
            name,
            rows,
            keys=keys,
            app_id=self.app_id,
            version=batch_id,
            target_filter=f"t.window_end >= '{since}'" if since else None,
        )


def _has_rows(rows: Rows) -> bool:
    """A frame or staged files are given only with rows (a micro-batch without rows for a table
    gives an empty table)."""
    return not isinstance(rows, pa.Table) or rows.num_rows > 0
