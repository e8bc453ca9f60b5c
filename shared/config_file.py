"""Which configuration file is in use, known without reading it: ``--config``, else
``$LKLAB_CONFIG``, else ``./lklab.toml`` when it exists. ``shared.config`` reads and validates
it; a DAG file, which must not read the configuration when it is parsed, finds it here too
(``lklab.pipelines.declared.names``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["config_file_of"]


def config_file_of(config_file: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The configuration file in use: ``config_file``, else ``$LKLAB_CONFIG``, else
    ``./lklab.toml`` when it exists (None: no file)."""
    environ = os.environ if environ is None else environ
    if config_file is None:
        config_file = environ.get("LKLAB_CONFIG") or ("lklab.toml" if Path("lklab.toml").is_file() else None)
    return None if config_file is None else Path(config_file)
