"""Column expressions built once per Spark context and reused by every DataFrame.

A PySpark ``Column`` is an unresolved expression tree held by the JVM, independent of any
DataFrame, and every call that builds one is a round trip from Python. Building the columns of
``parse_events`` takes thousands of them, and every batch recompute, replay and reconciliation
parses (tests build many such DataFrames in one session). ``built_once`` keeps what a pure
builder returns for as long as the Spark context lives.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

from pyspark import SparkContext

__all__ = ["built_once"]

T = TypeVar("T")


def built_once(build: Callable[[], T]) -> Callable[[], T]:
    """Call ``build`` (no arguments, no data: only ``Column`` construction) once per context."""
    built: list = [None, None]  # [context, value]

    @functools.wraps(build)
    def cached() -> T:
        context = SparkContext._active_spark_context
        if built[0] is not context:
            built[:] = [context, build()]
        return built[1]

    return cached
