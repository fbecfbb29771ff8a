"""The in-memory store for unit tests; passes the same contract suites as LanceDB.

Like LanceDB it holds views side by side (a rebuild writes one, a switch makes it active): every
handle opened from one store (``open_view``) shares its views, and a handle opened without a view
name follows the active one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from adamem.errors import StoreError
from adamem.partitioning import owner_partition
from adamem.projections.folds.changes import Change
from adamem.projections.folds.rows import TABLES, MessageRow, Row
from adamem.projections.store.base import (
    CHANGE_HISTORY,
    TEXT_FIELDS,
    ArchiveSplit,
    ChangeEntry,
    Hit,
    OwnerChanges,
    OwnerColumns,
    change_entry,
    check_below_seq,
    final_rows,
    owner_columns,
    owner_ids,
)
from adamem.projections.store.lance_arrow import arrow_schema, row_tokens, rows_to_arrow
from adamem.projections.store.ports import DEFAULT_VIEW
from adamem.projections.store.scoring import bm25_scores, cosine
from adamem.text import search_text

__all__ = ["InMemoryStore"]


@dataclass
class _View:
    """One view's shards, checkpoints, generation and change log."""

    partitions: int = 0
    shards: dict[int, dict[str, dict[str, Row]]] = field(default_factory=dict)
    checkpoints: dict[int, dict[str, int]] = field(default_factory=dict)
    generation: dict[str, str] = field(default_factory=dict)
    rebuild_job: dict[str, Any] = field(default_factory=dict)
    erased: set[int] = field(default_factory=set)
    erasing: set[int] = field(default_factory=set)
    commits: dict[int, int] = field(default_factory=dict)
    changes: dict[int, deque[tuple[int, ChangeEntry]]] = field(default_factory=dict)


@dataclass
class _Views:
    """The views of one in-memory store, shared by every handle opened from it."""

    active: str = DEFAULT_VIEW
    held: dict[str, _View] = field(default_factory=dict)


class InMemoryStore:
    """Rows in dicts, one shard per partition; gone when the process ends."""

    def __init__(
        self, *, views: _Views | None = None, view: str | None = None, read_only: bool = False, bulk: bool = False
    ) -> None:
        """A new store (``views`` None), or another handle on the views of one (``open_view``)."""
        self.url = "memory://"
        self._views = views if views is not None else _Views()
        self._pinned = view
        self._held: list[str] = []  # the view of each ``held_view`` block open, outermost first
        self._read_only = read_only
        self._bulk = bulk

    @property
    def _name(self) -> str:
        """The view this handle reads: its own, the one held, or the active one."""
        if self._pinned is not None:
            return self._pinned
        return self._held[0] if self._held else self._views.active

    @contextmanager
    def held_view(self) -> Iterator[str]:
        """Follow a switch now, then stay on that view until the block ends (``StoreReader.held_view``)."""
        self._held.append(self._name)
        try:
            yield self._name
        finally:
            self._held.pop()

    @property
    def view(self) -> str:
        """The view this handle reads."""
        return self._name

    @property
    def _view(self) -> _View:
        """The view's data; an empty stand-in while the view does not exist (reading makes none)."""
        return self._views.held.get(self._name) or _View()

    def _written(self) -> _View:
        """The view's data, made on the first write (as a LanceDB view is)."""
        return self._views.held.setdefault(self._name, _View())

    # -- the view catalog --------------------------------------------------------------------------

    def active_view(self) -> str:
        """The active view (``main`` until a switch)."""
        return self._views.active

    def views(self) -> list[str]:
        """Views written to so far."""
        return sorted(self._views.held)

    def open_view(
        self,
        name: str | None = None,
        *,
        read_only: bool = False,
        bulk: bool = False,
        optimize_every: int | None = None,
    ) -> InMemoryStore:
        """A handle on view ``name`` (None: the active one, following switches); ``optimize_every`` has no effect."""
        return InMemoryStore(views=self._views, view=name, read_only=read_only, bulk=bulk)

    def switch_view(self, name: str) -> None:
        """Make ``name`` the active view."""
        if name not in self._views.held:
            raise StoreError(f"store {self.url} has no view {name!r}; views: {self.views()}")
        self._views.active = name

    def remove_other_views(self, keep: str) -> list[str]:
        """Drop every view but ``keep``; their names."""
        removed = [name for name in self.views() if name != keep]
        for name in removed:
            del self._views.held[name]
        return removed

    # -- writer and reader of one view ---------------------------------------------------------------

    def bind(self, partitions: int) -> None:
        """Fix the shard count."""
        view = self._written()
        if view.partitions and view.partitions != partitions:
            raise StoreError(f"store has {view.partitions} shards, the log {partitions} partitions; rebuild it")
        view.partitions = partitions

    def partition_count(self) -> int:
        """The bound shard count (0 before ``bind``)."""
        return self._view.partitions

    def _shard_of(self, owner_id: str) -> dict[str, dict[str, Row]]:
        view = self._view
        if not view.partitions:
            return {}
        return view.shards.get(owner_partition(owner_id, view.partitions), {})

    def generation(self) -> dict[str, str]:
        """The recorded analysis generation ({} if none)."""
        return dict(self._view.generation)

    def record_generation(self, info: dict[str, str]) -> None:
        """Record the analysis generation."""
        self._written().generation = dict(info)

    def rebuild_job(self) -> dict[str, Any]:
        """The recorded rebuild job, with the partitions a rebuild folded forgets in and those still owing
        their erasure ({} if none)."""
        view = self._view
        if not view.rebuild_job:
            return {}
        return {**view.rebuild_job, "erased": sorted(view.erased), "erasing": sorted(view.erasing)}

    def record_rebuild_job(self, job: dict[str, Any]) -> None:
        """Record the view's rebuild job."""
        self._written().rebuild_job = dict(job)

    def checkpoint(self, partition: int) -> dict[str, int]:
        """Next offset per topic for a shard."""
        return dict(self._view.checkpoints.get(partition, {}))

    def change_token(self, partition: int) -> str:
        """The view and the shard's commit count (a switch moves it, as LanceDB's does)."""
        return f"{self._name}/{self._view.commits.get(partition, 0)}"

    def commit(self, partition: int, changes: Sequence[Change], offsets: dict[str, int]) -> None:
        """Apply changes and record offsets (atomic: nothing can fail half-way in memory)."""
        if self._read_only:
            raise StoreError(f"store {self.url} view {self._name} was opened read-only")
        view = self._written()
        if not view.partitions:
            raise StoreError("store is not bound to a partition count; call bind() first")
        shard = view.shards.setdefault(partition, {t: {} for t in TABLES})
        net = final_rows(changes)
        for table, rows in net.items():
            target = shard.setdefault(table, {})
            for id_, row in rows.items():
                if row is None:
                    target.pop(id_, None)
                else:
                    target[id_] = row
        view.checkpoints[partition] = {**view.checkpoints.get(partition, {}), **offsets}
        view.commits[partition] = view.commits.get(partition, 0) + 1
        history = view.changes.setdefault(partition, deque(maxlen=CHANGE_HISTORY))
        history.append((view.commits[partition], change_entry(net)))

    def owner_changes(self, owner_id: str, since: str) -> OwnerChanges | None:
        """The owner's rows written since the token ``since`` and the ids deleted since (None: cannot tell)."""
        name, view = self._name, self._view
        at, _, commits = since.rpartition("/")
        if not view.partitions or at != name or not commits.isdigit():
            return None
        partition = owner_partition(owner_id, view.partitions)
        start, now = int(commits), view.commits.get(partition, 0)
        entries = [entry for n, entry in view.changes.get(partition, ()) if n > start]
        if start > now or len(entries) != now - start:
            return None
        written, deleted = owner_ids(entries, owner_id)
        shard = view.shards.get(partition, {})
        gone = {table: set(ids) for table, ids in deleted.items()}
        rows: list[Row] = []
        for table, ids in sorted(written.items()):
            for id_ in sorted(ids):
                row = shard.get(table, {}).get(id_)
                if row is not None and row.owner_id == owner_id:
                    rows.append(row)
                else:
                    gone.setdefault(table, set()).add(id_)
        return OwnerChanges(f"{name}/{now}", tuple(rows), {t: frozenset(ids) for t, ids in gone.items() if ids})

    def archive_split(self, owner_id: str, hot_messages: int) -> ArchiveSplit | None:
        """Where the owner's newest ``hot_messages`` messages begin (None: it has at most that many)."""
        messages = self._messages(owner_id)
        if len(messages) <= hot_messages:
            return None
        seqs = sorted((m.seq for m in messages), reverse=True)
        cold_below_seq = seqs[hot_messages - 1] if hot_messages > 0 else seqs[0] + 1
        return ArchiveSplit(
            cold_below_seq=cold_below_seq,
            cold_messages=sum(1 for s in seqs if s < cold_below_seq),
            messages=len(messages),
            speakers=tuple(sorted({(m.speaker, m.role) for m in messages})),
        )

    def _messages(self, owner_id: str) -> list[MessageRow]:
        return self.rows("messages", owner_id)  # type: ignore[return-value]

    def load_owner(self, owner_id: str, messages_from_seq: int = 0) -> list[Row]:
        """Every row of an owner; messages only those with ``seq >= messages_from_seq``."""
        rows = [row for table in TABLES for row in self.rows(table, owner_id)]
        if not messages_from_seq:
            return rows
        return [r for r in rows if not isinstance(r, MessageRow) or r.seq >= messages_from_seq]

    def load_owner_columns(self, owner_id: str, messages_from_seq: int = 0) -> OwnerColumns:
        """``load_owner`` as columns (``base.owner_columns``)."""
        return owner_columns(self.load_owner(owner_id, messages_from_seq))

    def rows(self, table: str, owner_id: str) -> list[Row]:
        """Rows of one table for an owner, in id order."""
        rows = self._shard_of(owner_id).get(table, {})
        return [rows[i] for i in sorted(rows) if rows[i].owner_id == owner_id]

    def owners(self) -> list[str]:
        """Owners with any memory."""
        shards = self._view.shards.values()
        return sorted({r.owner_id for shard in shards for r in shard.get("owners", {}).values()})

    def _searched(self, table: str, owner_id: str, below_seq: int | None) -> list[Row]:
        """The owner's rows of a table a search may return: with ``below_seq``, messages below it only."""
        check_below_seq(table, below_seq)
        rows = self.rows(table, owner_id)
        if below_seq is None:
            return rows
        return [r for r in rows if r.seq < below_seq]  # type: ignore[union-attr]

    def vector_search(
        self, table: str, owner_id: str, vector: Sequence[float], k: int, below_seq: int | None = None
    ) -> list[Hit]:
        """Exact cosine search over an owner's rows (with ``below_seq``: messages with ``seq < below_seq``)."""
        rows = self._searched(table, owner_id, below_seq)
        hits = [Hit(r, cosine(vector, r.vector)) for r in rows if getattr(r, "vector", ())]  # type: ignore[union-attr]
        hits.sort(key=lambda h: (-h.score, h.row.id))
        return hits[:k]

    def text_search(
        self, table: str, owner_id: str, query: str, k: int, below_seq: int | None = None, *, context: bool = False
    ) -> list[Hit]:
        """BM25 over an owner's rows of the table (an owner's rows are the corpus; ``below_seq`` keeps
        the hits among messages with ``seq < below_seq``, the corpus stays the owner's); ``context``: each
        message's document its words and its ``context``."""
        if table not in TEXT_FIELDS:
            raise StoreError(f"table {table!r} has no full-text column; use one of {sorted(TEXT_FIELDS)}")
        check_below_seq(table, below_seq)
        rows = self.rows(table, owner_id)
        docs = [row_tokens(table, r).split() for r in rows]
        if context and table == "messages":
            docs = [d + (getattr(r, "context", None) or "").split() for d, r in zip(docs, rows, strict=True)]
        terms = search_text(query).split()
        hits = [Hit(r, s) for r, s in zip(rows, bm25_scores(docs, terms), strict=True) if s > 0]
        if below_seq is not None:
            hits = [h for h in hits if h.row.seq < below_seq]  # type: ignore[union-attr]
        hits.sort(key=lambda h: (-h.score, h.row.id))
        return hits[:k]

    def messages_by_id(self, owner_id: str, ids: Sequence[str]) -> list[MessageRow]:
        """The owner's messages with these ids (absent ids and other owners' skipped), in id order."""
        messages = self._shard_of(owner_id).get("messages", {})
        found = (messages.get(i) for i in sorted(set(ids)))
        return [m for m in found if m is not None and m.owner_id == owner_id]  # type: ignore[misc]

    def message_ids(self, owner_id: str, below_seq: int | None = None) -> list[str]:
        """Ids of the owner's messages (those with ``seq < below_seq`` when given), sorted."""
        return sorted(m.id for m in self._messages(owner_id) if below_seq is None or m.seq < below_seq)

    def message_columns(
        self, owner_id: str, from_seq: int = 0, below_seq: int | None = None, columns: Sequence[str] | None = None
    ) -> pa.Table | None:
        """The owner's messages in a range of ``seq`` as the Arrow the LanceDB adapter's table holds."""
        rows = [m for m in self._messages(owner_id) if from_seq <= m.seq and (below_seq is None or m.seq < below_seq)]
        dim = max((len(m.vector) for m in rows), default=0) or 1
        data = rows_to_arrow("messages", rows, arrow_schema("messages", dim))
        return data.select([c for c in columns if c in data.column_names]) if columns is not None else data

    def note_forgets(self, partition: int) -> None:
        """The shard owes its erasure until ``erase_history``; a rebuild's view lists the partition as erased."""
        if self._read_only:
            raise StoreError(f"store {self.url} view {self._name} is read-only; cannot note forgets in p{partition}")
        view = self._written()
        view.erasing.add(partition)
        if self._bulk:
            view.erased.add(partition)

    def erase_history(self, partition: int) -> list[str]:
        """Deleted rows are gone from the dicts already; other views may still hold them (as in LanceDB,
        a writer of the active view removes them; a bulk writer of a view not yet active does not)."""
        if self._read_only:
            raise StoreError(f"store {self.url} view {self._name} is read-only; cannot erase shard p{partition}")
        self._written().erasing.discard(partition)
        if self._bulk:
            self._written().erased.add(partition)
            return []
        if self._name != self._views.active:
            return []
        return self.remove_other_views(self._name)

    def optimize(self) -> None:
        """Nothing to compact or index."""

    def release(self, partitions: Sequence[int]) -> None:
        """Nothing is cached outside the shards themselves."""

    def owns(self, partition: int) -> bool:
        """One process, one writer: nothing else claims its shards."""
        return True

    def close(self) -> None:
        """Nothing to release."""
