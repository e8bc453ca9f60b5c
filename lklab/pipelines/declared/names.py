"""The names of a declared pipeline's tables, and of the pipelines a configuration file declares,
known without reading a declaration: what a DAG file may know when it is parsed.

A declared pipeline ``NAME`` keeps each table under ``NAME_<role>`` (``TABLE_ROLES``):
``lklab.pipelines.declared.tables`` gives them their schemas from the declaration, and the DAGs
(``lklab.pipeline_dags.declared_dags``) their assets from these names alone. ``declared_names``
reads only the section names of the configuration file in use (``[pipelines.NAME]``), with
``tomllib``: a file that is not TOML declares none here, and the commands that read it refuse it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping

from shared.config_file import config_file_of

__all__ = ["TABLE_ROLES", "BATCH_ROLES", "table_name", "declared_names"]

# Every table of a declared pipeline, by role: the stream's (commit order, the state last), then
# the batch's.
TABLE_ROLES = (
    "dead_letter",
    "duplicates",
    "late",
    "windows",
    "stream_metrics",
    "stream_state",
    "truth",
    "batch_duplicates",
    "batch_dead_letter",
)
BATCH_ROLES = ("truth", "batch_duplicates", "batch_dead_letter")


def table_name(pipeline: str, role: str) -> str:
    """The table of ``role`` (one of ``TABLE_ROLES``) of the declared pipeline ``pipeline``."""
    if role not in TABLE_ROLES:
        raise ValueError(f"role: {role!r} is not valid; valid: {', '.join(TABLE_ROLES)}")
    return f"{pipeline}_{role}"


def declared_names(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The names of the pipelines the configuration file in use declares, in the file's order
    (``shared.config_file.config_file_of``: ``$LKLAB_CONFIG``, else ``./lklab.toml``; a DAG has no
    ``--config``); no name when there is no such file or it is not TOML."""
    path = config_file_of(environ=environ)
    if path is None or not path.is_file():
        return ()
    try:
        sections = tomllib.loads(path.read_text(encoding="utf-8")).get("pipelines", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
        return ()
    return tuple(name for name, section in sections.items() if isinstance(section, dict) and "kind" in section)
