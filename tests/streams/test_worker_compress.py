"""The Faust worker proposes compressions: after a committed batch, to the control topic, folded like any control event.

First at the level of ``WorkerState`` over the in-memory log (no broker): what the project agent
sends, that it folds once it comes back through the analyze step, that replay gives the same
rows, and that a failed proposal leaves the batch committed. Then the real worker process on the
real broker, English and Chinese owners alike.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pytest
from faust.types import TP
from faust.types.tuples import Message

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.events import MemoryCompressed, message_event_id
from adamem.ingest import load_messages
from adamem.partitioning import partition_for
from adamem.projections.folds.rows import EpisodicRow
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.projections.store.lance import LanceStore
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.keys import keystore_for
from adamem.streams.log import EventLog, OutgoingRecord
from adamem.streams.memory_log import InMemoryLog
from adamem.streams.pipeline import analyze_pending, run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.worker_state import WorkerState, WorkerTopics
from tests.conftest import FlatEmbedder
from tests.streams.test_compress import chat_jsonl
from tests.streams.test_worker import _caught_up, _snapshot, _start_worker, _stop
from tests.streams.test_worker_rebalance import _Event, _Topic

OWNERS = ("default:alice", "default:wang")


def _agent() -> MemoryAgent:
    return MemoryAgent(RuleExtractor(), FlatEmbedder())


async def _analyses_from(log: EventLog, settings: Settings, start: int) -> list[_Event]:
    """The analyses of partition 0 from ``start`` on, as the consumer delivers them to the project agent."""
    topic = settings.topic("analyses")
    return [
        _Event(Message(topic, 0, r.offset, 0.0, 0, [], r.key.encode(), r.value, None))
        async for r in log.read(topic, from_offsets={0: start})
    ]


def _summaries(store: Any, owner: str) -> list[EpisodicRow]:
    return [r for r in store.rows("episodic", owner) if isinstance(r, EpisodicRow) and r.type == "summary"]


def _compressed_runs(store: Any) -> dict[str, int]:
    """Per owner, how many records its one summary compressed; each of them ``compressed`` and naming it."""
    out = {}
    for owner in OWNERS:
        [summary] = _summaries(store, owner)
        assert summary.key == "running"
        sources = [r for r in store.rows("episodic", owner) if isinstance(r, EpisodicRow) and r.superseded_by]
        assert {r.status for r in sources} == {"compressed"} and {r.superseded_by for r in sources} == {summary.id}
        assert sorted(summary.source_message_ids) == sorted(m for r in sources for m in r.source_message_ids)
        out[owner] = len(sources)
    return out


async def _one_partition(settings: Settings, compression: str) -> tuple[Settings, InMemoryLog]:
    """Both owners' chats on a one-partition in-memory log, analysed (rules), not yet folded."""
    on = dataclasses.replace(
        settings, partitions=1, embedded_partitions=1, worker_transactions=False, compression=compression
    )
    log = InMemoryLog(on)
    await log.start()
    await publish_messages(log, load_messages(chat_jsonl(), on), on)
    await analyze_pending(log, _agent(), on, 0)
    return on, log


def _worker(settings: Settings, log: InMemoryLog, store: Any) -> WorkerState:
    return WorkerState(
        settings,
        "127.0.0.1:1",
        "group",
        _agent,
        lambda: Projector(store, feed=False),
        WorkerTopics(_Topic(), _Topic(), _Topic(), _Topic()),
        log_reader=lambda: log,
    )


async def test_the_project_agent_proposes_compressions_that_fold_once_and_replay_to_the_same_rows(
    settings: Settings, tmp_path: Path
) -> None:
    on, log = await _one_partition(settings, "rules")
    store = open_store(str(tmp_path / "store"))
    state = _worker(on, log, store)
    await state.assigned(None, [TP(on.topic("analyses"), 0)])
    first = await _analyses_from(log, on, 0)
    await state.project(first)
    control: _Topic = state.topics.control
    proposed = [decode_event(s["value"], log.keyring) for s in control.sent]
    assert sorted((e.owner_id, e.key) for e in proposed if isinstance(e, MemoryCompressed)) == [
        ("default:alice", "running"),
        ("default:wang", "running"),
    ]
    assert {s["partition"] for s in control.sent} == {0} and sorted(s["key"] for s in control.sent) == [
        b"alice",
        b"wang",
    ]
    assert not _summaries(store, "default:alice")  # proposed, not folded: it goes through the log first

    await state.project(first)  # a redelivery: nothing folded, nothing proposed again
    assert len(control.sent) == 2
    # Another of Alice's messages folds before the compressions come back: the same cluster, not sent again.
    [hello] = [m for m in load_messages(chat_jsonl(), on) if m.user_id == "alice" and m.message_id == "s5-1"]
    again = message_event_id(hello.tenant, hello.user_id, hello.conversation_id, "s6-1")
    await publish_messages(log, [dataclasses.replace(hello, event_id=again, message_id="s6-1")], on)
    await analyze_pending(log, _agent(), on, 0)
    await state.project(await _analyses_from(log, on, len(first)))
    assert len(control.sent) == 2 and len(store.rows("messages", "default:alice")) == 7
    assert state.proposed == {e.event_id for e in proposed if isinstance(e, MemoryCompressed)}

    # The control topic is the analyze agent's input: it forwards them, and the project agent folds them.
    await log.append(on.topic("control"), [OutgoingRecord(s["key"].decode(), s["value"]) for s in control.sent])
    await analyze_pending(log, _agent(), on, 0)
    await state.project(await _analyses_from(log, on, len(first) + 1))
    assert _compressed_runs(store) == {"default:alice": 5, "default:wang": 5}
    assert len(control.sent) == 2  # the compressed records call for no other compression
    assert state.proposed == set()  # met again on the analyses topic: nothing waits any more

    replay = open_store(str(tmp_path / "replay"))
    await run_pipeline(log, Projector(replay), _agent(), settings=dataclasses.replace(on, compression="off"))
    assert _snapshot(replay) == _snapshot(store)
    await log.stop()


async def test_a_failed_proposal_leaves_the_batch_committed(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``openai`` without an endpoint cannot propose: the worker says so and goes on; the batch stays folded."""
    on, log = await _one_partition(settings, "openai")
    store = open_store(str(tmp_path / "store"))
    state = _worker(on, log, store)
    await state.assigned(None, [TP(on.topic("analyses"), 0)])
    batch = await _analyses_from(log, on, 0)
    await state.project(batch)
    assert store.checkpoint(0).get(on.topic("analyses")) == len(batch) == 12
    assert all(state.acks(e.message) for e in batch)
    assert len(store.rows("episodic", "default:wang")) == 5
    assert state.topics.control.sent == []
    assert any("not proposed" in r.getMessage() and "ADAMEM_LLM_URL" in r.getMessage() for r in caplog.records)
    await log.stop()


async def test_a_worker_proposes_nothing_for_a_partition_it_lost_during_the_batch(
    settings: Settings, tmp_path: Path
) -> None:
    on, log = await _one_partition(settings, "rules")
    store = open_store(str(tmp_path / "store"))
    state = _worker(on, log, store)
    tp = TP(on.topic("analyses"), 0)
    await state.assigned(None, [tp])
    batch = await _analyses_from(log, on, 0)
    committed = state._fold

    async def fold_then_lose(*args: Any) -> set[str] | None:
        folded = await committed(*args)
        await state.revoked(None, [tp])  # the rebalance lands between the commit and the proposal
        return folded

    state._fold = fold_then_lose  # type: ignore[method-assign]
    await state.project(batch)
    assert store.checkpoint(0).get(on.topic("analyses")) == 12
    assert state.topics.control.sent == []
    await log.stop()


# ---- the real worker process against the real broker ------------------------------------------


async def _compressed(settings: Settings, bootstrap: str, store_path: Path, timeout: float) -> None:
    """Wait until the worker has folded a summary for every owner and has projected all there is."""
    deadline = time.monotonic() + timeout
    while True:
        await _caught_up(settings, bootstrap, store_path, 12, timeout=max(1.0, deadline - time.monotonic()))
        store = LanceStore(str(store_path), read_only=True)
        if all(_summaries(store, o) for o in OWNERS):
            await _caught_up(settings, bootstrap, store_path, 14, timeout=max(1.0, deadline - time.monotonic()))
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"no summary folded in {timeout}s: {[len(_summaries(store, o)) for o in OWNERS]}")
        await asyncio.sleep(1.0)


@pytest.mark.kafka
async def test_the_worker_compresses_with_rules_and_replay_gives_the_same_rows(
    settings: Settings, kafka_bootstrap: str, tmp_path: Path
) -> None:
    on = dataclasses.replace(settings, compression="rules")
    log = open_log(f"kafka://{kafka_bootstrap}", on)
    await log.start()
    await publish_messages(log, load_messages(chat_jsonl(), on), on)
    store_path = tmp_path / "worker-store"
    env = {
        **os.environ,
        "ADAMEM_LOG": f"kafka://{kafka_bootstrap}",
        "ADAMEM_TOPIC_PREFIX": on.topic_prefix,
        "ADAMEM_PARTITIONS": str(on.partitions),
        "ADAMEM_COMPRESSION": "rules",
    }
    worker = _start_worker(env, store_path, tmp_path / "worker.log")
    try:
        await _compressed(on, kafka_bootstrap, store_path, timeout=240)
    finally:
        _stop(worker)

    live = LanceStore(str(store_path), read_only=True)
    # All five runs when the worker folded them in one batch (the usual case: they are on the log before
    # it starts); a batch that ended after the fourth compresses four, and the fifth stays on its own.
    assert all(n >= 4 for n in _compressed_runs(live).values())
    keys = keystore_for(log, on)
    control = [(r, decode_event(r.value, keys)) async for r in log.read(on.topic("control"))]
    recorded = {e.event_id: (e.owner_id, r.partition) for r, e in control if isinstance(e, MemoryCompressed)}
    assert set(recorded.values()) == {(o, partition_for(o.split(":", 1)[1], on.partitions)) for o in OWNERS}

    # Replay equals live: the recorded compressions folded again in-process, the compressor never run.
    replay = open_store(str(tmp_path / "replay"))
    await run_pipeline(log, Projector(replay), _agent(), settings)
    await log.stop()
    assert _snapshot(replay) == _snapshot(live)
    assert _compressed_runs(replay) == _compressed_runs(live)
