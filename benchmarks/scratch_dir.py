"""A benchmark's temporary directory: inside ``--scratch DIR`` when one is given (made if it is
missing), else in the system's temporary directory; removed when the benchmark ends."""

from __future__ import annotations

import tempfile
from pathlib import Path

__all__ = ["scratch_dir"]


def scratch_dir(prefix: str, parent: str | None) -> tempfile.TemporaryDirectory:
    if parent:
        Path(parent).mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=prefix, dir=parent)
