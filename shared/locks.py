"""One writer per role on a lake: OS file locks that die with their process.

A lake has writers that must not run twice at once: the speed layer (per table prefix), a
replay of a given name, the batch recompute, reconciliation. Each takes an exclusive
``flock`` on ``<lake>/locks/<role>.lock`` for as long as it writes; a second writer of the same
role is refused at once with ``LockHeld``, which names the holder (pid, host, command, since
when) from the lock file. Every writer also holds ``<lake>/locks/lake.lock`` shared, so that
replacing the whole lake (``lklab generate --overwrite``, ``lklab compare --scenario``) — which
takes it exclusively — cannot happen under a running writer. Appending to the log (``lklab
ingest``) holds only that shared lock: any number of appenders may run at once, as the log
gives each segment its own number.

The kernel releases a ``flock`` when its process ends, however it ends: a writer killed with
SIGKILL leaves no stale lock behind, and the next one simply takes it. The lock file itself is
never deleted (deleting it would let two processes lock two different files of that name).
Locks are advisory and local to the host: a lake shared between machines needs one writing host
(or a file system whose ``flock`` spans them).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["LockHeld", "hold", "writer", "stream_role", "refuse_if_held", "appender", "whole_lake", "history_append"]

_ROLE_NAME = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class LockHeld(RuntimeError):
    """Another process holds the lock; the message says which."""


def _path(lake: str | Path, role: str) -> Path:
    if not role or not set(role) <= _ROLE_NAME:
        raise ValueError(f"lock role {role!r}: letters, digits, '-', '_' or '.' only")
    directory = Path(lake) / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{role}.lock"


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        info = {}
    if not info:
        return "another process"
    return f"pid {info.get('pid')} on {info.get('host')} ({info.get('command')}, since {info.get('since')})"


@contextmanager
def hold(lake: str | Path, role: str, *, shared: bool = False, wait: bool = False) -> Iterator[None]:
    """Hold ``role``'s lock on ``lake`` for the duration of the block (exclusive unless
    ``shared``); without ``wait``, raise ``LockHeld`` at once when it is taken."""
    path = _path(lake, role)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
        try:
            fcntl.flock(handle, mode)
        except BlockingIOError:
            raise LockHeld(f"{role} is locked by {_holder(path)}: {path}") from None
        if not shared:
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:]) or "python",
                "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            os.ftruncate(handle, 0)
            os.pwrite(handle, json.dumps(info).encode(), 0)
        yield
    finally:
        os.close(handle)  # closing the last descriptor releases the lock


def _share_lake(stack: ExitStack, lake: str | Path) -> None:
    try:
        stack.enter_context(hold(lake, "lake", shared=True))
    except LockHeld:
        raise LockHeld(f"the lake {Path(lake)} is being replaced by {_holder(_path(lake, 'lake'))}") from None


def stream_role(prefix: str, app_id: str) -> str:
    """The writer role of a live stream of ``app_id`` writing tables under ``prefix``."""
    return "stream-" + (prefix + app_id).replace("/", ".")


@contextmanager
def writer(lake: str | Path, role: str) -> Iterator[None]:
    """A writer of ``role``: that role exclusively, the lake shared."""
    with ExitStack() as stack:
        _share_lake(stack, lake)
        stack.enter_context(hold(lake, role))
        yield


def refuse_if_held(lake: str | Path, role: str) -> None:
    """Raise ``LockHeld`` now if a writer of ``role`` runs (or the lake is being replaced),
    keeping no lock: a command checks before it starts Spark, so a second writer is refused in a
    moment rather than after the engine has started. The job still takes the lock when it
    writes (``writer``): that, not this check, is what keeps two writers apart."""
    with writer(lake, role):
        pass


@contextmanager
def appender(lake: str | Path) -> Iterator[None]:
    """Appending to the log: the lake shared, no role (appenders run side by side)."""
    with ExitStack() as stack:
        _share_lake(stack, lake)
        yield


def _held_roles(lake: str | Path) -> list[str]:
    """The roles whose lock some process holds now, with their holders."""
    held = []
    for path in sorted((Path(lake) / "locks").glob("*.lock")):
        if path.stem == "lake":
            continue
        handle = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(f"{path.stem} ({_holder(path)})")
        finally:
            os.close(handle)
    return held


@contextmanager
def whole_lake(lake: str | Path) -> Iterator[None]:
    """Everything on ``lake``: refused while any writer runs."""
    stack = ExitStack()
    try:
        stack.enter_context(hold(lake, "lake"))
    except LockHeld:
        writers = ", ".join(_held_roles(lake)) or "a writer"
        raise LockHeld(f"the lake {Path(lake)} is in use by {writers}; stop it first") from None
    with stack:
        yield


@contextmanager
def history_append(lake: str | Path, table: str) -> Iterator[None]:
    """Around reading a run-history table and appending its next row: writers of different
    roles that share the table wait for each other instead of taking the same row number."""
    with hold(lake, f"history-{table.replace('/', '.')}", wait=True):
        yield
