"""Arrow tables carried as binary cells: typed rows through Spark's stateful operators.

A stateful operator of Spark's (``transformWithStateInPandas``) hands its function pandas frames
and takes pandas frames back, one schema for everything it emits. A step that emits several
kinds of rows (events for the next operator, duplicates, late events, its state) and must keep
exact types (decimals, microsecond timestamps) sends each as one cell instead: a row ``(key,
kind, blob)`` whose ``blob`` is an Arrow IPC stream of a whole table. ``key`` routes the row to
the next operator's group (a bucket), ``kind`` says what the table is. Rows leave and enter
pandas as bytes, so nothing is converted cell by cell, and a bucket's rows cross a shuffle as a
few cells, not as many rows.

``packed`` turns a frame's partitions into such rows inside Spark's tasks (one per partition,
under one key).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator

import pandas as pd
import pyarrow as pa

__all__ = ["BLOB_DDL", "BLOB_SCHEMA", "encode", "decode", "blob_frame", "by_kind", "packed"]

BLOB_DDL = "key long, kind string, blob binary"
BLOB_SCHEMA = pa.schema([pa.field("key", pa.int64()), pa.field("kind", pa.string()), pa.field("blob", pa.binary())])


def encode(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream (schema and rows)."""
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def decode(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(blob).read_all()


def blob_frame(rows: Iterable[tuple[int, str, pa.Table]]) -> pd.DataFrame:
    """``(key, kind, table)`` rows as the pandas frame a stateful operator emits."""
    keys, kinds, blobs = [], [], []
    for key, kind, table in rows:
        keys.append(key)
        kinds.append(kind)
        blobs.append(encode(table))
    return pd.DataFrame({"key": pd.Series(keys, dtype="int64"), "kind": kinds, "blob": blobs})


def by_kind(frames: Iterable[pd.DataFrame]) -> dict[str, list[pa.Table]]:
    """The tables in a stateful operator's input frames, by kind, in the order received."""
    found: dict[str, list[pa.Table]] = {}
    for frame in frames:
        for kind, blob in zip(frame["kind"], frame["blob"]):
            found.setdefault(kind, []).append(decode(blob))
    return found


def packed(schema: pa.Schema, key: int = 0, kind: str = "lines"):
    """A ``mapInArrow`` function: each partition's rows (of ``schema``) as one ``(key, kind,
    blob)`` row, also for a partition without rows, so a step sees every partition of a batch."""

    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = list(batches)
        table = pa.Table.from_batches(received).cast(schema) if received else schema.empty_table()
        yield pa.record_batch([[key], [kind], [encode(table)]], schema=BLOB_SCHEMA)

    return pack
