"""``append_and_wait``: a write returns once the projections hold it, or says why not.

The in-process catch-up (embedded log) is exercised through every ``remember`` of the MCP and
LangChain tests. Here: the path of a log that other processes project (Kafka's workers), run on the
in-memory log (which passes the same log contract tests as Kafka) with a real pipeline following it
as the worker, over a real LanceDB store; and what happens when nobody projects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.core import append_and_wait
from adamem.errors import NotVisible
from adamem.ingest import load_messages
from adamem.owners import owner_key
from adamem.projections.folds.rows import MessageRow
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.log import OutgoingRecord
from adamem.streams.memory_log import InMemoryLog
from adamem.streams.pipeline import run_pipeline
from tests.conftest import FlatEmbedder


def _records(settings: Settings, user: str, texts: list[str]) -> tuple[list[str], list[OutgoingRecord]]:
    lines = [
        {"user_id": user, "speaker": user, "text": t, "occurred_at": 1_700_000_000_000 + i} for i, t in enumerate(texts)
    ]
    messages = load_messages("\n".join(json.dumps(x) for x in lines).encode(), settings, "test", "jsonl")
    return [m.event_id for m in messages], [OutgoingRecord(m.user_id, encode_event(m)) for m in messages]


async def test_a_write_waits_for_the_workers_checkpoint_and_is_visible_on_return(settings: Settings) -> None:
    settings = dataclasses.replace(settings, log_url="memory://")
    log = InMemoryLog(settings)
    await log.start()
    reader = open_store(settings.store, read_only=True)  # a reader sees every commit (a writer's handle would not)
    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_pipeline(
            log,
            Projector(open_store(settings.store)),
            MemoryAgent(RuleExtractor(), FlatEmbedder()),
            settings,
            follow=True,
            poll_s=0.05,
            stop=stop,
        )
    )
    try:
        for round_, user in enumerate(["una", "vic", "una"]):  # two owners, on their own partitions
            ids, records = _records(settings, user, [f"round {round_}: I like tea number {round_}", "and biscuits"])
            written = await append_and_wait(
                log, reader, settings, settings.topic("messages"), records, workers=True, timeout_s=120
            )
            [(partition, last)] = written[settings.topic("messages")].items()
            assert last == max(off for p, off in await _positions(log, settings, ids) if p == partition)
            visible = {r.id for r in reader.rows("messages", owner_key("default", user)) if isinstance(r, MessageRow)}
            assert set(ids) <= visible  # on return, not eventually
    finally:
        stop.set()
        await worker


async def _positions(log: InMemoryLog, settings: Settings, ids: list[str]) -> list[tuple[int, int]]:
    from adamem.schemas.serde import decode_event

    found = []
    async for rec in log.read(settings.topic("messages")):
        if getattr(decode_event(rec.value), "event_id", None) in ids:
            found.append((rec.partition, rec.offset))
    return found


async def test_a_write_nobody_projects_ends_with_a_clear_error(settings: Settings) -> None:
    settings = dataclasses.replace(settings, log_url="memory://")
    log = InMemoryLog(settings)
    await log.start()
    _, records = _records(settings, "wes", ["hello"])
    with pytest.raises(NotVisible, match=r"were not projected .* within 0.3 s.*adamem worker"):
        await append_and_wait(
            log,
            open_store(settings.store),
            settings,
            settings.topic("messages"),
            records,
            workers=True,
            timeout_s=0.3,
        )
    assert sum((await log.end_offsets(settings.topic("messages"))).values()) == 1  # the write itself stands


def test_remembered_text_is_sealed_on_the_log_and_a_forget_shreds_it(tmp_path_factory: pytest.TempPathFactory) -> None:
    """``remember`` seals like ``adamem publish``: the log's files never hold the text, and a message
    forget destroys its key (nothing of it is readable afterwards, by any replay)."""
    from pathlib import Path

    from adamem.memory import Memory
    from tests.api.conftest import build_store

    built = build_store(tmp_path_factory.mktemp("sealed"))
    marker = "my locker code is zebra-4471"
    handle = Memory(built)
    try:
        done = handle.remember("alice", [{"text": marker}])
        [event_id] = done.event_ids
        log_bytes = b"".join(p.read_bytes() for p in Path(built.log_url).rglob("*") if p.is_file())
        assert marker.encode() not in log_bytes and b"zebra-4471" not in log_bytes
        assert any(marker in item.content for item in handle.recall("alice", "What is my locker code?").items)
        handle.forget("alice", message=event_id)
        assert not any("zebra" in item.content for item in handle.recall("alice", "What is my locker code?").items)
    finally:
        handle.close()
