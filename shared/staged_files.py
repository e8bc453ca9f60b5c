"""Rows a Spark task wrote as Parquet files beside a table, for the driver to commit.

A stream whose step runs on the executors ends a micro-batch with rows of several tables in its
tasks (``shared.keyed_speed``'s cells). ``stage`` is the ``mapInArrow`` function that writes
them where they are: each cell of a table's kind becomes a Parquet file (Arrow's writer, the
table's exact schema, timestamps as UTC microseconds) in a staging folder of that table
(``_staging-<id>``: hidden from readers, deleted by ``lklab maintain`` when its commit never lands), and
every other cell passes through to the driver, with one ``staged`` cell per task naming the
files it wrote. The driver then commits each table's ``StagedFiles`` with
``shared.tables.Tables`` (the files move into the table and one delta-rs commit adds them) or,
when the table already holds the commit, discards them. Only the files named by the tasks whose
results the driver received are committed: a task attempt that failed, or lost to a speculative
copy, leaves its files in the staging folder, which goes with the commit. So a micro-batch is one
Spark job, its rows never reach the driver, and the operators before it run once.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shared.arrow_blobs import BLOB_SCHEMA, decode, encode

__all__ = ["StagedFiles", "Target", "STAGED_SCHEMA", "stage", "staged", "staging_folder"]

# A task's ``staged`` cell: per file it wrote, the kind of its rows, its name and its rows.
STAGED_SCHEMA = pa.schema([pa.field("kind", pa.string()), pa.field("file", pa.string()), pa.field("rows", pa.int64())])


def staging_folder(root: Path) -> Path:
    """A new staging folder inside the table folder ``root``."""
    return root / f"_staging-{uuid.uuid4()}"


@dataclass(frozen=True)
class Target:
    """Where a kind of cells goes: the staging folder of its table, its table's schema, and
    ``convert(kind, table)``, applied to a cell's table first (None: as it is)."""

    folder: Path
    schema: pa.Schema
    convert: Callable[[str, pa.Table], pa.Table] | None = None


def stage(targets: Mapping[str, Target]):
    """A ``mapInArrow`` function over ``(key, kind, blob)`` cells: a cell of a kind in ``targets``
    with rows is written as one Parquet file in its target's folder, named in the task's cell of
    kind ``staged`` (its table: ``STAGED_SCHEMA``); every other cell passes through."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keep = [True] * batch.num_rows
            written: list[tuple[str, str, int]] = []
            for index, (kind, blob) in enumerate(
                zip(batch.column("kind").to_pylist(), batch.column("blob").to_pylist())
            ):
                target = targets.get(kind)
                if target is None:
                    continue
                keep[index] = False
                table = decode(blob)
                if target.convert is not None:
                    table = target.convert(kind, table)
                if table.num_rows:
                    target.folder.mkdir(parents=True, exist_ok=True)
                    name = f"part-{uuid.uuid4()}.parquet"
                    pq.write_table(table.cast(target.schema), target.folder / name, compression="snappy")
                    written.append((kind, name, table.num_rows))
            yield batch.filter(pa.array(keep))
            if written:
                staged = pa.table(dict(zip(STAGED_SCHEMA.names, zip(*written))), schema=STAGED_SCHEMA)
                yield pa.record_batch([[0], ["staged"], [encode(staged)]], schema=BLOB_SCHEMA)

    return write


@dataclass(frozen=True)
class StagedFiles:
    """A table's rows as the Parquet ``files`` (names) in ``folder`` (``stage``), of ``schema``,
    ``rows`` in all."""

    folder: Path
    schema: pa.Schema
    files: tuple[str, ...]
    rows: int

    def read(self) -> pa.Table:
        return pa.concat_tables([pq.read_table(self.folder / name, schema=self.schema) for name in self.files])

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def staged(folder: Path, schema: pa.Schema, named: list[dict]) -> StagedFiles | pa.Table:
    """One table's files as the tasks named them (``named``: ``STAGED_SCHEMA`` rows) in ``folder``:
    ``StagedFiles``, or an empty table of ``schema`` when they named none (the folder, holding at
    most a failed task attempt's files, removed)."""
    if not named:
        shutil.rmtree(folder, ignore_errors=True)
        return schema.empty_table()
    return StagedFiles(folder, schema, tuple(row["file"] for row in named), sum(row["rows"] for row in named))
