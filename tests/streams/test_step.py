"""The analyse and fold steps (``streams.step``), as every runner calls them, without a runner.

An in-memory key ring and store, and an agent that embeds every text as the same vector: what is
under test is what each input turns into and what it says on the log, not the analysis.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Sequence

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import NoExtractor
from adamem.events import ChatMessage, MemoryForgotten, MessageAnalyzed
from adamem.feed import MemoryChanged
from adamem.ingest import load_messages
from adamem.partitioning import partition_for
from adamem.projections.folds.apply import Positioned
from adamem.projections.projector import Projector
from adamem.projections.store.memory import InMemoryStore
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams.keys import InMemoryKeyRing
from adamem.streams.log import LogRecord
from adamem.streams.memory_log import InMemoryLog
from adamem.streams.resume import FOR_HEADER, RESUME_HEADER, SOURCE_HEADER, ResumeTracker
from adamem.streams.step import (
    ERROR_HEADER,
    Analysed,
    analyse,
    classify,
    decode_analysis,
    emit,
    fold,
)
from tests.conftest import FlatEmbedder
from tests.streams.test_pipeline import SAMPLE


def _agent() -> MemoryAgent:
    return MemoryAgent(NoExtractor(), FlatEmbedder())


def _messages(settings: Settings) -> list[ChatMessage]:
    return [m for m in load_messages(SAMPLE, settings) if m.user_id == "alice"][:2]


def _input(settings: Settings, topic: str, offset: int, key: str, value: bytes, at: int = 0) -> LogRecord:
    return LogRecord(settings.topic(topic), partition_for(key, settings.partitions), offset, key, value, at)


def test_classify_names_why_a_record_is_dead_lettered(settings: Settings) -> None:
    [m, _] = _messages(settings)
    assert classify(_input(settings, "messages", 0, "alice", encode_event(m)), settings.partitions) == m
    assert "is not the event's owner" in str(classify(_input(settings, "messages", 0, "bob", encode_event(m)), 3))
    assert "DecodeError" in str(classify(_input(settings, "messages", 0, "alice", b"\x00 no avro"), 3))
    elsewhere = _input(settings, "messages", 0, "alice", encode_event(m))
    elsewhere = LogRecord(elsewhere.topic, (elsewhere.partition + 1) % 3, 0, "alice", elsewhere.value, 0)
    assert "partitioner" in str(classify(elsewhere, settings.partitions))


def test_a_batch_becomes_analyses_forwards_and_dead_letters_in_arrival_order(settings: Settings) -> None:
    keys = InMemoryKeyRing()
    first, second = _messages(settings)
    forget = MemoryForgotten(event_id=str(uuid.uuid4()), user_id="alice", scope="user", occurred_at=1)
    records = [
        _input(settings, "messages", 4, "alice", encode_event(first)),
        _input(settings, "messages", 5, "alice", b"\x00 no avro"),
        _input(settings, "control", 0, "alice", encode_event(forget)),
        _input(settings, "messages", 6, "alice", encode_event(second)),
    ]
    items = analyse(_agent(), [(r, classify(r, settings.partitions, keys)) for r in records])
    assert [type(i.analysis) for i in items] == [MessageAnalyzed, type(None), type(None), MessageAnalyzed]
    messages, control = settings.topic("messages"), settings.topic("control")
    tracker = ResumeTracker({messages: 4}, [(r.topic, r.offset) for r in records])
    out = list(emit(items, {records[0].partition: tracker}, settings, keys))

    assert [e.topic for e in out] == [settings.topic(t) for t in ("analyses", "deadletter", "analyses", "analyses")]
    assert [e.dead for e in out] == [False, True, False, False]
    resume = [json.loads(dict(e.record.headers)[RESUME_HEADER]) for e in out]
    assert resume == [
        {messages: 5, control: 0},
        {messages: 6, control: 0},
        {messages: 6, control: 1},
        {messages: 7, control: 1},
    ]
    assert [dict(e.record.headers)[SOURCE_HEADER] for e in out] == [
        f"{r.topic}:{r.partition}:{r.offset}".encode() for r in records
    ]
    dead = out[1].record
    assert (dead.key, dead.value, dead.partition) == ("alice", b"\x00 no avro", records[1].partition)
    assert b"DecodeError" in dict(dead.headers)[ERROR_HEADER]
    assert dict(dead.headers)[FOR_HEADER] == settings.topic("analyses").encode()
    assert decode_event(out[0].record.value, keys).message.event_id == first.event_id  # type: ignore[union-attr]
    assert decode_event(out[2].record.value, keys) == forget  # forwarded as it came
    assert keys.get(first.owner_id, first.event_id) is None  # the forget destroyed the owner's keys when emitted


def test_a_shredded_message_is_handled_but_writes_nothing(settings: Settings) -> None:
    [m, _] = _messages(settings)
    shredded = dataclasses.replace(m, shredded=True)
    rec = _input(settings, "messages", 0, "alice", b"")
    tracker = ResumeTracker({}, [(rec.topic, 0)])
    assert list(emit([Analysed(rec, shredded)], {rec.partition: tracker}, settings, InMemoryKeyRing())) == []
    assert tracker.points() == {settings.topic("messages"): 1}


def test_decode_analysis_reads_what_the_folds_read(settings: Settings) -> None:
    keys = InMemoryKeyRing()
    [m, _] = _messages(settings)
    [item] = analyse(_agent(), [(_input(settings, "messages", 0, "alice", encode_event(m)), m)])
    rec = LogRecord(settings.topic("analyses"), 1, 9, "alice", encode_event(item.analysis, keys), 0)
    read = decode_analysis(rec, keys)
    assert isinstance(read, Positioned) and (read.topic, read.partition, read.offset) == (rec.topic, 1, 9)
    assert read.event.event_id == item.analysis.event_id  # type: ignore[union-attr]
    raw = LogRecord(rec.topic, 1, 10, "alice", encode_event(m), 0)
    assert decode_analysis(raw, keys) == "AdaMemError: a raw ChatMessage does not belong on the analyses topic"


@pytest.mark.parametrize("feed", [True, False])
async def test_fold_commits_then_publishes_the_batch_change_events(settings: Settings, feed: bool) -> None:
    log = InMemoryLog(settings)
    [m, _] = _messages(settings)
    [item] = analyse(_agent(), [(_input(settings, "messages", 0, "alice", encode_event(m)), m)])
    assert item.analysis is not None
    p = partition_for("alice", settings.partitions)
    store = InMemoryStore()
    store.bind(settings.partitions)
    projector = Projector(store, feed=feed)
    heard: list[tuple[Sequence[MemoryChanged], int]] = []

    async def publish(changes: Sequence[MemoryChanged], reach: int) -> None:
        heard.append((changes, reach))

    batch = [Positioned(item.analysis, settings.topic("analyses"), p, 3)]
    result = await fold(log, projector, settings, p, batch, 5, publish)
    assert (result.applied, result.reach) == (1, 5)
    assert store.checkpoint(p) == {settings.topic("analyses"): 5}
    assert [r.id for r in store.rows("messages", m.owner_id)]
    assert len(heard) == 1 and heard[0][1] == 5 and bool(heard[0][0]) is feed
    again = await fold(log, projector, settings, p, batch, 5, publish)
    assert (again.applied, again.skipped) == (0, 1)  # below the checkpoint: changes nothing
