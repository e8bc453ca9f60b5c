"""The experiment DAG's own lake: what it may overwrite.

``lambda_kappa_experiment`` regenerates a log and rewrites every table of the lake it is given
(``--replace`` included), so that lake must be one the experiment made. A lake becomes the
experiment's when the DAG first claims it empty (or absent): it gets the marker file
``EXPERIMENT_MARKER``. Claiming is refused for the configured live lake, and for any lake that
holds something without the marker (a log, tables or checkpoints from elsewhere).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

EXPERIMENT_MARKER = "lklab-experiment.json"
_CONTENTS = ("log", "tables", "checkpoints", "generator")


class NotAnExperimentLake(ValueError):
    """The lake given to the experiment holds data the experiment did not make."""


def default_lake(live_lake: str | Path) -> str:
    """The experiment's lake when none is given: ``$LKLAB_EXPERIMENT_LAKE``, else the live
    lake's path with ``-experiment`` appended."""
    return os.environ.get("LKLAB_EXPERIMENT_LAKE") or f"{live_lake}-experiment"


def claim(lake: str | Path, live_lake: str | Path | None) -> Path:
    """Make sure ``lake`` is the experiment's (marking it when it is empty); its resolved path."""
    lake = Path(lake).resolve()
    if live_lake is not None and lake == Path(live_lake).resolve():
        raise NotAnExperimentLake(f"{lake} is the configured live lake; the experiment runs on a lake of its own")
    marker = lake / EXPERIMENT_MARKER
    if marker.is_file():
        return lake
    held = [part for part in _CONTENTS if (lake / part).exists() and any((lake / part).iterdir())]
    if held:
        raise NotAnExperimentLake(
            f"{lake} holds {', '.join(held)} that the experiment did not make (no {EXPERIMENT_MARKER}); "
            "give the experiment an empty or new directory"
        )
    lake.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"claimed_at": dt.datetime.now(dt.UTC).isoformat()}) + "\n")
    return lake
