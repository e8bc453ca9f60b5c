"""Compaction and VACUUM of the always-on tables (``lklab maintain``): rows unchanged, files
compacted, time travel kept within the retention, writers undisturbed.

The tables are written the way the lab writes them (``shared.tables.Tables`` over delta-rs):
one append per micro-batch or run, the speed layer's windows merged and its state overwritten.
The Airflow DAG runs for real in ``test_airflow_run.py`` (the README's embedded steps).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lklab.cli import main as lklab
from lklab.maintenance import ALWAYS_ON_TABLES, maintain_lake, retention_hours
from lklab.pipelines.billing_windows.speed import SPEED_RULE
from lklab.pipelines.order_payments.stream import PAYMENTS_RULE
from lklab.pipelines.running_max.stream import MAX_RULE
from lklab.pipelines.unique_visitors.speed import VISITORS_RULE
from shared.locks import LockHeld, stream_role, writer
from shared.tables import Tables

# the locks the live streams hold while they run
SPEED_LAYER_LOCK, VISITORS_STREAM_LOCK, PAYMENTS_STREAM_LOCK, MAX_STREAM_LOCK = (
    stream_role("", rule.app_id) for rule in (SPEED_RULE, VISITORS_RULE, PAYMENTS_RULE, MAX_RULE)
)
BATCHES = 3  # micro-batches per table: three small files to compact (29 tables)
APPENDED = [t.name for t in ALWAYS_ON_TABLES if t.rewritten_by is None]
REWRITTEN = [t.name for t in ALWAYS_ON_TABLES if t.rewritten_by is not None]
MERGED = (
    "speed_aggregates",
    "visitors_windows",
    "max_stream",
)  # merged every micro-batch; the other rewritten ones overwritten
HOLD = """
import sys, time
from shared.locks import writer
with writer(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def batch_rows(batch: int) -> pa.Table:
    return pa.table({"batch_id": [batch, batch], "line": [2 * batch, 2 * batch + 1], "note": [f"b{batch}", None]})


def windows(batch: int) -> pa.Table:
    """The speed layer's merge: window ``batch`` is new, window ``batch - 1`` gets its final count."""
    return pa.table(
        {
            "window": [batch - 1, batch],
            "events": [10 * batch, batch],
            "status": ["final", "open"],
            "_delete": [False, False],
        }
    )


def rewrite(tables: Tables, name: str, batch: int, app_id: str = "speed") -> None:
    """A stream's rewrite of table ``name`` in micro-batch ``batch``: its windows merged, or its state overwritten."""
    if name in MERGED:
        tables.upsert(name, windows(batch), keys=("window",), app_id=app_id, version=batch)
    else:
        tables.overwrite(name, pa.table({"clock": [batch], "windows_held": [batch + 1]}), app_id=app_id, version=batch)


def write_lake(lake: Path) -> Tables:
    """Every always-on table after ``BATCHES`` micro-batches (and as many reconciliation runs)."""
    tables = Tables(None, lake, "deltalake")
    for batch in range(BATCHES):
        for name in APPENDED:
            tables.append(name, batch_rows(batch), app_id="speed", version=batch)
        for name in REWRITTEN:
            rewrite(tables, name, batch)
    return tables


def rows(lake: Path, name: str, version: int | None = None) -> Counter:
    table = DeltaTable(str(lake / "tables" / name), version=version).to_pyarrow_dataset().to_table()
    return Counter(json.dumps(row, sort_keys=True, default=str) for row in table.to_pylist())


def live_files(lake: Path, name: str) -> int:
    return len(DeltaTable(str(lake / "tables" / name)).file_uris())


def parquet_files(lake: Path, name: str) -> int:
    return len(list((lake / "tables" / name).glob("*.parquet")))


@pytest.fixture
def lake(tmp_path) -> Path:
    write_lake(tmp_path)
    return tmp_path


def holder(lake: Path, role: str) -> subprocess.Popen:
    """Another process holding ``role``'s writer lock (a running speed layer, a maintenance)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lake), role],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert process.stdout.readline().strip() == "held"
    return process


def test_every_always_on_table_is_compacted_with_its_rows_unchanged_and_time_travel_kept(lake):
    names = [t.name for t in ALWAYS_ON_TABLES]
    before = {name: rows(lake, name) for name in names}
    versions = {name: DeltaTable(str(lake / "tables" / name)).version() for name in names}
    assert {name: live_files(lake, name) for name in APPENDED} == {name: BATCHES for name in APPENDED}

    done = maintain_lake(lake)  # retention 7d: nothing removed this week is deleted

    assert [t.table for t in done.tables] == names and done.missing == () and done.retention == "7d"
    for table in done.tables:
        assert rows(lake, table.table) == before[table.table], table.table
        assert live_files(lake, table.table) == table.files_after == 1, table.table
        assert table.skipped is None and table.vacuumed_files == 0
        # The versions of the last week are still there, files and all.
        assert rows(lake, table.table, versions[table.table]) == before[table.table]
    assert {t.table: t.files_before for t in done.tables if t.table in APPENDED} == {name: BATCHES for name in APPENDED}
    history = DeltaTable(str(lake / "tables" / "late_events")).history(1)[0]
    assert history["operation"] == "OPTIMIZE" and history["operationParameters"]["targetSize"]

    again = maintain_lake(lake)  # nothing left to compact or delete: no new commit
    assert [(t.files_before, t.files_after, t.vacuumed_files) for t in again.tables] == [(1, 1, 0)] * len(names)
    assert [t.version for t in again.tables] == [t.version for t in done.tables]


def test_vacuum_deletes_what_is_older_than_the_retention_and_only_that(lake):
    before = {t.name: rows(lake, t.name) for t in ALWAYS_ON_TABLES}
    first_version = {
        t.name: DeltaTable(str(lake / "tables" / t.name)).version() - (BATCHES - 1) for t in ALWAYS_ON_TABLES
    }
    superseded = {t.name: parquet_files(lake, t.name) for t in ALWAYS_ON_TABLES}

    done = maintain_lake(lake, "0", enforce_retention_duration=False)

    for table in done.tables:
        assert rows(lake, table.table) == before[table.table]
        # One file is left, the live one; every file the compaction or a rewrite replaced is gone.
        assert parquet_files(lake, table.table) == 1
        kept_live_file = 1 if table.files_before == 1 else 0
        assert table.vacuumed_files == superseded[table.table] - kept_live_file, table.table
        with pytest.raises(OSError):  # the first micro-batch's version has lost its files
            rows(lake, table.table, first_version[table.table])


def test_staging_folders_a_dead_writer_left_go_after_an_hour_and_a_live_writers_stay(lake):
    """A writer stages files in ``_staging-*`` beside the table and moves them in at its commit;
    Delta's VACUUM skips such folders. One untouched for two hours goes (its two files counted),
    one written now stays, even with a retention of 0."""
    root = lake / "tables" / "stream_state"
    for name, age in (("_staging-dead", 2 * 3600), ("_staging-live", 0)):
        (root / name).mkdir()
        for part in ("part-1.parquet", "part-2.parquet"):
            (root / name / part).write_bytes(b"x")
            os.utime(root / name / part, (time.time() - age,) * 2)
    before = rows(lake, "stream_state")

    done = maintain_lake(lake, "0", enforce_retention_duration=False)

    assert sorted(folder.name for folder in root.glob("_staging-*")) == ["_staging-live"]
    table = next(t for t in done.tables if t.table == "stream_state")
    superseded = BATCHES - 1  # the state overwritten each micro-batch: the earlier files
    assert table.vacuumed_files == superseded + 2
    assert rows(lake, "stream_state") == before


def test_tables_a_running_stream_rewrites_are_vacuumed_but_not_compacted(lake):
    """A MERGE or an overwrite committed after a compaction of the same table fails or brings
    back overwritten rows (delta-rs 1.6.6), so they wait for their stopped stream. The
    unique_visitors stream runs; billing's speed layer and the order_payments stream do not."""
    tables = Tables(None, lake, "deltalake")  # a second live file each
    for name in REWRITTEN:
        extra = (
            windows(BATCHES + 1).drop_columns(["_delete"]).slice(1)
            if name in MERGED
            else pa.table({"clock": [BATCHES], "windows_held": [0]})
        )
        tables.append(name, extra, app_id="extra", version=1)
    running = {t.name for t in ALWAYS_ON_TABLES if t.rewritten_by == VISITORS_STREAM_LOCK}
    assert running == {"visitors_windows", "visitors_seen", "visitors_state"}
    stream = holder(lake, VISITORS_STREAM_LOCK)
    try:
        done = maintain_lake(lake)
    finally:
        stream.send_signal(signal.SIGKILL)
        stream.wait()
    by_table = {t.table: t for t in done.tables}
    for name in running:
        assert by_table[name].skipped.startswith(
            f"its writer is running ({VISITORS_STREAM_LOCK} is locked by pid {stream.pid}"
        )
        assert by_table[name].files_after == by_table[name].files_before == live_files(lake, name) > 1
    assert all(
        by_table[name].skipped is None and by_table[name].files_after == 1
        for name in APPENDED + REWRITTEN
        if name not in running
    )

    done = {t.table: t for t in maintain_lake(lake).tables}  # the stream stopped: now they are compacted
    for name in running:
        assert (done[name].skipped, done[name].files_after, live_files(lake, name)) == (None, 1, 1)


def test_appends_committed_during_maintenance_all_land_once(lake):
    """The speed layer and reconciliation keep appending while their tables are compacted.

    (With the shortest retention, 1h: a shorter one could delete the file of an append that is
    written but not committed yet, since VACUUM also deletes files no commit references.)"""
    tables = Tables(None, lake, "deltalake")
    stop, failures, appended = threading.Event(), [], []

    def append_batches():
        batch = BATCHES
        try:
            while not stop.is_set() or batch < BATCHES + 10:
                tables.append("late_events", batch_rows(batch), app_id="speed", version=batch)
                appended.append(batch)
                batch += 1
        except Exception as err:  # reported below: the writer must never fail
            failures.append(err)

    writer_thread = threading.Thread(target=append_batches)
    writer_thread.start()
    try:
        for _ in range(5):
            maintain_lake(lake, "1h")
    finally:
        stop.set()
        writer_thread.join(timeout=60)
    assert failures == []
    expected = Counter()
    for batch in range(BATCHES + len(appended)):
        expected.update(json.dumps(row, sort_keys=True, default=str) for row in batch_rows(batch).to_pylist())
    assert rows(lake, "late_events") == expected


def test_one_maintenance_at_a_time(lake):
    other = holder(lake, "maintenance")
    try:
        with pytest.raises(LockHeld, match=rf"maintenance is locked by pid {other.pid}"):
            maintain_lake(lake)
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()


def test_retention_is_whole_hours_from_an_hour_to_thirty_days():
    assert [retention_hours(text) for text in ("1h", "36h", "7d", "30d")] == [1, 36, 168, 720]
    assert retention_hours("0", enforce_retention_duration=False) == 0
    for text, message in (
        ("30m", "not a whole number of hours"),
        ("0", "out of range; use 1h to 30d"),
        ("31d", "out of range"),
        ("7", "needs a unit"),
    ):
        with pytest.raises(ValueError, match=message):
            retention_hours(text)


def test_the_always_on_tables_are_every_pipelines_stream_and_the_reconciliation_history():
    from lklab.pipelines.billing_windows.speed import SPEED_TABLES
    from lklab.pipelines.order_payments.tables import PAYMENTS_TABLES
    from lklab.pipelines.running_max.tables import MAX_STREAM_TABLES
    from lklab.pipelines.unique_visitors.speed import APP_ID
    from lklab.pipelines.unique_visitors.tables import VISITORS_SPEED_TABLES

    names = [t.name for t in ALWAYS_ON_TABLES]
    assert len(names) == len(set(names))
    assert set(names) == (
        set(SPEED_TABLES)
        | {"recon_runs", "recon_diffs", "recon_corrections", "table_recon_runs", "table_recon_diffs"}
        | {t.name for t in VISITORS_SPEED_TABLES}
        | {t.name for t in PAYMENTS_TABLES}
        | {t.name for t in MAX_STREAM_TABLES}
    )
    assert {t.name: t.rewritten_by for t in ALWAYS_ON_TABLES if t.rewritten_by} == {
        "speed_aggregates": SPEED_LAYER_LOCK,
        "stream_state": SPEED_LAYER_LOCK,
        "visitors_windows": VISITORS_STREAM_LOCK,
        "visitors_seen": VISITORS_STREAM_LOCK,
        "visitors_state": VISITORS_STREAM_LOCK,
        "payments_state": PAYMENTS_STREAM_LOCK,
        "max_stream": MAX_STREAM_LOCK,
        "max_state": MAX_STREAM_LOCK,
    }
    # the locks the streams take: "stream-" + their app id (run_speed's "speed", run_payments_speed's "payments")
    assert (SPEED_LAYER_LOCK, VISITORS_STREAM_LOCK, PAYMENTS_STREAM_LOCK, MAX_STREAM_LOCK) == (
        "stream-speed",
        f"stream-{APP_ID}",
        "stream-payments",
        "stream-max-speed",
    )


def test_lklab_maintain(lake, capsys):
    assert lklab(["maintain", "--help"]) == 0
    assert "example:\n  lklab maintain --retention 7d" in capsys.readouterr().out
    assert lklab(["maintain", "--lake", str(lake)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"maintenance of {lake.resolve()} (retention 7d)")
    assert f"  late_events: {BATCHES} -> 1 files; vacuum deleted 0 files; version {BATCHES}" in out
    assert lklab(["maintain", "--lake", str(lake), "--retention", "2h30m"]) == 2
    assert "lklab maintain: retention: '2h30m' is not a duration" in capsys.readouterr().err
    assert lklab(["maintain", "--lake", str(lake / "missing")]) == 2
    assert f"lake {lake / 'missing'}: no such directory" in capsys.readouterr().err
    with writer(lake, "maintenance"):
        assert lklab(["maintain", "--lake", str(lake)]) == 2
    assert "lklab maintain: maintenance is locked by pid" in capsys.readouterr().err
