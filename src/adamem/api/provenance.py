"""Provenance: from a memory item back to the analyses and messages that made it, with offsets."""

from __future__ import annotations

import asyncio
from typing import Any

from adamem.events import MessageAnalyzed, ms_to_iso
from adamem.owners import split_owner
from adamem.projections.folds.rows import EpisodicRow, GraphNodeRow, MessageRow, PersonaRow
from adamem.retrieval.errors import ItemNotFound
from adamem.retrieval.service import Retriever
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.keys import KeyRingLike, keystore_for
from adamem.streams.log import EventLog
from adamem.streams.resume import SOURCE_HEADER

__all__ = ["ItemNotFound", "trace"]


async def _analysis(log: EventLog, m: MessageRow, keys: KeyRingLike) -> dict[str, Any]:
    """The recorded analysis at the message row's position, decoded, with the message's own offset."""
    out: dict[str, Any] = {"topic": m.source_topic, "partition": m.source_partition, "offset": m.source_offset}
    async for rec in log.read(
        m.source_topic,
        from_offsets={m.source_partition: m.source_offset},
        until={m.source_partition: m.source_offset + 1},
    ):
        event = decode_event(rec.value, keys)  # sealed: opened with the log's keystore
        if isinstance(event, MessageAnalyzed):
            out.update(
                event_id=event.event_id,
                analyzer=f"{event.analyzer.name}/{event.analyzer.version}",
                generation=event.generation,
                embedding_model=event.embedding.model,
                summary=event.summary,
                matches_row=event.event_id == m.analysis_event_id,
            )
        source = dict(rec.headers).get(SOURCE_HEADER)
        if source:
            topic, partition, offset = source.decode().rsplit(":", 2)
            out["message_position"] = {"topic": topic, "partition": int(partition), "offset": int(offset)}
    return out


async def trace(retriever: Retriever, log: EventLog | None, settings: Settings, user: str, item: str) -> dict[str, Any]:
    """The item, the messages it came from (in time order), and each one's analysis on the log."""
    snap = await asyncio.to_thread(retriever.snapshot, user)
    row: Any = snap.records.get(item) or snap.traits.get(item) or snap.nodes.get(item) or snap.message(item)
    if row is None:
        raise ItemNotFound(user, item)
    if isinstance(row, EpisodicRow):
        sources, kind = list(row.source_message_ids), f"episodic {row.type}"
    elif isinstance(row, PersonaRow):
        sources, kind = list(row.evidence_message_ids), f"persona {row.kind}"
    elif isinstance(row, GraphNodeRow):
        target: Any = snap.records.get(row.ref_id) or snap.message(row.ref_id)
        sources = list(target.source_message_ids) if isinstance(target, EpisodicRow) else [row.ref_id]
        kind = f"graph {row.node_type}"
    else:
        sources, kind = [row.id], "message"
    messages = sorted(snap.messages_for(sources).values(), key=lambda m: (m.occurred_at, m.id))
    chain = []
    for m in messages:
        entry: dict[str, Any] = {
            "message_event_id": m.id,
            "message_id": m.message_id,
            "conversation_id": m.conversation_id,
            "speaker": m.speaker,
            "text": m.text,
            "occurred_at": m.occurred_at,
            "utc_offset_minutes": m.utc_offset_minutes,
            "occurred_at_local": ms_to_iso(m.occurred_at, m.utc_offset_minutes),
            "analysis": {
                "topic": m.source_topic,
                "partition": m.source_partition,
                "offset": m.source_offset,
                "event_id": m.analysis_event_id,
                "analyzer": m.analyzer,
            },
        }
        if log is not None:
            entry["analysis"] = await _analysis(log, m, keystore_for(log, settings))
        chain.append(entry)
    content = getattr(row, "content", None) or getattr(row, "value", None) or getattr(row, "label", None) or row.text
    tenant, user_id = split_owner(user)
    return {
        "user_id": user_id,
        "tenant": tenant,
        "item": item,
        "kind": kind,
        "content": content,
        "origin_event_id": getattr(row, "origin_event_id", ""),
        "missing_sources": len(sources) - len(messages),
        "messages": chain,
    }
