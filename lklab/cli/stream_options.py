"""What the ``speed`` and ``replay`` handlers of every pipeline check alike: ``stream_stop``
(``speed``: the micro-batch size checked, SIGTERM wired to stop after the current micro-batch)
and ``replay_name`` (``replay``: the run name checked)."""

from __future__ import annotations

import argparse
import signal
import threading

from lklab.cli.console import UsageError

__all__ = ["stream_stop", "replay_name"]


def stream_stop(args: argparse.Namespace) -> threading.Event:
    """``speed``: check ``--segments-per-batch``; the event SIGTERM sets (the stream stops after its current micro-batch)."""
    if args.segments_per_batch is not None and args.segments_per_batch < 1:
        raise UsageError(f"--segments-per-batch must be at least 1, got {args.segments_per_batch}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def replay_name(args: argparse.Namespace) -> str:
    """``replay``: the table prefix of ``--name`` (``kappa/NAME/``), a bad name refused."""
    from shared.catalog import replay_prefix

    try:
        return replay_prefix(args.name)
    except ValueError as err:
        raise UsageError(str(err)) from None
