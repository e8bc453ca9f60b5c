"""Delta table I/O: the one place that knows how tables are written and read.

Tables live under ``<lake>/tables/<name>`` (``shared.catalog.tables_root``). Two engines write the same Delta format:

* ``deltalake`` (delta-rs, the default): Spark computes, the driver hands Arrow data to
  delta-rs, which commits.
* ``delta-spark``: Spark writes through the Delta Lake connector. Used when its jars are on
  hand (``LKLAB_DELTA_SPARK_JARS`` or ``delta-spark_*.jar`` in pyspark's ``jars/``) and the
  engine setting is ``auto`` or ``delta-spark``.

Idempotent appends: an append is tagged ``(app_id, version)`` as a Delta app transaction. Before
writing, the table's recorded version for ``app_id`` is read; if it is at least ``version`` the
append already happened and is skipped. (delta-rs records app transactions but does not skip by
itself; delta-spark's ``txnAppId``/``txnVersion`` options do, and the check is the same.)
Reruns replace data with an overwrite restricted by a predicate (e.g. one date).

Rows given as a Spark DataFrame are written where they are (``deltalake`` engine): each Spark task
writes its rows as one Parquet file with Spark's own writer, the files move into the table's
directory, and the driver commits them
(``AddAction``) with delta-rs in one transaction, so no data passes through the driver. Files a
task already wrote beside a table (``shared.staged_files.StagedFiles``) are committed the same
way, or discarded when the commit is found done. An
overwrite with a predicate removes the files holding matching rows in the same commit and
writes their other rows again. Files written by a run whose commit never lands are not part of
the table (``lklab maintain`` deletes the staging folders of the always-on tables). Arrow
tables (small, from the driver) go through ``write_deltalake``, and so does any of the others
bound for a table whose files do not hold exactly its rows (partitioned, deletion vectors,
column mapping: ``_plain``), or that takes new columns: those rows pass through the driver.

A writer that commits to the same tables again and again (the speed layer, every micro-batch)
passes ``keep_open``: each table's snapshot then stays open between calls and only the commits
made since are read, instead of the whole log each time.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from shared.catalog import tables_root
from shared.partitions import predicate_range
from shared.session_conf import session_conf
from shared.staged_files import StagedFiles, staging_folder

__all__ = ["Tables", "Rows", "resolve_engine", "delta_spark_jars", "TableNameError"]

# What a write takes: an Arrow table (from the driver), a Spark frame (written by its tasks), or
# files a task already wrote beside the table (``shared.staged_files``).
Rows = pa.Table | DataFrame | StagedFiles
_TIMESTAMP_SETTING = threading.Lock()
_NAME = re.compile(r"^[a-z][a-z0-9_]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*$")


class TableNameError(ValueError):
    """A table name is not ``lower_snake`` segments separated by ``/``."""


def delta_spark_jars() -> list[str]:
    """Paths of the delta-spark jars available to this installation (may be empty)."""
    configured = os.environ.get("LKLAB_DELTA_SPARK_JARS", "")
    if configured:
        return [jar for jar in configured.split(",") if jar]
    import pyspark

    jars_dir = Path(pyspark.__file__).parent / "jars"
    return sorted(glob.glob(str(jars_dir / "delta-spark_*.jar")) + glob.glob(str(jars_dir / "delta-storage-*.jar")))


def resolve_engine(setting: str) -> str:
    """``auto`` -> delta-spark when its jars are present, else deltalake."""
    if setting == "deltalake":
        return "deltalake"
    has_jars = bool(delta_spark_jars())
    if setting == "delta-spark" and not has_jars:
        raise RuntimeError(
            "table-engine delta-spark: no delta-spark jars found; set LKLAB_DELTA_SPARK_JARS to "
            "the delta-spark and delta-storage jar paths, or use table-engine deltalake"
        )
    return "delta-spark" if has_jars else "deltalake"


class Tables:
    """Read and write the lake's Delta tables with the configured engine."""

    def __init__(self, spark: SparkSession, lake: str | Path, engine: str = "auto", *, keep_open: bool = False) -> None:
        self.spark = spark
        self.root = tables_root(lake)
        self.engine = resolve_engine(engine)
        self.keep_open = keep_open
        self._open: dict[str, DeltaTable] = {}

    def path(self, name: str) -> Path:
        if not _NAME.match(name):
            raise TableNameError(f"table name {name!r}: use lower_snake words, '/' between levels")
        return self.root / name

    def exists(self, name: str) -> bool:
        return DeltaTable.is_deltatable(str(self.path(name)))

    def committed_version(self, name: str, app_id: str) -> int | None:
        """The highest ``version`` committed for ``app_id`` (None if never)."""
        if not self.exists(name):
            return None
        return self._latest(name).transaction_version(app_id)

    def already_committed(self, name: str, app_id: str, version: int) -> bool:
        committed = self.committed_version(name, app_id)
        return committed is not None and committed >= version

    def _frame(self, rows: Rows) -> DataFrame:
        if isinstance(rows, StagedFiles):
            reader = self.spark.read.schema(from_arrow_schema(rows.schema))
            return reader.parquet(*(str(rows.folder / name) for name in rows.files))
        return self.spark.createDataFrame(rows) if isinstance(rows, pa.Table) else rows

    def append(
        self,
        name: str,
        rows: Rows,
        *,
        app_id: str,
        version: int,
        partition_by: list[str] | None = None,
        add_columns: bool = False,
    ) -> bool:
        """Append ``rows`` once per ``(app_id, version)``; return False when already committed.
        ``add_columns``: a column of ``rows`` the table lacks is added to it (its older rows
        null there) instead of refused."""
        if self.already_committed(name, app_id, version):
            _discard(rows)
            return False
        if self.engine == "delta-spark":
            writer = self._frame(rows).write.format("delta").mode("append")
            writer = writer.option("txnAppId", app_id).option("txnVersion", version)
            if add_columns:
                writer = writer.option("mergeSchema", "true")
            if partition_by:
                writer = writer.partitionBy(*partition_by)
            writer.save(str(self.path(name)))
            _discard(rows)
            return True
        if isinstance(rows, DataFrame | StagedFiles) and not partition_by and not add_columns:
            self._commit_files(name, rows, None, _txn(app_id, version), replace=False)
            return True
        write_deltalake(
            self._target(name),
            _arrow(rows),
            mode="append",
            partition_by=partition_by,
            schema_mode="merge" if add_columns else None,
            commit_properties=_txn(app_id, version),
        )
        _discard(rows)
        return True

    def overwrite(
        self,
        name: str,
        rows: Rows,
        *,
        predicate: str | None = None,
        partition_by: list[str] | None = None,
        app_id: str | None = None,
        version: int | None = None,
    ) -> bool:
        """Replace the rows matching ``predicate`` (all rows when None) with ``rows``.

        With ``app_id``/``version`` the overwrite happens once, like an idempotent append.
        """
        if app_id is not None and self.already_committed(name, app_id, version):
            _discard(rows)
            return False
        if self.engine == "delta-spark":
            writer = self._frame(rows).write.format("delta").mode("overwrite")
            if predicate:
                writer = writer.option("replaceWhere", predicate)
            if partition_by:
                writer = writer.partitionBy(*partition_by)
            if app_id is not None:
                writer = writer.option("txnAppId", app_id).option("txnVersion", version)
            writer.save(str(self.path(name)))
            _discard(rows)
            return True
        if isinstance(rows, DataFrame | StagedFiles) and not partition_by:
            self._commit_files(
                name, rows, predicate, _txn(app_id, version) if app_id is not None else None, replace=True
            )
            return True
        write_deltalake(
            self._target(name),
            _arrow(rows),
            mode="overwrite",
            predicate=predicate if self.exists(name) else None,
            partition_by=partition_by,
            commit_properties=_txn(app_id, version) if app_id is not None else None,
        )
        _discard(rows)
        return True

    def upsert(
        self,
        name: str,
        rows: DataFrame | pa.Table,
        *,
        keys: tuple[str, ...],
        app_id: str,
        version: int,
        partial_columns: tuple[str, ...] = (),
        target_filter: str | None = None,
    ) -> bool:
        """MERGE ``rows`` by ``keys`` once per ``(app_id, version)``.

        A row whose boolean ``_delete`` is true deletes its match; one whose boolean
        ``_partial`` is true (if the column is there) sets only ``partial_columns`` of its match
        and inserts nothing; the others update or insert. ``target_filter`` (SQL over ``t``) may
        name a range every match lies in, so that files outside it are not read.
        """
        if self.already_committed(name, app_id, version):
            return False
        source = _arrow(rows)
        if "_partial" not in source.column_names:
            source = source.append_column("_partial", pa.array([False] * source.num_rows, pa.bool_()))
        columns = [c for c in source.column_names if c not in ("_delete", "_partial")]
        whole = "NOT s._delete AND NOT s._partial"
        if not self.exists(name):
            keep = source.filter(pa.compute.invert(pa.compute.or_(source["_delete"], source["_partial"]))).select(
                columns
            )
            write_deltalake(str(self.path(name)), keep, mode="append", commit_properties=_txn(app_id, version))
            return True
        on = " AND ".join([*([target_filter] if target_filter else []), *(f"t.{k} = s.{k}" for k in keys)])
        values = {c: f"s.{c}" for c in columns}
        partial = {c: f"s.{c}" for c in partial_columns}
        if self.engine == "delta-spark":
            from delta.tables import DeltaTable as SparkDeltaTable

            with self._spark_txn(app_id, version):
                merge = (
                    SparkDeltaTable.forPath(self.spark, str(self.path(name)))
                    .alias("t")
                    .merge(self._frame(source).alias("s"), on)
                )
                merge = merge.whenMatchedDelete("s._delete")
                if partial:
                    merge = merge.whenMatchedUpdate("s._partial", partial)
                merge.whenMatchedUpdate(whole, values).whenNotMatchedInsert(whole, values).execute()
            return True
        merge = self._latest(name).merge(
            source, on, source_alias="s", target_alias="t", commit_properties=_txn(app_id, version)
        )
        merge = merge.when_matched_delete("s._delete")
        if partial:
            merge = merge.when_matched_update(partial, "s._partial")
        merge.when_matched_update(values, whole).when_not_matched_insert(values, whole).execute()
        return True

    def insert_new(
        self, name: str, rows: DataFrame, *, keys: tuple[str, ...], app_id: str, version: int, among: str | None = None
    ) -> bool:
        """Append the ``rows`` whose ``keys`` the table does not hold yet, once per
        ``(app_id, version)``: an upsert for rows that never change once written (e.g. what a
        line of the log is), without sending them through the driver. ``among``: a SQL
        condition that every held row sharing keys with one of ``rows`` meets (e.g. ``segment >=
        F`` for the lines of segments ``F..N``); the keys of the other rows are not compared."""
        if self.already_committed(name, app_id, version):
            return False
        if self.exists(name) and self._delta(name, None).file_uris():
            table = self._delta(name, None)
            held = self._parquet(table, table.file_uris()) if _plain(table) else self.read(name)
            held = held if among is None else held.where(among)
            rows = rows.join(held.select(*keys), list(keys), "left_anti")
        if self.engine == "delta-spark":
            return self.append(name, rows, app_id=app_id, version=version)
        self._commit_files(name, rows, None, _txn(app_id, version), replace=False)
        return True

    def _commit_files(
        self,
        name: str,
        rows: DataFrame | StagedFiles,
        predicate: str | None,
        commit: CommitProperties | None,
        *,
        replace: bool,
    ) -> None:
        """Spark tasks write ``rows`` as Parquet files in the table (or wrote them, ``StagedFiles``);
        one delta-rs commit adds them.

        ``replace``: the commit also removes every file holding a row that matches ``predicate``
        (every file when it is None), and the other rows of those files are written again.
        """
        root = self.path(name)
        root.mkdir(parents=True, exist_ok=True)
        if isinstance(rows, StagedFiles) and predicate is not None:
            raise ValueError("staged files replace a whole table, not the rows of a predicate")
        if not self.exists(name):
            schema = rows.schema if isinstance(rows, StagedFiles) else to_arrow_schema(rows.schema, timezone="UTC")
            adds = _files(rows, root, schema)
            create_table_with_add_actions(
                str(root), _delta_schema(schema), adds, mode="append", commit_properties=commit
            )
            return
        table = self._latest(name)
        if not _plain(table):
            mode, where = ("overwrite", predicate) if replace else ("append", None)
            write_deltalake(self._target(name), _arrow(rows), mode=mode, predicate=where, commit_properties=commit)
            _discard(rows)
            return
        schema = pa.schema(table.schema().to_arrow())
        current = {Path(p).name: p for p in table.file_uris()}
        removed: list[str] = []
        if replace and current:
            if predicate is None:
                removed = list(current)
            else:
                reader = self.spark.read.schema(rows.schema)
                files = lambda names: reader.parquet(*(current[n] for n in names))  # noqa: E731
                # A day range (DayRange.predicate) rules out, from their footers alone, the files
                # whose statistics put every row outside it: a new day in a table of many needs no
                # Spark job. The others are scanned with the predicate as written, which reaches
                # the Parquet reader: it skips the row groups their statistics rule out. Only the
                # files removed are read again, for their other rows.
                bounds = predicate_range(predicate)
                candidates = [n for n in current if bounds is None or _may_hold(current[n], *bounds)]
                if candidates:
                    matching = files(candidates).where(F.expr(predicate))
                    found = matching.select(F.regexp_extract("_metadata.file_path", "[^/]+$", 0).alias("_file"))
                    removed = [r["_file"] for r in found.distinct().collect()]
                if removed:
                    rows = rows.unionByName(files(removed).where(~F.coalesce(F.expr(predicate), F.lit(False))))
        adds = _files(rows, root, schema)
        now = int(time.time() * 1000)
        actions = pa.table(table.get_add_actions(flatten=True))
        sizes = dict(zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist()))
        removes = [RemoveAction(path, True, now, sizes.get(path)) for path in removed]
        table.create_write_transaction([*adds, *removes], "append", table.schema(), commit_properties=commit)

    def read(self, name: str, version: int | None = None) -> DataFrame:
        """The table (at ``version``, for time travel) as a Spark DataFrame.

        delta-spark reads it itself. With delta-rs, Spark reads the snapshot's Parquet files
        directly when that returns exactly the table and the files are big
        (``_plain_parquet_files``), else delta-rs reads it and hands Spark the Arrow data.
        """
        if self.engine == "delta-spark":
            reader = self.spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", version)
            return reader.load(str(self.path(name)))
        table = self._delta(name, version)
        files = _plain_parquet_files(table)
        if files:
            return self._parquet(table, files)
        return self.spark.createDataFrame(table.to_pyarrow_dataset().to_table())

    def _parquet(self, table: DeltaTable, files: list[str]) -> DataFrame:
        """A plain table's data ``files`` read by Spark with the table's schema: no footer is
        read to infer one (a job per read of many files), and a column added to the table after
        a file was written reads as null in it."""
        return self.spark.read.schema(from_arrow_schema(pa.schema(table.schema().to_arrow()))).parquet(*files)

    def column_range(self, name: str, column: str) -> tuple[object, object] | None:
        """The smallest and largest value of top-level ``column`` in the table's latest snapshot,
        from the statistics its Parquet files' footers record (no row is read; None and None for
        a table without a non-null value). None when they cannot say: a data file holding rows
        that are not exactly the table's (``_plain``), or one whose footer cannot say
        (``_footer_ranges``)."""
        table = self._delta(name, None)
        if not _plain(table):
            return None
        low = high = None
        for uri in table.file_uris():
            ranges = _footer_ranges(uri, column)
            if ranges is None:
                return None
            try:
                for least, most in ranges:
                    low = least if low is None else min(low, least)
                    high = most if high is None else max(high, most)
            except TypeError:  # files that disagree on the values' type (naive and aware times)
                return None
        return low, high

    def read_arrow(self, name: str, version: int | None = None) -> pa.Table:
        """The table as Arrow, read by delta-rs whatever engine wrote it."""
        # Arrow threads left by this read can abort the interpreter's teardown: lklab.cli.process_exit.
        return self._delta(name, version).to_pyarrow_dataset().to_table()

    def _latest(self, name: str) -> DeltaTable:
        """The table's latest snapshot (with ``keep_open``, the one kept open, brought up to date)."""
        table = self._open.get(name)
        if table is None:
            table = DeltaTable(str(self.path(name)))
            if self.keep_open:
                self._open[name] = table
        else:
            table.update_incremental()
        return table

    def _target(self, name: str) -> str | DeltaTable:
        """Where delta-rs writes: the open snapshot when there is one (no log to read again)."""
        return self._latest(name) if self.keep_open and self.exists(name) else str(self.path(name))

    def _delta(self, name: str, version: int | None) -> DeltaTable:
        if not self.exists(name):
            raise FileNotFoundError(f"table {name} does not exist under {self.root}")
        return DeltaTable(str(self.path(name)), version=version)

    @contextmanager
    def _spark_txn(self, app_id: str, version: int):
        """delta-spark: tag the DML run inside with an app transaction (session settings)."""
        keys = {
            "spark.databricks.delta.write.txnAppId": app_id,
            "spark.databricks.delta.write.txnVersion": str(version),
        }
        for key, value in keys.items():
            self.spark.conf.set(key, value)
        try:
            yield
        finally:
            for key in keys:
                self.spark.conf.unset(key)

    def version(self, name: str) -> int:
        return DeltaTable(str(self.path(name))).version()

    def as_of(self, name: str, app_version: int) -> pa.Table:
        """The table as it was once every commit tagged with a version <= ``app_version`` landed."""
        table = DeltaTable(str(self.path(name)))
        latest = None
        for commit in table.history():
            tagged = commit.get("lklab.version")
            if tagged is not None and int(tagged) <= app_version:
                latest = max(latest or 0, commit["version"])
        if latest is None:
            return table.to_pyarrow_dataset().to_table().slice(0, 0)
        return DeltaTable(str(self.path(name)), version=latest).to_pyarrow_dataset().to_table()


# Below this many rows per data file, handing delta-rs's Arrow to Spark beats Spark opening the
# files itself (small appends, e.g. one file per micro-batch); above it the native reader wins
# (about 2x for a million rows in one file, and no copy through the driver).
_NATIVE_READ_MIN_ROWS_PER_FILE = 10_000


def _plain(table: DeltaTable) -> bool:
    """Its data files hold exactly its rows: reader protocol 1 (no column mapping, no deletion
    vectors) and not partitioned (partition values live in the log, not the files)."""
    return table.protocol().min_reader_version == 1 and not table.metadata().partition_columns


def _plain_parquet_files(table: DeltaTable) -> list[str] | None:
    """The snapshot's data files when Spark's own Parquet reader returns exactly the table:
    reader protocol 1 (no column mapping, no deletion vectors), not partitioned (partition values
    live in the log, not the files), row counts recorded, and files big enough to be worth it."""
    if not _plain(table):
        return None
    files = table.file_uris()
    if not files:
        return None
    records = pa.table(table.get_add_actions(flatten=True)).column("num_records")
    if records.null_count or pa.compute.sum(records).as_py() < _NATIVE_READ_MIN_ROWS_PER_FILE * len(files):
        return None
    return files


def _footer_ranges(uri: str, column: str) -> list[tuple[object, object]] | None:
    """``(min, max)`` of top-level ``column`` in each row group of a data file that holds a
    non-null value of it, from the file's footer; None when the footer cannot say: no such
    column, a row group with such a value and no statistics (INT96 timestamps, say), or a column
    stored as bytes (text, or decimals so stored: a writer may cut their statistics short)."""
    footer = pq.read_metadata(uri.removeprefix("file://"))
    ranges = []
    for group in range(footer.num_row_groups):
        row_group = footer.row_group(group)
        chunk = next(
            (row_group.column(i) for i in range(row_group.num_columns) if row_group.column(i).path_in_schema == column),
            None,
        )
        if chunk is None or chunk.physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):
            return None
        statistics = chunk.statistics
        if statistics is not None and statistics.has_null_count and statistics.null_count == row_group.num_rows:
            continue  # only nulls here
        if statistics is None or not statistics.has_min_max:
            return None
        ranges.append((statistics.min, statistics.max))
    return ranges


def _may_hold(uri: str, column: str, low: object, high: object) -> bool:
    """Whether a data file may hold a row with ``low <= column < high``: False only when its
    footer shows every row group's values outside."""
    ranges = _footer_ranges(uri, column)
    if ranges is None:
        return True
    try:
        return any(most >= low and least < high for least, most in ranges)
    except TypeError:  # values the bounds cannot be compared with (times without a zone, say)
        return True


def _write_files(rows: DataFrame, root: Path, schema: pa.Schema) -> list[AddAction]:
    """Spark's own Parquet writer writes ``rows`` (cast to ``schema``), one file per task, into a
    staging folder of ``root``; the files then move into ``root`` and are returned as Delta add
    actions, with the row and null counts their footers record as statistics.

    No row passes through Python. Timestamps are written as microseconds adjusted to UTC (Delta's
    ``timestamp``), not Spark's default INT96. Only files whose job completed are moved, so a
    failed write leaves nothing in the table's folder but a staging folder (``_`` hides it from
    readers; ``lklab maintain`` deletes those of the always-on tables).
    """
    staging = staging_folder(root)
    target = from_arrow_schema(schema)
    typed = rows.select(*[F.col(field.name).cast(field.dataType).alias(field.name) for field in target.fields])
    # A session setting: writers in several threads (a stream's outputs) set it under one lock.
    with (
        _TIMESTAMP_SETTING,
        session_conf(rows.sparkSession, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}),
    ):
        typed.write.mode("errorifexists").option("compression", "snappy").parquet(str(staging))
    return _adopt(staging, root)


def _files(rows: DataFrame | StagedFiles, root: Path, schema: pa.Schema) -> list[AddAction]:
    """``rows``' files in the table folder ``root``, as add actions (a frame's written first)."""
    if isinstance(rows, StagedFiles):
        if rows.schema != schema:
            rows.discard()
            raise ValueError(f"{root.name}: files staged as {rows.schema} for a table of {schema}")
        return _adopt(rows.folder, root, rows.files)
    return _write_files(rows, root, schema)


def _adopt(staging: Path, root: Path, names: tuple[str, ...] | None = None) -> list[AddAction]:
    """The Parquet files of ``staging`` (those ``names``, or every ``part-*.parquet``) moved into
    ``root``, as add actions with the row and null counts their footers record as statistics;
    ``staging`` removed."""
    now = int(time.time() * 1000)
    adds: list[AddAction] = []
    try:
        chosen = sorted(staging.glob("part-*.parquet")) if names is None else [staging / name for name in names]
        footers = {path: pq.read_metadata(path) for path in chosen}  # every footer read before a file moves
        for path, footer in footers.items():
            if footer.num_rows == 0:
                continue
            stats = json.dumps({"numRecords": footer.num_rows, "nullCount": _null_counts(footer)})
            size = os.path.getsize(path)
            os.replace(path, root / path.name)  # part names carry the write job's id, or a uuid
            adds.append(AddAction(path.name, size, {}, now, True, stats))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return adds


def _null_counts(footer: pq.FileMetaData) -> dict[str, int]:
    """Null count per top-level column over every row group (a column whose count a row group
    does not record is left out: Delta statistics may name only some columns)."""
    counts: dict[str, int] = {}
    unknown: set[str] = set()
    for group in range(footer.num_row_groups):
        row_group = footer.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            name = chunk.path_in_schema
            statistics = chunk.statistics
            if statistics is None or not statistics.has_null_count:
                unknown.add(name)
            else:
                counts[name] = counts.get(name, 0) + statistics.null_count
    return {name: count for name, count in counts.items() if name not in unknown}


def _delta_schema(schema: pa.Schema):
    from deltalake import Schema

    return Schema.from_arrow(schema)


def _arrow(rows: Rows) -> pa.Table:
    if isinstance(rows, StagedFiles):
        return rows.read()
    return rows if isinstance(rows, pa.Table) else rows.toArrow()


def _discard(rows: Rows) -> None:
    if isinstance(rows, StagedFiles):
        rows.discard()


def _txn(app_id: str, version: int) -> CommitProperties:
    """Tag a commit with an app transaction (and the same in its metadata, for history readers)."""
    return CommitProperties(
        custom_metadata={"lklab.app_id": app_id, "lklab.version": str(version)},
        app_transactions=[Transaction(app_id, version)],
    )
