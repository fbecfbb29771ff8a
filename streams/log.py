"""The event log port: append framed events keyed by owner, read them back by offset.

Adapters are chosen by URL: a folder path (or ``file://``) is the embedded Avro log,
``kafka://host:port`` is a Kafka cluster, ``memory://`` is an in-process list for unit tests.
Every adapter passes the same contract tests (``tests/streams/test_log_contract.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from adamem.errors import ConfigError
from adamem.partitioning import murmur2, partition_for

if TYPE_CHECKING:
    from adamem.settings import Settings

__all__ = ["EventLog", "LogRecord", "OutgoingRecord", "murmur2", "open_log", "partition_for"]

TOPICS = ("messages", "analyses", "control", "deadletter")


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """A record to append: the owner key and the framed event bytes (the log stamps append time)."""

    key: str
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A record as stored: where it is, what it holds, and when the log took it (``timestamp``, ms).

    ``timestamp`` is append time, for operators; projections use the event's own ``occurred_at``.
    """

    topic: str
    partition: int
    offset: int
    key: str
    value: bytes
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


class EventLog(Protocol):
    """An append-only, partitioned, keyed log (the port every adapter implements)."""

    url: str

    async def start(self) -> None:
        """Connect or open; create the project's topics if they are missing."""

    async def stop(self) -> None:
        """Flush and release every resource."""

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic``."""

    async def append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        """Append records (each to the partition of its key); returns (partition, offset) per record."""

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """The next offset to be written, per partition."""

    def read(
        self,
        topic: str,
        *,
        from_offsets: dict[int, int] | None = None,
        key: str | None = None,
        until: dict[int, int] | None = None,
    ) -> AsyncIterator[LogRecord]:
        """Records of ``topic`` from the given offsets (default 0) up to ``until`` (default: the end now)."""


def open_log(url: str, settings: Settings) -> EventLog:
    """The log adapter for ``url``: ``kafka://host:port``, ``memory://``, or a folder path."""
    if url.startswith("kafka://"):
        from adamem.streams.kafka_log import KafkaLog

        bootstrap = url[len("kafka://") :].rstrip("/")
        if not bootstrap:
            raise ConfigError(f"log URL {url!r} names no broker; use kafka://127.0.0.1:9092")
        return KafkaLog(bootstrap, settings)
    if url.startswith("memory://"):
        from adamem.streams.memory_log import InMemoryLog

        return InMemoryLog(settings)
    if "://" in url and not url.startswith("file://"):
        raise ConfigError(f"log URL {url!r} is not kafka://host:port, memory:// or a folder path")
    from adamem.streams.embedded_log import EmbeddedLog

    return EmbeddedLog(url.removeprefix("file://"), settings)
