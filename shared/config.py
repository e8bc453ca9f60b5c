"""The lab's one configuration object.

Every setting has one key, spelled the same everywhere:

* in the configuration file (TOML): ``window-size = "2m"``;
* in the environment: ``LKLAB_WINDOW_SIZE=2m``;
* on the command line: ``--window-size 2m``.

Later sources win: defaults < file < the file's section of the pipeline < environment < flags.
A pipeline's section, ``[pipelines.NAME]``, holds settings that apply when ``NAME`` is the
pipeline configured (its own, such as ``state-ttl``, or any other, such as a window size for
that pipeline alone); its keys are the same settings, ``pipeline`` aside. The file is ``--config FILE``,
else ``$LKLAB_CONFIG``, else ``./lklab.toml`` when it exists. ``load_config`` validates
everything once and raises ``ConfigError`` with a message naming the bad value and the
valid ones.

A section with a ``kind`` key is not settings but a pipeline declared in the file
(``DECLARED_KIND``; ``lklab.pipelines.declared`` reads and validates it from
``read_config_file``): ``load_config`` leaves it alone and takes no setting from it.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from shared.config_file import config_file_of
from shared.durations import format_duration, parse_duration
from shared.windows import WINDOW_KINDS, WindowSpec, window_spec

__all__ = [
    "LabConfig",
    "ConfigError",
    "load_config",
    "with_settings",
    "setting_value",
    "config_file_of",
    "read_config_file",
    "SETTINGS",
    "SECTIONS",
    "DECLARED_KIND",
    "TABLE_ENGINES",
    "SPEED_STEPS",
]

TABLE_ENGINES = ("auto", "deltalake", "delta-spark")
SPEED_STEPS = ("driver", "executors")


class ConfigError(ValueError):
    """A configuration value is invalid; the message says which and what is valid."""


@dataclass(frozen=True)
class LabConfig:
    """Validated settings. Durations are integer microseconds."""

    lake: Path = Path("lake")
    window_kind: str = "tumbling"
    window_size: int = parse_duration("1m")
    window_slide: int | None = None
    session_gap: int = parse_duration("5m")
    watermark_delay: int = parse_duration("1m")
    watermark_interval: int = parse_duration("1s")
    allowed_lateness: int = 0
    dedup_horizon: int = parse_duration("1h")
    heartbeat_interval: int = parse_duration("1m")
    max_clock_skew: int = parse_duration("5m")
    max_line_bytes: int = 1 << 20
    state_ttl: int = parse_duration("24h")  # unique_visitors: how long a seen URL stays in the stream's state
    join_bound: int = parse_duration("15m")  # order_payments: a payment matches an order up to this long after it
    speed_step: str = "driver"  # billing_windows: where the live step runs (SPEED_STEPS)
    pipeline: str = "billing_windows"  # a name in the registry (lklab.pipelines), checked by the command line
    spark_master: str = "local[2]"
    driver_memory: str = "4g"
    table_engine: str = "auto"
    explicit: frozenset[str] = field(default=frozenset(), compare=False)  # keys a file, the environment or a flag set

    @property
    def window(self) -> WindowSpec:
        return window_spec(self.window_kind, size=self.window_size, slide=self.window_slide, gap=self.session_gap)

    def describe(self) -> dict[str, str]:
        """Settings as a user would write them (for logs and reports)."""
        out: dict[str, str] = {}
        for f in _SETTING_FIELDS:
            value = getattr(self, f.name)
            if f.name in _DURATIONS:
                value = "" if value is None else format_duration(value)
            out[f.name.replace("_", "-")] = str(value)
        return out


_DURATIONS = {
    "window_size",
    "window_slide",
    "session_gap",
    "watermark_delay",
    "watermark_interval",
    "allowed_lateness",
    "dedup_horizon",
    "heartbeat_interval",
    "max_clock_skew",
    "state_ttl",
    "join_bound",
}
_MEMORY = re.compile(r"[1-9][0-9]*[kmgtKMGT]")
_SETTING_FIELDS = tuple(f for f in fields(LabConfig) if f.name != "explicit")
SETTINGS = tuple(f.name.replace("_", "-") for f in _SETTING_FIELDS)


def _coerce(name: str, value: Any) -> Any:
    key = name.replace("_", "-")
    if name in _DURATIONS:
        try:
            return parse_duration(value, name=key)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    if name == "lake":
        return Path(str(value)).expanduser()
    if name == "max_line_bytes":
        try:
            size = int(str(value))
        except ValueError:
            size = 0
        if size < 64:
            raise ConfigError(
                f"max-line-bytes: {value!r} is not valid; valid: a whole number of bytes, at least 64, e.g. 1048576"
            )
        return size
    if name == "window_kind" and value not in WINDOW_KINDS:
        raise ConfigError(f"window-kind: {value!r} is not valid; valid: {', '.join(WINDOW_KINDS)}")
    if name == "driver_memory" and not (isinstance(value, str) and _MEMORY.fullmatch(value)):
        raise ConfigError(
            f"driver-memory: {value!r} is not a JVM memory size; valid: a whole number and k, m, g or t, e.g. 4g"
        )
    if name == "speed_step" and value not in SPEED_STEPS:
        raise ConfigError(f"speed-step: {value!r} is not valid; valid: {', '.join(SPEED_STEPS)}")
    if name == "table_engine" and value not in TABLE_ENGINES:
        raise ConfigError(f"table-engine: {value!r} is not valid; valid: {', '.join(TABLE_ENGINES)}")
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def setting_value(key: str, value: Any) -> Any:
    """A setting's value as ``LabConfig`` holds it (``key`` as a user writes it, e.g.
    ``watermark-delay``: durations in microseconds), or ``ConfigError`` naming what is valid."""
    return _coerce(key.replace("-", "_"), value)


SECTIONS = "pipelines"  # the file's table of per-pipeline sections
DECLARED_KIND = "kind"  # a section with this key declares a pipeline (lklab.pipelines.declared)


def _unknown(keys, valid, where: str) -> None:
    unknown = sorted(set(keys) - set(valid))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(valid)}")


def _toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} does not exist") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"configuration file {path} is not valid TOML: {err}") from None


def _read_file(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The file's settings, and its sections of settings by pipeline name (declared pipelines left out)."""
    data = _toml(path)
    sections = data.pop(SECTIONS, {})
    _unknown(data, (*SETTINGS, SECTIONS), f"configuration file {path}")
    if not isinstance(sections, dict) or not all(isinstance(v, dict) for v in sections.values()):
        raise ConfigError(f"configuration file {path}: [{SECTIONS}] holds one table per pipeline, [{SECTIONS}.NAME]")
    sections = {name: section for name, section in sections.items() if DECLARED_KIND not in section}
    for name, section in sections.items():
        _unknown(
            section, [key for key in SETTINGS if key != "pipeline"], f"configuration file {path}, [{SECTIONS}.{name}]"
        )
    return data, sections


def read_config_file(config_file: str | Path | None = None, environ: Mapping[str, str] | None = None) -> dict:
    """The configuration file in use (``config_file_of``) as TOML gives it, unvalidated ({}: no file)."""
    path = config_file_of(config_file, environ)
    return {} if path is None else _toml(path)


def load_config(
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LabConfig:
    """Merge defaults, file, environment (``LKLAB_*``) and ``overrides`` (flags; None = unset)."""
    environ = os.environ if environ is None else environ
    config_file = config_file_of(config_file, environ)
    raw: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    if config_file is not None:
        file_settings, sections = _read_file(Path(config_file))
        raw.update(file_settings)
    environment: dict[str, Any] = {}
    for key in SETTINGS:
        env_key = "LKLAB_" + key.replace("-", "_").upper()
        if environ.get(env_key):
            environment[key] = environ[env_key]
    flags: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        key = key.replace("_", "-")
        if key not in SETTINGS:
            raise ConfigError(f"unknown setting {key!r}; valid: {', '.join(SETTINGS)}")
        if value is not None:
            flags[key] = value
    pipeline = {**raw, **environment, **flags}.get("pipeline", LabConfig.pipeline)
    raw.update(sections.get(pipeline, {}))
    raw.update(environment)
    raw.update(flags)
    values = {key.replace("-", "_"): _coerce(key.replace("-", "_"), value) for key, value in raw.items()}
    config = LabConfig(**values, explicit=frozenset(raw))
    try:
        _ = config.window  # the window settings validate together
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return config


def with_settings(config: LabConfig, settings: Mapping[str, str]) -> LabConfig:
    """``config`` with ``settings`` (keys and values as a user writes them, e.g.
    ``{"window-size": "2m"}``) taken where it did not set them itself."""
    values = {
        key.replace("-", "_"): _coerce(key.replace("-", "_"), value)
        for key, value in settings.items()
        if key not in config.explicit
    }
    return replace(config, **values)
