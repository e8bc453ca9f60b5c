"""Deterministic page-view logs for the ``unique_visitors`` pipeline.

``generate_page_views`` draws the views of a browsing session mix by seed: users and pages are
Zipf-skewed (a few heavy users, a few popular pages), and each user keeps coming back to a
handful of their own pages, so windows hold repeats as well as new URLs. Arrival delays are
the lab's scenarios (``lklab.scenarios.arrival_delays``, with users standing for accounts):

* ``billing``: devices offline for a while upload every buffered view hours later;
* ``clickstream``: a CDN hiccup holds 20% of one minute's views for 90 seconds;
* ``outage``: a regional outage holds every fourth user's views, then drains them in order.

On top: exact resends (same ``event_id`` and payload, landing later) and malformed lines of
known rejection reasons (``MALFORMED_KINDS``). Lines are ordered by ingest time, cut into one
segment per ``segment_interval`` and appended to the lake's log (``shared.eventlog``) with
their ``ingest_time``. The real views go to ``generator/page_views.npz`` and the counts to
``generator/page_views.json``, from which ``lklab.pipelines.unique_visitors.truth`` derives the truth.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from lklab.generator_params import ScenarioLogParams
from lklab.scenarios import arrival_delays
from shared import generated_log
from shared.eventlog import EventLog
from shared.generated_log import EventColumns
from shared.locks import whole_lake

__all__ = [
    "PageViewParams",
    "GeneratedViews",
    "MALFORMED_KINDS",
    "generate_page_views",
    "draw_page_views",
    "load_page_views",
]

# kind -> (reason the validator must give, how to spoil a good view)
MALFORMED_KINDS: dict[str, tuple[str, Callable[[dict], str]]] = {
    "truncated": ("not_json", lambda v: json.dumps(v)[: len(json.dumps(v)) // 2]),
    "array": ("not_an_object", lambda v: json.dumps([v])),
    "no_url": ("missing_field", lambda v: json.dumps({k: x for k, x in v.items() if k != "url"})),
    "user_number": ("wrong_type", lambda v: json.dumps({**v, "user_id": 7})),
    "url_relative": ("invalid_url", lambda v: json.dumps({**v, "url": v["url"].split("example", 1)[-1]})),
    "time_no_offset": ("invalid_event_time", lambda v: json.dumps({**v, "event_time": v["event_time"][:-1]})),
    "blank": ("empty_line", lambda v: ""),
}


@dataclass(frozen=True)
class PageViewParams(ScenarioLogParams):
    """What to generate (``ScenarioLogParams`` and the views' counts). Times are microseconds;
    rates are fractions of ``views``."""

    counts: ClassVar[tuple[str, ...]] = ("views", "users", "pages")

    scenario: str = "clickstream"
    seed: int = 11
    malformed_rate: float = 0.002
    views: int = 20_000
    users: int = 200
    pages: int = 300


@dataclass(frozen=True)
class GeneratedViews(EventColumns):
    """The real (valid, unique) views, as columns: ``EventColumns`` and their users and URLs."""

    users: np.ndarray
    urls: np.ndarray


def _zipf(rng: np.random.Generator, size: int, count: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, size + 1) ** exponent
    return rng.choice(size, size=count, p=weights / weights.sum())


def draw_page_views(params: PageViewParams) -> tuple[GeneratedViews, np.random.Generator]:
    """The real views of ``params`` (and the generator, to draw retries and bad lines from)."""
    rng = np.random.default_rng(params.seed)
    n = params.views
    users = _zipf(rng, params.users, n, 0.9)
    favourites = rng.integers(0, params.pages, (params.users, 5))  # each user's own pages
    popular = _zipf(rng, params.pages, n, 1.1)
    own = favourites[users, rng.integers(0, 5, n)]
    pages = np.where(rng.random(n) < 0.6, own, popular)
    event_times = params.start + np.sort(rng.integers(0, params.span // 1000, n)) * 1000
    delays = arrival_delays(params.scenario, rng, event_times, users, params.start, params.span)
    views = GeneratedViews(
        event_ids=np.char.add(f"v{params.seed}-", np.char.zfill(np.arange(n).astype(str), 8)),
        users=np.char.add("user-", np.char.zfill(users.astype(str), 4)),
        urls=np.char.add("https://shop.example/p/", pages.astype(str)),
        event_times=event_times,
        ingest_times=event_times + delays,
    )
    return views, rng


def _iso(micros: np.ndarray) -> list[str]:
    return np.char.add(np.datetime_as_string(np.asarray(micros).astype("datetime64[us]"), unit="ms"), "Z").tolist()


def _lines(views: GeneratedViews, index: np.ndarray, ingest: np.ndarray) -> list[str]:
    fields = zip(
        views.event_ids[index].tolist(),
        views.users[index].tolist(),
        views.urls[index].tolist(),
        _iso(views.event_times[index]),
        _iso(ingest),
    )
    return [
        f'{{"event_id": "{i}", "user_id": "{u}", "url": "{r}", "event_time": "{e}", "ingest_time": "{g}"}}'
        for i, u, r, e, g in fields
    ]


def generate_page_views(params: PageViewParams, lake: str | Path, *, overwrite: bool = False) -> dict:
    """Write the views' log to ``<lake>/log`` and the generator's files; return the manifest.
    Refuses a lake that already holds a log unless ``overwrite`` (then the log is replaced)."""
    lake = Path(lake)
    with whole_lake(lake):
        log = EventLog(lake)
        if log.root.exists() and any(log.root.iterdir()):
            if not overwrite:
                raise FileExistsError(
                    f"{lake} already holds a log ({log.last_segment()} segments); choose another lake or overwrite"
                )
            for path in log.root.iterdir():
                path.unlink()
        views, rng = draw_page_views(params)
        n = params.views
        retried, retry_ingest = generated_log.draw_resends(rng, views.ingest_times, params.duplicate_rate)
        bad_count = int(round(n * params.malformed_rate))
        templates, bad_ingest = generated_log.draw_spoiled(rng, views.ingest_times, bad_count)
        good = _lines(views, templates, bad_ingest)
        kinds = list(MALFORMED_KINDS)
        chosen = [kinds[k] for k in rng.integers(0, len(kinds), bad_count)]
        bad_lines, reasons = generated_log.spoiled_lines((json.loads(line) for line in good), chosen, MALFORMED_KINDS)
        lines = _lines(views, np.arange(n), views.ingest_times) + _lines(views, retried, retry_ingest) + bad_lines
        ingest = np.concatenate([views.ingest_times, retry_ingest, bad_ingest])
        pieces = generated_log.ingest_segments(ingest, params.start, params.segment_interval)
        generated_log.append_segments(log, lines, pieces)
        manifest = {
            "pipeline": "unique_visitors",
            "params": asdict(params),
            "lines": len(lines),
            "segments": len(pieces),
            "views": n,
            "duplicates": len(retried),
            "dead_letters": dict(sorted(Counter(reasons).items())),
        }
        (lake / "generator").mkdir(parents=True, exist_ok=True)
        (lake / "generator" / "page_views.json").write_text(json.dumps(manifest, indent=2) + "\n")
        generated_log.save_columns(lake / "generator" / "page_views.npz", views)
        return manifest


def load_page_views(lake: str | Path) -> GeneratedViews | None:
    """The real views generated into ``lake`` (None if none were)."""
    return generated_log.load_columns(Path(lake) / "generator" / "page_views.npz", GeneratedViews)
