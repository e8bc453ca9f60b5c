"""The real ``lklab`` command: help with examples, clear errors with exit code 2, the README's examples.

Help, refusals, the empty lake's failure and the README's example are ``lklab.cli.main`` called in
the tests' process (``lklab_here``: the same command line, environment and working directory,
its exit code and what it printed; a command that runs Spark uses the tests' session) instead of
an ``lklab`` process each: what they check is what the command says and returns, not how a
process starts. The ingests (several processes at once among them) and the scenario refusals
stay ``lklab`` processes, and ``tests/test_process_exit.py`` checks that a process ends with
``main``'s code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.eventlog import EventLog

ROOT = Path(__file__).resolve().parents[1]
LKLAB = str(Path(sys.executable).parent / "lklab")


def lklab(*args, cwd=None, env=None):
    return subprocess.run(
        [LKLAB, *args], capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=600
    )


@pytest.mark.parametrize(
    "command", ["demo", "compare", "generate", "ingest", "batch", "speed", "replay", "reconcile", "health"]
)
def test_every_command_explains_itself_with_an_example(command, lklab_here):
    result = lklab_here(command, "--help")
    assert result.returncode == 0
    assert "example:" in result.stdout and f"lklab {command}" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["generate", "--scenario", "iot"], "valid: billing, clickstream, outage"),
        (["generate", "--window-size", "10"], "window-size: '10' needs a unit"),
        (["generate", "--window-kind", "hopping"], "valid: tumbling, sliding, session"),
        (["generate", "--span", "forever"], "span: 'forever' is not a duration"),
        (["ingest", "no-such-file.jsonl"], "no such file: no-such-file.jsonl"),
        (["batch", "--table-engine", "csv"], "valid: auto, deltalake, delta-spark"),
        (["batch", "--date", "2026-02-30"], "2026-02-30"),
        (["compare", "--watermark-delay", "10s,soon"], "'soon' is not a duration"),
        (["reconcile", "--against", "kappa"], "use 'speed' or 'kappa:<RUN>'"),
        (["reconcile", "--abs-tol", "-1"], "abs-tol"),
        (["replay", "--name", "../x"], "replay name '../x'"),
        (
            ["batch", "--pipeline", "order_payments", "--date", "2026-01-05"],
            "--date does not apply to 'batch' on the order_payments pipeline",
        ),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path, args, message, lklab_here):
    (tmp_path / "lake").mkdir()  # a lake that does not exist is refused first (tests/test_cli_first_hour.py)
    result = lklab_here(*args, "--lake", str(tmp_path / "lake"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_config_file_is_a_usage_error(tmp_path, lklab_here):
    (tmp_path / "lklab.toml").write_text('window-size = "fast"\n')
    result = lklab_here("generate", "--events", "10", cwd=tmp_path)
    assert result.returncode == 2 and "window-size: 'fast' is not a duration" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args, why",
    [
        (["batch"], "no batch to run (run 'lklab generate' first)"),
        (["replay", "--name", "first"], "nothing to replay (run 'lklab generate' first)"),
        (
            ["batch", "--pipeline", "unique_visitors"],
            "no batch to run (run 'lklab generate --pipeline unique_visitors' first)",
        ),
    ],
)
def test_a_batch_or_replay_of_an_empty_log_is_refused_before_spark_starts(tmp_path, args, why):
    """A process of its own (no session of the tests' to reuse), its JVM told to print its flags on
    start: nothing on stdout means no JVM started."""
    from tests.processes import REPO, VENV_BIN, run, venv_env

    (tmp_path / "empty" / "log").mkdir(parents=True)
    env = venv_env({"PYTHONPATH": str(REPO), "SPARK_SUBMIT_OPTS": "-XX:+PrintFlagsFinal"})
    result = run([str(VENV_BIN / "lklab"), *args, "--lake", str(tmp_path / "empty")], env=env, timeout=120)
    assert (result.returncode, result.stdout) == (2, ""), result.stdout[-2000:] + result.stderr
    assert result.stderr.strip() == f"lklab {args[0]}: the log under {tmp_path / 'empty'} is empty: {why}"


def test_ingest_appends_segments_and_keeps_bad_lines(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(
        '{"event_id": "1", "account_id": "a", "event_type": "charge", "amount": "1.00", "currency": "USD", "event_time": "2026-01-05T10:00:00Z"}\n'
    )
    second.write_text("garbage\n")
    result = lklab("ingest", str(first), str(second), "--lake", str(tmp_path / "lake"))
    assert result.returncode == 0, result.stderr
    assert "-> segment 1" in result.stdout and "-> segment 2" in result.stdout
    log = EventLog(tmp_path / "lake")
    # each line as sent, after the header holding the append's stamp
    assert log.read_lines(log.segment_path(1)) == first.read_text().splitlines()
    assert log.read_lines(log.segment_path(2)) == ["garbage"]
    assert log.stamp(1).endswith("Z") and log.stamp(2).endswith("Z")


def test_a_dead_letter_of_an_ingested_file_is_its_line_byte_for_byte(spark, tmp_path, lklab_here):
    """The stream's and the batch's dead letters hold each line as the file has it; the stamp
    the ingest gave the file still dates the lines without an ingest_time (one dated 2099 is
    ahead of it), and the batch reads the same events as the stream."""
    from lklab.pipelines.billing_windows.batch import run_batch
    from lklab.pipelines.billing_windows.speed import run_speed
    from shared.config import LabConfig
    from shared.tables import Tables
    from tests.conftest import event_line

    sent = [
        event_line(event_id="ok", ingest_time=None).encode(),
        b'{ "event_id":"future","account_id":"a","event_type":"charge","amount":"1.5","currency":"USD",'
        b'"event_time":"2099-01-01T00:00:00Z" }',
        b'{"event_id": "no-amount",\t"account_id": "a"}  ',
        event_line(event_id="sign", amount="-1.00", ingest_time=None).encode(),
        b"not json \xe2\x82\xac",
    ]
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\r\n".join(sent) + b"\r\n")
    lake = tmp_path / "lake"
    assert lklab_here("ingest", str(events), "--lake", str(lake)).returncode == 0
    config = LabConfig(lake=lake, table_engine="deltalake")
    run_batch(spark, config)
    run_speed(spark, config, available_now=True)
    tables = Tables(spark, lake, "deltalake")
    for name in ("batch_dead_letter", "dead_letter"):
        rows = sorted(tables.read_arrow(name).to_pylist(), key=lambda row: row["line_number"])
        assert [(r["line_number"], r["reject_reason"]) for r in rows] == [
            (2, "event_time_in_future"),
            (3, "missing_field"),
            (4, "amount_sign"),
            (5, "not_json"),
        ], name
        assert [r["raw_line"].encode() for r in rows] == sent[1:], name
    assert rows[0]["reject_detail"].endswith(f"ahead of ingest_time {EventLog(lake).stamp(1)}")
    (event,) = tables.read_arrow("batch_truth").to_pylist()
    assert event["event_count"] == 1


def test_ingest_refuses_an_empty_file_and_appends_nothing(tmp_path):
    good, empty = tmp_path / "good.jsonl", tmp_path / "empty.jsonl"
    good.write_text("garbage\n")
    empty.write_bytes(b"")
    result = lklab("ingest", str(good), str(empty), "--lake", str(tmp_path / "lake"))
    assert result.returncode == 2
    assert result.stderr == f"lklab ingest: empty file (no line to append): {empty}; nothing was appended\n"
    assert not (tmp_path / "lake" / "log").exists()


def test_ingest_is_refused_while_the_lake_is_being_replaced(tmp_path):
    from shared.locks import whole_lake

    events = tmp_path / "events.jsonl"
    events.write_text("garbage\n")
    lake = tmp_path / "lake"
    with whole_lake(lake):  # what generate --overwrite holds while it replaces the log
        refused = lklab("ingest", str(events), "--lake", str(lake))
    assert refused.returncode == 2 and f"the lake {lake} is being replaced by pid {os.getpid()}" in refused.stderr
    assert not (lake / "log").exists()
    assert lklab("ingest", str(events), "--lake", str(lake)).returncode == 0


def test_concurrent_ingests_land_every_line_once_and_the_batch_counts_them_all(spark, tmp_path):
    """Four ``lklab ingest`` processes at once, ten files each, with a byte order mark, a line
    dated 2099 and a line that is not UTF-8 among them: segments 1..40, every line once, and
    the batch recompute counts every line (events + dead letters)."""
    from lklab.pipelines.billing_windows.batch import run_batch
    from shared.config import LabConfig
    from shared.tables import Tables
    from tests.conftest import event_line

    lake = tmp_path / "lake"
    writers = []
    for writer in range(4):
        files = []
        for batch in range(10):
            path = tmp_path / f"w{writer}-{batch}.jsonl"
            lines = [
                event_line(
                    event_id=f"w{writer}-{batch}-{n}", event_time="2026-01-05T10:00:00Z", ingest_time=None
                ).encode()
                for n in range(5)
            ]
            lines += [
                b'{"event_id": "x\xff"}',
                event_line(event_id=f"future-{writer}-{batch}", event_time="2099-01-01T00:00:00Z").encode(),
            ]
            path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
            files.append(str(path))
        writers.append(
            subprocess.Popen(
                [LKLAB, "ingest", *files, "--lake", str(lake)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [writer.communicate(timeout=300) for writer in writers]
    assert [writer.returncode for writer in writers] == [0] * 4, outputs
    segments = EventLog(lake).segments()
    assert [segment.number for segment in segments] == list(range(1, 41))
    landed = sorted(
        json.loads(line)["event_id"] for s in segments for line in EventLog.read_lines(s.path) if "\\x" not in line
    )
    assert landed == sorted(
        [f"w{w}-{b}-{n}" for w in range(4) for b in range(10) for n in range(5)]
        + [f"future-{w}-{b}" for w in range(4) for b in range(10)]
    )
    run = run_batch(spark, LabConfig(lake=lake, table_engine="deltalake"))
    assert (run.lines, run.events, run.duplicates, run.dead_letters, run.heartbeats) == (280, 200, 0, 80, 0)
    dead = Tables(spark, lake, "deltalake").read_arrow("batch_dead_letter").to_pylist()
    assert (
        sorted({row["reject_reason"] for row in dead}) == ["event_time_in_future", "invalid_utf8"] and len(dead) == 80
    )
    future = sorted(row["raw_line"] for row in dead if row["reject_reason"] == "event_time_in_future")
    assert future == sorted(
        event_line(event_id=f"future-{w}-{b}", event_time="2099-01-01T00:00:00Z") for w in range(4) for b in range(10)
    )


def test_compare_scenario_refuses_to_replace_a_lake_it_did_not_generate_or_a_speed_layer_reads(tmp_path):
    events = tmp_path / "events.jsonl"
    events.write_text('{"event_id": "x"}\n')
    foreign = tmp_path / "foreign"
    assert lklab("ingest", str(events), "--lake", str(foreign)).returncode == 0
    refused = lklab("compare", "--scenario", "billing", "--lake", str(foreign))
    assert refused.returncode == 2
    assert "holds a log the lab did not generate (1 segments); pass --overwrite" in refused.stderr
    assert '"event_id": "x"' in (foreign / "log" / "segment-000000000001.jsonl").read_text()

    generated = tmp_path / "generated"
    assert lklab("generate", "--events", "50", "--lake", str(generated)).returncode == 0
    (generated / "checkpoints" / "speed").mkdir(parents=True)
    refused = lklab("demo", "--lake", str(generated))
    assert refused.returncode == 2 and "is read by a speed layer" in refused.stderr
