"""A LanceDB shard opened: its tables, its one writer's claim (fencing) and its recovery to the checkpoint.

Exactly-once effect: a commit upserts (``merge_insert`` on the ``id`` primary key) and deletes
per table, then writes one checkpoint row holding the log offsets *and the version of every
table*. On open, a writer restores any table that is ahead of the last checkpoint (a crash
between the table writes and the checkpoint), so the shard is exactly as of its checkpoint and
the events after it are applied again. Writes are batched by the caller; ``optimize`` compacts
and refreshes indexes every ``optimize_every`` commits.

Fencing: each shard has exactly one writer at a time, also while a consumer group rebalances. A
writer opening a shard *claims* it: it raises the owner epoch in the checkpoint row by one and
writes that row with a compare-and-set (a Lance ``Overwrite`` committed with ``read_version`` = the
checkpoint version it read; Lance refuses it if any other commit came in between, locally and on
object stores alike). Every later checkpoint of that writer is written the same way, on top of the
version it wrote last, and carries its epoch and name (host:pid). So once a newer writer has
claimed the shard, every checkpoint of the older one is refused (``StoreFenced``): a worker that
lost its partition — revoked, or paused past its session timeout — cannot commit to the shard,
and what it wrote is never visible (readers see the tables as of the checkpoint). The older writer
also checks the fence before writing any table; a table version it still wrote after the claim
(it was paused between that check and the write) is rolled back by the owner before the owner's
next write (every table is compared with the owner's checkpoint first), and a foreign version
interleaved with the owner's own writes is caught by counting versions (each write adds exactly
one) and the commit is redone on the restored tables.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import timedelta
from typing import Any

import lance
import lancedb
import pyarrow as pa
from lance.commit import CommitConflictError

from adamem.errors import StoreError, StoreFenced
from adamem.projections.folds.rows import TABLES
from adamem.projections.store.lance_arrow import arrow_schema
from adamem.projections.store.lance_tables import (
    CHANGES,
    CHANGES_SCHEMA,
    CHECKPOINT_EMPTY,
    CHECKPOINT_SCHEMA,
    CHECKPOINTS,
    LegacyStore,
    names_owner_by_user_id,
    writer_name,
)
from adamem.projections.store.location import Location

__all__ = ["ShardHandle"]

log = logging.getLogger("adamem.store")


class ShardHandle:
    """One partition's LanceDB database and its open tables; a writer's claim on it and its recovery."""

    def __init__(self, loc: Location, rel: str, dim: int, *, writer: bool, bulk: bool = False) -> None:
        local = loc.local(rel)
        if local is not None:
            local.mkdir(parents=True, exist_ok=True)
        self.loc, self.rel = loc, rel
        self.path = loc.uri(rel)
        # Readers check for new versions on every query: a query after a commit never sees stale rows.
        self.db = lancedb.connect(
            self.path,
            read_consistency_interval=None if writer else timedelta(0),
            storage_options=loc.options or None,
        )
        self.dim = dim
        self.tables: dict[str, Any] = {}
        self.schemas: dict[str, pa.Schema] = {}
        self.writer = writer
        self.vector_index_min_rows = 0
        self.pinned: dict[str, int] = {}
        self.datasets: dict[str, tuple[int, Any]] = {}  # table -> (version, its Lance dataset)
        self.fts_ready: set[str] = set()
        self.commits = 0
        # readers: the checkpoint folder's state when last read, and the checkpoint row read then
        self._checkpoint_seen: tuple[tuple[int, int], dict[str, Any] | None] | None = None
        # writers: the owner epoch claimed, the checkpoint row last written and its table version
        self.epoch = 0
        self.ckpt: dict[str, Any] | None = None
        self.ckpt_version = 0
        self.changes_version: int | None = None  # writers: the change log's version after their last commit
        self.own: dict[str, int] = {}  # writers: table versions of their own not yet checkpointed (``optimize``)
        self._adopting = threading.Lock()  # writers: one thread at a time takes in a table made since the claim
        names = set(self.db.list_tables(limit=1000).tables)
        for name in (*TABLES, CHECKPOINTS, CHANGES):
            if name in names:
                try:
                    self.tables[name] = self.db.open_table(name)
                except ValueError:  # listed, but its first version is still being written: ``get`` opens it later
                    continue
        # Rows of 0.1 named their owner by the bare user id: such a view is read by nothing but a rebuild.
        self.legacy = any(names_owner_by_user_id(self.tables[n]) for n in TABLES if n in self.tables)
        if self.legacy and writer:
            raise LegacyStore(self.path)
        self.bulk = bulk
        # bulk: per table this writer found empty, every id it has written there (a superset of its ids)
        self.written: dict[str, set[str]] | None = None
        # bulk, all tables found empty: every owner this writer has written rows of (others have none)
        self.owners_written: set[str] | None = None
        if writer:
            self._claim()
            self._recover()
            if bulk:
                self.written = {n: set() for n in TABLES if n not in self.tables or not self.tables[n].count_rows()}
                self.owners_written = set() if len(self.written) == len(TABLES) else None

    def get(self, name: str) -> Any | None:
        """An existing table's handle (opening one another process created since), or None."""
        table = self.tables.get(name)
        if table is None and name in self.db.list_tables(limit=1000).tables:
            try:
                table = self.tables[name] = self.db.open_table(name)
            except ValueError:  # its folder exists but its first version is still being written
                return None
        return table

    def table(self, name: str) -> Any:
        if name not in self.tables:
            schemas = {CHECKPOINTS: CHECKPOINT_SCHEMA, CHANGES: CHANGES_SCHEMA}
            schema = schemas[name] if name in schemas else arrow_schema(name, self.dim)
            self.tables[name] = self.db.create_table(name, schema=schema, exist_ok=True)
        return self.tables[name]

    def checkpoint_row(self) -> dict[str, Any] | None:
        """The last checkpoint (a writer's own: the one it wrote last, or found when it claimed the shard)."""
        if self.writer and self.ckpt is not None:
            return self.ckpt
        table = self.get(CHECKPOINTS)
        if table is None:
            return None
        rows = table.to_arrow().to_pylist()
        return rows[0] if rows else None

    def _claim(self) -> None:
        """Become the shard's one writer: raise the owner epoch by one, compare-and-set (module notes)."""
        for _ in range(100):
            table = self.get(CHECKPOINTS)
            if table is None:
                row = {**CHECKPOINT_EMPTY, "epoch": 1, "writer": writer_name()}
                try:
                    table = self.db.create_table(
                        CHECKPOINTS, data=pa.Table.from_pylist([row], schema=CHECKPOINT_SCHEMA)
                    )
                except (ValueError, OSError):  # another writer made it first: claim on top of its row
                    time.sleep(0.01)
                    continue
                self.tables[CHECKPOINTS] = table
                self.ckpt, self.ckpt_version, self.epoch = row, table.version, 1
                return
            table.checkout_latest()
            found = table.to_arrow().to_pylist()
            row = {**CHECKPOINT_EMPTY, **(found[0] if found else {})}
            row["epoch"] = int(row["epoch"] or 0) + 1
            row["writer"] = writer_name()
            try:
                self._put_checkpoint(row, table.version)
            except StoreFenced:  # claimed by another writer at the same moment: claim again above it
                continue
            return
        raise StoreError(f"could not claim shard {self.path}: other writers kept claiming it")

    def _put_checkpoint(self, row: dict[str, Any], read_version: int) -> None:
        """Write the checkpoint row as the version after ``read_version``, or raise ``StoreFenced``."""
        table = self.table(CHECKPOINTS)
        uri = table.to_lance().uri
        data = pa.Table.from_pylist([row], schema=CHECKPOINT_SCHEMA)
        options = self.loc.options or None
        fragments = lance.fragment.write_fragments(data, uri, schema=CHECKPOINT_SCHEMA, storage_options=options)
        try:
            written = lance.LanceDataset.commit(
                uri,
                lance.LanceOperation.Overwrite(CHECKPOINT_SCHEMA, fragments),
                read_version=read_version,
                storage_options=options,
            )
        except CommitConflictError as exc:
            raise self._fenced(int(row["epoch"] or 0)) from exc
        table.checkout_latest()
        self.ckpt, self.ckpt_version, self.epoch = row, written.version, int(row["epoch"] or 0)
        self.own = {}

    def _fenced(self, epoch: int) -> StoreFenced:
        table = self.tables[CHECKPOINTS]
        table.checkout_latest()
        found = table.to_arrow().to_pylist()
        owner = found[0] if found else {}
        return StoreFenced(
            f"shard {self.path} was claimed by {owner.get('writer') or 'another writer'} (owner epoch "
            f"{owner.get('epoch')}) after this writer ({writer_name()}, epoch {epoch}); this writer lost "
            "its partition and may no longer commit to the shard"
        )

    def _check_fence(self) -> None:
        """Writers: raise ``StoreFenced`` when another writer wrote the checkpoint since this one's last."""
        table = self.tables[CHECKPOINTS]
        table.checkout_latest()
        if table.version != self.ckpt_version:
            raise self._fenced(self.epoch)

    def _guard(self) -> None:
        """Before a writer writes: the fence holds, and every table is as of its checkpoint.

        A table ahead of the checkpoint was written by a fenced writer after this one claimed the
        shard (or by this writer in a commit that failed): it is restored to the checkpoint first.
        """
        self._check_fence()
        for name in TABLES:
            table = self.get(name)
            if table is not None:
                table.checkout_latest()
        changes = self.get(CHANGES)
        if changes is not None:
            changes.checkout_latest()
        self._recover(quiet=False)

    def _to_checkpoint(self, name: str, table: Any, want: int | None, *, quiet: bool) -> None:
        """Bring one table to the version the checkpoint names (``None``: no rows), recorded as this writer's own.

        Recorded, the restored version (its content the checkpoint's) is not rolled back again at the
        next commit's guard.
        """
        if want is None:
            if table.count_rows():
                if not quiet:
                    log.warning("%s/%s: removing rows no checkpoint covers", self.path, name)
                table.delete("true")  # written after the last checkpoint: none of it counts
                self.own[name] = table.version
        elif table.version != want:
            if not quiet:
                log.warning("%s/%s: rolling back versions %d-%d to %d", self.path, name, want + 1, table.version, want)
            table.restore(want)
            self.own[name] = table.version

    def _recover(self, *, quiet: bool = True) -> None:
        """Roll every table back to the versions the last checkpoint recorded."""
        ckpt = self.checkpoint_row()
        versions: dict[str, int] = json.loads(ckpt["versions"]) if ckpt else {}
        self.commits = int(ckpt["commits"]) if ckpt else 0
        for name in TABLES:
            table = self.tables.get(name)
            if table is None:
                continue
            if name in self.own and table.version == self.own[name]:
                continue  # this writer's own optimisation since its checkpoint: the next checkpoint names it
            self._to_checkpoint(name, table, versions.get(name), quiet=quiet)
        changes = self.tables.get(CHANGES)
        if changes is not None and changes.version != self.changes_version:
            changes.delete(f"commit > {self.commits}")  # logged by a commit that never reached its checkpoint
            self.changes_version = changes.version

    def _adopt(self, name: str) -> None:
        """Writers: take in a table another process made after this writer claimed the shard.

        Only a fenced writer makes one then: its commit wrote the table after this writer's claim,
        and its checkpoint was refused, so nothing in it counts. Read as it is, its rows would enter
        the state this writer folds from, and the next commit's guard would then delete them while
        the fold, which found them already there, wrote nothing in their place (seen in the group
        test: a message's graph nodes lost). So it is rolled back before anything of it is read, or
        ``StoreFenced`` is raised when this writer has lost the shard itself.
        """
        if name not in self.db.list_tables(limit=1000).tables:
            return
        self._check_fence()
        try:
            table = self.db.open_table(name)
        except ValueError:  # its first version is still being written: nothing of it to read yet
            return
        versions: dict[str, int] = json.loads(self.ckpt["versions"]) if self.ckpt else {}
        self._to_checkpoint(name, table, versions.get(name), quiet=False)
        self.tables[name] = table
