"""The fold: ``apply(state, positioned_event) -> (state, changes)``, one handler per event type.

``MessageAnalyzed`` (the recorded analysis z_t, carrying its message):

1. A message already archived (by message event id) or forgotten earlier → no changes; this makes
   redelivery and duplicate publishes harmless. A *shredded* message (sealed, its key destroyed by a
   forget or lost: ``adamem.schemas.sealing``) → no changes either; the projector rebuilds an owner
   after a message forget so that the live state is this fold's too (``streams.pipeline``).
2. Session boundary: when the message's ``conversation_id`` differs from the owner's previous
   message, or its ``occurred_at`` is ``session_gap_ms`` or more after it (a gap in event time: a
   stream without conversation ids has sessions too), every working-memory entry not yet
   consolidated is consolidated now (they stay in working memory until evicted). This keeps the
   paper's "consolidate the evicted batch" and adds a deterministic session-end trigger, so short
   conversations that never fill 20 slots still reach episodic, persona and graph memory — without
   a timer, which a pure fold cannot have.
3. Arrival: the message is archived, enters working memory (FIFO of ``working_capacity``), and gets
   its graph message node, topic nodes and ``mentions`` / ``temporal_next`` / ``same_topic`` /
   ``speaker_related`` / ``similar`` edges.
4. Eviction: when working memory exceeds its capacity, the oldest ``eviction_batch`` entries leave it
   as one batch and those not consolidated yet are consolidated, oldest first.

Consolidating a message routes its recorded facts, attributes and events through the episodic
routers, counts its attributes (and new events, as habit occurrences) as persona evidence, and adds
the record nodes and ``supports`` / ``supersedes`` edges to the graph. Consolidation reads only the
archived row (its ``extraction_json``), so a restarted worker consolidates exactly as a live one.

Time is event time only: the owner's ``last_event_time`` (max ``occurred_at`` applied) is "now".
``MemoryForgotten`` and ``MemoryCorrected`` are handled in ``projections.folds.control``,
``GrantChanged`` in ``projections.folds.grants``, ``AnswerFeedback`` in ``projections.folds.style`` (it does
not move the owner's clock: it is about answers, not the owner's life), ``MemoryCompressed`` (a recorded
compression) in ``projections.folds.compressed``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

from adamem.events import (
    AnswerFeedback,
    Event,
    GrantChanged,
    MemoryCompressed,
    MemoryCorrected,
    MemoryForgotten,
    MessageAnalyzed,
)
from adamem.projections.folds import compressed, control, episodic, grants, graph, persona, style
from adamem.projections.folds.changes import Change
from adamem.projections.folds.lexicon import activity_of
from adamem.projections.folds.params import SEED_DEFAULT, MemoryParameters
from adamem.projections.folds.rows import (
    EpisodicRow,
    MessageRow,
    OwnerRow,
    context_words,
    evolve,
    float32_vector,
    message_row,
    owner_row,
)
from adamem.projections.folds.state import ForeignOwnerError, OwnerMemory, Transaction

__all__ = [
    "ForeignOwnerError",
    "Positioned",
    "advance_clock",
    "apply",
    "consolidate",
    "new_session",
]


@dataclass(frozen=True, slots=True)
class Positioned:
    """An event and its position on the log (topic, partition, offset); -1 when unknown."""

    event: Event
    topic: str = ""
    partition: int = -1
    offset: int = -1


def apply(
    state: OwnerMemory, envelope: Positioned | Event, params: MemoryParameters = SEED_DEFAULT
) -> tuple[OwnerMemory, list[Change]]:
    """Fold one event into the owner's state (in place) and return the state and exactly what changed."""
    positioned = envelope if isinstance(envelope, Positioned) else Positioned(envelope)
    event = positioned.event
    owner = event.owner_id
    if owner != state.owner_id:
        raise ForeignOwnerError(
            f"event {event.event_id} belongs to owner {owner!r} but was applied to the state of "
            f"{state.owner_id!r}; route events by owner_id (the partition key) to the owner's state"
        )
    tx = Transaction(state)
    _handle(event, tx, positioned, params)
    return state, tx.changes()


def advance_clock(tx: Transaction, occurred_at: int, *, next_seq: int | None = None) -> OwnerRow:
    """Move the owner's event-time clock forward (never back) and return the written owner row."""
    owner = tx.state.owner or owner_row(tx.state.owner_id, tx.state.owner_id, -1, 0, [])
    row = evolve(
        owner,
        last_event_time=max(owner.last_event_time, occurred_at),
        next_seq=owner.next_seq if next_seq is None else next_seq,
    )
    tx.put(row)
    return row


@singledispatch
def _handle(event: object, tx: Transaction, positioned: Positioned, params: MemoryParameters) -> None:
    """Events the memory layers do not fold (e.g. a bare ``ChatMessage``) change nothing."""


@_handle.register
def _(event: MessageAnalyzed, tx: Transaction, positioned: Positioned, params: MemoryParameters) -> None:
    state, msg = tx.state, event.message
    if msg.shredded:  # sealed, and its key is gone (forgotten, lost): nothing of it can be known, nothing is folded
        return
    owner = state.owner
    if state.message(msg.event_id) is not None or (owner is not None and msg.event_id in owner.forgotten_message_ids):
        return
    seq = owner.next_seq if owner is not None else 0
    advance_clock(tx, msg.occurred_at, next_seq=seq + 1)
    index = state.index
    prev = state.message(index.last_message[1]) if index.last_message is not None else None
    row = _message_row(
        event, positioned, seq, context_words(prev, msg.conversation_id, msg.occurred_at, params.session_gap_ms)
    )

    if params.consolidate_on_session_end and prev is not None and new_session(prev, row, params):
        for mid in state.working_ids():
            consolidate(tx, mid, params)

    graph.link_arrival(tx, row, params)
    tx.put(row)

    working = state.working_ids()
    if len(working) > params.working_capacity:
        for mid in working[: params.eviction_batch]:
            consolidate(tx, mid, params)
            current = state.message(mid)
            if current is not None:
                tx.put(evolve(current, in_working=False, working_seq=-1))


@_handle.register
def _(event: MemoryForgotten, tx: Transaction, positioned: Positioned, params: MemoryParameters) -> None:
    if event.scope != "user" and tx.state.owner is not None:
        advance_clock(tx, event.occurred_at)
    control.forget(tx, event, params)


@_handle.register
def _(event: MemoryCorrected, tx: Transaction, positioned: Positioned, params: MemoryParameters) -> None:
    if tx.state.record(event.item_id) is None and tx.state.trait(event.item_id) is None:
        return
    advance_clock(tx, event.occurred_at)
    control.correct(tx, event, params)


@_handle.register
def _(event: AnswerFeedback, tx: Transaction, positioned: Positioned, params: MemoryParameters) -> None:
    if tx.state.owner is not None:  # feedback on an owner with no memory has nothing to rank
        style.learn(tx, event, params)


@_handle.register
def _(event: GrantChanged, tx: Transaction, positioned: Positioned, params: MemoryParameters) -> None:
    grants.change_grant(tx, event)


@_handle.register
def _(event: MemoryCompressed, tx: Transaction, positioned: Positioned, params: MemoryParameters) -> None:
    if tx.state.owner is None:
        return
    if compressed.compress(tx, event):
        advance_clock(tx, event.occurred_at)


def new_session(prev: MessageRow, row: MessageRow, params: MemoryParameters) -> bool:
    """Whether ``row`` opens a new session after ``prev``: another conversation id, or a gap in event time."""
    return prev.conversation_id != row.conversation_id or row.occurred_at - prev.occurred_at >= params.session_gap_ms


_EXTRACTION_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
"""How a message row's ``extraction_json`` is written (one encoder, not one per message)."""

_NOTHING_EXTRACTED = _EXTRACTION_JSON.encode({"facts": [], "attributes": [], "events": []})
"""The ``extraction_json`` of a message nothing was extracted from (most messages), written once."""


def _extraction_json(event: MessageAnalyzed) -> str:
    if not (event.facts or event.attributes or event.events):
        return _NOTHING_EXTRACTED
    extraction: dict[str, Any] = {
        "facts": [
            {"content": f.content, "type": f.type, "key": f.key, "confidence": f.confidence} for f in event.facts
        ],
        "attributes": [{"key": a.key, "value": a.value, "confidence": a.confidence} for a in event.attributes],
        "events": [
            {"content": e.content, "when": e.when, "when_text": e.when_text, "confidence": e.confidence}
            for e in event.events
        ],
    }
    return _EXTRACTION_JSON.encode(extraction)


def _message_row(event: MessageAnalyzed, positioned: Positioned, seq: int, context: str) -> MessageRow:
    msg = event.message
    return message_row(
        id=msg.event_id,
        owner_id=msg.owner_id,
        tenant=msg.tenant,
        conversation_id=msg.conversation_id,
        message_id=msg.message_id,
        speaker=msg.speaker.name,
        role=msg.speaker.role,
        text=msg.text,
        occurred_at=msg.occurred_at,
        topics=list(event.topics),
        entities=list(event.entities),
        summary=event.summary,
        sentiment=float(event.sentiment),
        dialog_act=event.dialog_act,
        certainty=event.certainty,
        vector=float32_vector(event.embedding.vector),
        embedding_model=event.embedding.model,
        analysis_event_id=event.event_id,
        analyzer=f"{event.analyzer.name}/{event.analyzer.version}",
        generation=event.generation,
        source_topic=positioned.topic,
        source_partition=positioned.partition,
        source_offset=positioned.offset,
        seq=seq,
        in_working=True,
        working_seq=seq,
        consolidated=False,
        extraction_json=_extraction_json(event),
        utc_offset_minutes=msg.utc_offset_minutes,
        context=context,
    )


def consolidate(tx: Transaction, message_id: str, params: MemoryParameters) -> None:
    """Route one archived message's extraction into episodic, persona and graph memory (once)."""
    m = tx.state.message(message_id)
    if m is None or m.consolidated:
        return
    if m.extraction_json == _NOTHING_EXTRACTED:  # nothing to route: the message is only marked consolidated
        tx.put(evolve(m, consolidated=True))
        return
    extraction = json.loads(m.extraction_json)
    facts: list[EpisodicRow] = []
    events: list[EpisodicRow] = []
    new_ids: set[str] = set()
    activities: set[str] = set()
    for item in episodic.items_of(extraction, m.occurred_at):
        routed = episodic.route(tx, m, item, params)
        if routed.record is None:
            continue
        record = routed.record
        graph.link_record(tx, m, record, routed.replaced, params)
        if routed.decision != "IGNORE":
            new_ids.add(record.id)
            if record.type == "event" and m.role in params.persona_roles:
                activities.add(activity_of(record.content))
        if record.type == "fact":
            facts.append(record)
        elif record.type == "event":
            events.append(record)
    if m.role in params.persona_roles:
        for a in extraction.get("attributes", ()):
            persona.observe_attribute(tx, m.id, m.occurred_at, a["key"], a["value"], float(a["confidence"]), params)
    graph.link_fact_events(tx, m, facts, events, new_ids, params)
    for activity in sorted(activities):
        persona.refresh_habit(tx, activity, params)
    current = tx.state.message(message_id)
    if current is not None:
        tx.put(evolve(current, consolidated=True))
