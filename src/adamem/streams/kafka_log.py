"""The Kafka adapter of the event log (aiokafka).

Topics are created by the project with explicit settings: every topic keyed by the memory owner
and co-partitioned (the same partition count), the event-store topics kept forever
(``retention.ms=-1``). Records go to the partition our own murmur2 partitioner picks — the same
one Kafka's Java client uses — so every client agrees where an owner lives.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError, TopicAlreadyExistsError

from adamem.errors import BrokerUnavailable, LogError
from adamem.settings import Settings
from adamem.streams.log import TOPICS, LogRecord, OutgoingRecord, partition_for

__all__ = ["KafkaLog", "start_client", "topic_configs"]


async def start_client(start: Coroutine[Any, Any, Any], stop: Callable[[], Awaitable[Any]], timeout_s: float) -> None:
    """Start an aiokafka client within ``timeout_s``; a start that fails or is cancelled stops it.

    A caller cancelled midway waits for the start to settle first: aiokafka leaves the connection it
    bootstraps from open when its start is cancelled between connecting and reading the metadata.
    """
    task = asyncio.ensure_future(asyncio.wait_for(start, timeout_s))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await task
        with contextlib.suppress(Exception):  # the cancellation is what the caller hears
            await asyncio.shield(stop())
        raise
    except BaseException:
        with contextlib.suppress(Exception):  # the start's own error is what the caller hears
            await stop()
        raise


def topic_configs(name: str) -> dict[str, str]:
    """Explicit settings of each project topic: the event store is kept forever."""
    forever = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
    if name in ("messages", "analyses", "control", "audit"):  # audit: the owner's record of reads under grants
        return forever
    if name == "changes":  # derived: a subscriber further behind recomputes it from the log (streams.feed)
        return {"retention.ms": str(7 * 24 * 3600 * 1000), "cleanup.policy": "delete"}
    return {"retention.ms": str(30 * 24 * 3600 * 1000), "cleanup.policy": "delete"}  # deadletter: 30 days


class KafkaLog:
    """The event log on a Kafka cluster."""

    def __init__(self, bootstrap: str, settings: Settings) -> None:
        self.bootstrap = bootstrap
        self.url = f"kafka://{bootstrap}"
        self._settings = settings
        self._producer: AIOKafkaProducer | None = None
        self._partitions: dict[str, int] = {}

    def _unavailable(self, exc: BaseException) -> BrokerUnavailable:
        return BrokerUnavailable(
            f"no Kafka broker answers at {self.bootstrap} ({exc}); start one with "
            "`bash deploy/kafka.sh start` or use an embedded log folder"
        )

    async def start(self) -> None:
        """Connect, create the project's topics if missing, and learn their partition counts."""
        await self.ensure_topics()
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=int(self._settings.kafka_timeout_s * 1000),
        )
        try:
            await start_client(producer.start(), producer.stop, self._settings.kafka_timeout_s)
        except (TimeoutError, KafkaConnectionError, OSError) as exc:
            raise self._unavailable(exc) from exc
        try:
            for name in TOPICS:
                topic = self._settings.topic(name)
                parts = producer.client.cluster.partitions_for_topic(topic)
                if not parts:
                    await producer.client.force_metadata_update()
                    parts = producer.client.cluster.partitions_for_topic(topic)
                self._partitions[topic] = len(parts or ()) or self._settings.partitions
        except BaseException:  # a start that fails leaves nothing open
            await asyncio.shield(producer.stop())
            raise
        self._producer = producer

    async def ensure_topics(self) -> None:
        """Create the messages, analyses, control, dead-letter, changes and audit topics with explicit settings."""
        admin = AIOKafkaAdminClient(
            bootstrap_servers=self.bootstrap, request_timeout_ms=int(self._settings.kafka_timeout_s * 1000)
        )
        try:
            await start_client(admin.start(), admin.close, self._settings.kafka_timeout_s)
        except (TimeoutError, KafkaConnectionError, OSError) as exc:
            raise self._unavailable(exc) from exc
        try:
            existing = set(await admin.list_topics())
            wanted = [
                NewTopic(
                    name=self._settings.topic(name),
                    num_partitions=self._settings.partitions,
                    replication_factor=1,
                    topic_configs=topic_configs(name),
                )
                for name in TOPICS
                if self._settings.topic(name) not in existing
            ]
            if wanted:
                with contextlib.suppress(TopicAlreadyExistsError):  # another process made them first
                    await admin.create_topics(wanted)
        except KafkaError as exc:
            raise LogError(f"could not create topics on {self.bootstrap}: {exc}") from exc
        finally:
            await admin.close()

    async def topics(self) -> list[str]:
        """Every topic of this deployment on the broker (named with the topic prefix), e.g. for ``forget --verify``."""
        admin = AIOKafkaAdminClient(
            bootstrap_servers=self.bootstrap, request_timeout_ms=int(self._settings.kafka_timeout_s * 1000)
        )
        try:
            await start_client(admin.start(), admin.close, self._settings.kafka_timeout_s)
            prefix = self._settings.topic_prefix + "."
            return sorted(t for t in await admin.list_topics() if t.startswith(prefix))
        except (TimeoutError, KafkaConnectionError, OSError) as exc:
            raise self._unavailable(exc) from exc
        finally:
            await admin.close()

    async def stop(self) -> None:
        """Flush and disconnect."""
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    def hold_writer_lock(self) -> None:
        """Kafka's partitions have many writers (transactions fence them): no lock to hold."""

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic`` (learned at start)."""
        return self._partitions.get(topic, self._settings.partitions)

    async def append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        """Send every record to its partition (by default, its key's) and wait for the broker's acks."""
        if self._producer is None:
            raise LogError(f"{self.url} is not started; call start() first")
        n = self.partitions(topic)
        try:
            futures = [
                await self._producer.send(
                    topic,
                    value=rec.value,
                    key=rec.key.encode("utf-8"),
                    partition=partition_for(rec.key, n) if rec.partition is None else rec.partition,
                    headers=list(rec.headers) or None,
                )
                for rec in records
            ]
            metas = await asyncio.gather(*futures)
        except KafkaConnectionError as exc:
            raise self._unavailable(exc) from exc
        except KafkaError as exc:
            raise LogError(f"appending {len(records)} record(s) to {topic} failed: {exc}") from exc
        return [(m.partition, m.offset) for m in metas]

    async def _consumer(self) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            request_timeout_ms=int(self._settings.kafka_timeout_s * 1000),
            # A new consumer knows no topic yet: its first end_offsets waits one metadata retry
            # backoff (default 100 ms) for the leaders. 10 ms makes that 7 ms instead of 103 (a
            # rebuild asks for end offsets once per partition); retries stay bounded by the timeout.
            retry_backoff_ms=10,
        )
        try:
            await start_client(consumer.start(), consumer.stop, self._settings.kafka_timeout_s)
        except (TimeoutError, KafkaConnectionError, OSError) as exc:
            raise self._unavailable(exc) from exc
        return consumer

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """Next offset per partition."""
        consumer = await self._consumer()
        try:
            tps = [TopicPartition(topic, p) for p in range(self.partitions(topic))]
            ends = await consumer.end_offsets(tps)
            return {tp.partition: off for tp, off in ends.items()}
        finally:
            await consumer.stop()

    async def read(
        self,
        topic: str,
        *,
        from_offsets: dict[int, int] | None = None,
        key: str | None = None,
        until: dict[int, int] | None = None,
    ) -> AsyncIterator[LogRecord]:
        """Records from ``from_offsets`` up to ``until`` (default: the end now), partition by partition."""
        consumer = await self._consumer()
        try:
            n = self.partitions(topic)
            only = {partition_for(key, n)} if key is not None else set(range(n))
            tps = [TopicPartition(topic, p) for p in sorted(only)]
            ends = (
                until if until is not None else {tp.partition: o for tp, o in (await consumer.end_offsets(tps)).items()}
            )
            for tp in tps:
                start = (from_offsets or {}).get(tp.partition, 0)
                end = ends.get(tp.partition, 0)
                if start >= end:
                    continue
                consumer.assign([tp])
                consumer.seek(tp, start)
                position = start
                while position < end:
                    batch = await consumer.getmany(tp, timeout_ms=1000)
                    for msg in batch.get(tp, []):
                        position = msg.offset + 1
                        if msg.offset >= end:
                            break
                        rec_key = msg.key.decode("utf-8") if msg.key is not None else ""
                        if key is None or rec_key == key:
                            yield LogRecord(
                                topic,
                                tp.partition,
                                msg.offset,
                                rec_key,
                                msg.value or b"",
                                msg.timestamp,
                                tuple((h, v) for h, v in msg.headers),
                            )
                    # Transaction markers occupy offsets too: trust the consumer's position.
                    position = max(position, await consumer.position(tp))
        finally:
            await consumer.stop()
