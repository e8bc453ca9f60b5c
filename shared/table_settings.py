"""Settings belong to the tables built with them.

A window total means nothing without its windows, and a late event nothing without the
watermark that judged it. Every table the lab writes records the settings its rows were built
with, as Delta table properties (``lklab.<setting>``, values as a user writes them: ``2m``):

* the batch truth and what is computed from it: the windows (``window-kind`` and its
  ``window-size``, ``window-slide`` or ``session-gap``) and the settings that decide which lines
  are dead letters (``max-clock-skew``, ``max-line-bytes``);
* a stream's tables (speed layer, replay): the same, and the stream's own settings
  (``watermark-delay``, ``watermark-interval``, ``allowed-lateness``, ``dedup-horizon``);
* the order-payment join's stream: its ``join-bound``, the line settings and the stream's own
  settings (``interval_join_settings``); its truth, the ``join-bound`` and the line settings
  (``interval_join_truth_settings``).

The stream and the batch must dead-letter the same lines, or a reconciliation compares two logs:
``agreed`` over both refuses a lake whose batch truth and stream disagree on a setting.

A writer checks a table's recorded settings before adding rows built with others
(``require``): such a write is refused with ``SettingsConflict`` naming both values. A reader
takes a table's settings for what the user did not set (``adopt``): ``lklab reconcile`` after a
speed layer and a batch built with ``--window-size 2m`` compares 2-minute windows without being
told, and refuses an explicit ``--window-size 1m``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from deltalake import DeltaTable

from shared.config import LabConfig, with_settings

__all__ = [
    "SettingsConflict",
    "window_settings",
    "line_settings",
    "batch_settings",
    "stream_settings",
    "interval_join_truth_settings",
    "interval_join_settings",
    "recorded",
    "require",
    "record",
    "adopt",
    "agreed",
    "LINE_KEYS",
]

_PREFIX = "lklab."
_STREAM_KEYS = ("watermark-delay", "watermark-interval", "allowed-lateness", "dedup-horizon")
LINE_KEYS = ("max-clock-skew", "max-line-bytes")


class SettingsConflict(ValueError):
    """Two settings that must agree do not; the message names both values and where they come from."""


def window_settings(config: LabConfig) -> dict[str, str]:
    """The window settings that matter for ``config``'s window kind."""
    described = config.describe()
    return {"window-kind": config.window_kind, **{key: described[key] for key in config.window.settings}}


def line_settings(config: LabConfig) -> dict[str, str]:
    """The settings that decide which lines are dead letters."""
    described = config.describe()
    return {key: described[key] for key in LINE_KEYS}


def batch_settings(config: LabConfig) -> dict[str, str]:
    """What the batch truth is built with: windows and the line settings."""
    return {**window_settings(config), **line_settings(config)}


def stream_settings(config: LabConfig) -> dict[str, str]:
    """Windows, the line settings and the stream's own settings."""
    described = config.describe()
    return {**batch_settings(config), **{key: described[key] for key in _STREAM_KEYS}}


def interval_join_truth_settings(config: LabConfig) -> dict[str, str]:
    """What the order-payment truth is built with: the join bound and the line settings."""
    return {"join-bound": config.describe()["join-bound"], **line_settings(config)}


def interval_join_settings(config: LabConfig) -> dict[str, str]:
    """The truth's settings and the stream's own: what the order-payment stream's rows depend on."""
    described = config.describe()
    return {**interval_join_truth_settings(config), **{key: described[key] for key in _STREAM_KEYS}}


def recorded(tables, name: str) -> dict[str, str]:
    """The settings table ``name`` recorded (empty when it does not exist or recorded none)."""
    if not tables.exists(name):
        return {}
    configuration = DeltaTable(str(tables.path(name))).metadata().configuration
    return {key[len(_PREFIX) :]: value for key, value in configuration.items() if key.startswith(_PREFIX)}


def _differences(have: Mapping[str, str], want: Mapping[str, str]) -> list[str]:
    return [
        f"{key} {have[key]} (table) against {want[key]} (this run)"
        for key in want
        if key in have and have[key] != want[key]
    ]


def require(tables, names: Iterable[str], settings: Mapping[str, str]) -> None:
    """Refuse to add rows built with ``settings`` to tables recorded with other ones."""
    for name in names:
        differences = _differences(recorded(tables, name), settings)
        if differences:
            raise SettingsConflict(
                f"table {name} was built with other settings: {'; '.join(differences)}. "
                "Run with the table's settings, or write to another lake or run name"
            )


def record(tables, names: Iterable[str], settings: Mapping[str, str]) -> None:
    """Record ``settings`` on each existing table of ``names`` that has not recorded them yet."""
    for name in names:
        if not tables.exists(name):
            continue
        have = recorded(tables, name)
        missing = {f"{_PREFIX}{key}": value for key, value in settings.items() if key not in have}
        if missing:
            DeltaTable(str(tables.path(name))).alter.set_table_properties(missing, raise_if_not_exists=False)


def agreed(tables, names: Iterable[str], keys: Iterable[str] | None = None) -> dict[str, str]:
    """The settings the tables ``names`` recorded (restricted to ``keys``), which must agree
    where several recorded the same one."""
    keys = None if keys is None else set(keys)
    found: dict[str, tuple[str, str]] = {}
    for name in names:
        for key, value in recorded(tables, name).items():
            if keys is not None and key not in keys:
                continue
            if key in found and found[key][1] != value:
                raise SettingsConflict(
                    f"tables {found[key][0]} and {name} were built with different {key}: {found[key][1]} and {value}; "
                    "rebuild one of them with the other's settings"
                )
            found.setdefault(key, (name, value))
    return {key: value for key, (_, value) in found.items()}


def adopt(config: LabConfig, settings: Mapping[str, str], source: str) -> LabConfig:
    """``config`` with the ``settings`` recorded by ``source`` where the user set nothing;
    an explicit setting that contradicts them is refused."""
    if "window-kind" in settings and settings["window-kind"] != config.window_kind and "window-kind" in config.explicit:
        raise SettingsConflict(
            f"window-kind {config.window_kind} given, but {source} holds {settings['window-kind']} windows"
        )
    adopted = with_settings(config, {key: value for key, value in settings.items() if key == "window-kind"})
    described = adopted.describe()
    clashes = [
        key
        for key, value in settings.items()
        if key in adopted.explicit and described.get(key) != value and key != "window-kind"
    ]
    if clashes:
        detail = "; ".join(f"--{key} {described[key]} given, {source} holds {settings[key]}" for key in clashes)
        raise SettingsConflict(f"settings contradict the tables: {detail}. Drop the flag to use the tables' settings")
    return with_settings(adopted, settings)
