"""Delta table I/O: the one place that knows how tables are written and read.

Tables live under ``<lake>/tables/<name>``. Two engines write the same Delta format:

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
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from pyspark.sql import DataFrame, SparkSession

__all__ = ["Tables", "resolve_engine", "delta_spark_jars", "TableNameError"]

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

    def __init__(self, spark: SparkSession, lake: str | Path, engine: str = "auto") -> None:
        self.spark = spark
        self.root = Path(lake).resolve() / "tables"
        self.engine = resolve_engine(engine)

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
        return DeltaTable(str(self.path(name))).transaction_version(app_id)

    def append(
        self,
        name: str,
        rows: DataFrame,
        *,
        app_id: str,
        version: int,
        partition_by: list[str] | None = None,
    ) -> bool:
        """Append ``rows`` once per ``(app_id, version)``; return False when already committed."""
        committed = self.committed_version(name, app_id)
        if committed is not None and committed >= version:
            return False
        if self.engine == "delta-spark":
            writer = rows.write.format("delta").mode("append")
            writer = writer.option("txnAppId", app_id).option("txnVersion", version)
            if partition_by:
                writer = writer.partitionBy(*partition_by)
            writer.save(str(self.path(name)))
            return True
        write_deltalake(
            str(self.path(name)),
            rows.toArrow(),
            mode="append",
            partition_by=partition_by,
            commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]),
        )
        return True

    def overwrite(
        self,
        name: str,
        rows: DataFrame,
        *,
        predicate: str | None = None,
        partition_by: list[str] | None = None,
    ) -> None:
        """Replace the rows matching ``predicate`` (all rows when None) with ``rows``."""
        if self.engine == "delta-spark":
            writer = rows.write.format("delta").mode("overwrite")
            if predicate:
                writer = writer.option("replaceWhere", predicate)
            if partition_by:
                writer = writer.partitionBy(*partition_by)
            writer.save(str(self.path(name)))
            return
        write_deltalake(
            str(self.path(name)),
            rows.toArrow(),
            mode="overwrite",
            predicate=predicate if self.exists(name) else None,
            partition_by=partition_by,
        )

    def read(self, name: str, version: int | None = None) -> DataFrame:
        """The table (at ``version``, for time travel) as a Spark DataFrame."""
        if self.engine == "delta-spark":
            reader = self.spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", version)
            return reader.load(str(self.path(name)))
        return self.spark.createDataFrame(self.read_arrow(name, version))

    def read_arrow(self, name: str, version: int | None = None) -> pa.Table:
        """The table as Arrow, read by delta-rs whatever engine wrote it."""
        if not self.exists(name):
            raise FileNotFoundError(f"table {name} does not exist under {self.root}")
        return DeltaTable(str(self.path(name)), version=version).to_pyarrow_table()

    def version(self, name: str) -> int:
        return DeltaTable(str(self.path(name))).version()
