"""The project agent across a rebalance, at the level of ``WorkerState``: two workers, one shard, one log.

Faust lets a rebalance revoke partitions while a batch runs, and a paused worker goes on with its
batch when it wakes. These tests drive that order of events deterministically (no broker, no
signals, no timing): a stale batch never claims the shard of a partition its worker lost, the
partition's real owner folds every message, and no group offset passes an event left unfolded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faust.types import TP
from faust.types.tuples import Message

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import NoExtractor
from adamem.ingest import load_messages
from adamem.projections import projector as projector_module
from adamem.projections.folds.apply import Positioned
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.projections.store.lance import LanceStore
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams import worker_state
from adamem.streams.log import OutgoingRecord
from adamem.streams.memory_log import InMemoryLog
from adamem.streams.worker import create_app
from adamem.streams.worker_state import WorkerState, WorkerTopics
from tests.conftest import FlatEmbedder
from tests.streams.test_worker import SAMPLE, faust_apps  # noqa: F401  (a fixture)

OWNER = "alice"


@dataclasses.dataclass(frozen=True)
class _Event:
    """What the agents read of a Faust event: its message."""

    message: Message


class _Topic:
    """A Faust topic's ``send`` that the broker acknowledges at once; what was sent is kept."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, **kwargs: Any) -> asyncio.Future[None]:
        self.sent.append(kwargs)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


@dataclasses.dataclass
class _Group:
    """One log, one store folder, and the analyses partition 0 the workers take from each other."""

    settings: Settings
    log: InMemoryLog
    root: Path
    values: list[bytes]

    @property
    def topic(self) -> str:
        return self.settings.topic("analyses")

    def worker(self, **kwargs: Any) -> WorkerState:
        """A worker of the group with its own store handles, as a process of its own has."""
        store = open_store(str(self.root))
        return WorkerState(
            self.settings,
            "127.0.0.1:1",
            "group",
            lambda: MemoryAgent(NoExtractor(), FlatEmbedder()),
            lambda: Projector(store, feed=False),
            WorkerTopics(_Topic(), _Topic(), _Topic(), _Topic()),
            log_reader=lambda: self.log,
            **kwargs,
        )

    def batch(self, start: int, end: int, generation: int | None = None) -> list[_Event]:
        """The analyses at offsets ``start`` to ``end`` as the consumer delivers them."""
        return [
            _Event(
                Message(self.topic, 0, n, 0.0, 0, [], OWNER.encode(), self.values[n], None, generation_id=generation)
            )
            for n in range(start, end)
        ]

    def shard_epoch(self) -> tuple[int, int]:
        """The owner epoch of shard p0's checkpoint, and the analyses offset it reaches."""
        shard = LanceStore(str(self.root), read_only=True)._shard(0, create=False)
        row = shard.checkpoint_row() if shard is not None else None
        assert row is not None
        return int(row["epoch"]), LanceStore(str(self.root), read_only=True).checkpoint(0).get(self.topic, 0)

    def archived(self) -> int:
        """The owner's messages in the archive (every analysis folded archives its message once)."""
        return len(LanceStore(str(self.root), read_only=True).rows("messages", f"default:{OWNER}"))


@pytest.fixture
async def group(settings: Settings, tmp_path: Path) -> Any:
    settings = dataclasses.replace(settings, partitions=1, embedded_partitions=1, worker_transactions=False)
    log = InMemoryLog(settings)
    await log.start()
    messages = [m for m in load_messages(SAMPLE, settings) if m.user_id == OWNER][:6]
    analyses = MemoryAgent(NoExtractor(), FlatEmbedder()).analyze(messages)
    values = [encode_event(a, log.keyring) for a in analyses]
    await log.append(settings.topic("analyses"), [OutgoingRecord(OWNER, v) for v in values])
    yield _Group(settings, log, tmp_path / "store", values)
    await log.stop()


def _meanwhile(run: Callable[[], Any]) -> Callable[[], None]:
    """A ``switched_generation`` that runs the coroutine ``run()`` on the event loop before it answers.

    ``project`` calls it first, in a thread, so what ``run`` does happens while the batch runs.
    """
    loop = asyncio.get_running_loop()

    def switched_generation() -> None:
        asyncio.run_coroutine_threadsafe(run(), loop).result()

    return switched_generation


async def test_a_worker_whose_partition_is_revoked_mid_batch_leaves_the_shard_to_its_new_owner(
    group: _Group,
) -> None:
    old, new = group.worker(), group.worker()
    tp = TP(group.topic, 0)
    await old.assigned(None, [tp])
    await old.project(group.batch(0, 2))  # the old owner opened (claimed) the shard and folded two
    claimed_by_old, _ = group.shard_epoch()

    async def rebalance() -> None:
        await old.revoked(None, [tp])
        await new.assigned(None, [tp])
        await asyncio.to_thread(new.projector().store.checkpoint, 0)  # the new owner opens (claims) the shard

    old.switched_generation = _meanwhile(rebalance)  # type: ignore[method-assign]
    stale = group.batch(2, 4)
    await old.project(stale)  # begun before the rebalance, handled after it
    epoch, reach = group.shard_epoch()
    assert epoch == claimed_by_old + 1, "the stale batch claimed the shard from its new owner"
    assert reach == 2

    await new.project(group.batch(2, 6))  # the new owner reads on from the group's committed offset
    assert group.shard_epoch() == (claimed_by_old + 1, 6)
    assert group.archived() == len(group.values)
    assert not any(old.acks(e.message) for e in stale)  # the group's offset stays below what was not folded


async def test_a_rebalance_during_a_fold_waits_for_the_fold_and_the_shard_holds_the_uninterrupted_fold(
    group: _Group, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faust runs the rebalance handlers on the event loop while a batch folds on a thread. The worker keeps
    its partition (revoked, then assigned again) in the middle of a batch of one owner's events: the handlers
    wait for the fold, so its states are not forgotten (and read again from the store without the batch's
    first events) half-way, nor the shard released and claimed anew under it."""
    worker = group.worker()
    tp = TP(group.topic, 0)
    await worker.assigned(None, [tp])
    loop = asyncio.get_running_loop()
    begun, ended = threading.Event(), threading.Event()
    applied: list[int] = []
    apply = projector_module.apply

    async def rebalance() -> None:
        begun.set()
        await worker.revoked(None, [tp])
        await worker.assigned(None, [tp])
        ended.set()

    def apply_amid_a_rebalance(state: Any, positioned: Any, params: Any) -> Any:
        applied.append(positioned.offset)
        if len(applied) == 3:  # half-way through the batch, the rebalance arrives
            asyncio.run_coroutine_threadsafe(rebalance(), loop)
            begun.wait(10)
            ended.wait(1)  # a handler that does not wait for the fold has run by now
        return apply(state, positioned, params)

    monkeypatch.setattr(projector_module, "apply", apply_amid_a_rebalance)
    await worker.project(group.batch(0, 6))
    assert await asyncio.to_thread(ended.wait, 10), "the rebalance did not finish after the batch"
    assert applied == list(range(6))

    monkeypatch.setattr(projector_module, "apply", apply)
    alone = group.root.parent / "alone"
    store = open_store(str(alone))
    store.bind(group.settings.partitions)
    Projector(store, feed=False).apply_batch(0, group.topic, [_positioned(group, n) for n in range(6)])
    owner = f"default:{OWNER}"
    live = sorted(LanceStore(str(group.root), read_only=True).load_owner(owner), key=lambda r: (r.TABLE, r.id))
    uninterrupted = sorted(LanceStore(str(alone), read_only=True).load_owner(owner), key=lambda r: (r.TABLE, r.id))
    assert [(r.TABLE, r.id) for r in live] == [(r.TABLE, r.id) for r in uninterrupted]
    assert live == uninterrupted
    assert group.shard_epoch() == (1, 6), "the batch's shard was claimed anew under it"


async def test_a_view_switched_to_during_a_fold_gets_every_event_and_not_the_old_views_states(
    group: _Group, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild switches ``CURRENT`` to its view while a live batch folds, the view behind what the worker
    folded (a rebuild catches up, then the worker folds on until the switch). The batch ends in the view it began
    in; the next one follows the switch and fills the new view's gap from the log: nothing is folded into the new
    view on states read from the old one, and no event is skipped there."""
    worker = group.worker()
    await worker.assigned(None, [TP(group.topic, 0)])
    await worker.project(group.batch(0, 2))
    rebuilt = LanceStore(str(group.root)).open_view("rebuilt")
    rebuilt.bind(group.settings.partitions)
    Projector(rebuilt, feed=False).apply_batch(0, group.topic, [_positioned(group, 0)])  # caught up to offset 1
    rebuilt.close()
    catch_up = worker._catch_up_feed

    async def switch_then_catch_up(partition: int) -> None:  # after the batch read its checkpoint, before the fold
        LanceStore(str(group.root)).switch_view("rebuilt")
        await catch_up(partition)

    monkeypatch.setattr(worker, "_catch_up_feed", switch_then_catch_up)
    await worker.project(group.batch(2, 4))
    monkeypatch.setattr(worker, "_catch_up_feed", catch_up)
    await worker.project(group.batch(4, 6))

    alone = group.root.parent / "alone"
    store = open_store(str(alone))
    store.bind(group.settings.partitions)
    Projector(store, feed=False).apply_batch(0, group.topic, [_positioned(group, n) for n in range(6)])
    owner = f"default:{OWNER}"
    view = LanceStore(str(group.root), read_only=True)
    assert view.view == "rebuilt"
    live = sorted(view.load_owner(owner), key=lambda r: (r.TABLE, r.id))
    uninterrupted = sorted(LanceStore(str(alone), read_only=True).load_owner(owner), key=lambda r: (r.TABLE, r.id))
    assert [(r.TABLE, r.id) for r in live] == [(r.TABLE, r.id) for r in uninterrupted]
    assert live == uninterrupted
    assert view.checkpoint(0).get(group.topic) == 6


def _positioned(group: _Group, offset: int) -> Any:
    """The analysis at ``offset`` as the projector folds it."""
    return Positioned(decode_event(group.values[offset], group.log.keyring), group.topic, 0, offset)


async def test_an_owner_fenced_by_a_stale_claim_claims_the_shard_back_and_folds_every_message(
    group: _Group, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paused worker that has not yet heard of the rebalance claims the shard; the real owner folds anyway."""
    monkeypatch.setattr(worker_state, "RECLAIM_WAIT_S", 0.0, raising=False)
    stale, owner = group.worker(), group.worker()
    tp = TP(group.topic, 0)
    await stale.assigned(None, [tp])
    await owner.assigned(None, [tp])  # the stale worker was paused past its session timeout
    await owner.project(group.batch(0, 2))
    await stale.project(group.batch(2, 4))  # woken, before its consumer heard: it claims the shard
    claimed_by_stale, _ = group.shard_epoch()

    batch = group.batch(2, 6)
    await owner.project(batch)  # refused: the stale worker holds the shard's claim
    epoch, reach = group.shard_epoch()
    assert epoch > claimed_by_stale, "the owner did not claim the shard back"
    assert reach == 6 and group.archived() == len(group.values)
    assert all(owner.acks(e.message) for e in batch)


async def test_events_fetched_in_an_older_consumer_generation_are_neither_folded_nor_acked(
    group: _Group,
) -> None:
    """A batch that mixes events of two consumer generations folds the current one's only: no checkpoint
    passes an offset the batch does not hold."""
    generation = [1]
    worker = group.worker(generation=lambda: generation[0])
    tp = TP(group.topic, 0)
    await worker.assigned(None, [tp])
    await worker.project(group.batch(0, 2, generation=1))
    await worker.revoked(None, [tp])
    generation[0] = 2  # the rebalance gave the partition back: the consumer reads on from the committed offset 2
    await worker.assigned(None, [tp])
    old = group.batch(5, 6, generation=1)  # still in the take buffer from before the rebalance
    now = group.batch(2, 4, generation=2)
    await worker.project(old + now)
    assert group.shard_epoch()[1] == 4, "the checkpoint passed offset 4, which no batch folded"
    assert [worker.acks(e.message) for e in old + now] == [False, True, True]
    await worker.project(group.batch(4, 6, generation=2))  # offset 5 delivered again, in this generation
    assert group.shard_epoch()[1] == 6 and group.archived() == len(group.values)


async def test_a_batch_holding_a_message_twice_or_from_an_older_generation_analyses_it_once(
    group: _Group,
) -> None:
    """A worker given a partition back reads it again from the group's offset while events fetched before the
    rebalance are still in its take buffer: the analyses topic gets one analysis per message."""
    settings = group.settings
    topic = settings.topic("messages")
    messages = [m for m in load_messages(SAMPLE, settings) if m.user_id == OWNER][:4]
    values = [encode_event(m, group.log.keyring) for m in messages]
    await group.log.append(topic, [OutgoingRecord(OWNER, v) for v in values])

    def batch(start: int, end: int, generation: int) -> list[_Event]:
        return [
            _Event(Message(topic, 0, n, 0.0, 0, [], OWNER.encode(), values[n], None, generation_id=generation))
            for n in range(start, end)
        ]

    generation = [1]
    worker = group.worker(generation=lambda: generation[0])
    await worker.assigned(None, [TP(topic, 0)])
    generation[0] = 2  # a rebalance gave the partition back; the consumer reads on from the group's offset 0
    await worker.assigned(None, [TP(topic, 0)])
    await worker.analyze(batch(0, 2, 1) + batch(0, 3, 2) + batch(2, 3, 2))
    await worker.analyze(batch(3, 4, 2) + batch(3, 4, 2))
    sent = worker.topics.analyses.sent  # type: ignore[attr-defined]
    analysed = [decode_event(s["value"], group.log.keyring) for s in sent]
    assert [a.message.event_id for a in analysed] == [m.event_id for m in messages]


async def test_the_worker_consumer_records_no_ack_the_worker_withholds(
    settings: Settings,
    tmp_path: Path,
    faust_apps: list[Any],  # noqa: F811  (the fixture of tests.streams.test_worker)
) -> None:
    """Faust's take buffer acks a whole batch; the consumer records only the acks ``WorkerState.acks`` allows."""
    settings = dataclasses.replace(settings, partitions=1)
    app = create_app(
        settings,
        "127.0.0.1:1",
        lambda: MemoryAgent(NoExtractor(), FlatEmbedder()),
        lambda: Projector(open_store(str(tmp_path / "store")), feed=False),
    )
    app.finalize()
    faust_apps.append(app)
    consumer = app.consumer
    tp = TP(settings.topic("analyses"), 0)
    consumer.app.topics._acking_topics.add(tp.topic)  # as the project agent's topic is once the app runs
    await app.adamem_state.assigned(None, [tp])  # type: ignore[attr-defined]
    app.consumer_generation_id = 2

    def message(offset: int, generation: int) -> Message:
        return Message(tp.topic, 0, offset, 0.0, 0, [], b"alice", b"", None, tp=tp, generation_id=generation)

    app.adamem_state.unfolded[0].add(3)  # type: ignore[attr-defined]  # its batch was given up
    stale, given_up, folded = message(9, 1), message(3, 2), message(2, 2)
    assert [consumer.ack(m) for m in (stale, given_up, folded)] == [False, False, True]
    assert stale.acked and given_up.acked  # acked for Faust's stream, never counted toward the offset
    assert dict(consumer._acked) == {tp: [2]}
