"""What every stream step reports about one micro-batch, whatever the pipeline computes.

The steps of the three pipelines (``shared.speed.stream_step``, ``shared.visitors_stream``'s
``visitors_step``, ``shared.interval_join.join_step``) read a micro-batch's lines in log order
and send each somewhere: a dead letter (it could not be parsed or validated), a duplicate (a
later copy of an event already seen), or the pipeline's own outputs. ``MicroBatch`` holds what
they share; each step's result adds its outputs and its state after the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = ["MicroBatch"]


@dataclass(frozen=True)
class MicroBatch:
    """The lines of one micro-batch: how many (``heartbeats`` of them carry no event), the
    watermark its first line was judged by (``watermark``) and ``W*`` in force after its last
    (``next_watermark``), in microseconds (None: unknown, no event time seen yet), and its
    ``dead_letters`` and ``duplicates`` rows."""

    input_lines: int
    heartbeats: int
    watermark: int | None
    next_watermark: int | None
    dead_letters: pa.Table
    duplicates: pa.Table
