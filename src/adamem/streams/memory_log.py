"""In-process log for pure unit tests; passes the same contract suite as the real adapters."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

from adamem.settings import Settings
from adamem.streams.keys import InMemoryKeyRing
from adamem.streams.log import TOPICS, LogRecord, OutgoingRecord, partition_for

__all__ = ["InMemoryLog"]


class InMemoryLog:
    """A partitioned log kept in lists; gone when the process ends."""

    def __init__(self, settings: Settings) -> None:
        self.url = "memory://"
        self._settings = settings
        self._n = settings.embedded_partitions
        self._topics: dict[str, list[list[LogRecord]]] = {}
        self.keyring = InMemoryKeyRing()  # its keystore lives and dies with it (``streams.keys.keystore_for``)

    async def start(self) -> None:
        """Create the project's topics."""
        for name in TOPICS:
            self._topics.setdefault(self._settings.topic(name), [[] for _ in range(self._n)])

    async def stop(self) -> None:
        """Nothing to release."""

    def _parts(self, topic: str) -> list[list[LogRecord]]:
        return self._topics.setdefault(topic, [[] for _ in range(self._n)])

    def hold_writer_lock(self) -> None:
        """An in-memory log lives in one process: no lock to hold."""

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic``."""
        return len(self._parts(topic))

    async def append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        """Append each record to its partition (by default, its key's)."""
        parts = self._parts(topic)
        placed = []
        now = int(time.time() * 1000)
        for rec in records:
            p = partition_for(rec.key, len(parts)) if rec.partition is None else rec.partition
            offset = len(parts[p])
            parts[p].append(LogRecord(topic, p, offset, rec.key, rec.value, now, rec.headers))
            placed.append((p, offset))
        return placed

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """Next offset per partition."""
        return {p: len(recs) for p, recs in enumerate(self._parts(topic))}

    async def read(
        self,
        topic: str,
        *,
        from_offsets: dict[int, int] | None = None,
        key: str | None = None,
        until: dict[int, int] | None = None,
    ) -> AsyncIterator[LogRecord]:
        """Records from ``from_offsets`` up to ``until`` (default: the end now), partition by partition."""
        parts = self._parts(topic)
        stop = until if until is not None else {p: len(r) for p, r in enumerate(parts)}
        for p, recs in enumerate(parts):
            start = (from_offsets or {}).get(p, 0)
            for rec in recs[start : stop.get(p, 0)]:  # a partition missing from ``until`` is not read
                if key is None or rec.key == key:
                    yield rec
