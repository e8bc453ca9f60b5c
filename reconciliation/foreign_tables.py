"""A table the lab did not write, read into Spark for a keyed diff: a Delta table or Parquet.

``open_table(path)`` finds what is at ``path``: a Delta table (a folder holding ``_delta_log``,
read by delta-rs at its current version) or Parquet (one file, or a folder of files, read by
pyarrow), written by any engine. Its ``fingerprint`` names exactly what was read (the Delta
version; each Parquet file's size and modification time), so a run on the same inputs can tell
it has been done. ``read_columns`` hands Spark the columns asked for through Arrow on the driver
(timestamps in nanoseconds, which Spark does not read, become microseconds).

``check_sides`` refuses, before any diff, a pair of tables the diff cannot compare
(``ForeignTableError``, naming the column and the table):

* a key or measure column missing from a side;
* a measure that is not a number (integers, floats and decimals are), or a decimal on one side
  against a float on the other (a decimal compares exactly, never through a float);
* a key whose type differs between the sides, unless both are integers;
* a null in a key column (a key names one row; a null names none).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["ForeignTable", "ForeignTableError", "open_table", "read_columns", "check_sides"]

_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FLOATS = (T.FloatType, T.DoubleType)


class ForeignTableError(ValueError):
    """A table that cannot be read or compared as asked (the message names the column and table)."""


@dataclass(frozen=True)
class ForeignTable:
    """What ``path`` holds: ``kind`` ``delta`` (at ``version``) or ``parquet`` (``files``:
    ``(name, size in bytes, mtime in ns)`` each, sorted)."""

    path: str
    kind: str
    version: int | None = None
    files: tuple[tuple[str, int, int], ...] = ()

    @property
    def fingerprint(self) -> dict:
        """What was read, JSON-ready: equal fingerprints mean the same rows."""
        if self.kind == "delta":
            return {"path": self.path, "delta_version": self.version}
        return {"path": self.path, "parquet_files": [list(f) for f in self.files]}

    def describe(self) -> str:
        if self.kind == "delta":
            return f"{self.path} (Delta, version {self.version})"
        return f"{self.path} (Parquet, {len(self.files)} file{'s' if len(self.files) != 1 else ''})"

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.fingerprint, sort_keys=True).encode()).hexdigest()[:16]


def open_table(path: str | Path) -> ForeignTable:
    """The table at ``path`` (``ForeignTableError``: nothing readable there)."""
    where = Path(path).resolve()
    if not where.exists():
        raise ForeignTableError(f"no table at {path}: give a Delta table's folder or a Parquet file or folder")
    if (where / "_delta_log").is_dir():
        if not DeltaTable.is_deltatable(str(where)):
            raise ForeignTableError(f"{path} has a _delta_log but no committed version of a Delta table")
        return ForeignTable(str(where), "delta", version=DeltaTable(str(where)).version())
    try:
        files = ds.dataset(str(where), format="parquet").files
    except (pa.ArrowInvalid, OSError) as err:
        raise ForeignTableError(f"{path} is neither a Delta table nor Parquet: {err}") from None
    if not files:
        raise ForeignTableError(f"{path} holds no Parquet files (and no _delta_log)")
    stats = []
    for file in sorted(files):
        stat = Path(file).stat()
        stats.append(
            (str(Path(file).relative_to(where)) if where.is_dir() else where.name, stat.st_size, stat.st_mtime_ns)
        )
    return ForeignTable(str(where), "parquet", files=tuple(stats))


def _dataset(table: ForeignTable) -> ds.Dataset:
    if table.kind == "delta":
        return DeltaTable(table.path, version=table.version).to_pyarrow_dataset()
    return ds.dataset(
        [str(Path(table.path) / name) if Path(table.path).is_dir() else table.path for name, *_ in table.files],
        format="parquet",
    )


def _spark_ready(arrow: pa.Table) -> pa.Table:
    """Nanosecond timestamps as microseconds (Spark's unit); every other type as it is."""
    fields = [
        pa.field(f.name, pa.timestamp("us", tz=f.type.tz), f.nullable)
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns"
        else f
        for f in arrow.schema
    ]
    return arrow.cast(pa.schema(fields), safe=False)


def read_columns(spark: SparkSession, table: ForeignTable, columns: Sequence[str], side: str) -> DataFrame:
    """``columns`` of ``table`` as a Spark DataFrame (``ForeignTableError``: one is missing)."""
    dataset = _dataset(table)
    names = dataset.schema.names
    for column in columns:
        if column not in names:
            raise ForeignTableError(
                f"the {side} table {table.path} has no column {column!r}; its columns: {', '.join(names)}"
            )
    return spark.createDataFrame(_spark_ready(dataset.to_table(columns=list(columns))))


def _measure_problem(kind: T.DataType) -> str | None:
    if isinstance(kind, (*_INTEGERS, *_FLOATS, T.DecimalType)):
        return None
    return f"is {kind.simpleString()}, not a number"


def _key_problem(truth: T.DataType, stream: T.DataType) -> str | None:
    if truth == stream or (isinstance(truth, _INTEGERS) and isinstance(stream, _INTEGERS)):
        return None
    return f"is {truth.simpleString()} in the truth but {stream.simpleString()} in the stream: they do not join"


def check_sides(
    truth: DataFrame, stream: DataFrame, keys: Sequence[str], measures: Sequence[str], names: Sequence[str]
) -> tuple[int, int]:
    """Refuse what the module docstring lists; return the rows of each side. ``names``: how the
    messages name the truth and the stream table."""
    types = [dict((f.name, f.dataType) for f in side.schema.fields) for side in (truth, stream)]
    for measure in measures:
        for kinds, name in zip(types, names):
            problem = _measure_problem(kinds[measure])
            if problem:
                raise ForeignTableError(f"measure {measure!r} {problem} in {name}")
        decimal = [isinstance(kinds[measure], T.DecimalType) for kinds in types]
        floating = [isinstance(kinds[measure], _FLOATS) for kinds in types]
        if any(decimal) and any(floating):
            raise ForeignTableError(
                f"measure {measure!r} is {types[0][measure].simpleString()} in {names[0]} but "
                f"{types[1][measure].simpleString()} in {names[1]}: a decimal compares exactly, never "
                "through a float; cast one side"
            )
    for key in keys:
        problem = _key_problem(types[0][key], types[1][key])
        if problem:
            raise ForeignTableError(f"key {key!r} {problem} ({names[0]}; {names[1]})")
    rows = []
    for side, name in zip((truth, stream), names):
        counts = side.agg(F.count(F.lit(1)), *[F.count_if(F.col(k).isNull()) for k in keys]).first()
        for key, nulls in zip(keys, counts[1:]):
            if nulls:
                raise ForeignTableError(f"key {key!r} is null in {nulls:,} rows of {name}; a key names one row")
        rows.append(counts[0])
    return rows[0], rows[1]
