"""The LanceDB store: one LanceDB database per shard (log partition), tables per layer.

Layout: ``ROOT/CURRENT`` names the active view; ``ROOT/views/<view>/meta.json`` (shard count,
vector dimension) and ``ROOT/views/<view>/p<N>/`` per shard with the tables ``owners messages
episodic persona graph_nodes graph_edges`` and ``checkpoints``. A rebuild writes a new view
beside the active one and switches by replacing ``CURRENT`` atomically: readers keep reading the
old view until the switch and follow it on their next call.

The adapter, by responsibility: the store and its views' meta (this module), the view catalog
functions (``lance_views``), a shard's tables (``lance_tables``), opening and fencing a shard and
recovering it to its checkpoint (``lance_fencing``), its reads (``lance_reads``), its writes,
indexes and erasure (``lance_writes``), and the row <-> Arrow mapping (``lance_arrow``). Each
module's docstring tells its part of the design: exactly-once commits, bulk rebuilds, the change
log, fencing and erasure.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa

from adamem.errors import StoreError, StoreFenced
from adamem.partitioning import owner_partition
from adamem.projections.folds.changes import Change, Upsert
from adamem.projections.folds.rows import TABLES, MessageRow, Row
from adamem.projections.store.base import (
    EDGE_COLUMNS,
    NODE_COLUMNS,
    SEARCHED_TABLES,
    TEXT_FIELDS,
    TOKENS_KEPT,
    ArchiveSplit,
    Hit,
    OwnerChanges,
    OwnerColumns,
    check_below_seq,
    owner_columns,
)
from adamem.projections.store.lance_arrow import has_vector, rows_from_arrow, tokens_current, vector_matrix
from adamem.projections.store.lance_reads import read_pool
from adamem.projections.store.lance_tables import CHECKPOINTS, LegacyStore, quote, writer_name
from adamem.projections.store.lance_views import current_view, list_views, remove_other_views, switch_view
from adamem.projections.store.lance_writes import ShardWrites, Writes
from adamem.projections.store.location import Location
from adamem.projections.store.ports import DEFAULT_VIEW
from adamem.text import search_text

__all__ = [
    "DEFAULT_VIEW",
    "OPTIMIZE_EVERY",
    "LanceStore",
    "LegacyStore",
    "current_view",
    "list_views",
    "remove_other_views",
    "switch_view",
]


log = logging.getLogger(__name__)

_ERASED = "erased-p{}"
"""Beside a rebuilt view: the rebuild folded forgets in this shard (the views it replaces may hold them)."""
_ERASING = "erasing-p{}"
"""Beside a view: this shard committed forgets and owes their erasure (``note_forgets``)."""


class _Shard(ShardWrites):
    """One partition's LanceDB database and its open tables: opened and fenced, read, written."""


def _owner_ids(shard: _Shard) -> list[str]:
    table = shard.visible("owners")
    return [] if table is None else table.to_arrow().column("owner_id").to_pylist()


OPTIMIZE_EVERY = 50
BULK_VECTOR_INDEX_MIN_ROWS = 100_000
"""A rebuild indexes the vectors of tables this large before its view is switched to: an exact search over
100k rows of a shard takes about 100 ms (``bench/results/index_probe.json``), enough to matter to a
long-lived owner's cold messages (``retrieval.archive``). Smaller tables are left to the first writer."""
"""Commits of a shard between two ``optimize`` runs (compaction, index refresh), by default."""

VECTOR_NPROBES = 20
"""IVF partitions a vector search of an indexed table probes at least (more while the prefiltered
owner has fewer than ``k`` rows in them); ignored by the exact search of a table without an index."""

VECTOR_REFINE = 25
"""An indexed vector search re-ranks ``k`` × this many candidates by their exact cosine distance
(IVF_PQ alone ranks by quantised vectors). Its cost grows with ``k`` × this: at k 40 on a
100k-message owner, 100 takes 70 ms, 25 takes 37 ms and 10 takes 35 ms a search; a query vector
near stored ones finds all 40 of its exact neighbours with any of them, a random direction
(the worst case) 83 %, 58 % and 48 % (``bench/results/notes.md``). Ignored without an index."""


def _seq_filter(where: str, below_seq: int | None) -> str:
    return where if below_seq is None else f"{where} AND seq < {int(below_seq)}"


class LanceStore:
    """Memory tables in LanceDB folders, sharded by partition, in a switchable view."""

    def __init__(
        self,
        root: str,
        *,
        read_only: bool = False,
        optimize_every: int = OPTIMIZE_EVERY,
        view: str | None = None,
        vector_index_min_rows: int = 10_000,
        bulk: bool = False,
        storage_options: dict[str, str] | None = None,
        bulk_vector_index_min_rows: int = BULK_VECTOR_INDEX_MIN_ROWS,
    ) -> None:
        """``bulk``: write a view nobody reads yet (a rebuild); see the module's notes. Call ``optimize`` at the end.
        Its ``optimize`` indexes the vectors of tables of ``bulk_vector_index_min_rows`` rows or more.

        ``root``: a folder, or ``s3://bucket/prefix`` with the object store's ``storage_options``.
        """
        self.loc = Location(root, storage_options)
        self._root, self._storage_options = root, storage_options  # for the handles of ``open_view``
        self.root = self.loc.local() or Path(self.loc.base)  # (an object store's: for messages only)
        self.url = self.loc.url
        self._read_only = read_only
        self._optimize_every = optimize_every
        self._vector_index_min_rows = vector_index_min_rows
        self._bulk = bulk
        self._bulk_vector_index_min_rows = bulk_vector_index_min_rows
        self._pinned = view
        self.view = view or current_view(self.loc)
        self._holds = 0  # ``held_view`` blocks open: no switch is followed while any is
        self._following = threading.RLock()
        self._shards: dict[int, _Shard] = {}
        self._meta = self._read_meta()

    def active_view(self) -> str:
        """The active view (``CURRENT``; ``main`` when none was switched to)."""
        return current_view(self.loc)

    def views(self) -> list[str]:
        """Views present in the store (folders below ``views/``)."""
        return list_views(self.loc)

    def open_view(
        self,
        name: str | None = None,
        *,
        read_only: bool = False,
        bulk: bool = False,
        optimize_every: int | None = None,
    ) -> LanceStore:
        """A store of view ``name`` of this root (None: the active one, following switches)."""
        return LanceStore(
            self._root,
            read_only=read_only,
            optimize_every=OPTIMIZE_EVERY if optimize_every is None else optimize_every,
            view=name,
            vector_index_min_rows=self._vector_index_min_rows,
            bulk=bulk,
            storage_options=self._storage_options,
        )

    def switch_view(self, name: str) -> None:
        """Make ``name`` the active view, atomically."""
        switch_view(self.loc, name)

    def remove_other_views(self, keep: str) -> list[str]:
        """Delete every view but ``keep``; their names."""
        return remove_other_views(self.loc, keep)

    @property
    def dir(self) -> Path:
        """Folder of the view this store reads and writes (a local store's)."""
        folder = self.loc.local(f"views/{self.view}")
        if folder is None:
            raise StoreError(f"store {self.url} is on an object store: it has no local folder")
        return folder

    def _follow(self) -> None:
        """Follow a switch of ``CURRENT`` (unless the view was pinned or is held): drop handles of the old view."""
        if self._pinned is not None or self._holds:
            return
        with self._following:
            if self._holds:
                return
            active = current_view(self.loc)
            if active != self.view:
                self.view = active
                self._shards.clear()
                self._meta = self._read_meta()

    @contextmanager
    def held_view(self) -> Iterator[str]:
        """Follow a switch now, then stay on that view until the block ends (``StoreReader.held_view``)."""
        with self._following:
            self._follow()
            self._holds += 1
        try:
            yield self.view
        finally:
            with self._following:
                self._holds -= 1

    def _read_meta(self) -> dict[str, Any]:
        path = f"views/{self.view}/meta.json"
        try:
            text = self.loc.read_text(path)
            if text is None:
                return {}
            meta: dict[str, Any] = json.loads(text)
        except (OSError, json.JSONDecodeError) as exc:
            raise StoreError(
                f"{self.loc.uri(path)} is unreadable ({exc}); rebuild the store with `adamem replay`"
            ) from exc
        return meta

    def _write_meta(self) -> None:
        self.loc.write_text(f"views/{self.view}/meta.json", json.dumps(self._meta, sort_keys=True))

    def _current_meta(self) -> dict[str, Any]:
        """The active view's meta; read again while it names no shard count (a writer elsewhere may
        have made the view since), else the copy held."""
        self._follow()
        if not self._meta.get("partitions"):
            self._meta = self._read_meta() or self._meta
        return self._meta

    def generation(self) -> dict[str, str]:
        """The analysis generation of the active view (meta.json), {} if none was recorded."""
        recorded = self._current_meta().get("generation")
        return dict(recorded) if isinstance(recorded, dict) else {}

    def record_generation(self, info: dict[str, str]) -> None:
        """Record the view's analysis generation in its meta.json."""
        self._follow()
        self._meta = self._read_meta() or self._meta
        self._meta["generation"] = dict(info)
        self._write_meta()

    def rebuild_job(self) -> dict[str, Any]:
        """The view's rebuild job (meta.json), with the partitions a rebuild folded forgets in and those still
        owing their erasure; {} if none."""
        self._follow()
        self._meta = self._read_meta() or self._meta
        recorded = self._meta.get("rebuild_job")
        if not isinstance(recorded, dict):
            return {}
        partitions = int(self._meta.get("partitions") or 0)
        notes = set(self.loc.files(f"views/{self.view}"))
        erased = [p for p in range(partitions) if _ERASED.format(p) in notes]
        erasing = [p for p in range(partitions) if _ERASING.format(p) in notes]
        return {**recorded, "erased": erased, "erasing": erasing}

    def record_rebuild_job(self, job: dict[str, Any]) -> None:
        """Record the view's rebuild job in its meta.json."""
        self._follow()
        self._meta = self._read_meta() or self._meta
        self._meta["rebuild_job"] = dict(job)
        self._write_meta()

    def bind(self, partitions: int) -> None:
        """Fix the shard count (stored in meta.json)."""
        self._follow()
        have = self._meta.get("partitions")
        if have and have != partitions:
            raise StoreError(
                f"store {self.root} has {have} shards but the log has {partitions} partitions; "
                "rebuild it into a new folder with `adamem replay`"
            )
        if not have:
            self._meta["partitions"] = partitions
            self._write_meta()

    def _shard(self, partition: int, *, create: bool) -> _Shard | None:
        """The shard's handles; a writable store opens it as writer (recovering it to its checkpoint)."""
        shard = self._shards.get(partition)
        if shard is None:
            rel = f"views/{self.view}/p{partition}"
            if not create and not self.loc.exists(rel):
                return None
            shard = _Shard(self.loc, rel, self._meta.get("dim", 0), writer=not self._read_only, bulk=self._bulk)
            shard.vector_index_min_rows = (
                self._bulk_vector_index_min_rows if self._bulk else self._vector_index_min_rows
            )
            self._shards[partition] = shard
            if shard.writer and self.loc.exists(self._erasing(partition)):
                # The writer before this one committed forgets and stopped before erasing the history they
                # leave: this writer erases it before anything else (``note_forgets``).
                log.warning("%s: erasing the history of forgets its last writer committed", shard.path)
                self.erase_history(partition)
        return shard

    def _erasing(self, partition: int) -> str:
        return f"views/{self.view}/{_ERASING.format(partition)}"

    def _owner_shard(self, owner_id: str) -> _Shard | None:
        partitions = self._current_meta().get("partitions")
        if not partitions:
            return None
        shard = self._shard(owner_partition(owner_id, partitions), create=False)
        if shard is not None and shard.legacy:
            raise LegacyStore(shard.path)
        return shard

    def partition_count(self) -> int:
        """The shard count of the active view (meta.json; 0 before anything was bound)."""
        return int(self._current_meta().get("partitions") or 0)

    def checkpoint(self, partition: int) -> dict[str, int]:
        """Next offset per topic for a shard."""
        self._follow()
        shard = self._shard(partition, create=not self._read_only)
        ckpt = shard.checkpoint_row() if shard else None
        return dict(json.loads(ckpt["offsets"])) if ckpt else {}

    def change_token(self, partition: int) -> str:
        """``view/commits`` of the shard's last checkpoint (readers: re-read only when it changed)."""
        self._follow()
        shard = self._shard(partition, create=not self._read_only)
        return f"{self.view}/{shard.committed() if shard else 0}"

    def owner_changes(self, owner_id: str, since: str) -> OwnerChanges | None:
        """The owner's rows written since ``since`` and the ids deleted since, from the shard's change log."""
        view, _, commits = since.rpartition("/")
        shard = self._owner_shard(owner_id)
        if view != self.view or not commits.isdigit():
            return None
        if shard is None:
            return OwnerChanges(f"{self.view}/0") if commits == "0" else None
        found = shard.reading(lambda: shard.owner_changes(owner_id, int(commits)))
        if found is None:
            return None
        now, rows, gone = found
        return OwnerChanges(f"{self.view}/{now}", tuple(rows), {t: frozenset(ids) for t, ids in gone.items() if ids})

    def commit(self, partition: int, changes: Sequence[Change], offsets: dict[str, int]) -> None:
        """Apply changes, then record offsets and table versions in the checkpoint row."""
        if self._read_only:
            raise StoreError(f"store {self.root} was opened read-only")
        if not self._meta.get("partitions"):
            raise StoreError("store is not bound to a partition count; call bind() first")
        if not self._meta.get("dim"):
            vectors = (getattr(c.row, "vector", ()) for c in changes if isinstance(c, Upsert))
            dim = next((len(v) for v in vectors if v), 0)  # vectors of other lengths do not fit the column
            if dim:
                self._meta["dim"] = dim
                for open_shard in self._shards.values():  # first: a failed meta write must not leave them at 0
                    open_shard.dim = dim
                self._write_meta()
        shard = self._shard(partition, create=True)
        assert shard is not None
        try:
            shard.commit(changes, offsets, self._optimize_every)
        except (OSError, ValueError, RuntimeError, pa.ArrowException) as exc:
            text = str(exc)
            if "concurrent writers" in text or "CommitConflict" in text or "commit conflict" in text.lower():
                # Lance gave up on a table another writer commits to as well (too many concurrent writers,
                # or a conflict such as two index builds at one version): a shard has one writer, so this
                # one (or the other) lost it. Fenced: the batch is dropped and the shard released; whoever
                # owns the partition reopens it, claims it anew and fills the gap from the log.
                raise StoreFenced(f"shard p{partition} of {self.root} has another writer: {exc}") from exc
            raise StoreError(f"commit to shard p{partition} of {self.root} failed: {exc}") from exc

    def optimize(self) -> None:
        """Index and compact every open shard (a bulk writer compacts only tables of many files, and indexes
        the vectors of large tables only).

        A writer then checkpoints the optimised versions: readers (of a rebuilt view, once it is switched
        to) read tables with every index built, never the versions before them. Shards are optimised side
        by side, as many at a time as there are cores: LanceDB's index builds of a small shard leave cores idle.
        """
        with Writes(min(len(self._shards), os.cpu_count() or 1)) as writes:
            for shard in self._shards.values():
                writes.submit(self._optimize_shard, shard)

    def _optimize_shard(self, shard: _Shard) -> None:
        shard.optimize(self._bulk_vector_index_min_rows if self._bulk else self._vector_index_min_rows)
        if shard.writer:
            shard.own = {name: shard.tables[name].version for name in TABLES if name in shard.tables}
        if shard.writer and shard.commits:
            shard.commit([], {}, 0)

    def erase_history(self, partition: int) -> list[str]:
        """After a forget reached shard ``partition``: no copy of deleted rows stays (module notes); views removed.

        A rebuild (``bulk``) erases its own shard only; the view it replaces is handled when it switches.
        """
        if self._read_only:
            raise StoreError(f"store {self.root} was opened read-only; cannot erase shard p{partition}")
        shard = self._shard(partition, create=False)
        try:
            if shard is not None:
                shard.erase_history()
        except (OSError, ValueError, RuntimeError, pa.ArrowException) as exc:
            raise StoreError(f"erasing old versions of shard p{partition} of view {self.view} failed: {exc}") from exc
        removed: list[str] = []
        if self._bulk:
            self._note_erased(partition)
        elif self.view == current_view(self.loc):
            removed = remove_other_views(self.loc, self.view)
        self.loc.remove_file(self._erasing(partition))  # last: whatever stops before this, the next writer erases
        return removed

    def note_forgets(self, partition: int) -> None:
        """Before a commit that folds forgets: noted beside the view (a file per shard, which no two writers
        share) until ``erase_history`` has run; a rebuild's view also notes the partition as erased."""
        if self._read_only:
            raise StoreError(f"store {self.root} was opened read-only; cannot note forgets in shard p{partition}")
        self.loc.write_text(self._erasing(partition), "")
        if self._bulk:
            self._note_erased(partition)

    def _note_erased(self, partition: int) -> None:
        # So the process that switches to a view other processes rebuilt knows the views it replaces may
        # hold what the forgets removed.
        self.loc.write_text(f"views/{self.view}/{_ERASED.format(partition)}", "")

    def _reading_shard(self, owner_id: str) -> _Shard | None:
        """The owner's shard, None when it has none or a bulk writer has not written the owner yet."""
        shard = self._owner_shard(owner_id)
        if shard is None or (shard.owners_written is not None and owner_id not in shard.owners_written):
            return None
        return shard

    def archive_split(self, owner_id: str, hot_messages: int) -> ArchiveSplit | None:
        """Where the owner's newest ``hot_messages`` messages begin, from its messages' ``seq``, ``speaker``
        and ``role`` columns only (Arrow and NumPy: no row is made); None when it has at most that many."""
        shard = self._reading_shard(owner_id)
        if shard is None:
            return None
        where = f"owner_id = {quote(owner_id)}"
        data = shard.reading(lambda: shard.columns("messages", where, ("seq", "speaker", "role")))
        if data is None or data.num_rows <= hot_messages:
            return None
        seqs = data.column("seq").to_numpy()
        first_hot = len(seqs) - hot_messages  # its place in ascending order
        cold_below_seq = int(np.partition(seqs, first_hot)[first_hot]) if hot_messages > 0 else int(seqs.max()) + 1
        pairs = data.select(["speaker", "role"]).group_by(["speaker", "role"]).aggregate([])
        speakers = zip(pairs.column("speaker").to_pylist(), pairs.column("role").to_pylist(), strict=True)
        return ArchiveSplit(
            cold_below_seq=cold_below_seq,
            cold_messages=int(np.count_nonzero(seqs < cold_below_seq)),
            messages=len(seqs),
            speakers=tuple(sorted(speakers)),
        )

    def load_owner(self, owner_id: str, messages_from_seq: int = 0) -> list[Row]:
        """Every row of an owner, every table as of one checkpoint (none, without a query, for an owner
        a bulk writer has not written yet); messages only those with ``seq >= messages_from_seq``."""
        shard = self._reading_shard(owner_id)
        if shard is None:
            return []
        where = f"owner_id = {quote(owner_id)}"
        wheres = {table: where for table in TABLES}
        if messages_from_seq:
            wheres["messages"] = f"{where} AND seq >= {int(messages_from_seq)}"

        def read() -> list[Row]:
            shard.pin()
            found = read_pool().map(lambda table: shard.select(table, wheres[table], repin=False), TABLES)
            return [row for rows in found for row in rows]

        return shard.reading(read)

    def load_owner_columns(self, owner_id: str, messages_from_seq: int = 0) -> OwnerColumns:
        """``load_owner`` as columns: the graph's nodes and edges as the Arrow the tables hold (a reader casts
        them to ``base.NODE_SCHEMA`` and ``base.EDGE_SCHEMA``), each searched table's vectors as one float32
        matrix (the rows without them), every table as of one checkpoint."""
        shard = self._reading_shard(owner_id)
        if shard is None:
            return owner_columns(())
        where = f"owner_id = {quote(owner_id)}"
        wheres = {table: where for table in TABLES}
        if messages_from_seq:
            wheres["messages"] = f"{where} AND seq >= {int(messages_from_seq)}"

        graph = {"graph_edges": EDGE_COLUMNS, "graph_nodes": NODE_COLUMNS}

        Read = tuple[list[Row], tuple[list[str], Any] | None, pa.Table | None, dict[str, str] | None]

        def one(table: str) -> Read:
            data = shard.columns(table, wheres[table], graph.get(table), repin=False)
            if table in graph:
                return [], None, data, None
            if data is None:
                return [], None, None, None
            if table not in SEARCHED_TABLES:
                return rows_from_arrow(table, data), None, None, None
            ids = data.column("id").to_pylist()
            tokens = None
            if table in TOKENS_KEPT and tokens_current(table, data.schema):
                tokens = dict(zip(ids, data.column("tokens").to_pylist(), strict=True))
            vectors = (ids, vector_matrix(data.column("vector")))
            return rows_from_arrow(table, data, vectors=False), vectors, None, tokens

        def read() -> OwnerColumns:
            shard.pin()
            found = dict(zip(TABLES, read_pool().map(one, TABLES), strict=True))
            empty = owner_columns(())
            vectors = {t: found[t][1] or empty.vectors[t] for t in SEARCHED_TABLES}
            edges, nodes = found["graph_edges"][2], found["graph_nodes"][2]
            rows = [row for rows, _, _, _ in found.values() for row in rows]
            tokens = {t: kept for t in TOKENS_KEPT if (kept := found[t][3]) is not None}
            return OwnerColumns(
                rows,
                vectors,
                edges if edges is not None else empty.edges,
                nodes if nodes is not None else empty.nodes,
                tokens,
            )

        return shard.reading(read)

    def messages_by_id(self, owner_id: str, ids: Sequence[str]) -> list[MessageRow]:
        """The owner's messages with these ids, in id order: one read (``id IN (...)``, prefiltered by owner)."""
        shard = self._reading_shard(owner_id)
        if shard is None or not ids:
            return []
        where = f"owner_id = {quote(owner_id)} AND id IN ({', '.join(quote(i) for i in sorted(set(ids)))})"
        return cast(list[MessageRow], shard.reading(lambda: shard.select("messages", where)))

    def message_ids(self, owner_id: str, below_seq: int | None = None) -> list[str]:
        """Ids of the owner's messages (those with ``seq < below_seq`` when given), sorted: the id column only."""
        shard = self._reading_shard(owner_id)
        if shard is None:
            return []
        where = _seq_filter(f"owner_id = {quote(owner_id)}", below_seq)
        data = shard.reading(lambda: shard.columns("messages", where, ("id",)))
        return [] if data is None else sorted(data.column("id").to_pylist())

    def message_columns(
        self, owner_id: str, from_seq: int = 0, below_seq: int | None = None, columns: Sequence[str] | None = None
    ) -> pa.Table | None:
        """The owner's messages in a range of ``seq`` as the table's Arrow (every column, or ``columns``); one scan."""
        shard = self._reading_shard(owner_id)
        if shard is None:
            return None
        where = _seq_filter(f"owner_id = {quote(owner_id)} AND seq >= {int(from_seq)}", below_seq)
        return shard.reading(lambda: shard.columns("messages", where, columns))

    def rows(self, table: str, owner_id: str) -> list[Row]:
        """Rows of one table for an owner, in id order."""
        shard = self._owner_shard(owner_id)
        return shard.reading(lambda: shard.select(table, f"owner_id = {quote(owner_id)}")) if shard else []

    def owners(self) -> list[str]:
        """Owners with any memory."""
        found: set[str] = set()
        self._follow()
        for name in self.loc.dirs(f"views/{self.view}"):
            if not (name.startswith("p") and name[1:].isdigit()):
                continue
            shard = self._shard(int(name[1:]), create=False)
            if shard is not None and shard.legacy:
                raise LegacyStore(shard.path)
            if shard is not None:
                found.update(shard.reading(functools.partial(_owner_ids, shard)))
        return sorted(found)

    def vector_search(
        self, table: str, owner_id: str, vector: Sequence[float], k: int, below_seq: int | None = None
    ) -> list[Hit]:
        """Cosine search over an owner's rows (prefiltered by owner, and ``seq < below_seq``); an indexed
        table's candidates re-ranked by exact distance (``VECTOR_REFINE``)."""
        check_below_seq(table, below_seq)
        shard = self._owner_shard(owner_id)
        if shard is None or not has_vector(table):
            return []
        where = _seq_filter(f"owner_id = {quote(owner_id)}", below_seq)
        nearest = {
            "column": "vector",
            "q": np.asarray(vector, dtype=np.float32),
            "k": k,
            "metric": "cosine",
            "minimum_nprobes": VECTOR_NPROBES,
            "refine_factor": VECTOR_REFINE,
        }
        found = shard.reading(lambda: shard.search(table, where, k, nearest=nearest))
        if found is None:
            return []
        rows = rows_from_arrow(table, found)
        distances = found.column("_distance").to_pylist()
        hits = [Hit(r, 1.0 - float(d)) for r, d in zip(rows, distances, strict=True) if getattr(r, "vector", ())]
        hits.sort(key=lambda h: (-h.score, h.row.id))
        return hits

    def text_search(
        self, table: str, owner_id: str, query: str, k: int, below_seq: int | None = None, *, context: bool = False
    ) -> list[Hit]:
        """BM25 full-text search over the owner's rows (whitespace index over bilingual tokens; prefiltered
        by owner, and ``seq < below_seq``); the rows come with their vectors. ``context``: a message is found by
        its own words or its ``context``'s (a table made before messages held them: its own words only)."""
        if table not in TEXT_FIELDS:
            raise StoreError(f"table {table!r} has no full-text column; use one of {sorted(TEXT_FIELDS)}")
        check_below_seq(table, below_seq)
        shard = self._owner_shard(owner_id)
        terms = search_text(query)
        if shard is None or not terms:
            return []
        where = _seq_filter(f"owner_id = {quote(owner_id)}", below_seq)
        columns = ["tokens"]
        if context and table == "messages" and shard.has_column(table, "context"):
            columns.append("context")
        match = {"query": terms, "columns": columns}
        found = shard.reading(lambda: shard.search(table, where, k, full_text_query=match))
        if found is None:
            return []
        scores = found.column("_score").to_pylist()
        hits = [Hit(row, float(s)) for row, s in zip(rows_from_arrow(table, found), scores, strict=True)]
        hits.sort(key=lambda h: (-h.score, h.row.id))
        return hits

    def owns(self, partition: int) -> bool:
        """Writers: True while the shard's checkpoint still carries this writer's claim (no newer writer since).

        A commit refused as ``StoreFenced`` while this holds was refused because another writer
        wrote a table at the same moment (a fenced one, late), not because the shard moved.
        """
        shard = self._shards.get(partition)
        if shard is None or not shard.writer or not shard.epoch:
            return False
        table = shard.get(CHECKPOINTS)
        if table is None:
            return False
        table.checkout_latest()
        rows = table.to_arrow().to_pylist()
        return bool(rows) and int(rows[0].get("epoch") or 0) == shard.epoch and rows[0].get("writer") == writer_name()

    def release(self, partitions: Sequence[int]) -> None:
        """Drop the handles of these shards; reopening a shard as writer recovers it to its checkpoint."""
        for p in partitions:
            self._shards.pop(p, None)

    def close(self) -> None:
        """Drop open handles."""
        self._shards.clear()
