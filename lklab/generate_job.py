"""What a pipeline's ``generate`` job does around its generator, whichever the pipeline.

A generator (``lklab.pipelines.<name>.generator``) takes its parameters, the lake and
``overwrite``, writes the log under ``<lake>/log`` and returns what it made, ``lines`` and
``segments`` among the counts. ``generated_log`` runs one as ``lklab generate`` asks: the
parameters filled from the command's options (``lklab.generator_params.from_request``), a log
the lake already holds replaced only with ``--overwrite``. ``log_written`` ends the line every
job prints: how many lines in how many segments, and where.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lklab.generator_params import from_request

__all__ = ["generated_log", "log_written"]


def generated_log(
    config, request, params_type: type, generator: Callable[..., Mapping[str, Any]], **renamed: str
) -> Mapping[str, Any]:
    """What ``generator`` made writing ``config.lake``'s log with ``params_type`` filled from
    ``request`` (``renamed``: as ``from_request`` takes it), overwriting as the request says."""
    params = from_request(params_type, request, **renamed)
    return generator(params, config.lake, overwrite=request.overwrite)


def log_written(made: Mapping[str, Any], lake: Path) -> str:
    """``N lines in S segments -> <lake>/log``."""
    return f"{made['lines']:,} lines in {made['segments']:,} segments -> {lake / 'log'}"
