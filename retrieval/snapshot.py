"""One owner's memory as retrieval reads it: the rows, lookups derived from them, and as-of views.

``OwnerSnapshot`` is built from ``store.load_owner`` and never changes; a changed projection makes
a new snapshot (``retrieval.cache`` keys snapshots by the shard's checkpoint). ``View`` is the
snapshot as it was at an event time or a log offset (``AsOf``), or as it is now:

- now: every message; episodic records and persona traits with ``status == 'active'``
  (superseded records are history) — except records that a message still waiting in working
  memory will supersede when it is consolidated (``pending``: the episodic router's own UPDATE
  rule applied ahead of time, so a query right after "I moved to Shenzhen" does not answer
  with the old city); graph nodes that are active;
- at event time T: messages with ``occurred_at <= T``; records valid at T
  (``valid_from <= T < valid_to``, superseded or not); traits first seen by T and not superseded
  before T; graph nodes and edges whose message or record is visible and written by T;
- at log offset O: messages with ``source_offset < O``; everything else as at the event time of
  the newest such message (records carry no offsets of their own).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from projections.folds.episodic import items_of
from projections.folds.ids import node_id
from projections.folds.keys import record_content_key
from projections.folds.params import SEED_DEFAULT as MEMORY_DEFAULT
from projections.folds.params import MemoryParameters
from projections.folds.rows import EpisodicRow, GraphEdgeRow, GraphNodeRow, MessageRow, OwnerRow, PersonaRow, Row
from projections.store.base import TEXT_FIELDS
from retrieval.graph import MemoryGraph
from retrieval.index import TextIndex, VectorIndex, extracted_text

__all__ = ["AsOf", "MemoryRow", "OwnerSnapshot", "View"]

MemoryRow = MessageRow | EpisodicRow | PersonaRow


@dataclass(frozen=True, slots=True)
class AsOf:
    """A point in an owner's history: an event time (ms) or an offset of the owner's analyses partition."""

    time: int | None = None
    offset: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        """JSON-ready form."""
        return {"time": self.time, "offset": self.offset}


class OwnerSnapshot:
    """Every row of one owner, indexed for retrieval; immutable once built."""

    def __init__(self, user_id: str, rows: Iterable[Row], params: MemoryParameters = MEMORY_DEFAULT) -> None:
        self.user_id = user_id
        self.params = params
        self.owner: OwnerRow | None = None
        self.messages: dict[str, MessageRow] = {}
        self.records: dict[str, EpisodicRow] = {}
        self.traits: dict[str, PersonaRow] = {}
        self.nodes: dict[str, GraphNodeRow] = {}
        self.edges: list[GraphEdgeRow] = []
        for row in rows:
            if isinstance(row, MessageRow):
                self.messages[row.id] = row
            elif isinstance(row, EpisodicRow):
                self.records[row.id] = row
            elif isinstance(row, PersonaRow):
                self.traits[row.id] = row
            elif isinstance(row, GraphNodeRow):
                self.nodes[row.id] = row
            elif isinstance(row, GraphEdgeRow):
                self.edges.append(row)
            elif isinstance(row, OwnerRow):
                self.owner = row
        self.edges.sort(key=lambda e: e.id)
        self.by_seq: list[MessageRow] = sorted(self.messages.values(), key=lambda m: (m.seq, m.id))
        self.graphs: dict[AsOf | None, MemoryGraph] = {}  # built by the service per view, live view kept

    @property
    def last_event_time(self) -> int:
        """The owner's clock: the newest event time applied (-1 if none)."""
        return self.owner.last_event_time if self.owner is not None else -1

    @cached_property
    def speakers(self) -> tuple[tuple[str, str], ...]:
        """Known ``(speaker name, role)`` pairs of the owner's messages, sorted."""
        return tuple(sorted({(m.speaker, m.role) for m in self.messages.values()}))

    @cached_property
    def user_names(self) -> tuple[str, ...]:
        """Names the owner speaks under (role user), sorted."""
        return tuple(sorted({name for name, role in self.speakers if role == "user"}))

    @cached_property
    def working_now(self) -> frozenset[str]:
        """Ids of the messages in working memory now."""
        return frozenset(m.id for m in self.messages.values() if m.in_working)

    @cached_property
    def message_position(self) -> dict[str, int]:
        """Row of each message node in the messages vector index (for vectorised hub relevance)."""
        position = self.vector_index("messages").position
        return {node: position[mid] for mid, node in self.node_of.items() if mid in position}

    @cached_property
    def node_of(self) -> dict[str, str]:
        """Graph node id of every message and record id."""
        out = {mid: node_id(self.user_id, "message", mid) for mid in self.messages}
        out.update({rid: node_id(self.user_id, r.type, rid) for rid, r in self.records.items()})
        return out

    def sources_of_node(self, node: str) -> frozenset[str]:
        """Message ids a graph node stands on: the message itself, or a record's sources (none for topics)."""
        n = self.nodes.get(node)
        if n is None or n.node_type == "topic":
            return frozenset()
        if n.node_type == "message":
            return frozenset((n.ref_id,))
        r = self.records.get(n.ref_id)
        return frozenset(r.source_message_ids) if r is not None else frozenset()

    @cached_property
    def pending(self) -> dict[str, str]:
        """Active records that unconsolidated messages will supersede: record id → message id.

        The router's UPDATE rule (``projections.folds.episodic``): an item of the same type and
        conflict slot with a different content, confidence above ``add_threshold`` and at least
        the record's. Messages are taken in arrival order; the newest claim wins.
        """
        by_slot: dict[tuple[str, str], list[EpisodicRow]] = {}
        for r in self.records.values():
            if r.status == "active" and r.key:
                by_slot.setdefault((r.type, r.key), []).append(r)
        out: dict[str, str] = {}
        for m in self.by_seq:
            if m.consolidated or not m.extraction_json:
                continue
            for item in items_of(json.loads(m.extraction_json), m.occurred_at):
                if not item.slot or item.confidence <= self.params.add_threshold:
                    continue
                for r in by_slot.get((item.type, item.slot), ()):
                    if record_content_key(r) != item.content_key and item.confidence >= r.confidence:
                        out[r.id] = m.id
        return out

    @cached_property
    def records_of_message(self) -> dict[str, tuple[str, ...]]:
        """Ids of the records each message is a source of."""
        out: dict[str, list[str]] = {}
        for r in sorted(self.records.values(), key=lambda r: r.id):
            for mid in r.source_message_ids:
                out.setdefault(mid, []).append(r.id)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def traits_of_message(self) -> dict[str, tuple[str, ...]]:
        """Ids of the persona traits each message is evidence of."""
        out: dict[str, list[str]] = {}
        for t in sorted(self.traits.values(), key=lambda t: t.id):
            for mid in t.evidence_message_ids:
                out.setdefault(mid, []).append(t.id)
        return {k: tuple(v) for k, v in out.items()}

    def table_rows(self, table: str) -> Sequence[MemoryRow]:
        """Every row of ``messages``, ``episodic`` or ``persona``."""
        if table == "messages":
            return list(self.messages.values())
        if table == "episodic":
            return list(self.records.values())
        return list(self.traits.values())

    def text_index(self, table: str) -> TextIndex:
        """The BM25 index of ``messages``, ``episodic`` or ``persona`` (built on first use)."""
        return self._text_indexes[table]

    def vector_index(self, table: str) -> VectorIndex:
        """The vector matrix of ``messages``, ``episodic`` or ``persona`` (built on first use)."""
        return self._vector_indexes[table]

    @cached_property
    def _text_indexes(self) -> dict[str, TextIndex]:
        # a message is also found by the words of what was extracted from it ("Alice lives in Shenzhen"),
        # before its records exist (working memory) and after
        return {
            t: TextIndex(self.table_rows(t), TEXT_FIELDS[t], extra=extracted_text if t == "messages" else None)
            for t in ("messages", "episodic", "persona")
        }

    @cached_property
    def _vector_indexes(self) -> dict[str, VectorIndex]:
        return {t: VectorIndex(self.table_rows(t)) for t in ("messages", "episodic", "persona")}

    def row(self, table: str, row_id: str) -> MemoryRow | None:
        """A message, record or trait by table and id."""
        if table == "messages":
            return self.messages.get(row_id)
        if table == "episodic":
            return self.records.get(row_id)
        return self.traits.get(row_id)


class View:
    """A snapshot as of now, an event time, or a log offset: which rows are visible, and when "now" is."""

    def __init__(self, snapshot: OwnerSnapshot, as_of: AsOf | None = None) -> None:
        self.snapshot = snapshot
        self.as_of = as_of
        self.time: int | None = None
        if as_of is not None and as_of.offset is not None:
            times = [m.occurred_at for m in snapshot.messages.values() if m.source_offset < as_of.offset]
            self.time = max(times, default=-1)
            if as_of.time is not None:
                self.time = min(self.time, as_of.time)
        elif as_of is not None and as_of.time is not None:
            self.time = as_of.time
        self.now = self.time if self.time is not None else snapshot.last_event_time

    @property
    def live(self) -> bool:
        """True when this is the current memory."""
        return self.time is None

    def message(self, m: MessageRow) -> bool:
        """Whether a message existed at this point."""
        if self.as_of is None:
            return True
        if self.as_of.offset is not None and m.source_offset >= self.as_of.offset:
            return False
        return self.time is None or m.occurred_at <= self.time

    def record(self, r: EpisodicRow) -> bool:
        """Whether a record was valid at this point (now: active)."""
        if self.time is None:
            return r.status == "active" and r.id not in self.snapshot.pending
        return r.valid_from <= self.time and (r.valid_to < 0 or r.valid_to > self.time)

    def trait(self, t: PersonaRow) -> bool:
        """Whether a persona trait existed and was not superseded at this point (now: active)."""
        if self.time is None:
            return t.status == "active"
        return t.first_seen <= self.time and (t.status == "active" or t.valid_to < 0 or t.valid_to > self.time)

    def stale(self, m: MessageRow) -> bool:
        """A message whose every record is no longer valid here: what it stated has been superseded."""
        ids = self.snapshot.records_of_message.get(m.id, ())
        return bool(ids) and not any(self.record(self.snapshot.records[i]) for i in ids)

    def visible(self, row: MemoryRow) -> bool:
        """Visibility of any message, record or trait."""
        if isinstance(row, MessageRow):
            return self.message(row)
        if isinstance(row, EpisodicRow):
            return self.record(row)
        return self.trait(row)

    def node(self, n: GraphNodeRow) -> bool:
        """Whether a graph node stood for something visible at this point."""
        snap = self.snapshot
        if n.node_type == "message":
            m = snap.messages.get(n.ref_id)
            return m is not None and self.message(m)
        if n.node_type == "topic":
            return self.time is None or n.occurred_at <= self.time
        r = snap.records.get(n.ref_id)
        if r is None:
            return n.active and self.time is None
        return self.record(r)

    def edge(self, e: GraphEdgeRow) -> bool:
        """Whether an edge had been written at this point (its endpoints are checked separately)."""
        return self.time is None or e.occurred_at <= self.time

    @cached_property
    def working_ids(self) -> frozenset[str]:
        """Messages in working memory at this point (the FIFO replayed over the visible messages)."""
        if self.as_of is None:
            return self.snapshot.working_now
        seen = [m for m in self.snapshot.by_seq if self.message(m)]
        n, cap, batch = len(seen), self.snapshot.params.working_capacity, self.snapshot.params.eviction_batch
        keep = n if n <= cap else cap + 1 - batch + (n - cap - 1) % batch
        return frozenset(m.id for m in seen[n - keep :])

    def evidence(self, t: PersonaRow) -> list[tuple[str, float, int]]:
        """A trait's (message id, confidence, time) evidence visible at this point."""
        out = []
        for mid, conf, at in zip(t.evidence_message_ids, t.evidence_confidences, t.evidence_times, strict=True):
            m = self.snapshot.messages.get(mid)
            if m is not None and self.message(m):
                out.append((mid, conf, at))
        return out
