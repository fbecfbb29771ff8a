"""Where the analyzer resumes: the ``adamem-resume`` header of the newest analyses record.

The tests run on the in-memory log with a logical clock (one tick per append, so arrival order is
exact) and count the records read back, with an agent that embeds every text as the same vector:
what is under test is the bookkeeping, not the analysis.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import NoExtractor
from adamem.events import ChatMessage, MemoryForgotten, Speaker
from adamem.partitioning import partition_for
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.log import LogRecord, OutgoingRecord
from adamem.streams.memory_log import InMemoryLog
from adamem.streams.pipeline import ERROR_HEADER, analyze_pending
from adamem.streams.resume import RESUME_HEADER, SOURCE_HEADER, ResumeTracker, resume_points

OWNER = "alice"


class FlatEmbedder:
    """Every text is the same unit vector: no model to load."""

    name = "flat"
    dim = 2

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


def agent() -> MemoryAgent:
    return MemoryAgent(NoExtractor(), FlatEmbedder())


class CountingLog(InMemoryLog):
    """The in-memory log with a logical clock and a count of the records read back, per topic."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.clock = 0
        self.reads: Counter[str] = Counter()
        self.fail_analyses_after: int | None = None  # analyses appends that succeed before one fails

    async def append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        if topic.endswith(".analyses") and self.fail_analyses_after is not None:
            if self.fail_analyses_after == 0:
                raise OSError("simulated crash before an analyses append")
            self.fail_analyses_after -= 1
        placed = await super().append(topic, records)
        self.clock += 1
        parts = self._parts(topic)
        for p, offset in placed:
            parts[p][offset] = dataclasses.replace(parts[p][offset], timestamp=self.clock)
        return placed

    async def read(
        self,
        topic: str,
        *,
        from_offsets: dict[int, int] | None = None,
        key: str | None = None,
        until: dict[int, int] | None = None,
    ) -> AsyncIterator[LogRecord]:
        async for rec in super().read(topic, from_offsets=from_offsets, key=key, until=until):
            self.reads[topic] += 1
            yield rec


@pytest.fixture
async def log(settings: Settings) -> CountingLog:
    log = CountingLog(settings)
    await log.start()
    return log


def message(i: int) -> ChatMessage:
    return ChatMessage(
        str(uuid.UUID(int=i + 1)), OWNER, "c1", f"m{i}", Speaker("user", "Alice"), f"message {i}", 1_700_000_000_000 + i
    )


def forget(i: int, target: ChatMessage) -> MemoryForgotten:
    return MemoryForgotten(str(uuid.UUID(int=10**6 + i)), OWNER, "message", target.occurred_at + 1, target.event_id)


async def publish(log: CountingLog, settings: Settings, events: Sequence[ChatMessage | MemoryForgotten]) -> None:
    """Append each event on its own tick: messages to the messages topic, the rest to control."""
    for event in events:
        topic = settings.topic("messages" if isinstance(event, ChatMessage) else "control")
        await log.append(topic, [OutgoingRecord(event.user_id, encode_event(event))])


async def analyses(log: CountingLog, settings: Settings) -> list[LogRecord]:
    return [r async for r in InMemoryLog.read(log, settings.topic("analyses"))]  # not counted


def resume_of(rec: LogRecord) -> dict[str, int]:
    return json.loads(dict(rec.headers)[RESUME_HEADER])  # type: ignore[no-any-return]


async def test_a_long_log_without_control_events_resumes_from_its_newest_record(
    settings: Settings, log: CountingLog
) -> None:
    p = partition_for(OWNER, settings.embedded_partitions)
    await publish(log, settings, [message(i) for i in range(700)])
    stats = await analyze_pending(log, agent(), settings, p, batch=64)
    assert stats.analyzed == 700
    log.reads.clear()
    points = await resume_points(log, settings, p)
    assert points == {settings.topic("messages"): 700, settings.topic("control"): 0}
    assert log.reads[settings.topic("analyses")] == 1  # not the 700 the source headers alone would need
    # The header is plain JSON bytes, keyed by input topic, for any client to read.
    newest = (await analyses(log, settings))[-1]
    assert dict(newest.headers)[RESUME_HEADER] == (
        b'{"%s":0,"%s":700}' % (settings.topic("control").encode(), settings.topic("messages").encode())
    )
    # Resuming from it analyses only what came since.
    await publish(log, settings, [message(i) for i in range(700, 705)])
    again = await analyze_pending(log, agent(), settings, p)
    assert again.analyzed == 5


async def test_a_log_written_before_the_resume_header_resumes_through_the_source_headers(
    settings: Settings, log: CountingLog
) -> None:
    p = partition_for(OWNER, settings.embedded_partitions)
    messages_topic, control_topic = settings.topic("messages"), settings.topic("control")
    await publish(log, settings, [message(i) for i in range(600)])
    # What an older analyzer wrote: the analyses with their source header only.
    written = [rec async for rec in log.read(messages_topic)]
    agent_ = agent()
    await log.append(
        settings.topic("analyses"),
        [
            OutgoingRecord(OWNER, encode_event(a), ((SOURCE_HEADER, f"{messages_topic}:{p}:{rec.offset}".encode()),))
            for rec, a in zip(written, agent_.analyze([message(i) for i in range(600)]), strict=True)
        ],
    )
    log.reads.clear()
    assert await resume_points(log, settings, p) == {messages_topic: 600}
    assert log.reads[settings.topic("analyses")] == 600  # no control event: the scan reads it all
    # The first run of the new analyzer resumes right, and from then on its records say where.
    await publish(log, settings, [message(600), forget(0, message(3)), message(601)])
    stats = await analyze_pending(log, agent_, settings, p)
    assert (stats.analyzed, stats.forwarded) == (2, 1)
    log.reads.clear()
    assert await resume_points(log, settings, p) == {messages_topic: 602, control_topic: 1}
    assert log.reads[settings.topic("analyses")] == 1


async def test_old_records_at_the_tail_count_by_their_source_and_the_scan_stops_at_a_resume_header(
    settings: Settings, log: CountingLog
) -> None:
    """An older analyzer writing after a newer one: the scan stops at the first record with the header."""
    p = partition_for(OWNER, settings.embedded_partitions)
    messages_topic, control_topic = settings.topic("messages"), settings.topic("control")
    await publish(log, settings, [message(0), forget(0, message(0)), *[message(i) for i in range(1, 300)]])
    await analyze_pending(log, agent(), settings, p, batch=2)  # both headers everywhere
    await publish(log, settings, [message(i) for i in range(300, 305)])
    written = [rec async for rec in log.read(messages_topic, from_offsets={p: 300})]
    await log.append(
        settings.topic("analyses"),
        [
            OutgoingRecord(OWNER, encode_event(a), ((SOURCE_HEADER, f"{messages_topic}:{p}:{rec.offset}".encode()),))
            for rec, a in zip(written, agent().analyze([message(i) for i in range(300, 305)]), strict=True)
        ],
    )
    log.reads.clear()
    assert await resume_points(log, settings, p) == {messages_topic: 305, control_topic: 1}
    assert log.reads[settings.topic("analyses")] == 256  # the second window; not back to the control event


@pytest.mark.parametrize("last", ["message", "control"])
async def test_both_topics_resume_right_after_a_batch_ending_in_either(
    settings: Settings, log: CountingLog, last: str
) -> None:
    p = partition_for(OWNER, settings.embedded_partitions)
    messages_topic, control_topic = settings.topic("messages"), settings.topic("control")
    ms = [message(i) for i in range(12)]
    # Arrival order: control events between messages, and one at the very end or not.
    events: list[ChatMessage | MemoryForgotten] = [*ms[:4], forget(0, ms[0]), *ms[4:9], forget(1, ms[1]), *ms[9:]]
    if last == "control":
        events.append(forget(2, ms[2]))
    await publish(log, settings, events)
    await log.append(messages_topic, [OutgoingRecord(OWNER, b"\x00 not avro")])  # dead-lettered, in the last batch
    await log.append(messages_topic, [OutgoingRecord(OWNER, encode_event(message(12)))])
    c_end = 3 if last == "control" else 2
    stats = await analyze_pending(log, agent(), settings, p, batch=4)
    assert (stats.analyzed, stats.forwarded, stats.dead_lettered) == (13, c_end, 1)
    # Every record says how far each topic is handled with it: the records before it in arrival order.
    recs = await analyses(log, settings)
    seen = {messages_topic: 0, control_topic: 0}
    expected = []
    for rec in recs:
        topic, _, offset = dict(rec.headers)[SOURCE_HEADER].decode().rsplit(":", 2)
        seen[topic] = int(offset) + 1
        expected.append(dict(seen))
    # The garbage (messages offset 12) is dead-lettered in arrival order, between the analyses of
    # offsets 11 and 13 (its dead letter says so too), so no record counts it before it is handled.
    assert [resume_of(r) for r in recs] == expected
    assert resume_of(recs[-1]) == {messages_topic: 14, control_topic: c_end}
    log.reads.clear()
    assert await resume_points(log, settings, p) == {messages_topic: 14, control_topic: c_end}
    assert log.reads[settings.topic("analyses")] == 1
    assert (await analyze_pending(log, agent(), settings, p)).analyzed == 0


async def test_a_crash_between_batches_resumes_where_it_stopped(settings: Settings, log: CountingLog) -> None:
    p = partition_for(OWNER, settings.embedded_partitions)
    ms = [message(i) for i in range(40)]
    events: list[ChatMessage | MemoryForgotten] = []
    for i, m in enumerate(ms):
        events.append(m)
        if i % 7 == 3:
            events.append(forget(i, ms[i - 1]))
    await publish(log, settings, events)
    log.fail_analyses_after = 3
    with pytest.raises(OSError, match="simulated crash"):
        await analyze_pending(log, agent(), settings, p, batch=5)
    assert len(await analyses(log, settings)) == 15
    log.fail_analyses_after = None
    await analyze_pending(log, agent(), settings, p, batch=5)  # resumes from the log's headers
    sources = Counter(dict(r.headers)[SOURCE_HEADER] for r in await analyses(log, settings))
    assert len(sources) == len(events) and set(sources.values()) == {1}  # each input exactly once


def test_a_record_handled_before_an_earlier_one_does_not_vouch_for_it() -> None:
    """Append times need not rise with offsets: arrival order can handle offset 1 before offset 0."""
    tracker = ResumeTracker({"m": 5, "c": 2}, [("m", 5), ("m", 6), ("c", 2)])
    assert tracker.points() == {"m": 5, "c": 2}
    tracker.handled("m", 6)
    assert tracker.points() == {"m": 5, "c": 2}
    tracker.handled("c", 2)
    assert tracker.points() == {"m": 5, "c": 3}
    tracker.handled("m", 5)
    assert tracker.points() == {"m": 7, "c": 3}


def test_the_resume_header_is_read_by_any_json_client(settings: Settings) -> None:
    """Nothing but JSON: the topic names map to integers."""
    from adamem.streams.resume import resume_header

    value = resume_header({settings.topic("messages"): 3, settings.topic("control"): 0})
    decoded: Any = json.loads(value.decode("ascii"))
    assert decoded == {settings.topic("messages"): 3, settings.topic("control"): 0}


# ---- records on the wrong partition, and dead letters, across runs and crashes ------------------


def owner_on(partition: int, partitions: int, prefix: str) -> str:
    """The first owner name with ``prefix`` that our (murmur2) partitioner puts on ``partition``."""
    return next(f"{prefix}-{i}" for i in range(1000) if partition_for(f"{prefix}-{i}", partitions) == partition)


def owned(i: int, owner: str) -> ChatMessage:
    return dataclasses.replace(
        message(i), event_id=str(uuid.UUID(int=(hash(owner) & 0xFFFF) << 64 | i + 1)), user_id=owner
    )


async def deadletters(log: CountingLog, settings: Settings) -> list[LogRecord]:
    return [r async for r in InMemoryLog.read(log, settings.topic("deadletter"))]


async def analyse_all(log: CountingLog, settings: Settings) -> tuple[int, int]:
    """One ``adamem project``-like run of the analyzer over every partition, resuming from the log."""
    analysed = dead = 0
    for p in range(log.partitions(settings.topic("messages"))):
        stats = await analyze_pending(log, agent(), settings, p, batch=8)
        analysed, dead = analysed + stats.analyzed, dead + stats.dead_lettered
    return analysed, dead


async def test_a_record_on_the_wrong_partition_is_dead_lettered_and_costs_no_other_owner_a_message(
    settings: Settings, log: CountingLog
) -> None:
    """librdkafka's default partitioner put ``stray``'s messages on partition 0; ``victim`` lives on 1."""
    n = settings.embedded_partitions
    busy, stray, victim = owner_on(0, n, "busy"), owner_on(1, n, "stray"), owner_on(1, n, "victim")
    messages_topic = settings.topic("messages")
    # Partition 0 gets a busy owner and, after it, the misplaced ones; partition 1 the victim's few.
    for i in range(20):
        await log.append(messages_topic, [OutgoingRecord(busy, encode_event(owned(i, busy)))])
    for i in range(5):
        m = owned(i, stray)
        await log.append(messages_topic, [OutgoingRecord(stray, encode_event(m), partition=0)])
    for i in range(3):
        await log.append(messages_topic, [OutgoingRecord(victim, encode_event(owned(i, victim)))])
    assert await analyse_all(log, settings) == (23, 5)
    for i in range(3, 6):  # later messages of the victim: still below the stray's partition-0 offsets
        await log.append(messages_topic, [OutgoingRecord(victim, encode_event(owned(i, victim)))])
    assert await analyse_all(log, settings) == (3, 0)  # none skipped, nothing analysed or dead-lettered again
    assert await analyse_all(log, settings) == (0, 0)
    owners = Counter(r.key for r in await analyses(log, settings))
    assert owners == {busy: 20, victim: 6}
    dead = await deadletters(log, settings)
    assert [r.key for r in dead] == [stray] * 5 and {r.partition for r in dead} == {0}  # where they arrived
    assert all(b"partitioner=murmur2_random" in dict(r.headers)[ERROR_HEADER] for r in dead)
    assert [dict(r.headers)[SOURCE_HEADER] for r in dead] == [f"{messages_topic}:0:{o}".encode() for o in range(20, 25)]


async def test_a_partition_of_dead_letters_is_dead_lettered_once_however_often_the_analyzer_runs(
    settings: Settings, log: CountingLog
) -> None:
    p = partition_for(OWNER, settings.embedded_partitions)
    await log.append(settings.topic("messages"), [OutgoingRecord(OWNER, b"\x00 not avro %d" % i) for i in range(50)])
    for _ in range(3):
        assert await analyze_pending(log, agent(), settings, p) is not None
    assert len(await deadletters(log, settings)) == 50
    log.reads.clear()
    assert (await resume_points(log, settings, p))[settings.topic("messages")] == 50
    assert log.reads[settings.topic("messages")] == 0
    await publish(log, settings, [message(0)])  # and the next message is analysed
    assert (await analyze_pending(log, agent(), settings, p)).analyzed == 1
    assert len(await deadletters(log, settings)) == 50


async def test_a_crash_after_dead_lettering_writes_each_dead_letter_once(settings: Settings, log: CountingLog) -> None:
    """Garbage between messages; the analyzer dies before an analyses append, after the dead letters before it."""
    p = partition_for(OWNER, settings.embedded_partitions)
    messages_topic = settings.topic("messages")
    for i in range(30):
        await publish(log, settings, [message(i)])
        if i % 4 == 1:
            await log.append(messages_topic, [OutgoingRecord(OWNER, b"\x00 garbage %d" % i)])
    for crash_after in (1, 2, 3):
        log.fail_analyses_after = crash_after
        with pytest.raises(OSError, match="simulated crash"):
            await analyze_pending(log, agent(), settings, p, batch=5)
    log.fail_analyses_after = None
    await analyze_pending(log, agent(), settings, p, batch=5)
    dead = Counter(dict(r.headers)[SOURCE_HEADER] for r in await deadletters(log, settings))
    assert len(dead) == 8 and set(dead.values()) == {1}
    analysed = Counter(dict(r.headers)[SOURCE_HEADER] for r in await analyses(log, settings))
    assert len(analysed) == 30 and set(analysed.values()) == {1}
