"""The embedded log: append-only Avro object container files, one per topic partition.

Layout: ``ROOT/<topic>/<partition>.avro``. Each file is a standard Avro container (any Avro tool
reads it) of ``LogEntry`` records: offset, owner key, event time and the framed event bytes —
the very bytes Kafka would carry. One append is written as one container block, so a batch is
all-or-nothing: a torn last block (a crash mid-write) is detected and truncated when the log is
opened for writing; earlier blocks survive. Corruption before the last block is refused, never
silently truncated.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, cast

import fastavro

from adamem.errors import LogError
from adamem.settings import Settings
from adamem.streams.log import TOPICS, LogRecord, OutgoingRecord, partition_for

__all__ = ["ENTRY_SCHEMA", "EmbeddedLog"]

ENTRY_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "LogEntry",
        "namespace": "adamem.log",
        "doc": "One record of the embedded log: where it is and the framed event it holds.",
        "fields": [
            {"name": "offset", "type": "long", "doc": "Offset within the partition, from 0."},
            {"name": "key", "type": "string", "doc": "Memory owner (the partition key)."},
            {"name": "timestamp", "type": "long", "doc": "Append time, ms since the epoch (UTC)."},
            {"name": "value", "type": "bytes", "doc": "Avro single-object-encoded event."},
            {
                "name": "headers",
                "type": {"type": "map", "values": "bytes"},
                "default": {},
                "doc": "Record headers.",
            },
        ],
    }
)
_BIG_BLOCK = 1 << 62  # one append = one container block, so a batch is atomic


class _Partition:
    """One container file: its path and the next offset to write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.next_offset = 0


def _create(path: Path) -> None:
    """Create a container holding only its header, atomically (temp file + rename)."""
    tmp = path.with_suffix(".avro.tmp")
    with tmp.open("wb") as fo:
        fastavro.writer(fo, ENTRY_SCHEMA, [])
        fo.flush()
        os.fsync(fo.fileno())
    os.replace(tmp, path)


def _scan(path: Path, *, repair: bool) -> int:
    """Count records in a container; with ``repair``, truncate a torn last block. Returns the count."""
    if not path.exists():
        return 0
    count = 0
    with path.open("rb") as fo:
        try:
            if fo.read(4) != b"Obj\x01":
                raise ValueError("no Avro container magic 'Obj\\x01'")
            fo.seek(0)
            reader = fastavro.block_reader(fo)
        except Exception as exc:  # headers are written atomically, so this is real damage
            raise LogError(
                f"{path} has no readable Avro header ({exc}); the file is damaged. "
                "Restore it from a copy, or move it away and rebuild the log from its source."
            ) from exc
        sync: bytes = reader._header["sync"]
        good_end = fo.tell()
        try:
            for block in reader:
                count += block.num_records
                good_end = block.offset + block.size
        except Exception as exc:  # a torn block raises ValueError/EOFError/...
            fo.seek(good_end)
            if fo.read().count(sync) > 1:
                raise LogError(
                    f"{path} is corrupt at byte {good_end} with complete blocks after it ({exc}); "
                    "refusing to truncate. Restore the file from a copy or remove it and replay."
                ) from exc
            if repair:
                with path.open("r+b") as fw:
                    fw.truncate(good_end)
                    fw.flush()
                    os.fsync(fw.fileno())
    return count


class EmbeddedLog:
    """A partitioned log in local Avro container files; one writer process at a time."""

    def __init__(self, root: str | os.PathLike[str], settings: Settings) -> None:
        self.root = Path(root)
        self.url = str(self.root)
        self._settings = settings
        self._parts: dict[str, list[_Partition]] = {}
        self._lock: IO[bytes] | None = None

    async def start(self) -> None:
        """Open the folder; repair torn tails and create missing topics."""
        self.root.mkdir(parents=True, exist_ok=True)
        for name in TOPICS:
            self._open_topic(self._settings.topic(name))

    async def stop(self) -> None:
        """Release the writer lock."""
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _writer_lock(self) -> None:
        if self._lock is None:
            self._lock = (self.root / ".writer.lock").open("ab")
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._lock.close()
                self._lock = None
                raise LogError(f"another process is writing to the log in {self.root}; stop it first") from None

    def _open_topic(self, topic: str) -> list[_Partition]:
        if topic in self._parts:
            return self._parts[topic]
        folder = self.root / topic
        folder.mkdir(parents=True, exist_ok=True)
        existing = sorted(folder.glob("*.avro"))
        n = len(existing) or self._settings.embedded_partitions
        parts = [_Partition(folder / f"{p:05d}.avro") for p in range(n)]
        for part in parts:
            if not part.path.exists():
                _create(part.path)  # the partition count is fixed by the files from now on
            part.next_offset = _scan(part.path, repair=False)
        self._parts[topic] = parts
        return parts

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic`` (fixed when the topic's folder is first made)."""
        return len(self._open_topic(topic))

    async def append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        """Append records; each partition gets one block, fsynced when ``fsync`` is set."""
        return await asyncio.to_thread(self._append, topic, records)

    def _append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        self._writer_lock()
        parts = self._open_topic(topic)
        by_part: dict[int, list[dict[str, Any]]] = {}
        placed = []
        now = int(time.time() * 1000)
        where = [partition_for(r.key, len(parts)) if r.partition is None else r.partition for r in records]
        for p in set(where):
            parts[p].next_offset = _scan(parts[p].path, repair=True)  # repair a torn tail first
        for rec, p in zip(records, where, strict=True):
            batch = by_part.setdefault(p, [])
            offset = parts[p].next_offset + len(batch)
            batch.append(
                {"offset": offset, "key": rec.key, "timestamp": now, "value": rec.value, "headers": dict(rec.headers)}
            )
            placed.append((p, offset))
        for p, batch in by_part.items():
            part = parts[p]
            with part.path.open("a+b") as fo:
                fastavro.writer(fo, ENTRY_SCHEMA, batch, sync_interval=_BIG_BLOCK)
                fo.flush()
                if self._settings.fsync:
                    os.fsync(fo.fileno())
            part.next_offset += len(batch)
        return placed

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """Next offset per partition, as on disk now (another process may have appended)."""
        parts = self._open_topic(topic)
        return {p: _scan(part.path, repair=False) for p, part in enumerate(parts)}

    async def read(
        self,
        topic: str,
        *,
        from_offsets: dict[int, int] | None = None,
        key: str | None = None,
        until: dict[int, int] | None = None,
    ) -> AsyncIterator[LogRecord]:
        """Records from ``from_offsets`` up to ``until`` (default: the end now), partition by partition."""
        parts = self._open_topic(topic)
        stop = until if until is not None else await self.end_offsets(topic)
        for p, part in enumerate(parts):
            start = (from_offsets or {}).get(p, 0)
            end = stop.get(p, 0)
            if start >= end:
                continue
            batch: list[LogRecord] = []
            for entry in _entries(part.path, start, end):
                if key is None or entry["key"] == key:
                    batch.append(
                        LogRecord(
                            topic,
                            p,
                            entry["offset"],
                            entry["key"],
                            entry["value"],
                            entry["timestamp"],
                            tuple(sorted(entry["headers"].items())),
                        )
                    )
                if len(batch) >= 1000:
                    for rec in batch:
                        yield rec
                    batch = []
                    await asyncio.sleep(0)
            for rec in batch:
                yield rec


def _entries(path: Path, start: int, end: int) -> Iterator[dict[str, Any]]:
    """Entries with start <= offset < end, skipping whole blocks before ``start``."""
    with path.open("rb") as fo:
        seen = 0
        for block in fastavro.block_reader(fo):
            if seen + block.num_records <= start:
                seen += block.num_records
                continue
            for item in block:
                entry = cast(dict[str, Any], item)
                off = int(entry["offset"])
                if off >= end:
                    return
                if off >= start:
                    yield entry
            seen += block.num_records
            if seen >= end:
                return  # never read past ``end``: a writer may be appending a block there
