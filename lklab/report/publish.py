"""Writing a report's file so that readers never see half of it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["publish"]


def publish(path: Path, content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8) next to ``path`` and rename it into place: a reader sees
    the file before or after, never half written. Returns ``path``."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    os.replace(partial, path)
    return path
