from pathlib import Path

import pytest

from shared.config import ConfigError, LabConfig, load_config
from shared.windows import SessionWindows, SlidingWindows, TumblingWindows


def test_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(None, {}, environ={})
    assert config == LabConfig()
    assert config.window == TumblingWindows(60_000_000)
    assert config.lake == Path("lake")
    assert config.driver_memory == "4g"


def test_file_then_environment_then_flags(tmp_path):
    file = tmp_path / "lab.toml"
    file.write_text(
        'window-kind = "sliding"\nwindow-size = "10m"\nwindow-slide = "1m"\nwatermark-delay = "30s"\nlake = "from-file"\n'
    )
    env = {"LKLAB_WATERMARK_DELAY": "2m", "LKLAB_LAKE": "from-env"}
    config = load_config(file, {"lake": "from-flag", "allowed-lateness": "1h"}, environ=env)
    assert config.window == SlidingWindows(600_000_000, 60_000_000)
    assert config.watermark_delay == 120_000_000
    assert config.allowed_lateness == 3_600_000_000
    assert config.lake == Path("from-flag")


def test_config_file_from_environment(tmp_path):
    file = tmp_path / "lab.toml"
    file.write_text('window-kind = "session"\nsession-gap = "30s"\n')
    assert load_config(None, {}, environ={"LKLAB_CONFIG": str(file)}).window == SessionWindows(30_000_000)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"window-kind": "hopping"}, "valid: tumbling, sliding, session"),
        ({"window-size": "10"}, "window-size"),
        ({"window-size": "0s"}, "window-size must be longer than zero"),
        ({"window-kind": "sliding", "window-size": "1m", "window-slide": "2m"}, "must not exceed window-size"),
        ({"table-engine": "parquet"}, "valid: auto, deltalake, delta-spark"),
        ({"watermark-delay": "soon"}, "watermark-delay"),
        ({"driver-memory": "4GB"}, "driver-memory: '4GB' is not a JVM memory size"),
        ({"driver-memory": "0g"}, "driver-memory"),
    ],
)
def test_invalid_values_name_what_is_valid(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides, environ={})


def test_unknown_key_in_file_lists_valid_keys(tmp_path):
    file = tmp_path / "lab.toml"
    file.write_text('window_size = "1m"\n')
    with pytest.raises(ConfigError, match=r"unknown key\(s\) window_size; valid keys: lake, window-kind"):
        load_config(file, {}, environ={})


def test_broken_and_missing_files(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("window-size = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(broken, {}, environ={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml", {}, environ={})


def test_describe_speaks_the_users_units():
    described = LabConfig(watermark_delay=90_000_000).describe()
    assert described["watermark-delay"] == "90s"
    assert described["window-kind"] == "tumbling"


def test_a_pipelines_section_applies_to_that_pipeline_only(tmp_path):
    file = tmp_path / "lab.toml"
    file.write_text(
        'window-size = "2m"\nstate-ttl = "12h"\n'
        '[pipelines.unique_visitors]\nstate-ttl = "1h"\nwindow-size = "5m"\n'
        '[pipelines.order_payments]\njoin-bound = "30m"\n'
    )
    visitors = load_config(file, {"pipeline": "unique_visitors"}, environ={})
    assert (visitors.state_ttl, visitors.window_size, visitors.join_bound) == (3_600_000_000, 300_000_000, 900_000_000)
    billing = load_config(file, {}, environ={})  # the default pipeline has no section: the file's top level
    assert (billing.state_ttl, billing.window_size, billing.join_bound) == (43_200_000_000, 120_000_000, 900_000_000)
    payments = load_config(file, {}, environ={"LKLAB_PIPELINE": "order_payments"})
    assert payments.join_bound == 1_800_000_000
    # the environment and the flags still win over a section
    assert (
        load_config(file, {"pipeline": "unique_visitors"}, environ={"LKLAB_STATE_TTL": "2h"}).state_ttl == 7_200_000_000
    )
    assert load_config(file, {"pipeline": "unique_visitors", "window-size": "1m"}, environ={}).window_size == 60_000_000


def test_a_section_takes_the_settings_but_not_the_pipeline(tmp_path):
    file = tmp_path / "lab.toml"
    file.write_text('[pipelines.unique_visitors]\npipeline = "order_payments"\n')
    with pytest.raises(
        ConfigError, match=r"\[pipelines.unique_visitors\]: unknown key\(s\) pipeline; valid keys: lake,"
    ):
        load_config(file, {}, environ={})
    file.write_text('pipelines = "unique_visitors"\n')
    with pytest.raises(ConfigError, match=r"\[pipelines\] holds one table per pipeline"):
        load_config(file, {}, environ={})
