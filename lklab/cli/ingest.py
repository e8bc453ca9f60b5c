"""``lklab ingest``: append JSON-lines files to the log, one segment per file."""

from __future__ import annotations

import argparse
from pathlib import Path

from lklab.cli.console import UsageError
from lklab.cli.options import config_from


def cmd_ingest(args: argparse.Namespace) -> int:
    from shared.eventlog import EventLog, holds_no_line
    from shared.locks import appender

    config = config_from(args)
    missing = [name for name in args.files if not Path(name).is_file()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    empty = [name for name in args.files if holds_no_line(name)]
    if empty:
        raise UsageError(f"empty file (no line to append): {', '.join(empty)}; nothing was appended")
    log = EventLog(config.lake)
    with appender(config.lake):
        for name in args.files:
            segment = log.append_file(name)
            print(f"{name} -> segment {segment.number} ({segment.path})")
    return 0
