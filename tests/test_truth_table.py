"""The generator's truth table is written once per generated log and window spec: a later batch
over the same generated events and windows finds it already there, any other events or windows
write it again."""

from __future__ import annotations

import dataclasses

import numpy as np
from deltalake import DeltaTable

from lklab.pipelines.billing_windows.generator import GeneratorParams, events_path, generate, load_events
from lklab.pipelines.billing_windows.truth import events_digest, truth_windows, truth_written_for, write_truth
from shared.catalog import GENERATOR_TRUTH, tables_root
from shared.windows import SlidingWindows, TumblingWindows

MINUTE = 60_000_000


def test_the_truth_is_written_again_only_for_other_events_or_other_windows(tmp_path):
    assert events_digest(tmp_path / "not-generated") is None
    lake = tmp_path / "lake"
    generate(GeneratorParams(events=300, accounts=3), lake)
    digest, minute = events_digest(lake), TumblingWindows(MINUTE)
    assert not truth_written_for(minute, lake, digest)  # no table yet

    written = write_truth(load_events(lake), minute, lake, digest)
    table = DeltaTable(str(tables_root(lake) / GENERATOR_TRUTH.name))
    assert table.to_pyarrow_table().equals(written) and written.equals(truth_windows(load_events(lake), minute))
    assert truth_written_for(minute, lake, digest) and events_digest(lake) == digest
    assert not truth_written_for(TumblingWindows(2 * MINUTE), lake, digest)
    assert not truth_written_for(SlidingWindows(2 * MINUTE, MINUTE), lake, digest)

    # the generated events change (one fewer): another digest, so the table is not theirs
    events = load_events(lake)
    np.savez_compressed(events_path(lake), **{k: v[1:] for k, v in dataclasses.asdict(events).items()})
    assert events_digest(lake) != digest and not truth_written_for(minute, lake, events_digest(lake))

    write_truth(load_events(lake), minute, lake)  # a commit that records no digest matches none
    assert not truth_written_for(minute, lake, events_digest(lake))
