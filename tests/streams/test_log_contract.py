"""One contract for every event-log adapter: in-memory, embedded Avro files and real Kafka."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import EventLog, OutgoingRecord, partition_for

ADAPTERS = ["memory", "embedded", pytest.param("kafka", marks=pytest.mark.kafka)]


@pytest.fixture(params=ADAPTERS)
async def log(request: pytest.FixtureRequest, settings: Settings) -> AsyncIterator[EventLog]:
    kind = request.param
    if kind == "memory":
        url = "memory://"
        settings = replace(settings, embedded_partitions=3)
    elif kind == "embedded":
        url = settings.log_url
        settings = replace(settings, embedded_partitions=3)
    else:
        url = "kafka://" + request.getfixturevalue("kafka_bootstrap")
    adapter = open_log(url, settings)
    await adapter.start()
    adapter.test_settings = settings  # type: ignore[attr-defined]
    yield adapter
    await adapter.stop()


def _topic(log: EventLog) -> str:
    return log.test_settings.topic("messages")  # type: ignore[attr-defined, no-any-return]


async def _all(log: EventLog, topic: str, **kw: object) -> list[tuple[str, bytes, int, int]]:
    return [(r.key, r.value, r.partition, r.offset) async for r in log.read(topic, **kw)]  # type: ignore[arg-type]


async def test_topics_are_co_partitioned(log: EventLog) -> None:
    s = log.test_settings  # type: ignore[attr-defined]
    counts = {log.partitions(s.topic(n)) for n in ("messages", "analyses", "control", "deadletter")}
    assert counts == {3}


async def test_append_then_read_keeps_per_owner_order(log: EventLog) -> None:
    topic = _topic(log)
    owners = ["alice", "bob", "carol", "dave", "erin"]
    records = [OutgoingRecord(owners[i % 5], f"v{i}".encode()) for i in range(50)]
    placed = await log.append(topic, records)
    assert len(placed) == 50
    for rec, (p, _) in zip(records, placed, strict=True):
        assert p == partition_for(rec.key, 3)
    got = await _all(log, topic)
    assert sorted(v for _, v, _, _ in got) == sorted(r.value for r in records)
    for owner in owners:
        mine = [v for k, v, _, _ in got if k == owner]
        assert mine == [r.value for r in records if r.key == owner]


async def test_offsets_are_dense_and_reported(log: EventLog) -> None:
    topic = _topic(log)
    first = await log.append(topic, [OutgoingRecord("alice", b"a"), OutgoingRecord("alice", b"b")])
    second = await log.append(topic, [OutgoingRecord("alice", b"c")])
    p = partition_for("alice", 3)
    assert [off for _, off in first + second] == [0, 1, 2]
    ends = await log.end_offsets(topic)
    assert ends[p] == 3
    assert sum(ends.values()) == 3


async def test_read_from_offset_and_until(log: EventLog) -> None:
    topic = _topic(log)
    await log.append(topic, [OutgoingRecord("alice", bytes([i])) for i in range(10)])
    p = partition_for("alice", 3)
    got = await _all(log, topic, from_offsets={p: 4}, until={p: 7})
    assert [v for _, v, _, _ in got] == [bytes([4]), bytes([5]), bytes([6])]
    assert [o for _, _, _, o in got] == [4, 5, 6]


async def test_read_by_owner_key(log: EventLog) -> None:
    topic = _topic(log)
    await log.append(topic, [OutgoingRecord(k, k.encode()) for k in ["alice", "bob", "alice", "carol", "alice"]])
    got = await _all(log, topic, key="alice")
    assert [v for _, v, _, _ in got] == [b"alice"] * 3


async def test_empty_topic_reads_nothing(log: EventLog) -> None:
    assert await _all(log, log.test_settings.topic("control")) == []  # type: ignore[attr-defined]


async def test_unicode_keys_and_binary_values(log: EventLog) -> None:
    topic = _topic(log)
    await log.append(topic, [OutgoingRecord("小明", b"\x00\xff\xc3\x01")])
    got = await _all(log, topic, key="小明")
    assert got[0][:2] == ("小明", b"\x00\xff\xc3\x01")
