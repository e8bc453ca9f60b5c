"""Live traffic for the compose deployment: scenario segments appended to the log as time passes.

Each round generates a scenario whose traffic starts now into a scratch lake (the lab's own
generator: the same late arrivals, retries and malformed lines as ``lklab generate``), then
appends its segments to the live log one at a time, each when its ingest time comes
(``--speedup 10`` plays ten minutes of traffic per minute). When a round's log is used up the
next round starts, with the next seed. SIGTERM stops it between two segments.

    python docker/producer.py --scenario billing --events 20000 --span 1h --speedup 1
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.scenarios import SCENARIOS
from shared.durations import MICROS_PER_SECOND, parse_duration
from shared.eventlog import EventLog


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="producer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", help="the live lake (default: the configured one, env LKLAB_LAKE)")
    parser.add_argument("--scenario", default="billing", choices=sorted(SCENARIOS))
    parser.add_argument("--events", type=int, default=20_000, help="events per round (default 20,000)")
    parser.add_argument("--span", default="1h", help="event-time span of a round (default 1h)")
    parser.add_argument("--segment-interval", default="1m", help="ingest time per segment (default 1m)")
    parser.add_argument("--speedup", type=float, default=1.0, help="traffic time per wall-clock time (default 1)")
    parser.add_argument(
        "--seed",
        type=int,
        help="seed of the first round (default: the Unix time, so a restarted producer sends new event ids)",
    )
    parser.add_argument("--rounds", type=int, default=0, help="stop after this many rounds (default 0: never)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.speedup <= 0:
        print(f"producer: --speedup must be positive, got {args.speedup}", file=sys.stderr)
        return 2
    if args.lake is None:
        from shared.config import load_config

        args.lake = load_config().lake
    live = EventLog(args.lake)
    span = parse_duration(args.span, name="span")
    interval = parse_duration(args.segment_interval, name="segment-interval")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    seed, rounds = (int(time.time()) if args.seed is None else args.seed), 0
    while not stop.is_set() and (args.rounds == 0 or rounds < args.rounds):
        started = time.time()
        params = GeneratorParams(
            scenario=args.scenario,
            events=args.events,
            seed=seed,
            start=int(started * MICROS_PER_SECOND),
            span=span,
            segment_interval=interval,
        )
        with tempfile.TemporaryDirectory(prefix="lklab-producer-") as scratch:
            generate(params, Path(scratch))
            for segment in EventLog(scratch).segments():
                due = started + (segment.number - 1) * interval / MICROS_PER_SECOND / args.speedup
                if stop.wait(max(0.0, due - time.time())):
                    break
                published = live.append_file(segment.path)
                print(f"round {rounds + 1} segment {segment.number} -> live segment {published.number}", flush=True)
        seed, rounds = seed + 1, rounds + 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
