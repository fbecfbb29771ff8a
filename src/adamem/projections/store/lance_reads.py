"""Reads of a LanceDB shard: as of its last checkpoint, never a commit half-written, and across an erasure.

Change log: every commit also appends one row to the shard's ``changes`` table (its number, and
the ids it wrote per owner and deleted), so a reader holding an owner's rows as of an older
commit can fetch only what changed (``owner_changes``); the last ``CHANGE_HISTORY`` commits are
kept. A shard's change token is the view and the commit count of its checkpoint; readers re-read
the checkpoint only when its table's version folder changed (``ShardReads.committed``).

A reader pins every table at the versions the last checkpoint names. After a forget the writer's
``erase_history`` removes every older version's files: a reader still reading one of them at that
moment finds its files gone; it pins the versions the new checkpoint names and reads again
(``ShardReads.reading``), so the call answers from the rewritten versions.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pyarrow as pa

from adamem.projections.folds.rows import TABLES, Row
from adamem.projections.store.base import owner_ids
from adamem.projections.store.lance_arrow import rows_from_arrow
from adamem.projections.store.lance_fencing import ShardHandle
from adamem.projections.store.lance_tables import CHANGES, CHECKPOINTS, quote, vanished

__all__ = ["ShardReads", "read_pool"]

_TRUST_STAMP_NS = 1_000_000_000  # a version folder changed less than this long ago may change again unseen
_READS: tuple[int, ThreadPoolExecutor] | None = None


def read_pool() -> ThreadPoolExecutor:
    """Threads that read the tables of one owner side by side (Lance scans outside the GIL: an owner
    of a 1,000-owner shard loads in 18 ms instead of 23); made anew in a forked child."""
    global _READS
    if _READS is None or _READS[0] != os.getpid():
        _READS = (os.getpid(), ThreadPoolExecutor(max_workers=len(TABLES), thread_name_prefix="adamem-lance-read"))
    return _READS[1]


_R = TypeVar("_R")


class ShardReads(ShardHandle):
    """A shard's reads: pinned to its checkpoint (readers), or its own tables (its writer)."""

    def reading(self, read: Callable[[], _R]) -> _R:
        """Readers: ``read()``, again on the newest checkpoint's versions if the writer's ``erase_history``
        removed the files of the versions it was reading meanwhile (at most three tries)."""
        for attempt in range(1, 4):
            try:
                return read()
            except (OSError, ValueError, RuntimeError, pa.ArrowException) as exc:
                if self.writer or attempt == 3 or not vanished(exc):
                    raise
                self.pinned = {}  # check the tables out again, at the versions the checkpoint names now
                self.datasets.clear()
                self._checkpoint_seen = None  # and read that checkpoint again
        raise AssertionError("unreachable")  # pragma: no cover

    def pin(self) -> int:
        """Readers: show every table as of the last checkpoint, never a commit half-written; its commit count."""
        if self.writer:
            return self.commits
        for attempt in range(1, 4):
            ckpt = self.last_checkpoint()
            versions: dict[str, int] = json.loads(ckpt["versions"]) if ckpt else {}
            commits = int(ckpt["commits"]) if ckpt else 0
            if versions == self.pinned:
                return commits
            try:
                for name in TABLES:
                    table = self.get(name)
                    if table is not None and name in versions:
                        table.checkout(versions[name])
            except ValueError as exc:  # "Version N no longer exists": see below
                if not vanished(exc) or attempt == 3:
                    raise
                # The writer's ``erase_history`` removed the versions this checkpoint named, after
                # this reader read it: the checkpoint it wrote since names the rewritten ones.
                self._checkpoint_seen = None
                continue
            self.pinned = versions
            return commits
        raise AssertionError("unreachable")  # pragma: no cover

    def committed(self) -> int:
        """Commits the last checkpoint covers (readers: ``last_checkpoint``)."""
        if self.writer:
            return self.commits
        ckpt = self.last_checkpoint()
        self.commits = int(ckpt["commits"]) if ckpt else 0
        return self.commits

    def last_checkpoint(self) -> dict[str, Any] | None:
        """Readers: the last checkpoint row, read again only when its table's version folder changed.

        The folder's inode and modification time stand for its contents (a commit adds a version
        file to it); a time less than ``_TRUST_STAMP_NS`` old is not trusted (a second change could
        share its timestamp). Every query pins the tables through this: re-reading the one-row
        checkpoint table costs 1-4 ms a search, a ``stat`` a few microseconds.
        """
        folder = self.loc.local(f"{self.rel}/{CHECKPOINTS}.lance/_versions")
        try:  # (on an object store there is no such stamp: the checkpoint is read every time)
            st = os.stat(folder) if folder is not None else None
            stamp: tuple[int, int] | None = (st.st_ino, st.st_mtime_ns) if st is not None else None
        except OSError:
            stamp = None
        seen = self._checkpoint_seen  # (stamp, row) as one value: threads of one query read side by side
        if stamp is not None and seen is not None and seen[0] == stamp:
            return seen[1]
        read_at = time.time_ns()
        ckpt = self.checkpoint_row()
        self._checkpoint_seen = (stamp, ckpt) if stamp is not None and read_at - stamp[1] > _TRUST_STAMP_NS else None
        return ckpt

    def select(self, name: str, where: str, *, repin: bool = True) -> list[Row]:
        """Rows of a table matching a filter, as readers may see them, in id order.

        Read through the Lance dataset of the table's (pinned) version rather than LanceDB's query
        builder: the same scan and scalar index, for a third of the CPU (one owner of a 1,000-owner
        shard: 13 ms for the six tables instead of 25-40 ms, most of it the builder's Python).
        """
        table = self.visible(name, repin=repin)
        if table is None:
            return []
        rows = rows_from_arrow(name, self._dataset(name, table).to_table(filter=where))
        rows.sort(key=lambda r: r.id)
        return rows

    def columns(self, name: str, where: str, columns: Sequence[str] | None, *, repin: bool = True) -> pa.Table | None:
        """Some columns (None: every one; a column added since the table was made left out) of a table's rows
        matching a filter, as readers may see them, as Arrow (no rows made); None when readers see no such table."""
        table = self.visible(name, repin=repin)
        if table is None:
            return None
        dataset = self._dataset(name, table)
        names = dataset.schema.names
        data: pa.Table = dataset.to_table(
            columns=[c for c in columns if c in names] if columns is not None else None, filter=where
        )
        return data

    def search(self, name: str, where: str, limit: int, **query: Any) -> pa.Table | None:
        """A vector (``nearest``) or full-text (``full_text_query``) search of a table's rows matching a
        filter (prefiltered), as readers may see them, as Arrow with ``_distance`` or ``_score``; None
        when readers see no such table.

        Run on the Lance dataset of the table's version, as ``select`` reads: the same plan and rows as
        LanceDB's query builder, without its Python (three schema reads and a trip through its event
        loop a search: 5-8 ms of a warm question's CPU on a 100k-message owner).
        """
        table = self.visible(name)
        if table is None:
            return None
        found: pa.Table = self._dataset(name, table).to_table(filter=where, prefilter=True, limit=limit, **query)
        return found

    def has_column(self, name: str, column: str) -> bool:
        """Whether readers see the table with this column (a table made before the column was added has none)."""
        table = self.visible(name)
        return table is not None and column in self._dataset(name, table).schema.names

    def _dataset(self, name: str, table: Any) -> Any:
        """The Lance dataset of a table at the version its handle shows, opened once per version."""
        version = table.version
        held = self.datasets.get(name)
        if held is None or held[0] != version:
            held = self.datasets[name] = (version, table.to_lance())
        return held[1]

    def owner_changes(self, owner_id: str, since: int) -> tuple[int, list[Row], dict[str, set[str]]] | None:
        """(commit count, the owner's rows written since commit ``since``, ids gone per table); None: unknown."""
        now = self.pin()
        if since > now:
            return None
        if since == now:
            return now, [], {}
        log = self.get(CHANGES)
        if log is None:
            return None
        found = log.search().where(f"commit > {since} AND commit <= {now}").limit(None).to_arrow().to_pylist()
        found.sort(key=lambda r: int(r["commit"]))
        if [int(r["commit"]) for r in found] != list(range(since + 1, now + 1)):
            return None  # trimmed, or written before the shard kept changes
        written, deleted = owner_ids((json.loads(r["entry"]) for r in found), owner_id)
        gone = {table: set(ids) for table, ids in deleted.items()}
        rows: list[Row] = []
        for table, ids in sorted(written.items()):
            wanted = sorted(ids)
            found_here: list[Row] = []
            for start in range(0, len(wanted), 500):
                quoted = ", ".join(quote(i) for i in wanted[start : start + 500])
                found_here += self.select(table, f"owner_id = {quote(owner_id)} AND id IN ({quoted})", repin=False)
            rows += found_here
            missing = ids - {r.id for r in found_here}
            if missing:
                gone.setdefault(table, set()).update(missing)
        return now, rows, gone

    def visible(self, name: str, *, repin: bool = True) -> Any | None:
        """A table readers may see: one the last checkpoint covers (writers see their own tables).

        ``repin=False`` keeps the versions pinned last (several reads of one consistent state).
        """
        if not self.writer:
            if repin:
                self.pin()
            if name not in self.pinned:
                return None
            return self.get(name)
        table = self.tables.get(name)
        if table is None:
            with self._adopting:
                if name not in self.tables:
                    self._adopt(name)
            table = self.tables.get(name)
        return table
