"""The watermark advisor's whole curve against one Kappa replay, in replays.

One generated log (``billing``, 100,000 events by default, 1% retries, 0.1% malformed lines) and
one Spark session. One unmeasured run of each first (JVM, JIT, Python workers), then
``--repeats`` measured runs of each, interleaved: a replay at one delay (``run_replay``, the
stream's tables, as ``lklab replay`` writes them) and the advisor (the log read and parsed once,
then the curve of ``--points`` delays plus three asked ones, as ``lklab advise`` computes them).
Prints the median wall time of each and the cost of the whole curve in replays (advisor / replay;
the goal is at most two), and how many delays the curve holds.

    .venv/bin/python benchmarks/advise_bench.py [--events N] [--repeats R] [--points P] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)

from lklab.pipelines import find  # noqa: E402
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate  # noqa: E402
from lklab.pipelines.billing_windows.replay import run_replay  # noqa: E402
from lklab.watermark_advisor import SECOND, advise  # noqa: E402
from shared.config import LabConfig  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402

ASKED = {"10s": 10 * SECOND, "45s": 45 * SECOND, "3m": 180 * SECOND}


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def timed(action):
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--json-out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advise-bench-") as lake:
        progress(f"generating {args.events:,} events")
        generate(GeneratorParams(events=args.events), lake)
        config = LabConfig(lake=Path(lake), table_engine="deltalake")
        spark = spark_session(config, "advise-bench")
        reader = find("billing_windows").advise.read

        def replay():
            return run_replay(spark, dataclasses.replace(config, watermark_delay=45 * SECOND), "bench", replace=True)

        def advisor():
            return advise(reader(spark, config, None, lambda _: None), ASKED, points=args.points)

        walls = {"replay": [], "advise": []}
        curve = 0
        for run in range(args.repeats + 1):
            for side, action in (("replay", replay), ("advise", advisor)):
                wall, result = timed(action)
                if side == "advise":
                    curve = len(result.curve)
                if run:
                    walls[side].append(wall)
                progress(f"{'warm-up' if not run else f'run {run}'}: {side} {wall:.1f}s")
        spark.stop()
    replay_s, advise_s = statistics.median(walls["replay"]), statistics.median(walls["advise"])
    figures = {
        "events": args.events,
        "repeats": args.repeats,
        "curve_delays": curve,
        "replay_seconds": round(replay_s, 2),
        "advise_seconds": round(advise_s, 2),
        "curve_in_replays": round(advise_s / replay_s, 2),
    }
    print(
        f"{args.events:,} events: one replay {replay_s:.1f}s; the advisor's curve of {curve} delays {advise_s:.1f}s "
        f"= {advise_s / replay_s:.2f} replays (goal: at most 2)"
    )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
