"""A consistent read of a stream's tables: the versions of its last completed micro-batch.

The speed layer commits each micro-batch as several Delta commits (one per output table, side
by side, then ``stream_state``), each tagged with its batch id (``lklab.version``). A reader
that takes the latest version of each table while a batch is being written can see half of it:
late events of batch ``b`` next to windows of batch ``b - 1``, a gap that is not there. A
*cut* picks, per table, the last version tagged with a batch up to the last one whose state
was committed (the stream's commit point): every table as it stood when that batch completed.

Tables written in one go (a replay's: one commit each, untagged, once its run is recorded) are
read at their latest version. Finding a cut reads each table's commit history backwards from
the newest commit, only as far as the completed batch: a few commits for a live layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from deltalake import DeltaTable

__all__ = ["StreamCut", "stream_cut"]

_PAGE = 16


@dataclass(frozen=True)
class StreamCut:
    """``batch``: the last micro-batch completed (None: no tagged commit); ``versions``: the
    Delta version to read per table (absent: the table does not exist)."""

    batch: int | None
    versions: dict[str, int]


# Commits that change no row: compaction, VACUUM, table properties. A version reached from a
# batch's commit through such commits only holds the same rows (in files VACUUM keeps).
_NO_DATA_CHANGE = {"OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES"}


def _tagged_at_most(table: DeltaTable, batch: int) -> int | None:
    """The newest version holding the rows of the commits tagged with a batch id ``<= batch``
    (None if none is): the newest such commit, or a version reached from it through commits
    that change no row."""
    newest, limit = table.version(), _PAGE
    while True:
        commits = table.history(limit)  # newest first
        same_rows = None  # the newest version since which only row-neutral commits came
        for commit in commits:
            tagged = commit.get("lklab.version")
            if tagged is not None and int(tagged) <= batch:
                return commit["version"] if same_rows is None else same_rows
            if tagged is None and commit.get("operation") in _NO_DATA_CHANGE:
                same_rows = commit["version"] if same_rows is None else same_rows
            else:
                same_rows = None
        if len(commits) == limit and limit <= newest:
            limit *= 4
            continue
        return None


def stream_cut(root, names: Iterable[str], state: str) -> StreamCut:
    """The cut of the tables ``names`` (paths under ``root``) at the last batch ``state`` completed."""
    names = list(names)
    state_path = root / state
    if not DeltaTable.is_deltatable(str(state_path)):
        return StreamCut(None, {})
    state_table = DeltaTable(str(state_path))
    completed = next((int(c["lklab.version"]) for c in state_table.history(_PAGE) if c.get("lklab.version") is not None), None)
    if completed is None:  # written in one go (a replay): everything as it stands
        versions = {name: DeltaTable(str(root / name)).version() for name in names if DeltaTable.is_deltatable(str(root / name))}
        return StreamCut(None, versions)
    versions = {}
    for name in names:
        path = root / name
        if not DeltaTable.is_deltatable(str(path)):
            continue
        version = _tagged_at_most(DeltaTable(str(path)), completed)
        if version is not None:
            versions[name] = version
    return StreamCut(completed, versions)
