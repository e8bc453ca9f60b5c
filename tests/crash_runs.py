"""Killing a stream process at its named crash points (``lklab.crash_points``), for the exactly-once tests.

Each kill is a real ``lklab speed --available-now`` process (a JVM start: the whole cost), so a
stream with many points walks a sample: the first and the last point and ``others`` drawn between
them, in the order a micro-batch reaches them. The first point (``1:start``, before the batch
writes anything) is the same for every pipeline (``lklab.live_stream``): the billing stream's
test kills there (``tests/test_exactly_once.py``), the other pipelines' tests leave it out. The
draw changes from run to run; its seed is in every failure message, and
``LKLAB_CRASH_SEED=<seed>`` repeats it.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

from tests.processes import REPO, VENV_BIN, run, venv_env

__all__ = ["CRASH_SEED", "sampled_points", "kill_at_each"]

CRASH_SEED = "LKLAB_CRASH_SEED"


def sampled_points(points: list[str], others: int, *, first: bool = True) -> tuple[int, list[str]]:
    """``(seed, points to kill at)``: the first (unless ``first`` is false) and last of ``points``
    and ``others`` between them."""
    seed = int(os.environ.get(CRASH_SEED) or random.SystemRandom().randrange(1 << 32))
    middle = sorted(random.Random(seed).sample(range(1, len(points) - 1), min(others, len(points) - 2)))
    return seed, [*points[:1] * first, *(points[index] for index in middle), points[-1]]


def kill_at_each(lake: Path, pipeline: str, settings: list[str], points: list[str], seed: int) -> None:
    """One ``lklab speed --available-now`` process per point, each killed there with SIGKILL
    (each goes on from where the one before was killed)."""
    env = venv_env({"PYTHONPATH": str(REPO), "LKLAB_TABLE_ENGINE": "deltalake"})
    argv = [str(VENV_BIN / "lklab"), "speed", "--available-now", "--pipeline", pipeline, "--lake", str(lake), *settings]
    for crash_at in points:
        killed = run(argv, env={**env, "LKLAB_CRASH_AT": crash_at}, timeout=300)
        assert killed.returncode == -signal.SIGKILL, (
            f"{crash_at} was not reached ({CRASH_SEED}={seed}):\n{killed.stderr[-3000:]}"
        )
