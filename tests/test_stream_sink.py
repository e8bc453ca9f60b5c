"""The one exactly-once sink (``lklab.stream_sink``) on real Delta tables: each table once per
``(app_id, batch_id)``, the state last, no commit for a table without rows once it exists, the
settings recorded after the first micro-batch. The crash tests of each stream kill it between
its commits (``test_exactly_once``, ``test_visitors_jobs``, ``test_payments_jobs``)."""

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lklab.stream_sink import APPEND, MERGE, OVERWRITE, SinkTable, StreamSink, stream_layout
from shared.catalog import Table
from shared.table_settings import recorded
from shared.tables import Tables

EVENTS = Table("sink_events", "tests.test_stream_sink:EVENT_SCHEMA")
TOTALS = Table("sink_totals", "tests.test_stream_sink:TOTAL_SCHEMA")
STATE = Table("sink_state", "tests.test_stream_sink:STATE_SCHEMA")
EVENT_SCHEMA = pa.schema([pa.field("id", pa.string())])
TOTAL_SCHEMA = pa.schema(
    [pa.field("key", pa.string()), pa.field("window_end", pa.timestamp("us", tz="UTC")), pa.field("n", pa.int64())]
)
STATE_SCHEMA = pa.schema([pa.field("clock", pa.int64())])
LAYOUT = (SinkTable(EVENTS), SinkTable(TOTALS, MERGE, ("key",)), SinkTable(STATE, OVERWRITE))
SNAPSHOT = Table("sink_snapshot", "tests.test_stream_sink:STATE_SCHEMA")


def test_a_layout_from_the_tables_in_commit_order_appends_all_but_the_merged_and_the_snapshots():
    assert stream_layout((EVENTS, TOTALS, STATE), merged={TOTALS: ("key",)}) == LAYOUT
    assert stream_layout((EVENTS, SNAPSHOT, STATE), snapshots=(SNAPSHOT,)) == (
        SinkTable(EVENTS),
        SinkTable(SNAPSHOT, OVERWRITE),
        SinkTable(STATE, OVERWRITE),
    )
    with pytest.raises(ValueError, match="sink_state, sink_snapshot: not among the stream's tables before its state"):
        stream_layout((EVENTS, STATE), merged={STATE: ("clock",)}, snapshots=(SNAPSHOT,))


def rows(events, totals, clock):
    return {
        EVENTS: pa.table({"id": events}, EVENT_SCHEMA),
        TOTALS: pa.table(
            {"key": [k for k, _ in totals], "window_end": [10_000_000] * len(totals), "n": [n for _, n in totals]},
            TOTAL_SCHEMA,
        ),
        STATE: pa.table({"clock": [clock]}, STATE_SCHEMA),
    }


def versions(tables, sink):
    return [DeltaTable(str(tables.path(name))).version() for name in sink.names()]


def test_each_table_is_written_once_per_batch_the_state_last(tmp_path):
    tables = Tables(None, tmp_path, "deltalake")
    sink = StreamSink(tables, "run/", "app", LAYOUT, {"window-size": "1m"})
    assert sink.commit_order == (EVENTS, TOTALS, STATE) and sink.read_state() is None and not sink.committed(0)
    sink.commit(0, rows([], [], 5))  # the first batch creates every table, even without rows
    assert sink.names() == ["run/sink_events", "run/sink_totals", "run/sink_state"]
    assert versions(tables, sink) == [1, 1, 1] and sink.committed(0)  # the rows, then the settings recorded
    assert all(recorded(tables, name) == {"window-size": "1m"} for name in sink.names())
    sink.commit(1, rows(["e1", "e2"], [("a", 2)], 7))
    sink.commit(1, rows(["e1", "e2"], [("a", 2)], 7))  # a replayed batch commits nothing twice
    sink.commit(2, rows([], [("a", 3), ("b", 1)], 9))  # no events: that table gets no commit
    sink.close()
    assert versions(tables, sink) == [2, 3, 3]
    assert tables.read_arrow("run/sink_events")["id"].to_pylist() == ["e1", "e2"]
    assert sorted(tables.read_arrow("run/sink_totals").select(["key", "n"]).to_pylist(), key=str) == [
        {"key": "a", "n": 3},
        {"key": "b", "n": 1},
    ]
    assert sink.read_state()["clock"].to_pylist() == [9]


def test_a_batch_missing_a_table_commits_nothing(tmp_path):
    tables = Tables(None, tmp_path, "deltalake")
    sink = StreamSink(tables, "", "app", LAYOUT, {})
    partial = rows(["e1"], [], 1)
    del partial[TOTALS]
    with pytest.raises(ValueError, match="micro-batch 0 has no rows for sink_totals"):
        sink.commit(0, partial)
    assert not any(tables.exists(name) for name in sink.names())


def test_a_layout_is_checked_on_construction(tmp_path):
    tables = Tables(None, tmp_path, "deltalake")
    with pytest.raises(ValueError, match="last table is its state"):
        StreamSink(tables, "", "app", (SinkTable(EVENTS),), {})
    with pytest.raises(ValueError, match="keys go with write='merge' and only with it"):
        SinkTable(TOTALS, MERGE)
    with pytest.raises(ValueError, match="write: 'upsert' is not valid; valid: append, merge, overwrite"):
        SinkTable(TOTALS, "upsert", ("key",))
    assert SinkTable(EVENTS).write == APPEND
