"""A benchmark's billing log: the one a lake holds already, else ``events`` generated there."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from lklab.pipelines.billing_windows.generator import GeneratorParams, generate

__all__ = ["generated_log"]


def generated_log(lake: Path, events: int, progress: Callable[[str], None]) -> dict:
    """The generator's manifest of ``lake``'s log, generating ``events`` there first when it has
    no log."""
    if not (lake / "log").is_dir():
        progress(f"generating {events:,} events into {lake}")
        generate(GeneratorParams(events=events), lake, progress=progress)
    return json.loads((lake / "generator" / "manifest.json").read_text())
