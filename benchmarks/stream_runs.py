"""What the streaming benchmarks need around a run: Spark's file source over the log, progress, memory.

* ``order_for_file_source``: Spark's file source takes new files in modification-time order, and
  segments written within the same millisecond tie. Setting their times one second apart, in
  segment order, makes it read the log in the log's order (what the lab's own source does).
* ``files_per_batch``: which files each micro-batch of a file-source query read, from the
  checkpoint's source log (``sources/<n>/<batch>`` and its compactions).
* ``ProgressReports``: every query's progress reports (Spark's ``StreamingQueryProgress`` as a
  dict), collected by a listener, so a query started inside a library call is measured too.
* ``steady_state``: the seconds (Spark's ``triggerExecution``) of every micro-batch after the
  first, the figure ``speed_bench.py`` compares.
* ``PeakMemory``: the largest resident memory of this process tree (the driver, its JVM and
  the JVM's Python workers) while open, sampled.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

__all__ = ["order_for_file_source", "files_per_batch", "ProgressReports", "steady_state", "PeakMemory"]


def order_for_file_source(log_root: Path) -> list[Path]:
    """Give the segments of ``log_root`` modification times one second apart in segment order,
    ending now; return them in that order."""
    segments = sorted(log_root.glob("segment-*.jsonl"))
    now = time.time()
    for number, path in enumerate(segments):
        moment = now - len(segments) + number
        os.utime(path, (moment, moment))
    return segments


def files_per_batch(checkpoint: Path, source: int = 0) -> dict[int, list[str]]:
    """``{batch_id: [file name, ...]}`` of a file-source query's ``source`` (0: its first)."""
    files: dict[int, set[str]] = defaultdict(set)
    for path in (checkpoint / "sources" / str(source)).iterdir():
        if path.name.startswith("."):
            continue
        for line in path.read_text().splitlines()[1:]:  # the first line is the log's version
            entry = json.loads(line)
            files[entry["batchId"]].add(Path(entry["path"]).name)
    return {batch: sorted(names) for batch, names in sorted(files.items())}


class ProgressReports(StreamingQueryListener):
    """Progress reports of every streaming query of a session, by query id, as dicts."""

    def __init__(self, spark: SparkSession) -> None:
        self._reports: dict[str, list[dict]] = defaultdict(list)
        self._ended: set[str] = set()
        self._order: list[str] = []
        self._lock = threading.Lock()
        spark.streams.addListener(self)

    def onQueryStarted(self, event) -> None:
        with self._lock:
            self._order.append(str(event.id))

    def onQueryProgress(self, event) -> None:
        report = json.loads(event.progress.json)
        with self._lock:
            self._reports[report["id"]].append(report)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        with self._lock:
            self._ended.add(str(event.id))

    def last_query(self, timeout: float = 60.0) -> list[dict]:
        """The reports of the query started last, once its end has been delivered (the listener
        bus delivers in order, so every report of it has been too), by batch id."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                query = self._order[-1] if self._order else None
                if query is not None and query in self._ended:
                    return sorted(self._reports[query], key=lambda report: report["batchId"])
            if time.monotonic() > deadline:
                raise RuntimeError("the last streaming query's end was not reported")
            time.sleep(0.1)


def steady_state(reports: list[dict]) -> tuple[float, int]:
    """Seconds (the sum of ``triggerExecution``) and count of the micro-batches after the first."""
    later = [report for report in reports if report["batchId"] > 0]
    return sum(report["durationMs"]["triggerExecution"] for report in later) / 1000, len(later)


class PeakMemory:
    """The largest resident memory of this process tree, and of this (driver) process, while open.

    Sampled every ``every`` seconds: a peak shorter than that can be missed."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.tree, self.driver = every, 0, 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            sizes = []
            for proc in [me, *me.children(recursive=True)]:
                try:
                    sizes.append(proc.memory_info().rss)
                except psutil.Error:
                    continue
            self.tree, self.driver = max(self.tree, sum(sizes)), max(self.driver, sizes[0] if sizes else 0)
            self._stop.wait(self.every)

    def __enter__(self) -> "PeakMemory":
        self._stop.clear()  # may be opened again: the peak is over every time it was open
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
