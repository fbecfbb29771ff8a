"""Control events: forgetting (an item, a message, a user) and correcting a memory item.

Forgetting removes rows (it emits ``Delete``s); it does not mark them:

- ``scope='message'`` (target = message event id): the archived message, its graph node and every
  edge touching it; it leaves the ``source_message_ids`` of records and the evidence of traits.
  Records left without a source are removed with their graph nodes; traits left without evidence
  are removed, others are recomputed without it (strength can only go down); cluster aggregates
  and habits are recomputed from what remains; topic nodes no message mentions any more go too.
  The id is kept as a tombstone in the owner row, so a redelivered analysis is not archived again.
  The message after it takes the words of the one now before it in its session as its ``context``.
- ``scope='item'`` (target = an episodic record, a persona trait, or a graph node): a record goes
  with its node and the persona evidence its source messages gave to the matching trait; a trait
  goes alone (aggregates are recomputed); a node of a record forgets the record, a message node
  the message, a topic node just the topic.
- ``scope='user'``: every row of the owner, the owner row included — nothing is left.

A summary record (``projections.folds.compressed``) that loses a source message goes whole, and the
records it compressed are active again: its text may speak of what was forgotten. Forgetting a
summary by id does the same.

When a removed record had superseded another, the older record takes its place in the history
chain; if the removed record was the active one, the older record becomes active again (as if the
newer statement had never been made — which is what a replay without it would produce).

``MemoryCorrected`` replaces an ACTIVE episodic record's content (or an active trait's value): the
old row is kept with ``status='superseded'``, ``valid_to`` = the correction's ``occurred_at`` and
``superseded_by`` = the new row, whose id derives from the control event id. A corrected record
has no source messages (its provenance is ``origin_event_id``); a corrected trait keeps the old
mention count but no evidence list, with strength ``confidence * ln(mentions + 1)``, so forgetting
the old messages does not undo an explicit correction. Correcting a non-active item changes nothing.
"""

from __future__ import annotations

import bisect
import math

from adamem.events import MemoryCorrected, MemoryForgotten
from adamem.projections.folds import graph, persona
from adamem.projections.folds.compressed import SUMMARY, restore_sources
from adamem.projections.folds.ids import edge_id, node_id, record_id, trait_id
from adamem.projections.folds.keys import attribute_identity
from adamem.projections.folds.lexicon import activity_of, normalize
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import (
    TABLES,
    EpisodicRow,
    GraphEdgeRow,
    GraphNodeRow,
    MessageRow,
    PersonaRow,
    context_words,
    evolve,
)
from adamem.projections.folds.state import Transaction

__all__ = ["correct", "forget"]


def forget(tx: Transaction, event: MemoryForgotten, params: MemoryParameters) -> None:
    """Remove what a ``MemoryForgotten`` names from every layer."""
    state = tx.state
    if event.scope == "user":
        for table in TABLES:
            for id in sorted(state.tables[table]):
                tx.delete(table, id)
        state.invalidate()
        return
    target = event.target_id or ""
    if event.scope == "message" or state.message(target) is not None:
        _forget_messages(tx, {target}, params)
        return
    record = state.record(target)
    trait = state.trait(target)
    node = state.node(target)
    if record is not None:
        _forget_record(tx, record, params)
    elif trait is not None:
        tx.delete("persona", trait.id)
        if trait.kind == "preference":
            persona.refresh_cluster(tx, trait.key, trait.cluster, params)
    elif node is not None:
        _forget_node(tx, node, params)


def _forget_node(tx: Transaction, node: GraphNodeRow, params: MemoryParameters) -> None:
    if node.node_type == "message":
        _forget_messages(tx, {node.ref_id}, params)
        return
    record = tx.state.record(node.ref_id)
    if record is not None:
        _forget_record(tx, record, params)
    else:
        graph.remove_nodes(tx, {node.id})


def _unlink(tx: Transaction, record: EpisodicRow) -> set[str]:
    """Delete a record, mend the supersession chain around it; returns its graph node id."""
    state = tx.state
    tx.delete("episodic", record.id)
    older = state.record(record.supersedes) if record.supersedes else None
    newer = state.record(record.superseded_by) if record.superseded_by else None
    if older is not None and older.superseded_by == record.id:
        if newer is not None:
            tx.put(evolve(older, superseded_by=newer.id))
        else:
            restored = evolve(older, status="active", valid_to=-1, superseded_by="")
            tx.put(restored)
            graph.set_record_node_active(tx, restored)
    if newer is not None and newer.supersedes == record.id:
        tx.put(evolve(newer, supersedes=older.id if older is not None else ""))
    return {graph.record_node_id(record)}


def _forget_record(tx: Transaction, record: EpisodicRow, params: MemoryParameters) -> None:
    if record.type == SUMMARY:
        restore_sources(tx, record)
    nodes = _unlink(tx, record)
    if record.type == "attribute":
        kind, key, value = attribute_identity(record.attribute_key, record.attribute_value)
        for tid in sorted(tx.state.index.trait_value.get(f"{kind}|{key}|{value}", set())):
            trait = tx.state.trait(tid)
            if trait is not None:
                persona.drop_evidence(tx, trait, set(record.source_message_ids), params)
                if trait.kind == "preference":
                    persona.refresh_cluster(tx, trait.key, trait.cluster, params)
    elif record.type == "event":
        persona.refresh_habit(tx, activity_of(record.content), params)
    graph.remove_nodes(tx, nodes)


def _forget_messages(tx: Transaction, ids: set[str], params: MemoryParameters) -> None:
    state = tx.state
    ids = {i for i in ids if state.message(i) is not None}
    if not ids:
        return
    owner = state.owner
    if owner is not None:
        tx.put(evolve(owner, forgotten_message_ids=sorted({*owner.forgotten_message_ids, *ids})))
    nodes = {node_id(state.owner_id, "message", i) for i in ids}
    activities: set[str] = set()
    for record in sorted(
        (
            r
            for r in state.tables["episodic"].values()
            if isinstance(r, EpisodicRow) and not ids.isdisjoint(r.source_message_ids)
        ),
        key=lambda r: r.id,
    ):
        current = state.record(record.id) or record
        if current.type == SUMMARY:
            restore_sources(tx, current)
            tx.delete("episodic", current.id)
            continue
        if current.type == "event":
            activities.add(activity_of(current.content))
        remaining = [s for s in current.source_message_ids if s not in ids]
        if remaining:
            tx.put(evolve(current, source_message_ids=remaining))
        else:
            nodes |= _unlink(tx, current)
    clusters: set[tuple[str, str]] = set()
    for trait in sorted(
        (
            t
            for t in state.tables["persona"].values()
            if isinstance(t, PersonaRow)
            and t.kind in ("preference", "trait")
            and not ids.isdisjoint(t.evidence_message_ids)
        ),
        key=lambda t: t.id,
    ):
        persona.drop_evidence(tx, trait, ids, params)
        if trait.kind == "preference":
            clusters.add((trait.key, trait.cluster))
    for polarity, label in sorted(clusters):
        persona.refresh_cluster(tx, polarity, label, params)
    for activity in sorted(activities):
        persona.refresh_habit(tx, activity, params)
    graph.remove_nodes(tx, nodes)
    forgotten = [m.seq for i in ids if (m := state.message(i)) is not None]
    for i in sorted(ids):
        tx.delete("messages", i)
    _mend_contexts(tx, forgotten, params)


def _mend_contexts(tx: Transaction, forgotten: list[int], params: MemoryParameters) -> None:
    """The message after each forgotten one takes the words of the message now before it as its ``context`` (none
    across a session's start): no message keeps a forgotten one's words, and each holds what a replay of the log
    without it gives."""
    kept = sorted((m.seq, m.id) for m in tx.state.tables["messages"].values() if isinstance(m, MessageRow))
    seqs = [seq for seq, _ in kept]
    for seq in sorted(set(forgotten)):
        at = bisect.bisect_right(seqs, seq)
        after = tx.state.message(kept[at][1]) if at < len(kept) else None
        if after is None or after.context is None:
            continue
        before = tx.state.message(kept[at - 1][1]) if at > 0 else None
        words = context_words(before, after.conversation_id, after.occurred_at, params.session_gap_ms)
        if words != after.context:
            tx.put(evolve(after, context=words))


def correct(tx: Transaction, event: MemoryCorrected, params: MemoryParameters) -> None:
    """Replace an active record's content or an active trait's value, keeping the old one as history."""
    state, at = tx.state, event.occurred_at
    record = state.record(event.item_id)
    if record is not None and record.status == "active":
        new_id = record_id(state.owner_id, event.event_id, record.type, record.id)
        new = evolve(
            record,
            id=new_id,
            content=event.content,
            confidence=event.confidence,
            source_message_ids=[],
            occurred_at=at,
            valid_from=at,
            valid_to=-1,
            superseded_by="",
            supersedes=record.id,
            status="active",
            router="CORRECT",
            origin_event_id=event.event_id,
            attribute_value=event.content if record.type == "attribute" else record.attribute_value,
        )
        old = evolve(record, status="superseded", valid_to=at, superseded_by=new_id)
        tx.put(old)
        tx.put(new)
        user = state.owner_id
        tx.put(
            GraphNodeRow(graph.record_node_id(new), user, new.type, new.id, new.content[:200], new.confidence, at, True)
        )
        graph.set_record_node_active(tx, old)
        src, dst = graph.record_node_id(new), graph.record_node_id(old)
        if state.node(dst) is not None:
            tx.put(
                GraphEdgeRow(
                    edge_id(user, "supersedes", src, dst),
                    user,
                    src,
                    dst,
                    "supersedes",
                    params.w_supersedes,
                    "forward",
                    at,
                    "",
                )
            )
        if record.type == "event":
            persona.refresh_habit(tx, activity_of(record.content), params)
            persona.refresh_habit(tx, activity_of(new.content), params)
        return
    trait = state.trait(event.item_id)
    if trait is None or trait.status != "active":
        return
    value = normalize(event.content) if trait.kind != "habit" else event.content.strip()
    cluster = persona.choose_cluster(tx, value) if trait.kind == "preference" else trait.cluster
    new_trait = evolve(
        trait,
        id=trait_id(state.owner_id, "correction", event.event_id, trait.id),
        value=value,
        cluster=cluster,
        members=[value],
        base_confidence=event.confidence,
        evidence_message_ids=[],
        evidence_confidences=[],
        evidence_times=[],
        strength=event.confidence * math.log(trait.mention_count + 1),
        updated_at=at,
        changed_at=at,
        disputed=False,
        status="active",
        superseded_by="",
        valid_to=-1,
    )
    stable = (
        new_trait.strength >= params.persona_stable_strength and new_trait.mention_count >= params.persona_min_evidence
    )
    tx.put(evolve(trait, status="superseded", valid_to=at, superseded_by=new_trait.id, stable=False, changed_at=at))
    tx.put(evolve(new_trait, stable=stable))
    if trait.kind == "preference":
        persona.refresh_cluster(tx, trait.key, trait.cluster, params)
        persona.refresh_cluster(tx, trait.key, cluster, params)
