"""Publishing messages and reading the log back as JSON: the commands behind ``adamem publish|log``."""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adamem.errors import AdaMemError
from adamem.events import ChatMessage, MemoryCompressed, MessageAnalyzed, ms_to_iso
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams.keys import KeyRingLike, keystore_for
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
    """Append validated messages to the messages topic in batches, in input order per owner.

    Each message's text, speaker name and metadata are sealed under its own key in the log's
    keystore (``streams.keys``), made durable before the batch is appended.
    """
    topic = settings.topic("messages")
    keys = keystore_for(log, settings)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    size = max(1, settings.publish_batch)
    for i in range(0, len(messages), size):
        batch = messages[i : i + size]
        records = [OutgoingRecord(m.user_id, encode_event(m, keys)) for m in batch]
        keys.flush()
        placed = await log.append(topic, records)
        for p, off in placed:
            first.setdefault(p, off)
            last[p] = max(last.get(p, off), off)
        if progress is not None:
            progress(len(batch))
    return PublishReport(len(messages), len({m.user_id for m in messages}), first, last, topic)


def record_to_json(rec: LogRecord, keys: KeyRingLike | None = None) -> dict[str, Any]:
    """A log record as a JSON-ready dict; an undecodable one shows its error and raw bytes.

    A sealed event is shown opened with ``keys``; without them, or once its key is destroyed, its
    free text is empty and ``"shredded": true`` says why.
    """
    return _to_json(rec, keys)[0]


def _to_json(rec: LogRecord, keys: KeyRingLike | None) -> tuple[dict[str, Any], str | None]:
    """``record_to_json`` and the tenant the event names (None for an undecodable record)."""
    out: dict[str, Any] = {
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "key": rec.key,
        "appended_at": ms_to_iso(rec.timestamp),
    }
    try:
        event = decode_event(rec.value, keys)
    except AdaMemError as exc:
        out["error"] = str(exc)
        out["raw_base64"] = base64.b64encode(rec.value).decode("ascii")
        return out, None
    if isinstance(event, MessageAnalyzed):
        record = event.content_record()
        record["message"] = _plain_message(event.message)
        record["sealed"] = event.sealed is not None
    elif isinstance(event, ChatMessage):
        record = _plain_message(event)
    elif isinstance(event, MemoryCompressed):
        record = event.content_record()
    else:
        record = event.to_record()
    if getattr(event, "shredded", False):
        out["shredded"] = True
    if "occurred_at" in record:
        record["occurred_at"] = ms_to_iso(record["occurred_at"])
    out["type"] = event.SCHEMA.rsplit(".", 1)[-1]
    out["event"] = record
    return out, event.tenant


def _plain_message(message: ChatMessage) -> dict[str, Any]:
    record = message.to_record()
    if message.sealed is not None:
        record.update(text=message.text, metadata=dict(message.metadata), sealed=True)
        record["speaker"] = {"role": message.speaker.role, "name": message.speaker.name}
    else:
        record["sealed"] = False
    return record


async def read_as_json(
    log: EventLog,
    topic: str,
    *,
    from_offset: int = 0,
    user: str | None = None,
    tenant: str | None = None,
    tail: int | None = None,
    settings: Settings | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Records of ``topic`` as JSON dicts; ``tail`` keeps only the last N (after the filters).

    ``user`` keeps the records keyed by that user id (every tenant's: the log's key is the bare
    user id); ``tenant`` keeps the events that name that tenant, so an undecodable record, which
    names none, is left out.
    """
    ends = await log.end_offsets(topic)
    starts = {p: from_offset for p in ends}
    keys = keystore_for(log, settings) if settings is not None else None
    kept: deque[dict[str, Any]] = deque(maxlen=tail if tail is not None else None)
    async for rec in log.read(topic, from_offsets=starts, key=user, until=ends):
        row, named = _to_json(rec, keys)
        if tenant is not None and named != tenant:
            continue
        if tail is None:
            yield row
        else:
            kept.append(row)
    for row in kept:
        yield row
