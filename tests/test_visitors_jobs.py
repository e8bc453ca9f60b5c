"""The ``unique_visitors`` jobs on one small generated log: the speed layer whatever the
micro-batch cuts and across a restart, the replay equal to it, the batch truth equal to the
oracle, reconciliation proving corrected == truth once, and the CLI end to end."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lklab.page_view_generator import (
    PageViewParams,
    generate_page_views,
    load_page_views,
)
from lklab.page_view_truth import truth_counts as oracle_counts
from lklab.visitors_batch import run_visitors_batch
from lklab.visitors_reconcile import reconcile_visitors
from lklab.visitors_replay import run_visitors_replay
from lklab.visitors_speed import run_visitors_speed
from shared.catalog import (
    VISITORS_CORRECTED,
    VISITORS_SPEED_TABLES,
    VISITORS_STREAM_METRICS,
    VISITORS_TRUTH,
    replay_prefix,
)
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.tables import Tables
from tests.processes import REPO, VENV_BIN, run, venv_env

SECOND = 1_000_000
# ~300 views over 10 minutes in 1-minute segments (12 segments), with resends and bad lines;
# clickstream holds a minute's views back, so some arrive beyond the watermark.
PARAMS = PageViewParams(views=300, seed=3, span=600 * SECOND, users=20, pages=30, duplicate_rate=0.03, malformed_rate=0.02)
# Columns that name the micro-batch (or its position in the run's metrics), not the decision.
BATCH_COLUMNS = ("batch_id", "updated_batch_id", "added_batch_id")


def config_for(lake: Path) -> LabConfig:
    return LabConfig(lake=lake, table_engine="deltalake")


def copy_segments(source: Path, lake: Path, first: int, last: int) -> None:
    source_log, log = EventLog(source), EventLog(lake)
    log.root.mkdir(parents=True, exist_ok=True)
    for number in range(first, last + 1):
        shutil.copy(source_log.segment_path(number), log.segment_path(number))


def stream_rows(spark, lake: Path, prefix: str = "") -> dict[str, list[dict]]:
    """Every stream table's rows (metrics aside), batch ids dropped, in a fixed order."""
    tables = Tables(spark, lake, "deltalake")
    rows = {}
    for table in VISITORS_SPEED_TABLES:
        if table is VISITORS_STREAM_METRICS:
            continue
        found = tables.read_arrow(table.at(prefix))
        found = found.drop_columns([name for name in BATCH_COLUMNS if name in found.column_names])
        rows[table.name] = sorted(found.to_pylist(), key=lambda r: tuple((v is None, str(v)) for v in r.values()))
    return rows


@pytest.fixture(scope="module")
def lakes(tmp_path_factory):
    root = tmp_path_factory.mktemp("visitors")
    generate_page_views(PARAMS, root / "one")
    return root


@pytest.fixture(scope="module")
def one_per_batch(spark, lakes):
    """The log read one segment per micro-batch (as the traffic came)."""
    layer = run_visitors_speed(spark, config_for(lakes / "one"), available_now=True, segments_per_batch=1)
    assert layer.batches == EventLog(lakes / "one").last_segment() == 12
    return stream_rows(spark, lakes / "one")


def test_speed_writes_the_same_rows_with_many_segments_per_batch(spark, lakes, one_per_batch):
    copy_segments(lakes / "one", lakes / "five", 1, 12)
    layer = run_visitors_speed(spark, config_for(lakes / "five"), available_now=True, segments_per_batch=5)
    assert layer.batches == 3
    rows = stream_rows(spark, lakes / "five")
    assert rows == one_per_batch
    assert rows["visitors_late_events"] and rows["visitors_duplicates"] and rows["visitors_dead_letter"]  # the log exercises each output


def test_a_restart_halfway_goes_on_with_the_same_rows(spark, lakes, one_per_batch):
    copy_segments(lakes / "one", lakes / "restart", 1, 6)
    first = run_visitors_speed(spark, config_for(lakes / "restart"), available_now=True)
    copy_segments(lakes / "one", lakes / "restart", 7, 12)
    second = run_visitors_speed(spark, config_for(lakes / "restart"), available_now=True)  # a new layer: the state read from its table
    assert (first.batches, second.batches) == (6, 6)
    assert stream_rows(spark, lakes / "restart") == one_per_batch


def test_replay_writes_the_rows_of_the_live_stream(spark, lakes, one_per_batch):
    run = run_visitors_replay(spark, config_for(lakes / "one"), "whole")
    assert (run.segments, run.lines) == (12, 315)
    assert stream_rows(spark, lakes / "one", replay_prefix("whole")) == one_per_batch


def test_batch_truth_is_the_oracle_and_reconciliation_proves_the_stream_once(spark, lakes, one_per_batch):
    lake = lakes / "one"
    config = config_for(lake)
    run = run_visitors_batch(spark, config)
    assert run.conserved and (run.lines, run.views, run.duplicates, run.dead_letters) == (315, 300, 9, 6)
    tables = Tables(spark, lake, "deltalake")
    truth = tables.read_arrow(VISITORS_TRUTH.name).sort_by([(name, "ascending") for name in ("window_start", "window_end", "user_id")])
    assert truth.to_pylist() == oracle_counts(load_page_views(lake), config.window).to_pylist()

    reconciled = reconcile_visitors(spark, config, against="speed")
    assert reconciled.result.proven, reconciled.result.differences
    verdicts = reconciled.result.verdicts()
    assert verdicts["differs"] == 0 and verdicts["late"] > 0  # late views explain every served difference
    assert reconciled.written and reconciled.read_through == 12
    corrected = VISITORS_CORRECTED.at("")
    version = tables.version(corrected)
    again = reconcile_visitors(spark, config, against="speed")
    assert (again.run_id, again.written, tables.version(corrected)) == (reconciled.run_id, False, version)


def test_the_cli_generates_streams_recomputes_and_reconciles(tmp_path):
    env = venv_env({"PYTHONPATH": str(REPO)})
    common = ["--pipeline", "unique_visitors", "--lake", str(tmp_path / "lake")]
    commands = [
        ["generate", "--events", "120", "--seed", "5", "--span", "5m", "--accounts", "10"],
        ["speed", "--available-now", "--segments-per-batch", "2"],
        ["batch"],
        ["reconcile"],
    ]
    for command in commands:
        done = run([str(VENV_BIN / "lklab"), *command, *common], env=env, timeout=600)
        assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert "proven: corrected" in done.stdout and "0 differing" in done.stdout

    # One truth member deleted by hand: a difference nothing explains, exit 3 and the verdict on stderr.
    members_path = tmp_path / "lake" / "tables" / "visitors_truth_members"
    members = DeltaTable(str(members_path)).to_pyarrow_dataset().to_table()
    member = members.sort_by([(c, "ascending") for c in ("user_id", "url", "window_start")]).to_pylist()[0]
    DeltaTable(str(members_path)).delete(
        f"user_id = '{member['user_id']}' AND url = '{member['url']}' AND window_start = '{member['window_start'].isoformat()}'"
    )
    done = run([str(VENV_BIN / "lklab"), "reconcile", *common], env=env, timeout=600)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-4000:]
    assert "lklab reconcile: UNEXPLAINED: 1 differences" in done.stderr
