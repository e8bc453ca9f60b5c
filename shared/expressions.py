"""Column expressions built once per Spark context and reused by every DataFrame.

A PySpark ``Column`` is an unresolved expression tree held by the JVM, independent of any
DataFrame, and every call that builds one is a round trip from Python. Building the columns of
``parse_events`` takes thousands of them, and every batch recompute, replay and reconciliation
parses (tests build many such DataFrames in one session). ``built_once`` keeps what a pure
builder returns for as long as the Spark context lives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import TypeVar

from pyspark import SparkContext

__all__ = ["built_once"]

T = TypeVar("T")


def built_once(build: Callable[..., T]) -> Callable[..., T]:
    """Call ``build`` (only ``Column`` construction, from hashable settings such as a skew in
    microseconds) once per context and arguments."""
    built: dict = {"context": None, "values": {}}

    @functools.wraps(build)
    def cached(*arguments: Hashable) -> T:
        context = SparkContext._active_spark_context
        if built["context"] is not context:
            built.update(context=context, values={})
        if arguments not in built["values"]:
            built["values"][arguments] = build(*arguments)
        return built["values"][arguments]

    return cached
