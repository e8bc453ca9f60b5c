"""Which flags ``lklab COMMAND --help`` lists: those that apply to the command.

The commands share one parser whatever the pipeline (``lklab.cli.pipelines``), so each accepts
flags that some pipeline refuses; a refused flag is still parsed (to be refused naming why) but
its help is left out when no pipeline the help speaks for takes it. Without ``--pipeline`` the
help speaks for every registered pipeline: the common flags, then each pipeline's own settings
under a heading naming it (``unique_visitors only``); a flag the command refuses on every
pipeline is left out. ``lklab COMMAND --pipeline NAME --help`` speaks for ``NAME`` alone (a
registered pipeline or one the configuration file declares): the flags ``NAME`` refuses, other
pipelines' settings among them, are left out. The pipeline is read from the command line before
it is parsed, because argparse prints the help as soon as it meets ``--help``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from lklab.cli.console import UsageError
from lklab.cli.pipelines import refused_flags, selected_pipeline
from lklab.pipelines import REGISTRY
from lklab.pipelines.contract import Pipeline

__all__ = ["help_pipeline", "show_applicable"]

_HELP = ("-h", "--help")


def _value(argv: Sequence[str], flag: str) -> str | None:
    for position, token in enumerate(argv):
        if token == flag and position + 1 < len(argv):
            return argv[position + 1]
        if token.startswith(f"{flag}="):
            return token.split("=", 1)[1]
    return None


def help_pipeline(argv: Sequence[str]) -> Pipeline | None:
    """The pipeline ``argv`` asks the help of (``--pipeline NAME`` with ``--help``); None when it
    asks for no help, names no pipeline or one that cannot be found (the help then speaks for all)."""
    if not any(token in _HELP for token in argv):
        return None
    name = _value(argv, "--pipeline")
    if name is None:
        return None
    if name in REGISTRY:
        return REGISTRY[name]
    try:  # a declared pipeline, found in the configuration file; a bad file is reported when the command runs
        return selected_pipeline(argparse.Namespace(config=_value(argv, "--config"), pipeline=name))
    except UsageError:
        return None


def show_applicable(command: argparse.ArgumentParser, name: str, pipeline: Pipeline | None) -> None:
    """Leave out of the help of ``command`` (called ``name``) the flags it refuses on ``pipeline``
    (None: on every registered pipeline)."""
    served = [pipeline] if pipeline is not None else list(REGISTRY.values())
    refused = frozenset.intersection(*(refused_flags(each, name) for each in served))
    for action in command._actions:
        if refused.intersection(action.option_strings):
            action.help = argparse.SUPPRESS
