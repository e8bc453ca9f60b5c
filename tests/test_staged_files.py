"""Rows a task wrote beside a table, committed once by the driver (``shared.staged_files``).

``stage`` writes a cell of a table's kind as one Parquet file of the table's exact schema and
names it in the task's ``staged`` cell; every other cell passes through. ``Tables`` commits the
named files once per ``(app_id, version)``: a file the task did not name (a failed attempt's)
is never committed, and files staged for a commit already made are discarded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from shared.arrow_blobs import BLOB_SCHEMA, decode, encode
from shared.staged_files import STAGED_SCHEMA, Target, stage, staged, staging_folder
from shared.tables import Tables

SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("amount", pa.decimal128(20, 6)),
        pa.field("event_time", pa.timestamp("us", tz="UTC")),
    ]
)


def _rows(*ids: str) -> pa.Table:
    time = datetime(2026, 1, 5, 0, 0, 0, 1, tzinfo=UTC)
    return pa.table(
        {"event_id": list(ids), "amount": [Decimal("1.000001")] * len(ids), "event_time": [time] * len(ids)},
        schema=SCHEMA,
    )


def _cells(*cells: tuple[str, pa.Table]) -> pa.RecordBatch:
    return pa.record_batch(
        [[0] * len(cells), [kind for kind, _ in cells], [encode(table) for _, table in cells]], schema=BLOB_SCHEMA
    )


def _staged(root, kind, *cells):
    folder = staging_folder(root)
    out = list(stage({kind: Target(folder, SCHEMA)})(iter([_cells(*cells)])))
    assert pa.Table.from_batches(out[-1:])["kind"].to_pylist() == ["staged"]
    return out, staged(folder, SCHEMA, decode(out[-1]["blob"][0].as_py()).to_pylist())


def test_a_tables_cells_become_files_named_in_the_tasks_cell_and_the_others_pass(spark, tmp_path):
    tables = Tables(spark, tmp_path, "deltalake")
    root = tables.path("duplicate_events")
    other = pa.table({"n": [1]})
    out, staged = _staged(
        root, "duplicates", ("duplicates", _rows("a", "b")), ("batch", other), ("duplicates", _rows())
    )
    passed = pa.Table.from_batches(out[:-1])
    assert passed["kind"].to_pylist() == ["batch"] and decode(passed["blob"][0].as_py()).equals(other)
    assert (len(staged.files), staged.rows) == (1, 2)  # the empty cell wrote no file
    assert decode(out[-1]["blob"][0].as_py()).schema == STAGED_SCHEMA
    assert tables.append("duplicate_events", staged, app_id="speed", version=0)
    assert not staged.folder.exists()
    table = tables.read_arrow("duplicate_events")
    assert table.schema == SCHEMA and table.equals(_rows("a", "b"))


def test_only_named_files_are_committed_once_and_a_done_commit_discards_its_files(spark, tmp_path):
    tables = Tables(spark, tmp_path, "deltalake")
    root = tables.path("stream_state")
    _, first = _staged(root, "state", ("state", _rows("a")))
    _rows("stray").to_pandas().to_parquet(first.folder / "part-from-a-failed-attempt.parquet")
    assert tables.overwrite("stream_state", first, app_id="speed", version=0)
    _, second = _staged(root, "state", ("state", _rows("b", "c")))
    assert tables.overwrite("stream_state", second, app_id="speed", version=1)
    _, again = _staged(root, "state", ("state", _rows("x")))
    assert not tables.overwrite("stream_state", again, app_id="speed", version=1)  # done: discarded
    assert not again.folder.exists()
    assert sorted(tables.read_arrow("stream_state")["event_id"].to_pylist()) == ["b", "c"]
    assert tables.as_of("stream_state", 0)["event_id"].to_pylist() == ["a"]
    assert not list(root.glob("_staging-*"))


def test_a_table_no_task_named_files_for_is_an_empty_table_and_other_schemas_are_refused(spark, tmp_path):
    tables = Tables(spark, tmp_path, "deltalake")
    root = tables.path("late_events")
    folder = staging_folder(root)
    folder.mkdir(parents=True)
    (folder / "part-of-a-failed-attempt.parquet").write_bytes(b"x")
    empty = staged(folder, SCHEMA, [])
    assert empty.equals(SCHEMA.empty_table()) and not folder.exists()
    assert tables.append("late_events", _rows("a"), app_id="speed", version=0)
    narrower = _rows("b").drop_columns(["amount"])
    folder = staging_folder(root)
    out = list(stage({"late_events": Target(folder, narrower.schema)})(iter([_cells(("late_events", narrower))])))
    other = staged(folder, narrower.schema, decode(out[-1]["blob"][0].as_py()).to_pylist())
    with pytest.raises(ValueError, match="late_events: files staged as"):
        tables.append("late_events", other, app_id="speed", version=1)
    assert not other.folder.exists() and tables.read_arrow("late_events").equals(_rows("a"))
