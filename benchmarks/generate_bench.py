"""Scenario generation speed against a plain baseline, in the same process.

Baseline: the same number of events drawn with NumPy and written one ``json.dumps`` per line to
one file, with no delays, retries, malformed lines or segmenting. The ratio says what the
scenario machinery costs on top of merely writing that much JSON.

    .venv/bin/python benchmarks/generate_bench.py [EVENTS]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np  # noqa: E402
import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)

from lklab.pipelines.billing_windows.generator import GeneratorParams, generate  # noqa: E402


def baseline(events: int, path: Path) -> float:
    started = time.perf_counter()
    rng = np.random.default_rng(7)
    times = np.sort(rng.integers(0, 6 * 3600 * 1000, events))
    cents = rng.integers(1, 100_000, events)
    with path.open("w") as out:
        for i, (t, c) in enumerate(zip(times.tolist(), cents.tolist())):
            out.write(
                json.dumps(
                    {
                        "event_id": f"e{i}",
                        "account_id": "a",
                        "event_type": "charge",
                        "amount": f"{c // 100}.{c % 100:02d}",
                        "currency": "USD",
                        "event_time": t,
                    }
                )
                + "\n"
            )
    return time.perf_counter() - started


def main() -> None:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as scratch:
        base = baseline(events, Path(scratch) / "baseline.jsonl")
        for scenario in ("billing", "clickstream", "outage"):
            started = time.perf_counter()
            generate(GeneratorParams(scenario=scenario, events=events), Path(scratch) / scenario)
            took = time.perf_counter() - started
            print(
                f"{scenario:<12} {events:,} events in {took:6.2f}s  ({events / took:,.0f} events/s)  "
                f"ratio to plain json.dumps baseline ({base:.2f}s): {took / base:.2f}x"
            )


if __name__ == "__main__":
    main()
