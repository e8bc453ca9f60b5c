"""What the pipeline benchmarks share: the measured runs, Spark's file source over the log, progress, memory.

* ``measure_jobs``: one unmeasured run of each job, then ``repeats`` measured runs of each,
  interleaved: wall seconds, the peak memory of each job, and for a streaming job (its name ends
  in ``stream``) the steady state of the query it ran.
* ``order_for_file_source``: Spark's file source takes new files in modification-time order (a
  millisecond's resolution), and segments written in one go may tie. Setting their times one second apart, in
  segment order, makes it read the log in the log's order (what the lab's own source does).
* ``files_per_batch``: which files each micro-batch of a file-source query read, from the
  checkpoint's source log (``sources/<n>/<batch>`` and its compactions).
* ``ProgressReports``: every query's progress reports (Spark's ``StreamingQueryProgress`` as a
  dict), collected by a listener, so a query started inside a library call is measured too.
* ``steady_state``: the seconds (Spark's ``triggerExecution``) of every micro-batch after the
  first, the figure ``speed_bench.py`` compares.
* ``PeakMemory``: the largest resident memory of this process tree (the driver, its JVM and
  the JVM's Python workers) while open, sampled.
* ``require``: the exit (status 1) when the lab and bare Spark did not compute the same thing.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

__all__ = [
    "ratio_figures",
    "print_timings",
    "print_load",
    "Measured",
    "PeakMemory",
    "ProgressReports",
    "files_per_batch",
    "measure_jobs",
    "micros_of",
    "order_for_file_source",
    "progress",
    "require",
    "steady_state",
]


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def require(condition: bool, message: str) -> None:
    """Stop the benchmark (exit status 1) when the two sides did not compute the same thing."""
    if not condition:
        raise SystemExit(f"DISAGREEMENT: {message}")


def micros_of(stamp: str | None) -> int | None:
    """A progress report's ISO time (``2026-01-05T00:08:58.490Z``) in microseconds."""
    return None if stamp is None else int(datetime.fromisoformat(stamp).timestamp() * 1_000_000)


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
    """The largest resident memory of this process tree, of this (driver) process and of its
    largest process (with Spark: the JVM), while open.

    Sampled every ``every`` seconds: a peak shorter than that can be missed."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.tree, self.driver, self.largest = every, 0, 0, 0
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
            self.largest = max(self.largest, max(sizes, default=0))
            self._stop.wait(self.every)

    def __enter__(self) -> PeakMemory:
        self._stop.clear()  # may be opened again: the peak is over every time it was open
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Measured:
    """Per job: its measured runs (``wall`` seconds, and for a stream ``steady`` seconds and
    ``batches_after_first``), its peak memory, and the last streaming run's progress reports."""

    runs: dict[str, list[dict]] = field(default_factory=dict)
    memory: dict[str, PeakMemory] = field(default_factory=dict)
    reports: dict[str, list[dict]] = field(default_factory=dict)


def measure_jobs(jobs: dict[str, Callable[[str], object]], repeats: int, reports: ProgressReports) -> Measured:
    """Run every job once unmeasured (``"warmup"``), then ``repeats`` times (``"run1"``, ...)."""
    progress("warm-up: one unmeasured run of each")
    for job, action in jobs.items():
        action("warmup")
        progress(f"warm-up: {job} done")
    measured = Measured({job: [] for job in jobs}, {job: PeakMemory() for job in jobs})
    for repeat in range(1, repeats + 1):
        for job, action in jobs.items():
            with measured.memory[job]:
                started = time.perf_counter()
                action(f"run{repeat}")
                wall = time.perf_counter() - started
            if job.endswith("stream"):
                measured.reports[job] = reports.last_query()
                steady, batches = steady_state(measured.reports[job])
                measured.runs[job].append({"wall": wall, "steady": steady, "batches_after_first": batches})
                progress(
                    f"run {repeat}/{repeats}: {job} {wall:.1f}s, micro-batches after the first {steady:.1f}s ({batches})"
                )
            else:
                measured.runs[job].append({"wall": wall})
                progress(f"run {repeat}/{repeats}: {job} {wall:.1f}s")
    return measured


def ratio_figures(args, log: dict, measured: Measured, agreement: dict, load_at_start: float) -> dict:
    """The figures both stream benchmarks print and write: medians of the measured runs, ratios
    lab / bare Spark, peak memory, the agreement found and the load; written to ``--json-out``."""
    median = {
        job: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        for job, runs in measured.runs.items()
    }
    figures = {
        "log": log,
        "repeats": args.repeats,
        "runs": measured.runs,
        "median": median,
        "peak_rss_mib": {
            job: {"process_tree": m.tree / 2**20, "driver": m.driver / 2**20} for job, m in measured.memory.items()
        },
        "batch_ratio_lab_to_bare": median["lab_batch"]["wall"] / median["bare_batch"]["wall"],
        "stream_wall_ratio_lab_to_bare": median["lab_stream"]["wall"] / median["bare_stream"]["wall"],
        "stream_steady_ratio_lab_to_bare": median["lab_stream"]["steady"] / median["bare_stream"]["steady"],
        "agreement": agreement,
        "load_average": {"start": load_at_start, "end": os.getloadavg()[0]},
        "cores": os.cpu_count(),
    }
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def print_timings(figures: dict, lines: int, steady_lines: int, labels: dict[str, str]) -> None:
    """The batch and stream timings of ``ratio_figures``, each job under its ``labels`` entry."""
    median, width = figures["median"], max(len(label) for label in labels.values())
    for job in ("bare_batch", "lab_batch"):
        print(f"{labels[job]:{width}s} {median[job]['wall']:7.1f}s {lines / median[job]['wall']:9,.0f} lines/s")
    print(f"ratio lab / bare Spark, batch (time): {figures['batch_ratio_lab_to_bare']:.2f}x")
    batches = median["bare_stream"]["batches_after_first"]
    for job in ("bare_stream", "lab_stream"):
        m = median[job]
        print(
            f"{labels[job]:{width}s} wall {m['wall']:6.1f}s | batches 1..{batches:.0f}: {m['steady']:6.1f}s, "
            f"{m['steady'] / m['batches_after_first']:.3f}s per batch, {steady_lines / m['steady']:8,.0f} lines/s"
        )
    print(
        f"ratio lab / bare Spark, stream: steady state {figures['stream_steady_ratio_lab_to_bare']:.2f}x, "
        f"wall {figures['stream_wall_ratio_lab_to_bare']:.2f}x"
    )
    rss = figures["peak_rss_mib"]
    print(
        "peak RSS, process tree (driver): "
        + ", ".join(f"{job} {v['process_tree']:,.0f} MiB ({v['driver']:,.0f})" for job, v in rss.items())
        + " (summed over the processes, pages shared by forked Python workers counted in each; the JVM and idle workers"
        " are shared by the four jobs, so what one leaves counts in the next)"
    )


def print_load(figures: dict, load_at_start: float) -> None:
    print(
        f"load average (1 min) {load_at_start:.1f} at the start, {figures['load_average']['end']:.1f} at the end, on {figures['cores']} cores"
    )
