"""The event log port: append framed events keyed by owner, read them back by offset.

Adapters are chosen by URL: a folder path (or ``file://``) is the embedded Avro log,
``kafka://host:port`` is a Kafka cluster, ``memory://`` is an in-process list for unit tests.
Every adapter passes the same contract tests (``tests/streams/test_log_contract.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from adamem.partitioning import murmur2, partition_for

if TYPE_CHECKING:
    pass

__all__ = ["EventLog", "LogRecord", "OutgoingRecord", "murmur2", "partition_for"]

TOPICS = ("messages", "analyses", "control", "deadletter", "changes", "audit")


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """A record to append: the owner key and the framed event bytes (the log stamps append time).

    ``partition`` is None for every event (it goes to its key's partition); a dead letter names the
    partition its source record arrived on, so the source partition's progress is found there.
    """

    key: str
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int | None = None


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

    def hold_writer_lock(self) -> None:
        """Become the log's one writer from now on, or raise ``LogError`` naming the folder another process
        writes. A log with many writers (Kafka, in memory) has no lock: this does nothing there."""

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic``."""

    async def append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        """Append records (each to its ``partition``, else its key's); returns (partition, offset) per record."""

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
