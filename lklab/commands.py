"""A command as a user types it: ``lklab batch``, ``lklab batch --pipeline NAME``.

The runners name in their messages the command that fixes what they refuse; for the default
pipeline (``LabConfig.pipeline``) it needs no ``--pipeline``.
"""

from __future__ import annotations

from shared.config import LabConfig

__all__ = ["command_line"]


def command_line(pipeline: str, command: str) -> str:
    """``lklab COMMAND`` for ``pipeline``, with ``--pipeline`` unless it is the default one."""
    return f"lklab {command}" if pipeline == LabConfig.pipeline else f"lklab {command} --pipeline {pipeline}"
