"""Episodic memory: the event, fact and attribute routers (ADD / UPDATE / IGNORE) and record history.

Per extracted item of a consolidated message, in this order:

1. confidence ≤ ``add_threshold`` (0.7) → IGNORE (low quality);
2. an active record of the same type already says the same thing (same content key: normalised
   content for facts, canonical key + value for attributes, content + day for events) → IGNORE
   (redundant); the message is appended to that record's ``source_message_ids`` (provenance: the
   record now survives forgetting either message). Its confidence is left as it was;
3. an active record holds the same non-empty conflict slot (fact key such as ``lives_in``; the
   preferred value for likes / dislikes; the key of a single-valued attribute) with a different
   content → UPDATE when the new confidence ≥ the old one (a tie goes to the newer statement):
   the new record is active and the old one is kept with ``status='superseded'``,
   ``valid_to`` = the new message's ``occurred_at`` and ``superseded_by`` = the new id; otherwise
   IGNORE (less reliable than what is known);
4. otherwise ADD.

Events have no conflict slot: recurring events are separate records (they feed habits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adamem.packs import TERM_PREFIX
from adamem.projections.folds.ids import record_id
from adamem.projections.folds.keys import attribute_identity, attribute_slot, event_content_key
from adamem.projections.folds.lexicon import normalize
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import EpisodicRow, MessageRow, episodic_row, evolve
from adamem.projections.folds.state import Transaction

__all__ = ["Item", "Routed", "items_of", "route"]


@dataclass(frozen=True, slots=True)
class Item:
    """One extracted fact, attribute or event, in the shape the routers compare."""

    type: str  # event | fact | attribute
    slot: str
    content: str
    content_key: str
    confidence: float
    fact_type: str = ""
    attribute_key: str = ""
    attribute_value: str = ""
    event_time: int = -1


@dataclass(frozen=True, slots=True)
class Routed:
    """A router's decision; ``record`` is what the item now maps to (None when ignored outright)."""

    decision: str  # ADD | UPDATE | IGNORE
    reason: str  # new | conflict | redundant | low_confidence | less_reliable
    record: EpisodicRow | None = None
    replaced: EpisodicRow | None = None


def items_of(extraction: dict[str, Any], occurred_at: int) -> list[Item]:
    """The items of a message's recorded extraction, facts first, then attributes, then events."""
    items: list[Item] = []
    for f in extraction.get("facts", ()):
        if f.get("type", "").startswith(TERM_PREFIX):  # a domain pack's typed mention marks the message only
            continue
        items.append(
            Item(
                "fact",
                normalize(f.get("key", "")),
                f["content"],
                normalize(f["content"]),
                float(f["confidence"]),
                fact_type=f.get("type", ""),
            )
        )
    for a in extraction.get("attributes", ()):
        key, value = a["key"], a["value"]
        content = f"{key.replace('_', ' ')} {value}".strip()
        _, canonical, norm_value = attribute_identity(key, value)
        items.append(
            Item(
                "attribute",
                attribute_slot(key, value),
                content,
                f"{canonical}|{norm_value}",
                float(a["confidence"]),
                attribute_key=key,
                attribute_value=value,
            )
        )
    for e in extraction.get("events", ()):
        when = e.get("when")
        when = -1 if when is None else int(when)
        key = event_content_key(e["content"], when if when >= 0 else occurred_at)
        items.append(Item("event", "", e["content"], key, float(e["confidence"]), event_time=when))
    return items


def _pick(tx: Transaction, ids: set[str] | None, newest: bool) -> EpisodicRow | None:
    rows = [r for r in (tx.state.record(i) for i in ids or ()) if r is not None]
    if not rows:
        return None
    if newest:
        return max(rows, key=lambda r: (r.valid_from, r.id))
    return min(rows, key=lambda r: r.id)


def route(tx: Transaction, m: MessageRow, item: Item, params: MemoryParameters) -> Routed:
    """Decide ADD / UPDATE / IGNORE for one item of message m and write the records it implies."""
    if item.confidence <= params.add_threshold:
        return Routed("IGNORE", "low_confidence")
    index = tx.state.index
    same = _pick(tx, index.record_content.get(f"{item.type}|{item.content_key}"), newest=False)
    if same is not None:
        if params.merge_redundant_sources and m.id not in same.source_message_ids:
            same = evolve(same, source_message_ids=[*same.source_message_ids, m.id])
            tx.put(same)
        return Routed("IGNORE", "redundant", same)
    old = _pick(tx, index.record_slot.get(f"{item.type}|{item.slot}"), newest=True) if item.slot else None
    if old is not None and item.confidence < old.confidence:
        return Routed("IGNORE", "less_reliable")
    new = episodic_row(
        id=record_id(m.owner_id, m.id, item.type, item.content_key),
        owner_id=m.owner_id,
        type=item.type,
        key=item.slot,
        content=item.content,
        confidence=item.confidence,
        source_message_ids=[m.id],
        speaker=m.speaker,
        speaker_role=m.role,
        conversation_id=m.conversation_id,
        occurred_at=m.occurred_at,
        valid_from=m.occurred_at,
        valid_to=-1,
        superseded_by="",
        supersedes=old.id if old is not None else "",
        status="active",
        router="UPDATE" if old is not None else "ADD",
        vector=m.vector,
        event_time=item.event_time,
        fact_type=item.fact_type,
        attribute_key=item.attribute_key,
        attribute_value=item.attribute_value,
        entities=list(m.entities),
        origin_event_id=m.analysis_event_id,
    )
    if old is None:
        tx.put(new)
        return Routed("ADD", "new", new)
    replaced = evolve(old, status="superseded", valid_to=m.occurred_at, superseded_by=new.id)
    tx.put(replaced)
    tx.put(new)
    return Routed("UPDATE", "conflict", new, replaced)
