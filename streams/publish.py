"""Publishing messages and reading the log back as JSON: the commands behind ``adamem publish|log``."""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adamem.errors import AdaMemError
from adamem.events import ChatMessage, ms_to_iso
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams.log import EventLog, LogRecord, OutgoingRecord

__all__ = ["PublishReport", "publish_messages", "read_as_json", "record_to_json"]


@dataclass(frozen=True)
class PublishReport:
    """What a publish did: how many messages, for how many owners, at which offsets."""

    messages: int
    owners: int
    first: dict[int, int]
    last: dict[int, int]
    topic: str


async def publish_messages(
    log: EventLog,
    messages: Sequence[ChatMessage],
    settings: Settings,
    progress: Callable[[int], None] | None = None,
) -> PublishReport:
    """Append validated messages to the messages topic in batches, in input order per owner."""
    topic = settings.topic("messages")
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    size = max(1, settings.publish_batch)
    for i in range(0, len(messages), size):
        batch = messages[i : i + size]
        placed = await log.append(topic, [OutgoingRecord(m.user_id, encode_event(m)) for m in batch])
        for p, off in placed:
            first.setdefault(p, off)
            last[p] = max(last.get(p, off), off)
        if progress is not None:
            progress(len(batch))
    return PublishReport(len(messages), len({m.user_id for m in messages}), first, last, topic)


def record_to_json(rec: LogRecord) -> dict[str, Any]:
    """A log record as a JSON-ready dict; an undecodable one shows its error and raw bytes."""
    out: dict[str, Any] = {
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "key": rec.key,
        "appended_at": ms_to_iso(rec.timestamp),
    }
    try:
        event = decode_event(rec.value)
    except AdaMemError as exc:
        out["error"] = str(exc)
        out["raw_base64"] = base64.b64encode(rec.value).decode("ascii")
        return out
    record = event.to_record()
    if "occurred_at" in record:
        record["occurred_at"] = ms_to_iso(record["occurred_at"])
    out["type"] = event.SCHEMA.rsplit(".", 1)[-1]
    out["event"] = record
    return out


async def read_as_json(
    log: EventLog,
    topic: str,
    *,
    from_offset: int = 0,
    user: str | None = None,
    tail: int | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Records of ``topic`` as JSON dicts; ``tail`` keeps only the last N (after the user filter)."""
    ends = await log.end_offsets(topic)
    starts = {p: from_offset for p in ends}
    kept: deque[LogRecord] = deque(maxlen=tail if tail is not None else None)
    async for rec in log.read(topic, from_offsets=starts, key=user, until=ends):
        if tail is None:
            yield record_to_json(rec)
        else:
            kept.append(rec)
    for rec in kept:
        yield record_to_json(rec)
