"""Distinct URLs per user per window: the rule of the ``unique_visitors`` pipeline.

A page view at event time ``t`` belongs to the fixed windows holding ``t`` (``shared.windows``:
tumbling ``[N*size, (N+1)*size)`` or sliding ``[N*slide, N*slide + size)``); sessions are
refused (``require_fixed``): a distinct count over a window whose bounds move is not what this
pipeline serves. Each (view, window) pair is a *pair*.

A window's **members**, per user, are the distinct URLs of its pairs, and its count is
``distinct_urls = |members|``. URLs are compared exactly as written. The count is *not
additive*: a second view of a member URL adds nothing, so two partial counts cannot be summed,
only their member sets united. The view that makes a URL a member is the *first view* of its
``(window_start, window_end, user_id, url)`` in log order ``(segment, line_number)``
(``first_views``); every later one is a *repeat*.

The rule is written once, in Arrow and NumPy. The batch path runs ``distinct_url_members_table``
over every first copy of the log (``truth_members``/``truth_counts`` through Spark, all views of
a user in one call); the stream step (``lklab.pipelines.unique_visitors.step``) applies ``first_views`` to the
held members followed by a micro-batch's on-time pairs, so that both name the same first view.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from shared.events import UTC_MICROS
from shared.spark_arrow import per_key
from shared.windows import WindowSpec, assign_windows_table

__all__ = [
    "MEMBER_KEY",
    "WINDOW_KEY",
    "MEMBER_SCHEMA",
    "COUNT_SCHEMA",
    "require_fixed",
    "view_pairs",
    "first_views",
    "distinct_url_members_table",
    "distinct_url_counts_table",
    "truth_members",
    "truth_counts",
]

WINDOW_KEY = ("window_start", "window_end", "user_id")
MEMBER_KEY = (*WINDOW_KEY, "url")
# The batch truth's members: each with how many first copies viewed it in the window and where
# the first of them is in the log.
MEMBER_SCHEMA = pa.schema(
    [
        pa.field("window_start", UTC_MICROS),
        pa.field("window_end", UTC_MICROS),
        pa.field("user_id", pa.string()),
        pa.field("url", pa.string()),
        pa.field("views", pa.int64()),
        pa.field("first_segment", pa.int64()),
        pa.field("first_line_number", pa.int64()),
    ]
)
COUNT_SCHEMA = pa.schema(
    [
        pa.field("window_start", UTC_MICROS),
        pa.field("window_end", UTC_MICROS),
        pa.field("user_id", pa.string()),
        pa.field("distinct_urls", pa.int64()),
    ]
)


def require_fixed(spec: WindowSpec) -> WindowSpec:
    """``spec`` when it is tumbling or sliding; a ``ValueError`` naming the valid kinds otherwise."""
    return spec.require_fixed("unique_visitors counts distinct URLs per fixed window")


def view_pairs(spec: WindowSpec, views: pa.Table) -> pa.Table:
    """One row per (view, window): ``views`` with ``window_start`` and ``window_end``, in the
    order of ``views`` (a view's windows next to each other, earliest start last)."""
    return assign_windows_table(require_fixed(spec), views)


def first_views(pairs: pa.Table) -> np.ndarray:
    """Per row of ``pairs`` (with the ``MEMBER_KEY`` columns, in the order that counts): True
    where it is the first row of its ``(window_start, window_end, user_id, url)``."""
    flags = np.zeros(pairs.num_rows, dtype=bool)
    if not pairs.num_rows:
        return flags
    numbered = pairs.select(list(MEMBER_KEY)).append_column("_row", pa.array(np.arange(pairs.num_rows, dtype=np.int64)))
    firsts = numbered.group_by(list(MEMBER_KEY), use_threads=False).aggregate([("_row", "min")])
    flags[firsts["_row_min"].to_numpy()] = True
    return flags


def _log_order(table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table, sort_keys=[("segment", "ascending"), ("line_number", "ascending")]))


def distinct_url_members_table(spec: WindowSpec, views: pa.Table) -> pa.Table:
    """The members of every (window, user) of ``views`` (first copies with ``segment``,
    ``line_number``, ``user_id``, ``url``, ``event_time``): ``MEMBER_SCHEMA``, sorted by
    ``MEMBER_KEY``. Every view of a user must be in the call."""
    pairs = view_pairs(spec, _log_order(views))
    firsts = pairs.filter(pa.array(first_views(pairs)))
    views_per_member = pairs.group_by(list(MEMBER_KEY), use_threads=False).aggregate([("url", "count")])
    members = firsts.select([*MEMBER_KEY, "segment", "line_number"]).join(views_per_member, list(MEMBER_KEY))
    members = pa.table(
        {
            **{name: members[name] for name in MEMBER_KEY},
            "views": members["url_count"],
            "first_segment": members["segment"],
            "first_line_number": members["line_number"],
        }
    ).cast(MEMBER_SCHEMA)
    return members.sort_by([(name, "ascending") for name in MEMBER_KEY])


def distinct_url_counts_table(members: pa.Table) -> pa.Table:
    """``distinct_urls`` per (window, user) of a member table: ``COUNT_SCHEMA``, sorted."""
    counts = members.group_by(list(WINDOW_KEY), use_threads=False).aggregate([("url", "count_distinct")])
    table = pa.table({**{name: counts[name] for name in WINDOW_KEY}, "distinct_urls": counts["url_count_distinct"]})
    return table.cast(COUNT_SCHEMA).sort_by([(name, "ascending") for name in WINDOW_KEY])


def _members_then_counts(spec: WindowSpec, views: pa.Table) -> pa.Table:
    return distinct_url_counts_table(distinct_url_members_table(spec, views))


def truth_members(spec: WindowSpec) -> Callable[[DataFrame], DataFrame]:
    """``distinct_url_members_table`` over a Spark DataFrame of first copies (every view of a
    user in one call: hash-partitioned on ``user_id``)."""
    require_fixed(spec)
    return lambda views: per_key(
        views, ["user_id"], functools.partial(distinct_url_members_table, spec), from_arrow_schema(MEMBER_SCHEMA)
    )


def truth_counts(spec: WindowSpec) -> Callable[[DataFrame], DataFrame]:
    """``distinct_urls`` per (window, user) over a Spark DataFrame of first copies: the batch
    truth (``visitors_truth``)."""
    require_fixed(spec)
    return lambda views: per_key(
        views, ["user_id"], functools.partial(_members_then_counts, spec), from_arrow_schema(COUNT_SCHEMA)
    )
