"""Column expressions built once per Spark context and reused by every DataFrame.

A PySpark ``Column`` is an unresolved expression tree held by the JVM, independent of any
DataFrame, and every node costs a round trip from Python to build. The validation expression
of ``parse_events`` alone has about 4,000 nodes: rebuilt for every micro-batch, that is about
a second of the speed layer's time on a 2-core machine. ``built_once`` keeps what a pure
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
    cache: dict[int, tuple[SparkContext, T]] = {}

    @functools.wraps(build)
    def cached() -> T:
        context = SparkContext._active_spark_context
        key = id(context)
        hit = cache.get(key)
        if hit is None or hit[0] is not context:
            cache.clear()
            hit = cache[key] = (context, build())
        return hit[1]

    return cached
