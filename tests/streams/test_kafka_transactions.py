"""Kafka transactions of the analyze step, on the real broker.

* A partition's transactions belong to the last worker that claimed them: an older claimant's
  commit is refused (``LogFenced``), a transaction it had open is aborted by the broker, and
  readers (``read_committed``) see only the committed records and the offsets committed with them.
* ``CommittedEnds`` moves a reader's position past transaction markers and aborted records, never
  past a committed record.
* The real worker process never folds an aborted analysis, and its checkpoints reach the end
  offsets (markers included) once it has caught up.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from adamem.errors import LogFenced
from adamem.events import MessageAnalyzed
from adamem.ingest import load_messages
from adamem.partitioning import partition_for
from adamem.projections.store.lance import LanceStore
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.kafka_log import KafkaLog
from adamem.streams.kafka_transactions import CommittedEnds, PartitionTransactions, transactional_id
from adamem.streams.publish import publish_messages
from tests.streams.test_crash_safety import SAMPLE, Workers, _agent, _archive, _snapshot, _wait_for


async def _values(log: KafkaLog, topic: str, partition: int) -> list[bytes]:
    return [rec.value async for rec in log.read(topic, from_offsets={partition: 0}) if rec.partition == partition]


async def _group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        found = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()}


@pytest.mark.kafka
async def test_the_last_claim_owns_a_partitions_transactions(settings: Settings, kafka_bootstrap: str) -> None:
    log = KafkaLog(kafka_bootstrap, settings)
    await log.start()
    group = f"{settings.topic_prefix}-worker"
    analyses, messages = settings.topic("analyses"), settings.topic("messages")
    old, new = (
        PartitionTransactions(kafka_bootstrap, settings, group),
        PartitionTransactions(kafka_bootstrap, settings, group),
    )
    try:
        await old.claim([1])
        await old.commit(1, [(analyses, b"k", b"old-1", [])], {messages: 1})
        await new.claim([1])  # the partition moved: the new owner's producer fences the old one
        with pytest.raises(LogFenced):
            await old.commit(1, [(analyses, b"k", b"old-2", [])], {messages: 2})
        assert not old.holds(1) and new.holds(1)
        await new.commit(1, [(analyses, b"k", b"new-2", []), (analyses, b"k", b"new-3", [])], {messages: 3})
        assert await _values(log, analyses, 1) == [b"old-1", b"new-2", b"new-3"]
        assert (await _group_offsets(kafka_bootstrap, group))[(messages, 1)] == 3  # committed with the records
    finally:
        await old.stop()
        await new.stop()
        await log.stop()


@pytest.mark.kafka
async def test_an_open_transaction_of_a_fenced_worker_is_aborted_and_skipped(
    settings: Settings, kafka_bootstrap: str
) -> None:
    log = KafkaLog(kafka_bootstrap, settings)
    await log.start()
    group = f"{settings.topic_prefix}-worker"
    analyses = settings.topic("analyses")
    # A worker that was paused inside its transaction: records sent, not committed.
    zombie = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=transactional_id(group, 0))
    await zombie.start()
    owner = PartitionTransactions(kafka_bootstrap, settings, group)
    ends = CommittedEnds(kafka_bootstrap, settings)
    try:
        await zombie.begin_transaction()
        await (await zombie.send(analyses, b"zombie", key=b"k", partition=0))
        await owner.claim([0])  # returns once the broker aborted the zombie's transaction
        await owner.commit(0, [(analyses, b"k", b"owner", [])], {})
        assert await _values(log, analyses, 0) == [b"owner"]
        end = (await log.end_offsets(analyses))[0]
        # zombie record, abort marker, owner record, commit marker
        assert end == 4
        assert await ends.resume_at(analyses, 0, 0) == 0  # the owner's record is committed there
        assert await ends.resume_at(analyses, 0, 3) == end  # only the marker follows the last record
        assert await ends.resume_at(analyses, 0, end) == end
    finally:
        await zombie.stop()
        await owner.stop()
        await ends.stop()
        await log.stop()


@pytest.mark.kafka
async def test_the_worker_never_folds_an_aborted_analysis(
    settings: Settings, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = dataclasses.replace(settings, partitions=4)
    messages = load_messages(SAMPLE, settings)
    published, unpublished = messages[:-1], messages[-1]
    store = tmp_path / "live"
    log = KafkaLog(kafka_bootstrap, settings)
    await log.start()
    workers = Workers(tmp_path)
    aborted = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{settings.topic_prefix}-aborted")
    await aborted.start()
    try:
        # An analysis of a message never published, in a transaction that is aborted.
        (analysis,) = _agent().analyze([unpublished])
        assert isinstance(analysis, MessageAnalyzed)
        partition = partition_for(unpublished.user_id, settings.partitions)
        await aborted.begin_transaction()
        key = unpublished.user_id.encode()
        await (await aborted.send(settings.topic("analyses"), encode_event(analysis), key=key, partition=partition))
        await aborted.abort_transaction()
        await publish_messages(log, published, settings)
        workers.start(kafka_bootstrap, settings, store, tmp_path / "worker.log")
        # done: every input analysed, and every shard's checkpoint at its partition's end offset (past markers)
        await _wait_for(log, settings, store, lambda p: p.done, 300, "the worker did not catch up")
        workers.stop_all()
        live = _snapshot(LanceStore(str(store), read_only=True))
        ends = await log.end_offsets(settings.topic("analyses"))
        reader = LanceStore(str(store), read_only=True)
        checkpoints = {p: reader.checkpoint(p).get(settings.topic("analyses"), 0) for p in ends}
    finally:
        workers.stop_all()
        await aborted.stop()
        await log.stop()
    assert _archive(live) == sorted(m.event_id for m in published)  # the aborted analysis is not archived
    assert unpublished.event_id not in {r.id for rows in live.values() for r in rows}
    assert checkpoints == ends
    assert ends[partition] > sum(1 for m in published if partition_for(m.user_id, settings.partitions) == partition)
