"""The in-memory store for unit tests; passes the same contract suite as LanceDB."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from adamem.errors import StoreError
from adamem.partitioning import owner_partition
from adamem.projections.folds.changes import Change
from adamem.projections.folds.rows import TABLES, Row
from adamem.projections.store.base import (
    CHANGE_HISTORY,
    TEXT_FIELDS,
    ChangeEntry,
    Hit,
    OwnerChanges,
    change_entry,
    final_rows,
    owner_ids,
)
from adamem.projections.store.scoring import bm25_scores, cosine
from adamem.text import search_text

__all__ = ["InMemoryStore"]


class InMemoryStore:
    """Rows in dicts, one shard per partition; gone when the process ends."""

    def __init__(self) -> None:
        self.url = "memory://"
        self._partitions = 0
        self._shards: dict[int, dict[str, dict[str, Row]]] = {}
        self._checkpoints: dict[int, dict[str, int]] = {}
        self._generation: dict[str, str] = {}
        self._commits: dict[int, int] = {}
        self._changes: dict[int, deque[tuple[int, ChangeEntry]]] = {}

    def bind(self, partitions: int) -> None:
        """Fix the shard count."""
        if self._partitions and self._partitions != partitions:
            raise StoreError(f"store has {self._partitions} shards, the log {partitions} partitions; rebuild it")
        self._partitions = partitions

    def partition_count(self) -> int:
        """The bound shard count (0 before ``bind``)."""
        return self._partitions

    def _shard_of(self, owner_id: str) -> dict[str, dict[str, Row]]:
        if not self._partitions:
            return {}
        return self._shards.get(owner_partition(owner_id, self._partitions), {})

    def generation(self) -> dict[str, str]:
        """The recorded analysis generation ({} if none)."""
        return dict(self._generation)

    def record_generation(self, info: dict[str, str]) -> None:
        """Record the analysis generation."""
        self._generation = dict(info)

    def checkpoint(self, partition: int) -> dict[str, int]:
        """Next offset per topic for a shard."""
        return dict(self._checkpoints.get(partition, {}))

    def change_token(self, partition: int) -> str:
        """The shard's commit count."""
        return str(self._commits.get(partition, 0))

    def commit(self, partition: int, changes: Sequence[Change], offsets: dict[str, int]) -> None:
        """Apply changes and record offsets (atomic: nothing can fail half-way in memory)."""
        if not self._partitions:
            raise StoreError("store is not bound to a partition count; call bind() first")
        shard = self._shards.setdefault(partition, {t: {} for t in TABLES})
        net = final_rows(changes)
        for table, rows in net.items():
            target = shard.setdefault(table, {})
            for id_, row in rows.items():
                if row is None:
                    target.pop(id_, None)
                else:
                    target[id_] = row
        self._checkpoints[partition] = {**self._checkpoints.get(partition, {}), **offsets}
        self._commits[partition] = self._commits.get(partition, 0) + 1
        history = self._changes.setdefault(partition, deque(maxlen=CHANGE_HISTORY))
        history.append((self._commits[partition], change_entry(net)))

    def owner_changes(self, owner_id: str, since: str) -> OwnerChanges | None:
        """The owner's rows written since the token ``since`` and the ids deleted since (None: cannot tell)."""
        if not self._partitions or not since.isdigit():
            return None
        partition = owner_partition(owner_id, self._partitions)
        start, now = int(since), self._commits.get(partition, 0)
        entries = [entry for n, entry in self._changes.get(partition, ()) if n > start]
        if start > now or len(entries) != now - start:
            return None
        written, deleted = owner_ids(entries, owner_id)
        shard = self._shards.get(partition, {})
        gone = {table: set(ids) for table, ids in deleted.items()}
        rows: list[Row] = []
        for table, ids in sorted(written.items()):
            for id_ in sorted(ids):
                row = shard.get(table, {}).get(id_)
                if row is not None and row.owner_id == owner_id:
                    rows.append(row)
                else:
                    gone.setdefault(table, set()).add(id_)
        return OwnerChanges(str(now), tuple(rows), {t: frozenset(ids) for t, ids in gone.items() if ids})

    def load_owner(self, owner_id: str) -> list[Row]:
        """Every row of an owner."""
        return [row for table in TABLES for row in self.rows(table, owner_id)]

    def rows(self, table: str, owner_id: str) -> list[Row]:
        """Rows of one table for an owner, in id order."""
        rows = self._shard_of(owner_id).get(table, {})
        return [rows[i] for i in sorted(rows) if rows[i].owner_id == owner_id]

    def owners(self) -> list[str]:
        """Owners with any memory."""
        return sorted({r.owner_id for shard in self._shards.values() for r in shard.get("owners", {}).values()})

    def vector_search(self, table: str, owner_id: str, vector: Sequence[float], k: int) -> list[Hit]:
        """Exact cosine search over an owner's rows."""
        hits = [Hit(r, cosine(vector, r.vector)) for r in self.rows(table, owner_id) if getattr(r, "vector", ())]  # type: ignore[union-attr]
        hits.sort(key=lambda h: (-h.score, h.row.id))
        return hits[:k]

    def text_search(self, table: str, owner_id: str, query: str, k: int) -> list[Hit]:
        """BM25 over an owner's rows of the table (an owner's rows are the corpus)."""
        if table not in TEXT_FIELDS:
            raise StoreError(f"table {table!r} has no full-text column; use one of {sorted(TEXT_FIELDS)}")
        rows = self.rows(table, owner_id)
        docs = [search_text(" ".join(str(getattr(r, f)) for f in TEXT_FIELDS[table])).split() for r in rows]
        terms = search_text(query).split()
        hits = [Hit(r, s) for r, s in zip(rows, bm25_scores(docs, terms), strict=True) if s > 0]
        hits.sort(key=lambda h: (-h.score, h.row.id))
        return hits[:k]

    def erase_history(self, partition: int) -> list[str]:
        """Deleted rows are gone from the dicts already; there is no history to erase."""
        return []

    def release(self, partitions: Sequence[int]) -> None:
        """Nothing is cached outside the shards themselves."""

    def owns(self, partition: int) -> bool:
        """One process, one writer: nothing else claims its shards."""
        return True

    def close(self) -> None:
        """Nothing to release."""
