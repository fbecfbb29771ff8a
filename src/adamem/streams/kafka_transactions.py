"""Kafka transactions of the worker: what the analyze step publishes, and where a reader may resume.

``PartitionTransactions`` keeps one transactional producer per input partition, its
transactional id naming the consumer group and the partition. The worker starts (``claim``) that
producer before it reads how far the partition is analysed; starting it fences every older
producer with the same id, and the broker aborts whatever such a producer had begun. A worker that lost the partition
while it was paused or busy (a zombie) therefore cannot publish its batch: its ``commit`` fails
with ``LogFenced``. Each ``commit`` puts a partition's analyses and dead letters, and the consumer
offsets of the input records they account for, in one transaction: all of it is visible to
``read_committed`` readers, or none.

``CommittedEnds`` answers where a reader of a partition may record its position after the last
record it handled: transaction markers and aborted records occupy offsets but are never
delivered, so a projection that reached the last committed record records the end offset past
them (else it would look one marker behind the log forever).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from adamem.errors import LogError, LogFenced
from adamem.settings import Settings
from adamem.streams.kafka_log import start_client

__all__ = ["CommittedEnds", "Outgoing", "PartitionTransactions", "transactional_id"]

log = logging.getLogger("adamem.worker")

Outgoing = tuple[str, bytes, bytes, list[tuple[str, bytes]]]
"""One record to publish: (topic, key, value, headers), to the partition of the transaction."""


def transactional_id(group: str, partition: int) -> str:
    """The transactional id of a consumer group's analyze step on one input partition."""
    return f"{group}-analyze-p{partition}"


class PartitionTransactions:
    """Transactional producers of the partitions this worker was assigned, one per partition."""

    def __init__(self, bootstrap: str, settings: Settings, group: str) -> None:
        self._bootstrap = bootstrap
        self._settings = settings
        self._group = group
        self._producers: dict[int, AIOKafkaProducer] = {}

    def holds(self, partition: int) -> bool:
        """True when this worker claimed the partition (and was not fenced since)."""
        return partition in self._producers

    async def claim(self, partitions: list[int]) -> None:
        """Start the producers of newly assigned partitions: every older producer of theirs is fenced.

        Returns once the broker has finished (aborted or committed) any transaction an older
        producer had open, so what the log holds afterwards is final for those partitions.
        """
        todo = [p for p in partitions if p not in self._producers]
        made = await asyncio.gather(*(self._start(p) for p in todo), return_exceptions=True)
        failed = []
        for p, producer in zip(todo, made, strict=True):
            if isinstance(producer, AIOKafkaProducer):
                self._producers[p] = producer
            else:
                failed.append(f"p{p}: {producer}")
        if failed:
            raise LogError(f"could not claim the transactions of {', '.join(failed)} on {self._bootstrap}")

    async def _start(self, partition: int) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            transactional_id=transactional_id(self._group, partition),
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            request_timeout_ms=int(self._settings.kafka_timeout_s * 1000),
            # A zombie's open transaction is aborted by the broker after this at the latest.
            transaction_timeout_ms=int(max(10.0, 2 * self._settings.kafka_timeout_s) * 1000),
        )
        await start_client(producer.start(), producer.stop, self._settings.kafka_timeout_s)  # InitProducerId: fences
        return producer

    async def release(self, partitions: list[int]) -> None:
        """Stop the producers of revoked partitions (their next owner fences them anyway)."""
        for p in partitions:
            producer = self._producers.pop(p, None)
            if producer is not None:
                with contextlib.suppress(Exception):
                    await producer.stop()
                _retrieve_failure(producer)

    async def stop(self) -> None:
        """Stop every producer."""
        await self.release(sorted(self._producers))

    async def commit(self, partition: int, records: list[Outgoing], offsets: dict[str, int]) -> None:
        """Publish ``records`` on ``partition`` and commit the input ``offsets`` (topic → next offset), atomically.

        Raises ``LogFenced`` when another worker claimed the partition since, and ``LogError`` when
        the broker failed; either way nothing of it is visible and the producer is dropped: the
        caller claims the partition again, and reads what the log holds then, before it retries.
        """
        producer = self._producers.get(partition)
        if producer is None:
            raise LogFenced(f"partition {partition} is not claimed by this worker; its new owner publishes it")
        try:
            await asyncio.wait_for(self._transaction(producer, partition, records, offsets), self._timeout())
        except ProducerFenced as exc:
            await self.release([partition])
            raise LogFenced(
                f"the transactions of partition {partition} ({transactional_id(self._group, partition)}) "
                "were claimed by another worker since this one claimed them"
            ) from exc
        except (KafkaError, TimeoutError, OSError) as exc:
            # Its state is unknown: it is dropped, and the next claim (same id) aborts what it left open.
            await self.release([partition])
            raise LogError(f"the transaction of partition {partition} failed and was aborted: {exc!r}") from exc

    def _timeout(self) -> float:
        return 2 * self._settings.kafka_timeout_s

    async def _transaction(
        self, producer: AIOKafkaProducer, partition: int, records: list[Outgoing], offsets: dict[str, int]
    ) -> None:
        await producer.begin_transaction()
        futures: list[asyncio.Future[object]] = []
        try:
            for topic, key, value, headers in records:
                futures.append(await producer.send(topic, value=value, key=key, partition=partition, headers=headers))
            if offsets:
                committed = {TopicPartition(t, partition): o for t, o in offsets.items()}
                await producer.send_offsets_to_transaction(committed, self._group)
            await asyncio.gather(*futures)
            await producer.commit_transaction()
        except BaseException as exc:
            await asyncio.gather(*futures, return_exceptions=True)  # each send's outcome is retrieved
            if not isinstance(exc, ProducerFenced):  # a fenced one has nothing to abort: the broker did
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(producer.abort_transaction(), self._settings.kafka_timeout_s)
            raise


def _retrieve_failure(producer: AIOKafkaProducer) -> None:
    """Mark a fenced producer's last transaction outcome as seen (aiokafka keeps it in a future nobody awaits)."""
    waiter = getattr(getattr(producer, "_txn_manager", None), "_transaction_waiter", None)
    if isinstance(waiter, asyncio.Future) and waiter.done() and not waiter.cancelled():
        waiter.exception()


class CommittedEnds:
    """Where a ``read_committed`` reader of a partition may resume: past markers and aborted records."""

    def __init__(self, bootstrap: str, settings: Settings) -> None:
        self._bootstrap = bootstrap
        self._settings = settings
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap,
                group_id=None,
                enable_auto_commit=False,
                isolation_level="read_committed",
                request_timeout_ms=int(self._settings.kafka_timeout_s * 1000),
                retry_backoff_ms=10,
                fetch_max_wait_ms=50,
            )
            await start_client(consumer.start(), consumer.stop, self._settings.kafka_timeout_s)
            self._consumer = consumer
        return self._consumer

    async def resume_at(self, topic: str, partition: int, start: int, wait_s: float | None = None) -> int:
        """``start``, or the partition's end offset when no committed record lies in ``[start, end)``.

        ``start`` is the offset after the last record the caller handled. When records it has not
        seen yet are committed there (or the answer does not come within ``wait_s``, default the
        Kafka timeout: the answer comes as soon as the broker's fetch does), ``start``.
        """
        async with self._lock:
            try:
                consumer = await self._started()
                tp = TopicPartition(topic, partition)
                end = int((await consumer.end_offsets([tp]))[tp])  # the last stable offset
                if end <= start:
                    return start
                consumer.assign([tp])
                consumer.seek(tp, start)
                deadline = time.monotonic() + (self._settings.kafka_timeout_s if wait_s is None else wait_s)
                while time.monotonic() < deadline:
                    if (await consumer.getmany(tp, timeout_ms=20)).get(tp):
                        return start  # a committed record: the caller is going to receive it
                    if await consumer.position(tp) >= end:
                        return end
            except (KafkaError, TimeoutError, OSError) as exc:
                log.info("no resume point past p%d:%d of %s: %s", partition, start, topic, exc)
                await self.stop()
            return start

    async def stop(self) -> None:
        """Disconnect."""
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            with contextlib.suppress(Exception):
                await consumer.stop()
