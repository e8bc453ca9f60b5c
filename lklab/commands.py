"""A command as a user types it: ``lklab batch``, ``lklab batch --pipeline NAME``.

The runners name in their messages the command that fixes what they refuse; for the default
pipeline it needs no ``--pipeline``.
"""

from __future__ import annotations

__all__ = ["command_line"]


def command_line(pipeline: str, command: str) -> str:
    """``lklab COMMAND`` for ``pipeline``, with ``--pipeline`` unless it is the default one."""
    from lklab.pipelines import DEFAULT  # at call time: the registry imports the runners' users

    return f"lklab {command}" if pipeline == DEFAULT else f"lklab {command} --pipeline {pipeline}"
