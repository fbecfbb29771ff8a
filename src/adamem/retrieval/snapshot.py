"""One owner's memory as retrieval reads it: the rows, lookups derived from them, and as-of views.

``OwnerSnapshot`` is built from ``store.load_owner_columns`` (or rows) and never changes; a changed projection makes
a new snapshot, from the store's ``owner_changes`` when it can tell them (``updated``: only the
changed rows are indexed again, the rest is shared with the predecessor) and from every row
otherwise. Either way it answers exactly as one loaded afresh. Vectors live in the snapshot's
vector matrices only: its rows are kept without them. Its graph nodes and edges are held as
columns (``retrieval.nodes.NodeIndex``, ``retrieval.edges.EdgeIndex``), made into rows for the
nodes a question walks. A long-lived owner's snapshot holds its newest messages only, with a
``ColdArchive`` for the older ones (``retrieval.archive``): look a message up with
``message``/``messages_for``, which read a cold one from the store, not through ``messages``,
which holds the hot ones. ``View`` is the snapshot as it was at an
event time or a log offset (``AsOf``), or as it is now:

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

import bisect
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from adamem.projections.folds.episodic import items_of
from adamem.projections.folds.ids import node_id
from adamem.projections.folds.keys import record_content_key
from adamem.projections.folds.params import SEED_DEFAULT as MEMORY_DEFAULT
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import EpisodicRow, GraphEdgeRow, GraphNodeRow, MessageRow, OwnerRow, PersonaRow, Row
from adamem.projections.store.base import TEXT_FIELDS, OwnerChanges, OwnerColumns, owner_columns
from adamem.retrieval.archive import ColdArchive
from adamem.retrieval.cold import ColdIndex
from adamem.retrieval.edges import EdgeColumns, EdgeIndex
from adamem.retrieval.graph import MemoryGraph
from adamem.retrieval.index import TextIndex, VectorIndex, extracted_text
from adamem.retrieval.nodes import NodeColumns, NodeIndex

__all__ = ["AsOf", "MemoryRow", "OwnerSnapshot", "View"]

MemoryRow = MessageRow | EpisodicRow | PersonaRow
SEARCHED = ("messages", "episodic", "persona")
"""Tables with a vector and a text index."""
_ATTRIBUTE = {"messages": "messages", "episodic": "records", "persona": "traits"}
_HELD = frozenset({"owners", "graph_nodes", "graph_edges", *_ATTRIBUTE})
"""The memory layers; grants are not memory (``api.sharing``)."""
_ROW_BYTES = {
    "owners": 600,
    "messages": 2800,
    "episodic": 1800,
    "persona": 1600,
}
"""Approximate resident bytes per row of each table, its share of the text index included (for ``size``;
measured with tracemalloc: 1.1 MB for a 100-message owner, 90 MB for a 10,000-message one)."""
_BEFORE_KEPT = 4096
"""Older messages whose previous message a snapshot keeps (``message_before``)."""
_CONTEXT = "+context"
"""The key of the messages' index by their words and their ``context`` (``text_index(..., context=True)``)."""


def context_of(row: Row) -> str:
    """A message's ``context`` (the words of the owner's message before it), "" for none or another row."""
    return (row.context or "") if isinstance(row, MessageRow) else ""


@dataclass(frozen=True, slots=True)
class AsOf:
    """A point in an owner's history: an event time (ms) or an offset of the owner's analyses partition."""

    time: int | None = None
    offset: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        """JSON-ready form."""
        return {"time": self.time, "offset": self.offset}


class _TextIndexes(dict[str, TextIndex]):
    """An owner's BM25 indexes by key (a table, or ``messages+context``), each made on first need: an owner asked only
    "when" questions never makes the messages' index by their ``context``. A table's stored words
    (``OwnerSnapshot._tokens``) are let go once every index of that table is made."""

    def __init__(self, snapshot: OwnerSnapshot) -> None:
        super().__init__()
        self._snapshot = snapshot

    def __missing__(self, key: str) -> TextIndex:
        snap = self._snapshot
        table = key.removesuffix(_CONTEXT)
        tokens = snap._tokens.get(table)
        # a message is also found by the words of what was extracted from it ("Alice lives in Shenzhen"),
        # before its records exist (working memory) and after
        index = self[key] = TextIndex(
            snap.table_rows(table),
            TEXT_FIELDS[table],
            extra=extracted_text if table == "messages" else None,
            tokens=tokens,
            cut=context_of if key != table else None,
        )
        if tokens is not None and all(k in self for k in _KEYS[table]):
            snap._tokens = {t: v for t, v in snap._tokens.items() if t != table}
        return index


_KEYS = {t: (t, t + _CONTEXT) if t == "messages" else (t,) for t in SEARCHED}
"""Every index key of a table."""


class OwnerSnapshot:
    """Every row of one owner, indexed for retrieval; immutable once built."""

    def __init__(
        self,
        owner_id: str,
        rows: Iterable[Row],
        params: MemoryParameters = MEMORY_DEFAULT,
        archive: ColdArchive | None = None,
    ) -> None:
        """``archive``: the owner's cold messages when ``rows`` hold its newest messages only."""
        self._setup(owner_id, owner_columns(rows), params, archive)

    @classmethod
    def of_columns(
        cls,
        owner_id: str,
        columns: OwnerColumns,
        params: MemoryParameters = MEMORY_DEFAULT,
        archive: ColdArchive | None = None,
    ) -> OwnerSnapshot:
        """The snapshot of an owner loaded as columns (``StoreReader.load_owner_columns``): the same as of its rows."""
        snap = object.__new__(cls)
        snap._setup(owner_id, columns, params, archive)
        return snap

    def _setup(
        self, owner_id: str, columns: OwnerColumns, params: MemoryParameters, archive: ColdArchive | None
    ) -> None:
        self.owner_id = owner_id
        self.params = params
        self.archive = archive
        self.owner: OwnerRow | None = None
        self.messages: dict[str, MessageRow] = {}
        self.records: dict[str, EpisodicRow] = {}
        self.traits: dict[str, PersonaRow] = {}
        for row in columns.rows:
            self._put(row)
        self.nodes = NodeIndex(NodeColumns(owner_id, columns.nodes))
        self._edges = EdgeIndex(EdgeColumns(owner_id, columns.edges))
        self._vector_indexes = {t: VectorIndex.of_matrix(*columns.vectors[t]) for t in SEARCHED}
        self._tokens = columns.tokens  # until the text indexes are made
        self._derive()

    def _rows_of(self, table: str) -> dict[str, Any]:
        rows: dict[str, Any] = getattr(self, _ATTRIBUTE[table])
        return rows

    def _put(self, row: Row) -> None:
        if isinstance(row, OwnerRow):
            self.owner = row
        elif row.TABLE in _ATTRIBUTE:
            self._rows_of(row.TABLE)[row.id] = row

    def _strip(self, table: str, rows: dict[str, Any], ids: Iterable[str] | None = None) -> None:
        """Drop the vectors of rows (all, or ``ids``): the vector index holds them."""
        for id_ in rows if ids is None else ids:
            row = rows.get(id_)
            if row is not None and row.vector:
                rows[id_] = dataclasses.replace(row, vector=())

    def _derive(self, previous: OwnerSnapshot | None = None) -> None:
        """Lookups every view needs at once (the rest is derived on first use)."""
        if previous is not None and previous.messages is self.messages:
            self.by_seq: list[MessageRow] = previous.by_seq
        else:
            self.by_seq = sorted(self.messages.values(), key=lambda m: (m.seq, m.id))
        self.graphs: dict[AsOf | None, MemoryGraph] = {}  # built by the service per view, live view kept

    def updated(self, changes: OwnerChanges) -> OwnerSnapshot | None:
        """This snapshot with ``changes`` applied: itself when they change none of its rows; None: load afresh.

        Tables the changes do not touch, and every derived lookup that can be carried over, are
        shared with this snapshot; this snapshot itself is left as it was.
        """
        touched: dict[str, set[str]] = {}
        if self.archive is not None and (
            any(isinstance(r, MessageRow) and self.archive.holds(r) for r in changes.rows)
            or not changes.gone.get("messages", frozenset()) <= self.messages.keys()
        ):
            return None  # a cold message rewritten or forgotten: load the hot part afresh, with a new archive
        for table, gone in changes.gone.items():
            if table not in _HELD:
                continue
            held = self._held(table, gone)
            if held:
                touched.setdefault(table, set()).update(held)
        for row in changes.rows:
            if row.TABLE in _HELD:
                touched.setdefault(row.TABLE, set()).add(row.id)
        if not touched:
            return self
        new = object.__new__(OwnerSnapshot)
        new.owner_id, new.params, new.owner, new.archive = self.owner_id, self.params, self.owner, self.archive
        new._tokens = {}  # rows written since were not in the loaded columns: their text is cut
        for table in _ATTRIBUTE:
            rows = self._rows_of(table)
            setattr(new, _ATTRIBUTE[table], dict(rows) if table in touched else rows)
        new.nodes = self.nodes
        if "graph_nodes" in touched:
            written_nodes = [r for r in changes.rows if isinstance(r, GraphNodeRow)]
            new.nodes = self.nodes.changed(written_nodes, touched["graph_nodes"])
        new._edges = self._edges
        if "graph_edges" in touched:
            written = [r for r in changes.rows if isinstance(r, GraphEdgeRow)]
            new._edges = self._edges.changed(written, touched["graph_edges"])
        for table, ids in touched.items():
            if table == "owners":
                new.owner = None
            elif table in _ATTRIBUTE:
                target = new._rows_of(table)
                for id_ in ids:
                    target.pop(id_, None)
        for row in changes.rows:
            new._put(row)
        new._vector_indexes = dict(self._vector_indexes)
        for t in SEARCHED:
            if t in touched:
                index = self._vector_indexes[t].updated(new.table_rows(t), touched[t])
                if index is None:
                    return None
                new._vector_indexes[t] = index
                new._strip(t, new._rows_of(t), touched[t])
        new._derive(self)
        new._carry(self, touched)
        return new

    def _held(self, table: str, ids: frozenset[str]) -> set[str]:
        """Which of ``ids`` this snapshot holds in ``table``."""
        if table == "owners":
            return {self.owner.id} & ids if self.owner is not None else set()
        if table == "graph_edges":
            return self._edges.held(ids)
        if table == "graph_nodes":
            return {node for node in ids if node in self.nodes}
        return set(ids & self._rows_of(table).keys())

    def _carry(self, old: OwnerSnapshot, touched: dict[str, set[str]]) -> None:
        """Carry derived lookups the predecessor had made over, updated for the touched rows."""
        made = old.__dict__
        if "_text_indexes" in made:
            self._text_indexes = _TextIndexes(self)
            for key, index in old._text_indexes.items():
                t = key.removesuffix(_CONTEXT)
                self._text_indexes[key] = index.updated(self.table_rows(t), touched[t]) if t in touched else index
        if "node_of" in made and not ({"messages", "episodic"} & touched.keys()):
            self.node_of = old.node_of
        elif "node_of" in made:
            node_of = dict(old.node_of)
            for mid in touched.get("messages", ()):
                node_of.pop(mid, None)
                if mid in self.messages:
                    node_of[mid] = node_id(self.owner_id, "message", mid)
            for rid in touched.get("episodic", ()):
                node_of.pop(rid, None)
                if rid in self.records:
                    node_of[rid] = node_id(self.owner_id, self.records[rid].type, rid)
            self.node_of = node_of
        if "speakers" in made and "messages" not in touched:
            self.speakers = old.speakers

    @cached_property
    def edges(self) -> list[GraphEdgeRow]:
        """Every graph edge, in id order (made into rows: for small owners and tests)."""
        return self._edges.all()

    @property
    def edges_at(self) -> EdgeIndex:
        """The edges at each graph node, in id order (``retrieval.graph.edges_by_node``'s mapping, held as columns)."""
        return self._edges

    @property
    def edge_rows(self) -> Mapping[str, GraphEdgeRow]:
        """The graph edges by id."""
        return self._edges.by_id

    @property
    def size(self) -> int:
        """Approximate resident bytes: rows by table, vector matrices and text indexes."""
        counts = {"messages": len(self.messages), "episodic": len(self.records), "persona": len(self.traits)}
        counts |= {"owners": 1}
        rows = sum(_ROW_BYTES[t] * n for t, n in counts.items()) + self.nodes.nbytes + self._edges.nbytes
        archive = self.archive.size if self.archive is not None else 0
        return rows + archive + sum(v.matrix.nbytes for v in self._vector_indexes.values())

    @property
    def last_event_time(self) -> int:
        """The owner's clock: the newest event time applied (-1 if none)."""
        return self.owner.last_event_time if self.owner is not None else -1

    @cached_property
    def speakers(self) -> tuple[tuple[str, str], ...]:
        """Known ``(speaker name, role)`` pairs of the owner's messages, sorted."""
        found = {(m.speaker, m.role) for m in self.messages.values()}
        if self.archive is not None:
            found.update(self.archive.split.speakers)
        return tuple(sorted(found))

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
    def tiered_message_position(self) -> dict[str, int]:
        """``message_position``, and after the index's rows the message nodes without one (a tiered owner's
        cold messages), in node id order: the places where hub relevance keeps a query's cold cosines."""
        out = dict(self.message_position)
        start = self.vector_index("messages").matrix.shape[0]
        rest = sorted(n for n in self.nodes.of_type("message") if n not in out)
        out.update((node, start + i) for i, node in enumerate(rest))
        return out

    def cold_rows(self, index: ColdIndex) -> npt.NDArray[np.int64]:
        """The row in ``index`` (the cold part held in process) of the message of each node placed after the hot
        rows by ``tiered_message_position``, in that order (-1: none), made once per index."""
        memo = self._cold_rows_memo
        if not memo or memo[0][0] is not index:
            start = self.vector_index("messages").matrix.shape[0]
            placed = sorted((at, node) for node, at in self.tiered_message_position.items() if at >= start)
            ids = [n.ref_id if (n := self.nodes.get(node)) is not None else "" for _, node in placed]
            found = index.positions(ids)
            memo[:] = [(index, np.fromiter((found.get(i, -1) for i in ids), dtype=np.int64, count=len(ids)))]
        return memo[0][1]

    @cached_property
    def _cold_rows_memo(self) -> list[tuple[ColdIndex, npt.NDArray[np.int64]]]:
        return []

    @cached_property
    def node_of(self) -> dict[str, str]:
        """Graph node id of every message and record id."""
        out = {mid: node_id(self.owner_id, "message", mid) for mid in self.messages}
        out.update({rid: node_id(self.owner_id, r.type, rid) for rid, r in self.records.items()})
        return out

    def node_for(self, row_id: str) -> str | None:
        """The graph node of a message or record (a cold message's too), None without one."""
        found = self.node_of.get(row_id)
        if found is None and self.archive is not None:
            cold = node_id(self.owner_id, "message", row_id)
            return cold if cold in self.nodes else None
        return found

    def sources_of_node(self, node: str) -> frozenset[str]:
        """Message ids a graph node stands on: the message itself, or a record's sources (none for topics)."""
        found = self._sources_memo.get(node)
        if found is None:
            found = self._sources_memo[node] = self._sources_of_node(node)
        return found

    @cached_property
    def _sources_memo(self) -> dict[str, frozenset[str]]:
        return {}

    def _sources_of_node(self, node: str) -> frozenset[str]:
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
    def times_memo(self) -> dict[tuple[str, str], tuple[int, ...]]:
        """(table, id) -> the event times of a row (``fusion.item_times``), filled as questions need them."""
        return {}

    @cached_property
    def support_memo(self) -> dict[tuple[str, str], int]:
        """(table, id) -> how many records / evidence back a row in the live view (``fusion.fact_support``)."""
        return {}

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

    @cached_property
    def _seqs(self) -> list[int]:
        return [m.seq for m in self.by_seq]

    @cached_property
    def _before_memo(self) -> dict[str, str | None]:
        """``message_before`` of older messages looked up through the edges (the questions' cold hits recur)."""
        return {}

    def message_before(self, m: MessageRow) -> str | None:
        """The id of the owner's message before ``m`` (whose words are its ``context``): the held message before it by
        ``seq``, or for the first held message and an older one, the end of its backward ``temporal_next`` edge;
        None for the owner's first message."""
        at = bisect.bisect_left(self._seqs, m.seq)
        if 0 < at < len(self.by_seq) and self.by_seq[at].id == m.id:
            return self.by_seq[at - 1].id
        memo = self._before_memo
        if m.id in memo:
            return memo[m.id]
        found = None
        node = node_id(self.owner_id, "message", m.id)
        for src, dst, edge_type, _, direction in self._edges.ends_at(node):
            if edge_type == "temporal_next" and direction == "backward" and src == node:
                before = self.nodes.get(dst)
                found = before.ref_id if before is not None else None
                break
        if len(memo) >= _BEFORE_KEPT:
            memo.clear()
        memo[m.id] = found
        return found

    def text_index(self, table: str, *, context: bool = False) -> TextIndex:
        """The BM25 index of ``messages``, ``episodic`` or ``persona`` (built on first use); ``context``: of the
        messages, each by its words and its ``context`` (the words of the owner's message before it)."""
        return self._text_indexes[table + _CONTEXT if context and table == "messages" else table]

    def vector_index(self, table: str) -> VectorIndex:
        """The vector matrix of ``messages``, ``episodic`` or ``persona`` (built on first use)."""
        return self._vector_indexes[table]

    @cached_property
    def _text_indexes(self) -> _TextIndexes:
        return _TextIndexes(self)

    def message(self, message_id: str) -> MessageRow | None:
        """A message by id, hot or cold (a cold one not memoised yet is read from the store)."""
        found = self.messages.get(message_id)
        if found is not None or self.archive is None:
            return found
        return self.archive.get(message_id) or self.archive.fetch((message_id,)).get(message_id)

    def messages_for(self, ids: Iterable[str]) -> dict[str, MessageRow]:
        """The messages among ``ids`` that exist, hot or cold (the cold ones not memoised in one store read)."""
        ids = list(ids)
        found = {i: m for i in ids if (m := self.messages.get(i)) is not None}
        if self.archive is not None and len(found) < len(set(ids)):
            found.update(self.archive.fetch(i for i in ids if i not in found))
        return found

    def existing_messages(self, ids: Iterable[str]) -> set[str]:
        """The messages among ``ids`` that exist, hot or cold, without reading a cold one's row."""
        ids = list(ids)
        found = {i for i in ids if i in self.messages}
        if self.archive is not None and len(found) < len(set(ids)):
            found |= self.archive.existing(i for i in ids if i not in found)
        return found

    def row(self, table: str, row_id: str) -> MemoryRow | None:
        """A message, record or trait by table and id (a cold message only if memoised: no store read)."""
        if table == "messages":
            found = self.messages.get(row_id)
            return found if found is not None or self.archive is None else self.archive.get(row_id)
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
        return self.stale_id(m.id)

    def stale_id(self, message_id: str) -> bool:
        """``stale`` of the message with this id (hot or cold: its records are held either way)."""
        ids = self.snapshot.records_of_message.get(message_id, ())
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
            if m is None and snap.archive is not None:
                return self.as_of is None  # a cold message's node: the message exists while its node does
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

    def visible_messages(self, ids: Iterable[str]) -> set[str]:
        """The messages among ``ids`` that exist and are visible here (now: every one that exists, so a
        cold message's row is not read)."""
        if self.as_of is None:
            return self.snapshot.existing_messages(ids)
        found = self.snapshot.messages_for(ids)
        return {i for i, m in found.items() if self.message(m)}

    def evidence(self, t: PersonaRow) -> list[tuple[str, float, int]]:
        """A trait's (message id, confidence, time) evidence visible at this point."""
        seen = self.visible_messages(t.evidence_message_ids)
        zipped = zip(t.evidence_message_ids, t.evidence_confidences, t.evidence_times, strict=True)
        return [(mid, conf, at) for mid, conf, at in zipped if mid in seen]
