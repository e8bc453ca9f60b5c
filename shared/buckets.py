"""Buckets: which of ``n`` groups a key belongs to, the same in every process and on every run.

A stateful step spread over Spark's tasks keeps its state per bucket, so a key's bucket must
never change: not between micro-batches, not after a restart, not between machines. Python's
``hash`` of a string is salted per process, so the bucket is the 64-bit FNV-1a hash of the key's
UTF-8 bytes, modulo ``n`` (a null key hashes as the empty string). Computed in NumPy a byte
column at a time: a key costs its length in vector steps, not a Python call.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["buckets", "key_buckets"]

_OFFSET = np.uint64(0xCBF29CE484222325)
_PRIME = np.uint64(0x100000001B3)
_SEPARATOR = "\x1f"  # between the columns of a key of several columns (unit separator)


def buckets(keys: pa.Array | pa.ChunkedArray, n: int) -> np.ndarray:
    """Per key (strings), its bucket in ``0..n-1`` (int64)."""
    if n < 1:
        raise ValueError(f"buckets: n={n} is not valid; valid: a whole number, at least 1")
    array = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    array = pc.fill_null(array.cast(pa.large_string()), "")
    if len(array) == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data = array.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    hashes = np.full(len(array), _OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for position in range(int(lengths.max())):
            rows = np.flatnonzero(lengths > position)
            hashes[rows] = (hashes[rows] ^ data[starts[rows] + position].astype(np.uint64)) * _PRIME
    return (hashes % np.uint64(n)).astype(np.int64)


def key_buckets(table: pa.Table, columns: list[str], n: int) -> np.ndarray:
    """Per row of ``table``, the bucket of its key ``columns`` (strings) taken together."""
    if len(columns) == 1:
        return buckets(table[columns[0]], n)
    joined = pc.binary_join_element_wise(*[pc.fill_null(table[c], "") for c in columns], _SEPARATOR)
    return buckets(joined, n)
