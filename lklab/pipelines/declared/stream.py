"""A declared pipeline's stream for the live runner (``lklab.live_stream``) and the replay.

``stream_rule(d)`` is the ``StreamRule``: lines parsed by the declaration inside the streaming
query, on the executors (``parse.parse_declared``: ``parse_declared_lines`` per Arrow batch), ``rule.declared_step`` against the state carried
from the micro-batch before, and the sink's layout: the dead letters, duplicates and late rows
appended, the windows merged by ``(window_start, window_end, keys)`` (a session merged into
another deleted), the metrics, then the state (the commit point). Every callable is a ``functools.partial`` of a module-level function
over the ``Declaration`` (a frozen value), so the rule pickles: the replay ships it to the
executor that walks the log.

``settings_of(d)``: what its tables record, the settings their rows depend on, all of them
the declaration's; ``config_of(d, config)``: a command's configuration with the declaration's
windows and stream settings in it (the log's readers take ``max-line-bytes`` from it).
"""

from __future__ import annotations

import dataclasses
import json
import time
from functools import partial
from typing import Any

import pyarrow as pa

from lklab.live_stream import StateKind, StepOutput, StreamRule
from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.parse import parse_declared, parsed_schema_of
from lklab.pipelines.declared.rule import DeclaredState, declared_step, state_from_table, state_table
from lklab.pipelines.declared.tables import tables_of
from lklab.stream_sink import stream_layout
from shared.config import LabConfig
from shared.durations import format_duration

__all__ = ["stream_rule", "settings_of", "truth_settings_of", "config_of", "app_id_of"]

_STREAM_SETTINGS = ("watermark_delay", "watermark_interval", "allowed_lateness", "dedup_horizon")
_LINE_SETTINGS = ("max_clock_skew", "max_line_bytes")


def app_id_of(d: Declaration) -> str:
    return f"{d.name}-speed"


def config_of(d: Declaration, config: LabConfig) -> LabConfig:
    """``config`` with the declaration's windows, stream and line settings."""
    window = d.window
    return dataclasses.replace(
        config,
        window_kind=window.kind,
        window_size=getattr(window, "size", config.window_size),
        window_slide=getattr(window, "slide", None),
        session_gap=getattr(window, "gap", config.session_gap),
        heartbeat_interval=d.heartbeat_interval,
        **{name: getattr(d, name) for name in (*_STREAM_SETTINGS, *_LINE_SETTINGS)},
    )


def _what_is_read(d: Declaration) -> str:
    """The declaration's fields, keys, measures and rules: a line's fate depends on them."""
    rules = {name: {k: str(v) for k, v in vars(rule).items() if v is not None} for name, rule in d.rules.items()}
    return json.dumps(
        {
            "event-id": d.event_id,
            "event-time": d.event_time,
            "ingest-time": d.ingest_time,
            "keys": list(d.keys),
            "measures": {m.name: m.declared for m in d.measures},
            "fields": rules,
        },
        sort_keys=True,
    )


def truth_settings_of(d: Declaration) -> dict[str, str]:
    """What the truth's tables record: the declaration read, the windows and the line settings."""
    return {
        "declaration": _what_is_read(d),
        "window": d.window.describe(),
        **{name.replace("_", "-"): str(getattr(d, name)) for name in _LINE_SETTINGS},
    }


def settings_of(d: Declaration, config: LabConfig | None = None) -> dict[str, str]:
    """What the stream's tables record: the truth's settings and the stream's own (durations
    as a user writes them)."""
    stream = {name.replace("_", "-"): format_duration(getattr(d, name)) for name in _STREAM_SETTINGS}
    return {**truth_settings_of(d), **stream}


def _parse(d: Declaration, lines, max_clock_skew: int):
    """The lines parsed inside the streaming query, on the executors (the declaration holds the skew)."""
    return parse_declared(lines, d)


def _read(d: Declaration, parsed: pa.Table, config: LabConfig) -> pa.Table:
    schema = parsed_schema_of(d)
    return parsed.select(schema.names).cast(schema)


def _step(d: Declaration, parsed: pa.Table, state: DeclaredState, settings: Any, batch_id: int, started: float):
    batch = declared_step(d, parsed, state, batch_id)
    batch = batch.timed(time.monotonic() - started)
    t = tables_of(d)
    rows = {
        t.dead_letter: batch.dead_letters,
        t.duplicates: batch.duplicates,
        t.late: batch.late,
        t.windows: batch.windows,
        t.stream_metrics: batch.metrics,
        t.stream_state: state_table(d, batch.state),
    }
    return StepOutput(rows, batch.state, batch.figures)


def _holds_open(state: DeclaredState, settings: Any) -> bool:
    return bool(state.windows)


def _table_settings(d: Declaration, config: LabConfig) -> dict[str, str]:
    return settings_of(d)


def stream_rule(d: Declaration) -> StreamRule:
    """The ``StreamRule`` of the pipeline ``d`` declares."""
    t = tables_of(d)
    window_keys = ("window_start", "window_end", *d.keys)
    return StreamRule(
        what=f"{d.name} stream",
        app_id=app_id_of(d),
        layout=stream_layout(t.stream, merged={t.windows: window_keys}),
        table_settings=partial(_table_settings, d),
        state=StateKind(DeclaredState, partial(state_from_table, d), _holds_open),
        step=partial(_step, d),
        parse=partial(_parse, d),
        read=partial(_read, d),
        logger=f"lklab.{d.name}",
    )
