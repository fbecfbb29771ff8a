"""Writes of a LanceDB shard: commits with their checkpoint, indexes and compaction, bulk rebuilds, erasure.

A commit upserts (``merge_insert`` on the ``id`` primary key) and deletes per table, every table
on a thread of its own, appends its change-log entry, then writes the checkpoint row (a
compare-and-set: ``lance_fencing``). ``optimize`` compacts and refreshes indexes every
``optimize_every`` commits.

A rebuild writes a view nobody reads until it is switched to, and opens it in *bulk* mode: commits
skip the full-text index (``optimize`` makes it once, at the end), and rows whose id this writer
has never written to a table it found empty are appended (``add``) instead of merged, and commits
log no changes (nobody holds rows of the view yet). Each commit is still its rows plus its
checkpoint, recovered the same way. Its final ``optimize`` makes the full-text and ``owner_id``
indexes, and the vector index of tables past ``BULK_VECTOR_INDEX_MIN_ROWS`` (100k rows: the store's
``vector_search`` serves long-lived owners' cold messages, and is exact but slower without one),
so a switched-to view serves from complete indexes; a smaller table's vector index is left to the
first regular writer's ``optimize`` after the switch (about half of a LoCoMo-sized rebuild's time
was this index).

Erasure: LanceDB deletes by marking rows, and every older version keeps its files, so a forgotten
row stays on disk. After a commit that applied a forget, ``erase_history`` rewrites every fragment
that has deleted rows (compaction with ``materialize_deletions_threshold=0``), brings the indexes
up to date (the full-text index is remapped to the rewritten rows, and its token dictionary keeps
no word only a deleted row had), records the new versions in the checkpoint, then removes every older version's files
(``cleanup_old_versions(older_than=0)``); the store then removes, in the active view, every other
view (``LanceStore.erase_history``). How a reader copes with versions removed under it: ``lance_reads``.
The commit and the erasure after it are two steps: before the commit, ``LanceStore.note_forgets`` leaves
a note beside the view that the erasure removes last, and a writer that claims a shard with the note
(its writer stopped in between) erases the shard first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pyarrow as pa
from lancedb.index import BTree, IvfPq

from adamem.errors import StoreError
from adamem.projections.folds.changes import Change
from adamem.projections.folds.rows import TABLES, Row
from adamem.projections.store.base import CHANGE_HISTORY, TEXT_FIELDS, change_entry, final_rows, full_text_columns
from adamem.projections.store.lance_arrow import arrow_schema, has_vector, rows_to_arrow
from adamem.projections.store.lance_reads import ShardReads
from adamem.projections.store.lance_tables import CHANGES, CHANGES_SCHEMA, CHECKPOINTS, FTS_INDEX, quote, writer_name

__all__ = ["ShardWrites", "Writes"]

COMPACT_MIN_FRAGMENTS = 8
"""A bulk writer's ``optimize`` rewrites a table's files into fewer only past this many, or when one has deleted rows.

A rebuild writes each table in two or three large appends and makes every index once, over all of them:
reading three files costs a search no more than reading one, and rewriting them cost a tenth of a
rebuild's CPU (``bench/results/notes.md``). A live writer compacts at every ``optimize``: its full-text
indexes are folded forward commit by commit, and compaction is what keeps one index over the table.
"""
_COMMIT_ATTEMPTS = 3  # a commit interleaved with a fenced writer's late table write is redone this often
log = logging.getLogger("adamem.store")


_BTREE_COLUMNS = {"messages": ("owner_id", "id")}
"""Columns with a B-tree index, by table (others: ``owner_id`` only). A long-lived owner's older messages are read
by id (a record's sources, the messages a graph walk reaches): 6-10 ms a read of 100k rows with the index, 20-28
without it (``bench/results/notes.md``)."""


class ShardWrites(ShardReads):
    """A shard's writes: commits, indexes and compaction, erasure of history."""

    def commit(
        self, changes: Sequence[Change], offsets: dict[str, int], optimize_every: int, *, guarded: bool = False
    ) -> None:
        """Write the changes, then the checkpoint (compare-and-set); ``guarded``: ``_guard`` ran already."""
        net = final_rows(changes)
        for attempt in range(_COMMIT_ATTEMPTS):
            if not guarded or attempt:
                self._guard()
            try:
                self._commit(net, offsets, optimize_every)
                return
            except _Interleaved as exc:
                log.warning("%s; writing the commit again", exc)
        raise StoreError(f"commit to {self.path} was interleaved with another writer's {_COMMIT_ATTEMPTS} times")

    def _commit(self, net: dict[str, dict[str, Row | None]], offsets: dict[str, int], optimize_every: int) -> None:
        commits = self.commits
        try:
            self._commit_tables(net, offsets, optimize_every)
        except BaseException:
            self.commits = commits  # this commit did not happen: the next one has the same number
            raise

    def _commit_tables(
        self, net: dict[str, dict[str, Row | None]], offsets: dict[str, int], optimize_every: int
    ) -> None:
        with Writes() as writes:  # every table written (or failed) before the checkpoint
            if CHECKPOINTS not in self.tables:
                writes.submit(self.table, CHECKPOINTS)
            for name, rows in net.items():
                gone = [i for i, r in rows.items() if r is None]
                kept = [r for r in rows.values() if r is not None]
                if self.owners_written is not None:
                    self.owners_written.update(r.owner_id for r in kept)
                appended, merged = self._split(name, kept)
                schema = self._schema(name)
                writes.submit(
                    self._write,
                    name,
                    gone,
                    rows_to_arrow(name, appended, schema) if appended else None,
                    rows_to_arrow(name, merged, schema) if merged else None,
                )
        if not self.bulk:
            self._ensure_fts()
        self.commits += 1
        if not self.bulk:  # nobody holds rows of a view being rebuilt: no reader needs its changes
            entry = {"commit": self.commits, "entry": json.dumps(change_entry(net))}
            self.changes_version = self.table(CHANGES).add(pa.Table.from_pylist([entry], CHANGES_SCHEMA)).version
        if optimize_every and self.commits % optimize_every == 0:
            # before the checkpoint, so that it covers the compacted, indexed versions: readers see
            # them at once (after it, they read 50 small fragments per table until the next commit)
            self.optimize(self.vector_index_min_rows)
        ckpt = self.checkpoint_row()
        merged_offsets = {**(json.loads(ckpt["offsets"]) if ckpt else {}), **offsets}
        versions = {name: self.tables[name].version for name in TABLES if name in self.tables}
        row = {
            "id": "checkpoint",
            "offsets": json.dumps(merged_offsets, sort_keys=True),
            "versions": json.dumps(versions, sort_keys=True),
            "commits": self.commits,
            "epoch": self.epoch,
            "writer": writer_name(),
        }
        self._put_checkpoint(row, self.ckpt_version)

    def _schema(self, name: str) -> pa.Schema:
        """The Arrow schema of a table's rows: the table's own (read once), or the one it will be made with."""
        schema = self.schemas.get(name)
        if schema is None:
            table = self.tables.get(name)
            if table is None:
                return arrow_schema(name, self.dim)
            schema = self.schemas[name] = table.schema
        return schema

    def _write(self, name: str, gone: list[str], appended: pa.Table | None, merged: pa.Table | None) -> None:
        """One table's part of a commit (making the table first if need be): delete, append, merge by id."""
        table = self.table(name)
        before, writes = table.version, 0
        for start in range(0, len(gone), 500):
            table.delete("id IN (" + ", ".join(quote(i) for i in gone[start : start + 500]) + ")")
            writes += 1
        if appended is not None:
            table.add(appended)
            writes += 1
        if merged is not None:
            table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(merged)
            writes += 1
        if table.version != before + writes:  # each write adds one version: another writer's came between
            raise _Interleaved(f"{self.path}/{name}: versions {before}-{table.version} hold a write of another writer")

    def _split(self, name: str, rows: list[Row]) -> tuple[list[Row], list[Row]]:
        """Rows to append and rows to merge by id: in bulk mode, ids never written to a table found empty append."""
        known = self.written.get(name) if self.written is not None else None
        if known is None:
            return [], rows
        appended = [r for r in rows if r.id not in known]
        merged = [r for r in rows if r.id in known]
        known.update(r.id for r in appended)
        return appended, merged

    def _ensure_fts(self) -> None:
        """Make the full-text index of every text table that has rows and no index yet (tables side by side)."""
        with Writes() as writes:
            for name in TEXT_FIELDS:
                table = self.tables.get(name)
                if table is not None and name not in self.fts_ready:
                    writes.submit(self._index_text, name, table)

    def _index_text(self, name: str, table: Any, existing: Sequence[Any] | None = None) -> None:
        """One text table's full-text indexes (``full_text_columns``: those of its columns it has), made once the table
        has rows; ``existing``: its indexes, when the caller has listed them already."""
        listed = table.list_indices() if existing is None else existing
        indexed = {tuple(ix.columns) for ix in listed if ix.index_type == "FTS"}
        missing = [c for c in _text_columns(name, table) if (c,) not in indexed]
        if not missing:
            self.fts_ready.add(name)
        elif table.count_rows():
            # Made once; rows added later are searched unindexed until ``optimize`` folds them in.
            for column in missing:
                table.create_index(column, config=FTS_INDEX, replace=True)
            self.fts_ready.add(name)

    def _reindex_text(self, name: str, table: Any) -> None:
        """A text table's full-text indexes made again from its rows; none left when it has no rows."""
        if table.count_rows():
            for column in _text_columns(name, table):
                table.create_index(column, config=FTS_INDEX, replace=True)
            self.fts_ready.add(name)
            return
        for ix in table.list_indices():
            if ix.index_type == "FTS":
                table.drop_index(ix.name)
        self.fts_ready.discard(name)

    def optimize(self, vector_index_min_rows: int = 0, *, compact_all: bool = False) -> None:
        """Make missing full-text indexes, compact, bring indexes up to date, index vectors.

        Below ``vector_index_min_rows`` rows an exact (flat) cosine search is fast and exact; above
        it an IVF_PQ index (product quantised) keeps search fast and the index small, and a search
        re-ranks its candidates by exact distance (``lance.VECTOR_REFINE``). Against IVF_HNSW_SQ at
        100k rows: a first query of 30-45 ms instead of 120-150 (a 3 MB index read instead of 46),
        half the build time, and better recall with the re-ranking (``bench/results/notes.md``).
        A bulk writer compacts only tables of many files (``COMPACT_MIN_FRAGMENTS``) unless
        ``compact_all``: erasure needs every table and index rewritten without the deleted rows.
        Tables are optimised side by side. Every table gets a B-tree index of ``owner_id``: reading
        one owner of a shard of 1,000 then takes 14 ms instead of 40 (the six tables scanned). The
        messages table gets one of ``id`` too (``_BTREE_COLUMNS``). The change log keeps its last
        ``CHANGE_HISTORY`` commits.
        """
        log = self.tables.get(CHANGES)
        if log is not None:
            if self.commits > CHANGE_HISTORY:
                log.delete(f"commit <= {self.commits - CHANGE_HISTORY}")
            log.optimize()
        with Writes() as writes:
            for name in TABLES:
                table = self.tables.get(name)
                if table is not None:
                    writes.submit(self._optimize_table, name, table, vector_index_min_rows, compact_all)

    def _optimize_table(self, name: str, table: Any, vector_index_min_rows: int, compact_all: bool) -> None:
        existing = table.list_indices()
        if name in TEXT_FIELDS and name not in self.fts_ready:
            self._index_text(name, table, existing)
        rows = table.count_rows()
        if not rows:
            return
        indexed = [ix.columns for ix in existing]  # the vector and B-tree indexes are made below only
        if vector_index_min_rows and has_vector(name) and rows >= vector_index_min_rows and ["vector"] not in indexed:
            table.create_index("vector", config=IvfPq(distance_type="cosine"))
        for column in _BTREE_COLUMNS.get(name, ("owner_id",)):
            if [column] not in indexed:
                table.create_index(column, config=BTree())
        if compact_all or not self.bulk or _worth_compacting(table):
            table.optimize()
        elif existing:  # the indexes brought up to date, the files left as they are (made here: over every row)
            table.to_lance().optimize.optimize_indices()
            table.checkout_latest()

    def erase_history(self) -> None:
        """Rewrite fragments holding deleted rows, checkpoint the new versions, remove every older version."""
        self._guard()
        with Writes() as writes:
            for name in (*TABLES, CHANGES):
                table = self.tables.get(name)
                if table is not None:
                    writes.submit(_materialize_deletions, table)
        # The full-text indexes made anew: an index is only remapped when a rewrite drops a file whole, and
        # keeps the words of that file's rows.
        with Writes() as writes:
            for name in TEXT_FIELDS:
                table = self.tables.get(name)
                if table is not None:
                    writes.submit(self._reindex_text, name, table)
        self.optimize(self.vector_index_min_rows, compact_all=True)
        self.commit([], {}, 0, guarded=True)  # the checkpoint now names the rewritten versions, the only ones kept
        with Writes() as writes:
            for name in (*TABLES, CHECKPOINTS, CHANGES):
                table = self.tables.get(name)
                if table is not None:
                    writes.submit(_drop_old_versions, table)


def _worth_compacting(table: Any) -> bool:
    """Whether ``optimize`` should rewrite a table's files: many of them, or any holding deleted rows."""
    fragments = table.to_lance().get_fragments()
    return len(fragments) > COMPACT_MIN_FRAGMENTS or any(f.metadata.deletion_file is not None for f in fragments)


def _materialize_deletions(table: Any) -> None:
    """Rewrite every fragment of a table that has deleted rows, so no data file holds them."""
    table.to_lance().optimize.compact_files(materialize_deletions_threshold=0.0)
    table.checkout_latest()


def _drop_old_versions(table: Any) -> None:
    """Remove the files of every version but the latest (the shard's one writer is the caller)."""
    table.to_lance().cleanup_old_versions(older_than=timedelta(0), delete_unverified=True)
    table.checkout_latest()


class _Interleaved(StoreError):
    """A table write of this commit found another writer's version between its own (the commit is redone)."""


class Writes:
    """LanceDB calls of one step side by side (``workers`` threads: by default one a table), all finished when the
    block ends.

    LanceDB does its work outside the GIL, so one table is made and written while the next one's
    Arrow data is built. Leaving the block waits for every call, and re-raises the first failure.
    """

    def __init__(self, workers: int = len(TABLES)) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="adamem-lance")
        self._pending: list[Future[Any]] = []

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._pending.append(self._pool.submit(fn, *args, **kwargs))

    def __enter__(self) -> Writes:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._pool.shutdown(wait=True)
        if kind is None:
            for future in self._pending:
                future.result()


def _text_columns(name: str, table: Any) -> list[str]:
    """The columns of a text table to index for full text: ``full_text_columns`` its schema has."""
    names = table.schema.names
    return [c for c in full_text_columns(name) if c in names]
