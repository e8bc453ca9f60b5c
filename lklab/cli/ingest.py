"""``lklab ingest``: append JSON-lines files to the log, one segment per file, saying what each holds.

Before anything is appended, every file is read as the log will hold it and checked against the
selected pipeline's lines (``lklab.line_preview``, no Spark): how many lines look like its
events, how many will be dead letters, by reason, with the first line of each and the fields
expected. A file most of whose lines will be dead letters is called out on stderr; with
``--strict`` such a file refuses the whole command (exit 2) and nothing is appended. Otherwise
every line is appended as it is: the log is the record, and the dead letters are kept.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from datetime import UTC, datetime
from pathlib import Path

from lklab.cli.console import UsageError
from lklab.cli.options import config_from

_TRACKED_BYTES = 16 << 20  # a file this large shows its check's progress


def cmd_ingest(args: argparse.Namespace) -> int:
    import dataclasses

    from lklab.cli.pipelines import selected_pipeline
    from lklab.line_preview import MOSTLY_DEAD, preview_file, render_preview
    from lklab.progress import progress as track
    from shared.eventlog import EventLog, format_timestamp, holds_no_line
    from shared.locks import appender

    config = config_from(args)
    missing = [name for name in args.files if not Path(name).is_file()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    empty = [name for name in args.files if holds_no_line(name)]
    if empty:
        raise UsageError(f"empty file (no line to append): {', '.join(empty)}; nothing was appended")
    pipeline = selected_pipeline(args)
    line_format = pipeline.lines() if pipeline.lines is not None else None
    now = datetime.now(UTC)
    previews = {}
    if line_format is not None:
        checked = dataclasses.replace(config, max_line_bytes=line_format.max_line_bytes or config.max_line_bytes)
        for name in args.files:
            size = Path(name).stat().st_size
            stage = track(f"checking {name}", size) if size >= _TRACKED_BYTES else contextlib.nullcontext()
            with stage as checking:
                previews[name] = preview_file(
                    name,
                    line_format,
                    checked,
                    format_timestamp(now),
                    (lambda read: checking.advance(read - checking.done)) if checking else (lambda read: None),
                )
        dead = [p for p in previews.values() if p.mostly_dead]
        for preview in dead:
            print(
                f"lklab ingest: {preview.path}: {preview.dead_letters:,} of {preview.lines:,} lines will be dead "
                f"letters: is it {pipeline.name}'s format? (first: {next(iter(preview.examples.values())).text})",
                file=sys.stderr,
            )
        if dead and args.strict:
            raise UsageError(
                f"--strict: more than {MOSTLY_DEAD:.0%} of the lines of {', '.join(p.path for p in dead)} would be "
                "dead letters; nothing was appended"
            )
    log = EventLog(config.lake)
    with appender(config.lake):
        for name in args.files:
            segment = log.append_file(name, now)
            print(f"{name} -> segment {segment.number} ({segment.path})")
            if name in previews:
                print("\n".join(render_preview(previews[name], pipeline.name, line_format)))
    return 0
