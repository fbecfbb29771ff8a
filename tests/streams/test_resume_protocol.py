"""The resume-header protocol (``streams.resume``): what its headers say, byte for byte."""

from __future__ import annotations

import pytest

from adamem.streams.log import LogRecord
from adamem.streams.resume import (
    RESUME_HEADER,
    SOURCE_HEADER,
    accounted_by,
    parse_resume,
    resume_header,
    source_of,
)


def test_a_resume_header_is_compact_json_in_topic_order_and_reads_back() -> None:
    header = resume_header({"m": 5, "c": 1})
    assert header == b'{"c":1,"m":5}'
    assert parse_resume(header) == {"c": 1, "m": 5}


@pytest.mark.parametrize(
    "value",
    [None, b"", b"not json", b"\xff", b"[1]", b'{"m": -1}', b'{"m": 1.5}', b'{"m": true}', b'{"m": 3, "c": "2"}'],
)
def test_a_header_that_cannot_be_trusted_vouches_for_nothing(value: bytes | None) -> None:
    assert parse_resume(value) is None


def _rec(*headers: tuple[str, bytes]) -> LogRecord:
    return LogRecord("a", 0, 7, "alice", b"", 0, tuple(headers))


def test_the_resume_header_supersedes_the_source_of_a_record() -> None:
    rec = _rec((SOURCE_HEADER, b"m:0:9"), (RESUME_HEADER, b'{"c":2,"m":4}'))
    assert accounted_by(rec, {"m", "c"}) == {"c": 2, "m": 4}
    assert accounted_by(rec, {"m"}) == {"m": 4}


def test_a_record_written_before_the_resume_header_counts_through_its_source() -> None:
    rec = _rec((SOURCE_HEADER, b"my:topic:0:9"))
    assert accounted_by(rec, {"my:topic"}) == {"my:topic": 10}
    assert accounted_by(rec, {"my:topic"}, sources=False) == {}
    assert source_of(LogRecord("my:topic", 0, 9, "alice", b"", 0)) == b"my:topic:0:9"
