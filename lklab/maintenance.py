"""Compaction and VACUUM of the lake's always-on tables, keeping time travel within a retention.

Every pipeline's live stream (``Pipeline.stream``: its ``StreamRule``; the registered pipelines'
and those the configuration file declares, ``always_on_tables``) commits to its tables every
micro-batch and reconciliation appends to its history every run (of the lab's streams and of
two tables given, ``lklab reconcile --truth-table``): each commit leaves a small Parquet file, and each rewrite leaves the files it
replaced behind for time travel. Maintenance does two things to every always-on table:

* **Compaction** (delta-rs ``optimize.compact``): small files are rewritten into bigger ones in
  one commit that changes no row (``dataChange=false``). Readers of the new version open fewer
  files; readers of older versions still find the old ones.
* **VACUUM** (``vacuum(full=True)``): files the latest version does not reference and that were
  removed more than the *retention* ago are deleted (so are files no commit ever referenced,
  left by a writer that died, once older than the retention, and the staging folders such a
  writer left, ``_staging-*``, once untouched for the retention or an hour, whichever is
  longer: Delta's VACUUM skips folders whose names begin with ``_``). Every version committed within
  the retention stays readable: its files were removed, if at all, after it was committed, so
  less than the retention ago. Older versions may no longer be.

The retention is whole hours from ``1h`` to ``30d``, default ``7d`` (Delta's own default). Below
an hour a reader holding an older snapshot could lose its files (the speed layer reads the
latest version before each micro-batch; a reconciliation runs minutes); beyond 30 days Delta's
default log retention may have removed the commits themselves.

Concurrency (delta-rs 1.6.6):

* a compaction and a blind append commit in either order without conflict, so the tables only
  ever appended to (the speed layer's side outputs and metrics, the reconciliation history) are
  compacted while their writers run;
* a compaction next to an in-place rewrite is not safe: a MERGE that commits after it fails (the
  speed layer would stop), and an overwrite that commits after it keeps the compacted file next
  to its own (the overwritten rows come back). The tables a stream rewrites every micro-batch
  (those its sink layout merges or overwrites: billing's ``speed_aggregates`` and
  ``stream_state``, ``visitors_windows``, ``visitors_seen`` and ``visitors_state``,
  ``payments_state`` ...) are therefore compacted only while
  that stream's lock is free, and under it, so that none starts meanwhile; while it runs they
  are skipped (every micro-batch rewrites them, so they hold one or two live files anyway: what
  they need is VACUUM);
* VACUUM changes no data; a commit landing during it makes its closing commit fail, and it is
  tried again on the new version.

One maintenance at a time per lake (the ``maintenance`` writer lock); the lake cannot be
replaced meanwhile.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from reconciliation.tables import RECON_CORRECTIONS, RECON_DIFFS, RECON_RUNS, TABLE_RECON_DIFFS, TABLE_RECON_RUNS
from shared import catalog
from shared.durations import UNITS, format_duration, parse_duration
from shared.locks import LockHeld, hold, stream_role, writer

__all__ = [
    "ALWAYS_ON_TABLES",
    "AlwaysOnTable",
    "always_on_tables",
    "configured_tables",
    "DEFAULT_RETENTION",
    "LakeMaintenance",
    "TableMaintenance",
    "maintain_lake",
    "retention_hours",
]

DEFAULT_RETENTION = "7d"
MINIMUM_RETENTION_HOURS, MAXIMUM_RETENTION_HOURS = 1, 30 * 24
COMMIT_ATTEMPTS = 5


@dataclass(frozen=True)
class AlwaysOnTable:
    """A table written while the lab runs; ``rewritten_by``: the lock of the writer that rewrites
    it in place (None: it is only ever appended to)."""

    name: str
    rewritten_by: str | None = None


def always_on_tables(pipelines: Iterable) -> tuple[AlwaysOnTable, ...]:
    """The live-stream tables of ``pipelines`` (``Pipeline``s; those a stream merges or overwrites
    every micro-batch rewritten under its stream's lock), then the reconciliations' history."""
    from lklab.stream_sink import APPEND

    streams = []
    for pipeline in pipelines:
        rule = pipeline.stream()
        if rule is not None:
            lock = stream_role("", rule.app_id)
            streams += [AlwaysOnTable(e.table.name, None if e.write == APPEND else lock) for e in rule.layout]
    history = (RECON_RUNS, RECON_DIFFS, RECON_CORRECTIONS, TABLE_RECON_RUNS, TABLE_RECON_DIFFS)
    return (*streams, *(AlwaysOnTable(table.name) for table in history))


def _always_on_tables() -> tuple[AlwaysOnTable, ...]:
    from lklab.pipelines import REGISTRY

    return always_on_tables(REGISTRY.values())


def configured_tables(config_file: str | Path | None = None) -> tuple[AlwaysOnTable, ...]:
    """The always-on tables of the registered pipelines and of those the configuration file in
    use declares (``config_file``, else ``$LKLAB_CONFIG``, else ``./lklab.toml``; a declaration
    with session windows has no stream, so no table of this kind)."""
    from lklab.pipelines import REGISTRY
    from lklab.pipelines.declared.declaration import load_declarations
    from lklab.pipelines.declared.pipeline import pipeline_of

    declared = []
    for declaration in load_declarations(config_file).values():
        try:
            declared.append(pipeline_of(declaration))
        except ValueError:
            pass
    return always_on_tables([*REGISTRY.values(), *declared])


ALWAYS_ON_TABLES = _always_on_tables()


@dataclass(frozen=True)
class TableMaintenance:
    """What maintenance did to one table: live files before and after compaction, files deleted
    by VACUUM, the table's version afterwards; ``skipped`` says why compaction did not run."""

    table: str
    files_before: int
    files_after: int
    vacuumed_files: int
    version: int
    skipped: str | None = None

    def describe(self) -> str:
        compaction = (
            f"not compacted: {self.skipped}" if self.skipped else f"{self.files_before} -> {self.files_after} files"
        )
        return f"{self.table}: {compaction}; vacuum deleted {self.vacuumed_files} files; version {self.version}"


@dataclass(frozen=True)
class LakeMaintenance:
    """One maintenance of a lake; ``missing``: always-on tables the lake does not have yet."""

    lake: str
    retention: str
    tables: tuple[TableMaintenance, ...]
    missing: tuple[str, ...]
    seconds: float

    def describe(self) -> str:
        lines = [f"maintenance of {self.lake} (retention {self.retention}) in {self.seconds:.1f} s"]
        lines += [f"  {table.describe()}" for table in self.tables]
        if self.missing:
            lines.append(f"  not in this lake yet: {', '.join(self.missing)}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return asdict(self)


def retention_hours(text: str, *, enforce_retention_duration: bool = True) -> int:
    """The retention ``text`` (a duration) in whole hours, from 1h to 30d; without
    ``enforce_retention_duration`` any whole number of hours, 0 included (no reader may run)."""
    micros = parse_duration(text, name="retention")
    hours, rest = divmod(micros, UNITS["h"])
    if rest:
        raise ValueError(f"retention: {text!r} is not a whole number of hours; use e.g. 12h, 7d")
    if enforce_retention_duration and not MINIMUM_RETENTION_HOURS <= hours <= MAXIMUM_RETENTION_HOURS:
        raise ValueError(
            f"retention: {text!r} is out of range; use 1h to 30d (shorter: a reader's snapshot may lose its "
            "files; longer: Delta's 30-day log retention may lose the commits)"
        )
    return hours


def maintain_lake(
    lake: str | Path | None = None,
    retention: str = DEFAULT_RETENTION,
    *,
    enforce_retention_duration: bool = True,
    tables: Sequence[AlwaysOnTable] | None = None,
) -> LakeMaintenance:
    """Compact and VACUUM every always-on table of ``lake`` (default: the configured lake):
    ``tables``, by default ``configured_tables()`` (the registered pipelines', the declared ones',
    the reconciliations' history).

    Raises ``LockHeld`` when another maintenance runs or the lake is being replaced.
    """
    if lake is None:
        from shared.config import load_config

        lake = load_config().lake
    lake = Path(lake).resolve()
    if not lake.is_dir():
        raise ValueError(f"lake {lake}: no such directory (LKLAB_LAKE or --lake names the lake)")
    hours = retention_hours(retention, enforce_retention_duration=enforce_retention_duration)
    tables = configured_tables() if tables is None else tables
    started = time.monotonic()
    done, missing = [], []
    with writer(lake, "maintenance"):
        root = catalog.tables_root(lake)
        present = [t for t in tables if DeltaTable.is_deltatable(str(root / t.name))]
        missing = [t.name for t in tables if t not in present]
        for role in dict.fromkeys(t.rewritten_by for t in present):
            group = [t for t in present if t.rewritten_by == role]
            with ExitStack() as stack:
                skipped = None
                if role is not None:
                    try:
                        stack.enter_context(hold(lake, role))
                    except LockHeld as held:
                        skipped = f"its writer is running ({held})"
                done += [_maintain_table(root / t.name, hours, skipped) for t in group]
    order = [t.name for t in tables]
    return LakeMaintenance(
        lake=str(lake),
        retention=format_duration(hours * UNITS["h"]),
        tables=tuple(sorted(done, key=lambda t: order.index(t.table))),
        missing=tuple(missing),
        seconds=round(time.monotonic() - started, 3),
    )


def _maintain_table(path: Path, hours: int, skipped: str | None) -> TableMaintenance:
    before = len(DeltaTable(str(path)).file_uris())
    if skipped is None:
        _committed(lambda: DeltaTable(str(path)).optimize.compact())
    after = len(DeltaTable(str(path)).file_uris())
    vacuumed = _vacuum(path, hours)
    return TableMaintenance(path.name, before, after, vacuumed, DeltaTable(str(path)).version(), skipped)


def _vacuum(path: Path, hours: int) -> int:
    """VACUUM the table; the number of files it deletes, its stale staging folders' included.
    Nothing to delete: no commit."""
    options = {"retention_hours": hours, "enforce_retention_duration": False, "full": True}
    doomed = DeltaTable(str(path)).vacuum(dry_run=True, **options)
    if doomed:
        _committed(lambda: DeltaTable(str(path)).vacuum(dry_run=False, **options))
    return len(doomed) + _stale_staging(path, max(hours, 1))


def _stale_staging(path: Path, hours: int) -> int:
    """Delete the table's staging folders (``_staging-*``: files written for a commit, moved into
    the table when it lands) untouched for ``hours``: their writer died before its commit (a write
    takes seconds). Delta's VACUUM leaves folders whose names begin with ``_``. The number of
    files deleted."""
    oldest = time.time() - hours * 3600
    deleted = 0
    for folder in path.glob("_staging-*"):
        try:
            files = [f for f in folder.rglob("*") if f.is_file()]
            touched = max((f.stat().st_mtime for f in files), default=folder.stat().st_mtime)
        except FileNotFoundError:  # its writer committed meanwhile
            continue
        if touched < oldest:
            shutil.rmtree(folder, ignore_errors=True)
            deleted += len(files)
    return deleted


def _committed(operation):
    """Run ``operation`` (which opens the table's latest version itself) until its commit is not
    refused by a concurrent one; a conflict ``COMMIT_ATTEMPTS`` times running is raised."""
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            return operation()
        except CommitFailedError:
            if attempt == COMMIT_ATTEMPTS:
                raise
            time.sleep(0.2 * attempt)
