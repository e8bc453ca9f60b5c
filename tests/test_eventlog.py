import os
import subprocess
import sys
import threading
from datetime import UTC, datetime

import pytest

from shared.eventlog import SEGMENT_HEADER, EmptyInput, EventLog, LogDamaged, read_stamp


def test_segments_are_numbered_in_append_order(tmp_path):
    log = EventLog(tmp_path)
    assert log.segments() == [] and log.last_segment() == 0
    first = log.append(['{"a": 1, "ingest_time": "x"}'])
    second = log.append(["not json"])
    assert (first.number, second.number) == (1, 2)
    assert [s.number for s in log.segments()] == [1, 2]
    assert log.read_lines(second.path) == ["not json"]


def test_no_temporary_file_is_left_or_listed(tmp_path):
    log = EventLog(tmp_path)
    log.append(["x"])
    assert sorted(os.listdir(log.root)) == ["segment-000000000001.jsonl"]


def test_a_stamped_segment_holds_its_lines_verbatim_after_its_header(tmp_path):
    log = EventLog(tmp_path)
    sent = ['{"event_id": "a"}', '{"event_id": "b", "ingest_time": "2026-01-01T00:00:00Z"}', "{}", "[1]", "bad {"]
    segment = log.append(sent, datetime(2026, 1, 5, 10, 0, tzinfo=UTC))
    header = SEGMENT_HEADER + b"2026-01-05T10:00:00.000000Z\n"
    assert segment.path.read_bytes() == header + "".join(f"{line}\n" for line in sent).encode()
    assert log.read_lines(segment.path) == sent
    assert log.stamp(segment.number) == "2026-01-05T10:00:00.000000Z"


def test_a_segment_written_unstamped_or_before_headers_has_no_stamp(tmp_path):
    log = EventLog(tmp_path)
    unstamped = log.append(['{"event_id": "a", "ingest_time": "2026-01-01T00:00:00Z"}'], stamp=False)
    assert unstamped.path.read_bytes() == b'{"event_id": "a", "ingest_time": "2026-01-01T00:00:00Z"}\n'
    assert log.stamp(unstamped.number) is None
    # a line that only looks like a header, further down, is a line
    log.append([b"x", SEGMENT_HEADER + b"2026-01-05T10:00:00.000000Z"], stamp=False)
    assert log.stamp(2) is None and len(log.read_lines(log.segment_path(2))) == 2


def test_reading_the_stamp_leaves_the_handle_at_the_first_line(tmp_path):
    path = tmp_path / "segment.jsonl"
    for opening, stamp in [
        (SEGMENT_HEADER + b"2026-01-05T10:00:00.000000Z\n", "2026-01-05T10:00:00.000000Z"),
        (SEGMENT_HEADER + b"2026-01-05T10:00:00Z\n", None),
        (b"", None),
        (b"a", None),
    ]:
        path.write_bytes(opening + b"line\n")
        with path.open("rb") as handle:
            assert read_stamp(handle) == stamp
            assert handle.read() == (b"line\n" if stamp else opening + b"line\n")


def test_gap_in_numbering_is_reported(tmp_path):
    log = EventLog(tmp_path)
    for _ in range(3):
        log.append(["x"])
    log.segment_path(2).unlink()
    with pytest.raises(LogDamaged, match="segment 2 is missing"):
        log.segments()


def test_concurrent_writers_never_share_a_number(tmp_path):
    log = EventLog(tmp_path)
    threads = [threading.Thread(target=lambda i=i: log.append([f"line {i}"])) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    contents = sorted(log.read_lines(s.path)[0] for s in log.segments())
    assert [s.number for s in log.segments()] == list(range(1, 17))
    assert contents == sorted(f"line {i}" for i in range(16))


def test_reading_keeps_blank_lines_and_a_last_line_without_newline(tmp_path):
    path = tmp_path / "segment.jsonl"
    path.write_bytes(b"a\n\nb")
    assert EventLog.read_lines(path) == ["a", "", "b"]
    path.write_bytes(b"a\n")
    assert EventLog.read_lines(path) == ["a"]


def test_bytes_that_are_not_utf8_are_kept_visible(tmp_path):
    path = tmp_path / "segment.jsonl"
    path.write_bytes(b'{"x": "\xff"}\n')
    assert EventLog.read_lines(path) == ['{"x": "\\xff"}']


def test_append_file_keeps_bad_lines(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"event_id": "a", "ingest_time": "T"}\r\ngarbage\n\nold\rmac\r\r\nlast')
    segment = EventLog(tmp_path / "lake").append_file(source)
    assert EventLog.read_lines(segment.path) == [
        '{"event_id": "a", "ingest_time": "T"}',
        "garbage",
        "",
        "old",
        "mac",
        "",
        "last",
    ]


def test_a_byte_order_mark_opening_a_file_is_not_part_of_its_first_line(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'\xef\xbb\xbf{"event_id": "a"}\n\xef\xbb\xbf{"event_id": "b"}\n')
    segment = EventLog(tmp_path / "lake").append_file(source, ingest_time=datetime(2026, 1, 5, tzinfo=UTC))
    # the first line is appended as it would be without the mark; one inside the file is content
    assert segment.path.read_bytes() == (
        SEGMENT_HEADER + b'2026-01-05T00:00:00.000000Z\n{"event_id": "a"}\n\xef\xbb\xbf{"event_id": "b"}\n'
    )


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf"])
def test_an_empty_file_appends_nothing(tmp_path, content):
    source = tmp_path / "in.jsonl"
    source.write_bytes(content)
    log = EventLog(tmp_path / "lake")
    with pytest.raises(EmptyInput, match="in.jsonl is empty: there is no line to append"):
        log.append_file(source)
    assert log.segments() == []
    source.write_bytes(content + b"\n")  # one blank line is a line (a dead letter, empty_line)
    assert EventLog.read_lines(log.append_file(source).path) == [""]


APPENDER = """
import sys
from shared.eventlog import EventLog
log, writer = EventLog(sys.argv[1]), sys.argv[2]
for batch in range(25):
    log.append([f"{writer}-{batch}-{line}" for line in range(20)], stamp=False)
"""


def test_writers_in_separate_processes_land_every_line_once(tmp_path):
    """Four processes append 25 segments each at once while this one lists the log throughout:
    every line lands once, the numbers run 1..100 without a gap, and no listing sees damage."""
    log = EventLog(tmp_path)
    writers = [subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_path), f"w{index}"]) for index in range(4)]
    listings = 0
    while any(writer.poll() is None for writer in writers):
        numbers = [segment.number for segment in log.segments()]
        assert numbers == list(range(1, len(numbers) + 1))
        listings += 1
    assert [writer.returncode for writer in writers] == [0, 0, 0, 0] and listings > 0
    segments = log.segments()
    assert [segment.number for segment in segments] == list(range(1, 101))
    lines = [line for segment in segments for line in log.read_lines(segment.path)]
    assert sorted(lines) == sorted(f"w{w}-{b}-{n}" for w in range(4) for b in range(25) for n in range(20))
    for segment in segments:  # a segment is one writer's batch, whole
        assert len({line.rsplit("-", 1)[0] for line in log.read_lines(segment.path)}) == 1
