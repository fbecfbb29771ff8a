"""The embedded log: standard Avro container files that survive a torn last write."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import fastavro
import pytest

from adamem.errors import LogError
from adamem.settings import Settings
from adamem.streams.embedded_log import EmbeddedLog
from adamem.streams.log import OutgoingRecord


def _log(settings: Settings, partitions: int = 1) -> EmbeddedLog:
    return EmbeddedLog(settings.log_url, replace(settings, embedded_partitions=partitions))


async def _values(log: EmbeddedLog, topic: str) -> list[bytes]:
    return [r.value async for r in log.read(topic)]


async def test_files_are_plain_avro_containers(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    await log.append(topic, [OutgoingRecord("alice", b"one"), OutgoingRecord("bob", b"two")])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    with path.open("rb") as fo:
        rows = list(fastavro.reader(fo))
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [(0, "alice", b"one"), (1, "bob", b"two")]


async def test_torn_last_write_is_truncated_and_earlier_records_survive(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    await log.append(topic, [OutgoingRecord("alice", b"a" * 100)])
    await log.append(topic, [OutgoingRecord("alice", b"b" * 100), OutgoingRecord("alice", b"c" * 100)])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    size = path.stat().st_size
    with path.open("r+b") as fo:  # a crash in the middle of the second append
        fo.truncate(size - 60)

    reopened = _log(settings)
    await reopened.start()
    assert await _values(reopened, topic) == [b"a" * 100]  # readers stop before the torn tail
    placed = await reopened.append(topic, [OutgoingRecord("alice", b"d")])
    assert placed == [(0, 1)]  # the torn batch left no trace: offsets stay dense
    assert await _values(reopened, topic) == [b"a" * 100, b"d"]
    await reopened.stop()


async def test_torn_first_block_leaves_an_empty_partition(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    path = Path(settings.log_url) / topic / "00000.avro"
    header_only = path.stat().st_size  # created atomically at start
    await log.append(topic, [OutgoingRecord("alice", b"x" * 80)])
    await log.stop()
    with path.open("r+b") as fo:
        fo.truncate(header_only + 20)
    reopened = _log(settings)
    await reopened.start()
    assert await reopened.append(topic, [OutgoingRecord("alice", b"y")]) == [(0, 0)]
    assert await _values(reopened, topic) == [b"y"]
    await reopened.stop()


async def test_corruption_before_the_last_block_is_refused_not_truncated(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    for i in range(3):
        await log.append(topic, [OutgoingRecord("alice", bytes([65 + i]) * 50)])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    data = bytearray(path.read_bytes())
    first = data.index(b"A" * 50)
    data[first + 51 : first + 67] = b"\xee" * 16  # break the first block's sync marker
    path.write_bytes(bytes(data))
    before = path.stat().st_size
    with pytest.raises(LogError, match="refusing to truncate"):
        await _log(settings).start()
    assert path.stat().st_size == before


async def test_damaged_header_is_refused(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    await log.append(topic, [OutgoingRecord("alice", b"a")])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    path.write_bytes(b"XXXX" + path.read_bytes()[4:])
    with pytest.raises(LogError, match="no readable Avro header"):
        await _log(settings).start()


async def test_one_writer_at_a_time(settings: Settings) -> None:
    topic = settings.topic("messages")
    first, second = _log(settings), _log(settings)
    await first.start()
    await second.start()
    await first.append(topic, [OutgoingRecord("alice", b"1")])
    with pytest.raises(LogError, match="another process is writing"):
        await second.append(topic, [OutgoingRecord("alice", b"2")])
    await first.stop()
    await second.append(topic, [OutgoingRecord("alice", b"2")])
    assert await _values(second, topic) == [b"1", b"2"]
    await second.stop()


async def test_partition_count_is_fixed_by_the_folder(settings: Settings) -> None:
    log = _log(settings, partitions=3)
    await log.start()
    await log.stop()
    later = _log(settings, partitions=1)  # a different setting must not reshuffle owners
    await later.start()
    assert later.partitions(settings.topic("messages")) == 3
    await later.stop()
