"""The batch-truth runner (``lklab.truth_runner``) with a hand-made rule over a tiny log: every
table replaced with its own columns (Arrow rows cast to its schema), tagged or not, the settings
required and recorded, the figures taken after the writes, the persisted frames released, an
empty log and a second batch refused."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from lklab.truth_runner import TruthOutput, TruthRule, run_truth
from shared.catalog import Table
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.locks import LockHeld, hold
from shared.table_settings import SettingsConflict, recorded
from shared.tables import Tables

# The tables' rows: another column order than the raw lines', and a wider integer than the Arrow rows'.
LINE_SCHEMA = pa.schema([("line_number", pa.int64()), ("segment", pa.int64()), ("line_bytes", pa.int64())])
SIZE_SCHEMA = pa.schema([("segment", pa.int64()), ("bytes", pa.int64())])
LINES = Table("runner_lines", "tests.test_truth_runner:LINE_SCHEMA")
SIZES = Table("runner_sizes", "tests.test_truth_runner:SIZE_SCHEMA")


class LineTruth(TruthRule):
    """Every line's position and size (a DataFrame with a column too many), and the bytes per
    segment (Arrow, int32, columns reversed and one too many)."""

    pipeline = "tiny"
    tables = (LINES, SIZES)
    app_id = "tiny-batch"

    def __init__(self) -> None:
        self.persisted = None

    def settings(self, config: LabConfig) -> dict[str, str]:
        return {"max-line-bytes": config.describe()["max-line-bytes"]}

    def compute(self, spark, raw, config) -> TruthOutput:
        lines = raw.persist()
        self.persisted = lines
        sizes = lines.groupBy("segment").agg(F.sum("line_bytes").alias("bytes")).orderBy("segment").collect()
        arrow = pa.table(
            {
                "extra": pa.array(["x"] * len(sizes)),
                "bytes": pa.array([row["bytes"] for row in sizes], pa.int32()),
                "segment": pa.array([row["segment"] for row in sizes], pa.int32()),
            }
        )
        figures = lambda tables: {"lines": tables.read(LINES.name).count(), "segments": len(sizes)}
        return TruthOutput({LINES: lines, SIZES: arrow}, figures, persisted=(lines,))


class UntaggedTruth(LineTruth):
    app_id = None


@pytest.fixture
def lake(tmp_path):
    log = EventLog(tmp_path)
    log.append(["a", "bb"], stamp=False)
    log.append(["cccc"], stamp=False)
    return tmp_path


def config_for(lake) -> LabConfig:
    return LabConfig(lake=lake, table_engine="deltalake")


def test_every_table_is_replaced_with_its_columns_tagged_and_its_settings_recorded(spark, lake):
    tables = Tables(spark, lake, "deltalake")
    rule = LineTruth()
    run = run_truth(spark, config_for(lake), rule)
    assert (run.last_segment, dict(run.figures)) == (2, {"lines": 3, "segments": 2})
    assert run.wall_seconds > 0 and run.cpu_seconds >= 0
    order = [("segment", "ascending"), ("line_number", "ascending")]
    written = {
        LINES: tables.read_arrow(LINES.name).sort_by(order),
        SIZES: tables.read_arrow(SIZES.name).sort_by("segment"),
    }
    assert [written[table].schema.types for table in (LINES, SIZES)] == [LINE_SCHEMA.types, SIZE_SCHEMA.types]
    assert [written[table].column_names for table in (LINES, SIZES)] == [LINE_SCHEMA.names, SIZE_SCHEMA.names]
    assert written[LINES].to_pylist() == [
        {"line_number": 1, "segment": 1, "line_bytes": 1},
        {"line_number": 2, "segment": 1, "line_bytes": 2},
        {"line_number": 1, "segment": 2, "line_bytes": 4},
    ]
    assert written[SIZES].to_pylist() == [{"segment": 1, "bytes": 3}, {"segment": 2, "bytes": 4}]
    assert not rule.persisted.is_cached
    for table in (LINES, SIZES):
        assert recorded(tables, table.name) == {"max-line-bytes": "1048576"}
        assert tables.committed_version(table.name, "tiny-batch") == 2
    versions = [tables.version(table.name) for table in (LINES, SIZES)]
    again = run_truth(spark, config_for(lake), LineTruth())  # the same position: tagged commits land once
    assert again.figures == run.figures
    assert [tables.version(table.name) for table in (LINES, SIZES)] == versions
    with pytest.raises(SettingsConflict, match=r"table runner_lines .*max-line-bytes 1048576 .table. against 4096"):
        run_truth(spark, dataclasses.replace(config_for(lake), max_line_bytes=4096), LineTruth())


def test_an_untagged_rule_commits_every_run(spark, lake):
    tables = Tables(spark, lake, "deltalake")
    run_truth(spark, config_for(lake), UntaggedTruth())
    EventLog(lake).append(["ddddd"], stamp=False)
    run = run_truth(spark, config_for(lake), UntaggedTruth())
    assert (run.last_segment, dict(run.figures)) == (3, {"lines": 4, "segments": 3})
    # the first run's overwrite and settings (two commits), the second's overwrite
    assert [tables.version(table.name) for table in (LINES, SIZES)] == [2, 2]
    assert [tables.committed_version(table.name, "tiny-batch") for table in (LINES, SIZES)] == [None, None]


def test_an_empty_log_and_a_second_batch_are_refused(spark, tmp_path, lake):
    with pytest.raises(RuntimeError, match="is empty: run 'lklab generate --pipeline tiny' first"):
        run_truth(spark, config_for(tmp_path / "empty"), LineTruth())
    with hold(lake, "tiny-batch"), pytest.raises(LockHeld):
        run_truth(spark, config_for(lake), LineTruth())
    assert not Tables(spark, lake, "deltalake").exists(LINES.name)
