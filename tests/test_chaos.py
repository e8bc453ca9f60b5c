"""The chaos script's short version: SIGKILLs at random moments of the speed layer, the batch
recompute, the replay and reconciliation, then reruns, leave the tables of an uninterrupted run."""

import pytest

from tests.chaos import chaos

pytestmark = pytest.mark.slow


def test_random_kills_across_the_four_jobs_leave_the_uninterrupted_tables(tmp_path):
    result = chaos(kills=4, seed=2, events=1_500, scratch=tmp_path, say=lambda _: None)
    assert sum(result.kills.values()) == 4
    assert result.differences == []
    assert {"speed_aggregates", "batch_truth", "kappa/chaos/speed_aggregates", "recon_diffs", "corrected_aggregates"} <= set(result.tables)
