"""The chaos script's short version: one SIGKILL of each of the speed layer, the batch
recompute, the replay and reconciliation while it runs, then reruns, leave the tables of an
uninterrupted run (``tests/chaos.py``)."""

import pytest

from tests.chaos import JOBS, chaos

pytestmark = pytest.mark.slow


def test_a_kill_of_each_running_job_then_reruns_leave_the_uninterrupted_tables(spark, tmp_path):
    """The reference runs and the reruns after the kills are ``lklab`` called in this process, in
    the tests' session (a JVM start less each); the killed attempts are processes, each killed
    after its first write to the lake."""
    result = chaos(kills=4, seed=2, events=1_500, scratch=tmp_path, say=lambda _: None, segment_minutes=20, spark=spark)
    assert {job: result.kills[job] for job in JOBS} == {job: 1 for job in JOBS}  # each interrupted while it ran
    assert result.differences == []
    assert {
        "speed_aggregates",
        "batch_truth",
        "kappa/chaos/speed_aggregates",
        "recon_diffs",
        "corrected_aggregates",
    } <= set(result.tables)
