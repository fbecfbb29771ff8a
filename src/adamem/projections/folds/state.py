"""The fold state of one memory owner: nothing but its rows, plus indexes derived from them.

``OwnerMemory.from_rows(owner_id, rows)`` rebuilds exactly the state that emitted those rows, so a
worker that restarts reloads its owners from the store and folds on as if it had never stopped.
The indexes (``MemoryIndex``) are a cache: built lazily from the rows, kept up to date by
``Transaction.put`` and dropped (to be rebuilt) when a message or preference row is deleted. Every index lookup
that may see several candidates picks one by content (smallest id, latest sequence), never by
insertion order, so a rebuilt index answers exactly like a maintained one.

The state is owned by the fold: ``apply`` changes it in place and returns it (copying every row
per event would make a replay quadratic). Rows themselves are immutable values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from adamem.errors import AdaMemError
from adamem.projections.folds.changes import Change, Delete, Upsert
from adamem.projections.folds.keys import record_content_key, speaker_key, term_kinds, trait_slot
from adamem.projections.folds.lexicon import activity_of, normalize, tokens
from adamem.projections.folds.rows import (
    TABLES,
    EpisodicRow,
    GraphEdgeRow,
    GraphNodeRow,
    MessageRow,
    OwnerRow,
    PersonaRow,
    Row,
)
from adamem.quick import quick_constructor

__all__ = ["ForeignOwnerError", "MemoryIndex", "MessageVectors", "OwnerMemory", "Transaction"]

_Op = Callable[[dict[str, set[str]], str, str], None]
_INDEXED = frozenset(("messages", "episodic", "persona"))  # the tables ``MemoryIndex`` derives lookups from
_UPSERT = quick_constructor(Upsert)  # the same changes, without the frozen ``__init__`` (a fold makes several an event)
_DELETE = quick_constructor(Delete)


class ForeignOwnerError(AdaMemError):
    """An event or row of one memory owner was given to another owner's state."""


def _add(index: dict[str, set[str]], key: str, value: str) -> None:
    index.setdefault(key, set()).add(value)


def _discard(index: dict[str, set[str]], key: str, value: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(value)
        if not members:
            del index[key]


@dataclass
class MemoryIndex:
    """Lookups derived from the rows of one owner; never authoritative."""

    working: dict[str, int] = field(default_factory=dict)  # message id -> working_seq
    last_message: tuple[int, str] | None = None  # (seq, id) of the newest message
    topic_latest: dict[str, tuple[int, str]] = field(default_factory=dict)  # topic -> newest (seq, message id)
    speaker_latest: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # -> (seq, id, conversation)
    term_latest: dict[str, tuple[int, str]] = field(default_factory=dict)  # pack entity type -> newest (seq, id)
    record_slot: dict[str, set[str]] = field(default_factory=dict)  # "type|key" -> active record ids
    record_content: dict[str, set[str]] = field(default_factory=dict)  # "type|content key" -> active ids
    activity_events: dict[str, set[str]] = field(default_factory=dict)  # "role|activity" -> active event ids
    entity_facts: dict[str, set[str]] = field(default_factory=dict)  # entity -> active fact ids
    entity_events: dict[str, set[str]] = field(default_factory=dict)  # entity -> active event ids
    trait_value: dict[str, set[str]] = field(default_factory=dict)  # "kind|key|value" -> active trait ids
    trait_slot: dict[str, set[str]] = field(default_factory=dict)  # conflict slot -> active trait ids
    cluster_members: dict[str, set[str]] = field(default_factory=dict)  # cluster -> preference trait ids
    cluster_tokens: dict[str, set[str]] = field(default_factory=dict)  # token -> cluster labels

    def add(self, row: Row) -> None:
        """Index one row."""
        if isinstance(row, MessageRow):
            if row.in_working:
                self.working[row.id] = row.working_seq
            mark = (row.seq, row.id)
            if self.last_message is None or mark > self.last_message:
                self.last_message = mark
            for topic in row.topics:
                t = normalize(topic)
                if t and (t not in self.topic_latest or mark > self.topic_latest[t]):
                    self.topic_latest[t] = mark
            for kind in term_kinds(row.extraction_json):
                if kind not in self.term_latest or mark > self.term_latest[kind]:
                    self.term_latest[kind] = mark
            sk = speaker_key(row)
            if sk not in self.speaker_latest or mark > self.speaker_latest[sk][:2]:
                self.speaker_latest[sk] = (row.seq, row.id, row.conversation_id)
        elif isinstance(row, EpisodicRow):
            self._record(row, _add)
        elif isinstance(row, PersonaRow):
            self._trait(row, _add)
            if row.kind == "preference":
                for tok in tokens(row.value):
                    _add(self.cluster_tokens, tok, row.cluster)

    def discard(self, row: Row) -> None:
        """Forget one row that is being replaced; message rows only leave working memory here."""
        if isinstance(row, MessageRow):
            self.working.pop(row.id, None)
        elif isinstance(row, EpisodicRow):
            self._record(row, _discard)
        elif isinstance(row, PersonaRow):
            self._trait(row, _discard)
            # cluster_tokens only grows: a token pointing at a cluster is a hint, and the hint set is
            # recomputed from the rows whenever the index is rebuilt after a delete.

    def _record(self, row: EpisodicRow, fn: _Op) -> None:
        if row.status != "active":
            if row.status == "compressed" and row.type == "event":  # still an occurrence of its habit
                fn(self.activity_events, f"{row.speaker_role}|{activity_of(row.content)}", row.id)
            return
        if row.key:
            fn(self.record_slot, f"{row.type}|{row.key}", row.id)
        fn(self.record_content, f"{row.type}|{record_content_key(row)}", row.id)
        if row.type == "event":
            fn(self.activity_events, f"{row.speaker_role}|{activity_of(row.content)}", row.id)
        target = self.entity_facts if row.type == "fact" else self.entity_events if row.type == "event" else None
        if target is not None:
            for entity in row.entities:
                fn(target, normalize(entity), row.id)

    def _trait(self, row: PersonaRow, fn: _Op) -> None:
        if row.status != "active":
            return
        fn(self.trait_value, f"{row.kind}|{row.key}|{row.value}", row.id)
        slot = trait_slot(row)
        if slot:
            fn(self.trait_slot, slot, row.id)
        if row.kind == "preference" and row.cluster:
            fn(self.cluster_members, row.cluster, row.id)


class MessageVectors:
    """An owner's newest message vectors in arrival order (``seq``), L2-normalised, for "nearest in meaning" lookups.

    Derived from the rows like ``MemoryIndex``: built from every message row sorted by ``seq`` and then
    appended to as messages arrive (in ``seq`` order), so a rebuilt one holds the same rows in the same
    places as a maintained one. Messages without a vector, or with one of another length than the first
    message's, are left out. With ``keep``, at least the newest ``keep`` are held and at most twice as many
    (the oldest are dropped ``keep`` at a time): a long-lived owner's vectors cost what its newest cost.
    """

    __slots__ = (
        "_codes",
        "_conversation",
        "_last",
        "_matrix",
        "_session",
        "_time",
        "_unit",
        "_vectors",
        "ids",
        "keep",
        "size",
    )

    def __init__(self, rows: Iterable[MessageRow] = (), keep: int = 0) -> None:
        self.ids: list[str] = []
        self.size, self.keep = 0, keep
        self._last = -1  # seq of the newest message added
        self._vectors: dict[str, tuple[float, ...]] = {}  # id -> the row's vector (the tuple, not a copy)
        self._codes: dict[str, int] = {}  # conversation id -> its number
        self._matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
        self._time: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._conversation: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._session: tuple[int, int, int] | None = None  # (gap, messages held, where the newest's session starts)
        self._unit: tuple[tuple[float, ...], npt.NDArray[np.float32]] | None = None  # the vector asked for last
        ordered = sorted(rows, key=lambda r: (r.seq, r.id))
        width = next((len(r.vector) for r in ordered if any(r.vector)), 0)
        held = [r for r in ordered if len(r.vector) == width and any(r.vector)]
        n = len(held)
        if keep and n > 2 * keep:  # what appending them one by one would hold: made without the older ones
            held = held[n - (keep + (n - 2 * keep - 1) % keep + 1) :]
        for row in held:
            self.add(row)
        if ordered:
            self._last = ordered[-1].seq

    def add(self, row: MessageRow) -> bool:
        """Append a new message's vector; False when a held message came back with another vector (the
        vectors must then be built again from the rows)."""
        if row.seq <= self._last:  # not an arrival: a message written again (leaving working memory, consolidated)
            known = self._vectors.get(row.id)
            return known is None or known is row.vector or known == row.vector
        self._last = row.seq
        if not any(row.vector) or (self.size and len(row.vector) != self._matrix.shape[1]):
            return True
        unit = self._unit
        v = unit[1] if unit is not None and unit[0] is row.vector else _unit(row.vector)
        assert v is not None  # a value is not zero
        if self.keep and self.size == 2 * self.keep:
            self._drop(self.keep)
        if self.size == len(self._matrix):  # grow by doubling: appends cost O(1) amortised
            capacity = max(64, 2 * self.size)
            matrix = np.zeros((capacity, len(v)), dtype=np.float32)
            if self.size:
                matrix[: self.size] = self._matrix[: self.size]
            self._matrix = matrix
            self._time = np.resize(self._time, capacity)
            self._conversation = np.resize(self._conversation, capacity)
        at = self.size
        self._matrix[at] = v
        self._time[at] = row.occurred_at
        self._conversation[at] = self._codes.setdefault(row.conversation_id, len(self._codes))
        self.size += 1
        self.ids.append(row.id)
        self._vectors[row.id] = row.vector
        return True

    def _drop(self, n: int) -> None:
        """Forget the oldest ``n`` held."""
        for mid in self.ids[:n]:
            del self._vectors[mid]
        rest = self.size - n
        self._matrix[:rest] = self._matrix[n : self.size]
        self._time[:rest] = self._time[n : self.size]
        self._conversation[:rest] = self._conversation[n : self.size]
        self.ids = self.ids[n:]
        self.size = rest
        self._session = None

    def _session_start(self, gap: int) -> int:
        """Where the session of the newest held message starts (kept from one arrival to the next)."""
        known = self._session
        if known is None or known[0] != gap:
            size, time, conversation = self.size, self._time, self._conversation
            breaks = np.nonzero((conversation[1:size] != conversation[: size - 1]) | (np.diff(time[:size]) >= gap))[0]
            start = int(breaks[-1]) + 1 if len(breaks) else 0
        else:
            start = known[2]
            for i in range(known[1], self.size):  # the messages held since
                if self._conversation[i] != self._conversation[i - 1] or self._time[i] - self._time[i - 1] >= gap:
                    start = i
        self._session = (gap, self.size, start)
        return start

    def nearest(self, row: MessageRow, k: int, window: int, session_gap_ms: int) -> list[str]:
        """Ids of the ``k`` messages among the newest ``window`` held that came before the session of ``row`` (a
        message arriving next), whose vectors have the highest cosine with its vector (ties: the earlier first).

        Sessions are the folds': a message opens one when its conversation differs from the message before it,
        or it comes ``session_gap_ms`` or more after it.
        """
        v = _unit(row.vector)
        self._unit = (row.vector, v) if v is not None else None  # the row's own, appended next
        if k <= 0 or not self.size or v is None or len(v) != self._matrix.shape[1]:
            return []
        start, last = max(0, self.size - window), self.size - 1
        continues = (
            self._codes.get(row.conversation_id, -1) == self._conversation[last]
            and row.occurred_at - self._time[last] < session_gap_ms
        )
        before = self._session_start(session_gap_ms) if continues else self.size
        if before <= start:
            return []
        # a product without BLAS: one thread, whatever the library's pool (a fold runs beside others)
        cosines = np.einsum("ij,j->i", self._matrix[start:before], v)
        if len(cosines) > k:  # every message as near as the k-th, then the nearest k of them, earlier first
            tied = np.nonzero(cosines >= np.partition(cosines, len(cosines) - k)[len(cosines) - k])[0]
            best = tied[np.argsort(-cosines[tied], kind="stable")[:k]]
        else:
            best = np.argsort(-cosines, kind="stable")
        return [self.ids[start + int(i)] for i in best]


def _unit(vector: Sequence[float]) -> npt.NDArray[np.float32] | None:
    """A vector scaled to length 1 (None: empty or all zeros)."""
    if not any(vector):
        return None
    v = np.asarray(vector, dtype=np.float32)
    return v / np.float32(np.linalg.norm(v))


class OwnerMemory:
    """Fold state of ONE memory owner: ``tables[table][id] = row`` (+ a lazily built ``MemoryIndex`` and
    ``MessageVectors``)."""

    __slots__ = ("_index", "_vectors", "owner_id", "tables")

    def __init__(self, owner_id: str) -> None:
        self.owner_id = owner_id
        self.tables: dict[str, dict[str, Row]] = {t: {} for t in TABLES}
        self._index: MemoryIndex | None = None
        self._vectors: MessageVectors | None = None

    @classmethod
    def from_rows(cls, owner_id: str, rows: Iterable[Row]) -> OwnerMemory:
        """Rebuild the state of ``owner_id`` from the rows it emitted (e.g. read back from the store)."""
        state = cls(owner_id)
        for row in rows:
            if row.owner_id != owner_id:
                raise ForeignOwnerError(
                    f"row {row.TABLE}/{row.id} belongs to {row.owner_id!r}, not to {owner_id!r}; "
                    "load each owner's rows into that owner's state"
                )
            state.tables[row.TABLE][row.id] = row
        return state

    @property
    def index(self) -> MemoryIndex:
        """The derived lookups, built from the rows on first use."""
        if self._index is None:
            index = MemoryIndex()
            for table in ("messages", "episodic", "persona"):
                for row in self.tables[table].values():
                    index.add(row)
            self._index = index
        return self._index

    def vectors(self, keep: int = 0) -> MessageVectors:
        """The message vectors in arrival order (the newest ``keep`` at least; 0: all), built from the rows on first
        use."""
        if self._vectors is None or self._vectors.keep != keep:
            rows = self.tables["messages"].values()
            self._vectors = MessageVectors((r for r in rows if isinstance(r, MessageRow)), keep)
        return self._vectors

    def invalidate(self) -> None:
        """Drop the derived lookups; the next use rebuilds them from the rows."""
        self._index = None
        self._vectors = None

    @property
    def owner(self) -> OwnerRow | None:
        """The owner's bookkeeping row, if any event was applied."""
        row = self.tables["owners"].get(self.owner_id)
        return row if isinstance(row, OwnerRow) else None

    @property
    def last_event_time(self) -> int:
        """The largest ``occurred_at`` applied so far: the folds' "now" (-1 before the first event)."""
        owner = self.owner
        return owner.last_event_time if owner is not None else -1

    def rows(self) -> list[Row]:
        """Every row, table by table in ``TABLES`` order, each table sorted by id."""
        return [self.tables[t][i] for t in TABLES for i in sorted(self.tables[t])]

    def working_ids(self) -> list[str]:
        """Message ids in working memory, oldest first."""
        working = self.index.working
        return sorted(working, key=working.__getitem__)

    def message(self, id: str) -> MessageRow | None:
        """An archived message by event id."""
        row = self.tables["messages"].get(id)
        return row if isinstance(row, MessageRow) else None

    def record(self, id: str) -> EpisodicRow | None:
        """An episodic record by id."""
        row = self.tables["episodic"].get(id)
        return row if isinstance(row, EpisodicRow) else None

    def trait(self, id: str) -> PersonaRow | None:
        """A persona trait by id."""
        row = self.tables["persona"].get(id)
        return row if isinstance(row, PersonaRow) else None

    def node(self, id: str) -> GraphNodeRow | None:
        """A graph node by id."""
        row = self.tables["graph_nodes"].get(id)
        return row if isinstance(row, GraphNodeRow) else None

    def edge(self, id: str) -> GraphEdgeRow | None:
        """A graph edge by id."""
        row = self.tables["graph_edges"].get(id)
        return row if isinstance(row, GraphEdgeRow) else None


class Transaction:
    """Writes to one state, remembering each touched row's first version to compute the changes."""

    __slots__ = ("_before", "state")

    def __init__(self, state: OwnerMemory) -> None:
        self.state = state
        self._before: dict[tuple[str, str], Row | None] = {}

    def put(self, row: Row) -> None:
        """Insert or replace a row, keeping the index current."""
        table = self.state.tables[row.TABLE]
        old = table.get(row.id)
        self._before.setdefault((row.TABLE, row.id), old)
        table[row.id] = row
        index = self.state._index
        if index is not None and row.TABLE in _INDEXED:  # graph rows, most of the writes, index nothing
            if old is not None:
                index.discard(old)
            index.add(row)
        vectors = self.state._vectors
        if vectors is not None and isinstance(row, MessageRow) and not vectors.add(row):
            self.state._vectors = None  # a message's vector changed: built again from the rows when next asked

    def delete(self, table: str, id: str) -> None:
        """Remove a row (no-op when absent)."""
        old = self.state.tables[table].get(id)
        if old is None:
            return
        self._before.setdefault((table, id), old)
        del self.state.tables[table][id]
        if isinstance(old, MessageRow):
            self.state._vectors = None
        index = self.state._index
        if index is not None:
            if isinstance(old, MessageRow) or (isinstance(old, PersonaRow) and old.kind == "preference"):
                self.state.invalidate()  # newest-message and token hints cannot be "un-maxed"
            else:
                index.discard(old)

    def changes(self) -> list[Change]:
        """Exactly what differs from the state before this transaction, in first-touch order."""
        out: list[Change] = []
        tables = self.state.tables
        for (table, id), old in self._before.items():
            new = tables[table].get(id)
            if new is old:
                continue
            if new is None:
                out.append(_DELETE(table, id, old))
            elif old is None or new != old:  # a row that was not there is written without comparing
                out.append(_UPSERT(table, new, old))
        return out
