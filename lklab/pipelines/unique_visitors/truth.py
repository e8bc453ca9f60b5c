"""Ground truth for ``unique_visitors``, computed without Spark and without the rule it checks.

An independent oracle over the generator's real views (``lklab.pipelines.unique_visitors.generator``): the
windows of each view by plain integer arithmetic (tumbling ``[N*size, (N+1)*size)``, sliding
``[N*slide, N*slide + size)``), and per (window, user) the Python ``set`` of its URLs. It shares
no code with ``lklab.pipelines.unique_visitors.rule``, so agreement between them means something.
"""

from __future__ import annotations

import pyarrow as pa

from lklab.pipelines.unique_visitors.generator import GeneratedViews
from shared.windows import SlidingWindows, TumblingWindows, WindowSpec

__all__ = ["window_url_sets", "truth_members", "truth_counts"]


def _windows(t: int, spec: WindowSpec) -> list[tuple[int, int]]:
    if isinstance(spec, TumblingWindows):
        start = t - t % spec.size
        return [(start, start + spec.size)]
    if isinstance(spec, SlidingWindows):
        found, start = [], t - t % spec.slide
        while start + spec.size > t:
            found.append((start, start + spec.size))
            start -= spec.slide
        return found
    raise TypeError(f"the truth of distinct URLs is defined for tumbling and sliding windows, not {spec!r}")


def window_url_sets(views: GeneratedViews, spec: WindowSpec) -> dict[tuple[int, int, str], set[str]]:
    """``(window_start, window_end, user_id) -> {url, ...}`` over every real view (microseconds)."""
    sets: dict[tuple[int, int, str], set[str]] = {}
    for user, url, t in zip(views.users.tolist(), views.urls.tolist(), views.event_times.tolist()):
        for start, end in _windows(int(t), spec):
            sets.setdefault((start, end, user), set()).add(url)
    return sets


def _times(values: list[int]) -> pa.Array:
    return pa.array(values, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def truth_members(views: GeneratedViews, spec: WindowSpec) -> pa.Table:
    """One row per (window, user, url) of the truth, sorted."""
    rows = sorted((s, e, u, url) for (s, e, u), urls in window_url_sets(views, spec).items() for url in urls)
    return pa.table(
        {
            "window_start": _times([r[0] for r in rows]),
            "window_end": _times([r[1] for r in rows]),
            "user_id": pa.array([r[2] for r in rows], pa.string()),
            "url": pa.array([r[3] for r in rows], pa.string()),
        }
    )


def truth_counts(views: GeneratedViews, spec: WindowSpec) -> pa.Table:
    """``distinct_urls`` per (window, user), sorted."""
    rows = sorted((s, e, u, len(urls)) for (s, e, u), urls in window_url_sets(views, spec).items())
    return pa.table(
        {
            "window_start": _times([r[0] for r in rows]),
            "window_end": _times([r[1] for r in rows]),
            "user_id": pa.array([r[2] for r in rows], pa.string()),
            "distinct_urls": pa.array([r[3] for r in rows], pa.int64()),
        }
    )
