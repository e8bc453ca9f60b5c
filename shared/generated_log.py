"""What every log generator does around the events it draws, written once.

A generator (``lklab.pipelines.<name>.generator``) draws its pipeline's real events by seed, then:

* resends some (``draw_resends``: exact copies, landing a lognormal delay, median 5 s, later;
  a generator with its own retry shape draws its own);
* spoils some good lines into bad ones of known rejection reasons (``draw_spoiled`` picks the
  lines to copy and when the copies land, ``spoiled_lines`` spoils them: each is ``bad-NNNNNN``
  and made bad as its kind says);
* orders every line by ingest time and cuts the log into one segment per interval of ingest
  time (``ingest_segments``), appending each to the lake's log unstamped (``append_segments``:
  the lines carry their own ``ingest_time``);
* keeps the real events' columns beside the log (``save_columns``) for the truth to read back
  (``load_columns``).

Randomness comes only from the generator given, in the order the functions are called, so the
same seed writes the same log, byte for byte. Times are integer microseconds, whole
milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from shared.durations import MICROS_PER_SECOND
from shared.eventlog import EventLog

__all__ = [
    "Spoiler",
    "draw_resends",
    "draw_spoiled",
    "spoiled_lines",
    "ingest_segments",
    "append_segments",
    "save_columns",
    "load_columns",
    "EventColumns",
]

# kind -> (the reason the validator must give, how to spoil a good line's record)
Spoiler = Mapping[str, tuple[str, Callable[[dict], str]]]
Columns = TypeVar("Columns")


def _whole_ms(micros: np.ndarray) -> np.ndarray:
    return np.asarray(micros).astype(np.int64) // 1000 * 1000


def draw_resends(rng: np.random.Generator, ingest_times: np.ndarray, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """``(resent, ingest)``: the rows resent (``rate`` of them, each at most once, in order) and
    when each copy lands, a lognormal delay (median 5 s) after its original."""
    n = len(ingest_times)
    resent = np.sort(rng.choice(n, size=int(round(n * rate)), replace=False))
    delays = _whole_ms(5 * MICROS_PER_SECOND * rng.lognormal(0.0, 1.5, len(resent)))
    return resent, ingest_times[resent] + delays


def draw_spoiled(rng: np.random.Generator, ingest_times: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, ingest)``: ``count`` rows (with repeats) whose lines a bad line copies, and when
    each bad line lands, up to 10 s after its row."""
    rows = rng.integers(0, len(ingest_times), count)
    return rows, ingest_times[rows] + _whole_ms(rng.integers(0, 10 * MICROS_PER_SECOND, count))


def spoiled_lines(records: Iterable[dict], kinds: Sequence[str], spoiler: Spoiler) -> tuple[list[str], list[str]]:
    """``(lines, reasons)``: each of ``records`` (a good line's fields) made the bad line of its
    kind in ``kinds``, ``event_id`` ``bad-NNNNNN`` numbered from 0, and the reason the validator
    must give it."""
    lines, reasons = [], []
    for number, (record, kind) in enumerate(zip(records, kinds)):
        reason, spoil = spoiler[kind]
        lines.append(spoil({**record, "event_id": f"bad-{number:06d}"}))
        reasons.append(reason)
    return lines, reasons


def ingest_segments(ingest: np.ndarray, start: int, interval: int) -> list[np.ndarray]:
    """The lines' indices in ingest order (stable: lines landing together keep their order), cut
    into one segment per ``interval`` of ingest time counted from ``start`` (none where no line
    landed)."""
    order = np.argsort(ingest, kind="stable")
    return np.split(order, np.flatnonzero(np.diff((ingest[order] - start) // interval)) + 1)


def append_segments(
    log: EventLog, lines: Sequence[str], segments: Iterable[np.ndarray], appended: Callable[[], Any] = lambda: None
) -> None:
    """Append each of ``segments`` (indices into ``lines``) to ``log`` as one segment, unstamped;
    ``appended`` is called after each."""
    for segment in segments:
        log.append((lines[i] for i in segment.tolist()), stamp=False)
        appended()


@dataclass(frozen=True)
class EventColumns:
    """The real (valid, unique) events of a generated log as equally long columns: what every
    event has, its ``event_ids`` and its ``event_times`` and ``ingest_times`` (microseconds); a
    pipeline's columns add the rest of its events' fields."""

    event_ids: np.ndarray
    event_times: np.ndarray
    ingest_times: np.ndarray


def save_columns(path: str | Path, columns: Any) -> None:
    """Keep ``columns`` (a dataclass of equally long arrays) at ``path`` (``.npz``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **asdict(columns))


def load_columns(path: str | Path, kind: Callable[..., Columns]) -> Columns | None:
    """The columns ``save_columns`` kept at ``path``, as ``kind`` (None: nothing was kept)."""
    path = Path(path)
    if not path.is_file():
        return None
    with np.load(path) as stored:
        return kind(**{name: stored[name] for name in stored.files})
