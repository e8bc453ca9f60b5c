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

from collections.abc import Iterable
from dataclasses import dataclass

from deltalake import DeltaTable

__all__ = ["StreamCut", "stream_cut"]

_PAGE = 16


@dataclass(frozen=True)
class StreamCut:
    """``batch``: the last micro-batch completed (None: no tagged commit); ``versions``: the
    Delta version to read per table (absent: the table did not exist yet at the cut)."""

    batch: int | None
    versions: dict[str, int]


def _before_in_flight(table: DeltaTable, completed: int) -> int:
    """The newest version without a commit of a batch after ``completed``: the version before
    the first such commit, or the latest when there is none. A batch's commits follow those of
    the batches before it, so the history is read backwards only until a commit of a completed
    batch. (An edit made by hand, or compaction, after the last completed batch is read too.)"""
    newest, limit = table.version(), _PAGE
    while True:
        commits = table.history(limit)  # newest first
        first_in_flight = None
        for commit in commits:
            tagged = commit.get("lklab.version")
            if tagged is None:
                continue
            if int(tagged) <= completed:
                break
            first_in_flight = commit["version"]
        else:
            if len(commits) == limit and limit <= newest:
                limit *= 4
                continue
        return newest if first_in_flight is None else first_in_flight - 1


def _newest_batch(table: DeltaTable) -> int | None:
    """The batch id of the table's newest tagged commit (None: no commit is tagged)."""
    newest, limit = table.version(), _PAGE
    while True:
        commits = table.history(limit)
        tagged = next((int(c["lklab.version"]) for c in commits if c.get("lklab.version") is not None), None)
        if tagged is not None or len(commits) < limit or limit > newest:
            return tagged
        limit *= 4


def stream_cut(root, names: Iterable[str], state: str) -> StreamCut:
    """The cut of the tables ``names`` (paths under ``root``) at the last batch ``state`` completed."""
    names = list(names)
    state_path = root / state
    if not DeltaTable.is_deltatable(str(state_path)):
        return StreamCut(None, {})
    completed = _newest_batch(DeltaTable(str(state_path)))
    if completed is None:  # written in one go (a replay): everything as it stands
        versions = {
            name: DeltaTable(str(root / name)).version() for name in names if DeltaTable.is_deltatable(str(root / name))
        }
        return StreamCut(None, versions)
    versions = {}
    for name in names:
        path = root / name
        if not DeltaTable.is_deltatable(str(path)):
            continue
        version = _before_in_flight(DeltaTable(str(path)), completed)
        if version >= 0:
            versions[name] = version
    return StreamCut(completed, versions)
