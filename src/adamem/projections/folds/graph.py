"""Graph memory: nodes and weighted edges written on a message's arrival and on its consolidation.

Edges (weights from ``MemoryParameters``, ARCHITECTURE.md section 3):

- on arrival of message m: ``mentions`` m → topic; ``temporal_next`` between the owner's previous
  message p and m, stored as two directed rows (p → m ``forward`` 0.90 / 0.70 and m → p
  ``backward`` 0.45 / 0.35, same speaker / different speakers); ``same_topic`` between m and the
  newest earlier message sharing each topic (one row m → earlier, ``direction='both'``, 0.55);
  ``speaker_related`` between m and the same speaker's newest message in another conversation
  (``both``, 0.65) — so the first message of a speaker in a session links back to their previous
  session, and later messages of that session reach it through ``temporal_next``; ``similar`` between m and
  each of the ``similar_links`` messages of the owner's earlier sessions whose vectors have the highest cosine
  with m's (among the newest ``similar_window``; ``both``, 0.60): links across sessions that do not hang on a
  shared topic label.
- on consolidation: ``supports`` m → fact (0.85), m → attribute (0.80), m → event (0.80, added);
  ``supports`` fact → event (0.80) for a fact and an event of the same message, and for a new
  event (fact) with the newest ``entity_link_limit`` active facts (events) sharing an entity;
  ``supersedes`` new record → replaced record (0.60, added).
- on arrival, for each relation of the owner's domain packs (``params.relations``: from type, to
  type, edge type, weight): an edge of that type, ``direction='both'``, from the newest earlier
  message mentioning the from-type to m when m mentions the to-type (and from m to the newest
  earlier to-type message when m mentions the from-type); mentions are the analysis's typed
  ``term:<type>`` facts.

Node ids are ``node_id(user, node_type, ref_id)``; edge ids ``edge_id(user, edge_type, src, dst)``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from adamem.projections.folds.ids import edge_id, node_id
from adamem.projections.folds.keys import speaker_key, term_kinds
from adamem.projections.folds.lexicon import normalize
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import EpisodicRow, GraphEdgeRow, GraphNodeRow, MessageRow, edge_row, node_row
from adamem.projections.folds.state import Transaction

__all__ = [
    "link_arrival",
    "link_fact_events",
    "link_record",
    "record_node_id",
    "remove_nodes",
    "set_record_node_active",
]

_LABEL_CHARS = 200


def _edge(tx: Transaction, kind: str, src: str, dst: str, weight: float, direction: str, at: int, msg: str) -> None:
    user = tx.state.owner_id
    eid = edge_id(user, kind, src, dst)
    if tx.state.edge(eid) is None:
        tx.put(edge_row(eid, user, src, dst, kind, weight, direction, at, msg))


def record_node_id(record: EpisodicRow) -> str:
    """Id of the graph node standing for an episodic record."""
    return node_id(record.owner_id, record.type, record.id)


def link_arrival(tx: Transaction, m: MessageRow, params: MemoryParameters) -> None:
    """Write m's message node, its topics and its arrival edges; call BEFORE m enters the index."""
    state, user = tx.state, tx.state.owner_id
    index = state.index
    mnode = node_id(user, "message", m.id)
    tx.put(node_row(mnode, user, "message", m.id, m.text[:_LABEL_CHARS], 1.0, m.occurred_at, True))
    at = m.occurred_at

    if index.last_message is not None:
        prev = state.message(index.last_message[1])
        if prev is not None:
            pnode = node_id(user, "message", prev.id)
            same = speaker_key(prev) == speaker_key(m)
            fwd = params.w_temporal_same_speaker_forward if same else params.w_temporal_any_forward
            back = params.w_temporal_same_speaker_backward if same else params.w_temporal_any_backward
            _edge(tx, "temporal_next", pnode, mnode, fwd, "forward", at, m.id)
            _edge(tx, "temporal_next", mnode, pnode, back, "backward", at, m.id)

    linked: set[str] = set()
    for topic in m.topics:
        t = normalize(topic)
        if not t:
            continue
        tnode = node_id(user, "topic", t)
        if state.node(tnode) is None:
            tx.put(node_row(tnode, user, "topic", t, topic.strip(), 1.0, at, True))
        _edge(tx, "mentions", mnode, tnode, params.w_mentions, "forward", at, m.id)
        earlier = index.topic_latest.get(t)
        if earlier is not None and earlier[1] not in linked:
            linked.add(earlier[1])
            _edge(tx, "same_topic", mnode, node_id(user, "message", earlier[1]), params.w_same_topic, "both", at, m.id)

    _link_relations(tx, m, mnode, params)

    latest = index.speaker_latest.get(speaker_key(m))
    if latest is not None and latest[2] != m.conversation_id:
        _edge(
            tx,
            "speaker_related",
            mnode,
            node_id(user, "message", latest[1]),
            params.w_speaker_related,
            "both",
            at,
            m.id,
        )

    if params.similar_links > 0 and m.vector:
        vectors = state.vectors(params.similar_window)
        nearest = vectors.nearest(m, params.similar_links, params.similar_window, params.session_gap_ms)
        for other in nearest:
            onode = node_id(user, "message", other)
            _edge(tx, "similar", mnode, onode, params.w_similar, "both", at, m.id)


def _link_relations(tx: Transaction, m: MessageRow, mnode: str, params: MemoryParameters) -> None:
    """A domain pack's relation edges: m ↔ the newest earlier message mentioning the relation's other type."""
    if not params.relations:
        return
    kinds = term_kinds(m.extraction_json)
    if not kinds:
        return
    state, user = tx.state, tx.state.owner_id
    for from_type, to_type, name, weight in params.relations:
        for mine, other in ((to_type, from_type), (from_type, to_type)):
            earlier = state.index.term_latest.get(other)
            if mine in kinds and earlier is not None and earlier[1] != m.id and state.message(earlier[1]) is not None:
                src, dst = (
                    (node_id(user, "message", earlier[1]), mnode)
                    if mine == to_type
                    else (mnode, node_id(user, "message", earlier[1]))
                )
                _edge(tx, name, src, dst, weight, "both", m.occurred_at, m.id)


def link_record(
    tx: Transaction, m: MessageRow, record: EpisodicRow, replaced: EpisodicRow | None, params: MemoryParameters
) -> str:
    """Ensure the record's node and the m → record ``supports`` edge (+ ``supersedes``); returns the node id."""
    user = tx.state.owner_id
    rnode = record_node_id(record)
    existing = tx.state.node(rnode)
    node = node_row(
        rnode,
        user,
        record.type,
        record.id,
        record.content[:_LABEL_CHARS],
        record.confidence,
        record.occurred_at,
        record.status == "active",
    )
    if existing is None:
        tx.put(node)
    weight = {"fact": params.w_supports_message_fact, "attribute": params.w_supports_message_attribute}.get(
        record.type, params.w_supports_message_event
    )
    _edge(tx, "supports", node_id(user, "message", m.id), rnode, weight, "forward", m.occurred_at, m.id)
    if replaced is not None:
        set_record_node_active(tx, replaced)
        _edge(tx, "supersedes", rnode, record_node_id(replaced), params.w_supersedes, "forward", m.occurred_at, m.id)
    return rnode


def set_record_node_active(tx: Transaction, record: EpisodicRow) -> None:
    """Mirror a record's status (active or not) on its graph node."""
    node = tx.state.node(record_node_id(record))
    if node is not None and node.active != (record.status == "active"):
        tx.put(
            node_row(
                node.id,
                node.owner_id,
                node.node_type,
                node.ref_id,
                node.label,
                node.confidence,
                node.occurred_at,
                record.status == "active",
            )
        )


def _newest(tx: Transaction, ids: Iterable[str], limit: int) -> list[EpisodicRow]:
    rows = [r for r in (tx.state.record(i) for i in ids) if r is not None]
    return heapq.nlargest(limit, rows, key=lambda r: (r.occurred_at, r.id))


def link_fact_events(
    tx: Transaction,
    m: MessageRow,
    facts: list[EpisodicRow],
    events: list[EpisodicRow],
    new_ids: set[str],
    params: MemoryParameters,
) -> None:
    """``supports`` fact → event within m, and from/to the newest records sharing an entity with new ones."""
    index = tx.state.index
    pairs: set[tuple[str, str]] = {(f.id, e.id) for f in facts for e in events}
    limit = params.entity_link_limit
    for e in events:
        if e.id in new_ids:
            for entity in e.entities:
                ids = index.entity_facts.get(normalize(entity), set())
                pairs.update((f.id, e.id) for f in _newest(tx, ids, limit))
    for f in facts:
        if f.id in new_ids:
            for entity in f.entities:
                ids = index.entity_events.get(normalize(entity), set())
                pairs.update((f.id, e.id) for e in _newest(tx, ids, limit))
    user = tx.state.owner_id
    for fid, eid in sorted(pairs):
        src, dst = node_id(user, "fact", fid), node_id(user, "event", eid)
        if tx.state.node(src) is not None and tx.state.node(dst) is not None:
            _edge(tx, "supports", src, dst, params.w_supports_fact_event, "forward", m.occurred_at, m.id)


def remove_nodes(tx: Transaction, node_ids: set[str]) -> None:
    """Delete nodes, every edge touching them, and topic nodes no message mentions any more."""
    if not node_ids:
        return
    edges = tx.state.tables["graph_edges"]
    touching = [
        e.id for e in edges.values() if isinstance(e, GraphEdgeRow) and (e.src in node_ids or e.dst in node_ids)
    ]
    for eid in sorted(touching):
        tx.delete("graph_edges", eid)
    for nid in sorted(node_ids):
        tx.delete("graph_nodes", nid)
    mentioned = {e.dst for e in edges.values() if isinstance(e, GraphEdgeRow) and e.edge_type == "mentions"}
    nodes = tx.state.tables["graph_nodes"]
    orphans = {
        n.id for n in nodes.values() if isinstance(n, GraphNodeRow) and n.node_type == "topic" and n.id not in mentioned
    }
    if orphans:
        remove_nodes(tx, orphans)
