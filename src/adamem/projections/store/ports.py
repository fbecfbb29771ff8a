"""The store's ports: a reader, a writer, and a catalog of views, each small and adapter-free.

A projection store answers three kinds of callers, and each takes only the port it uses:

- ``StoreReader``: the retriever, verification and comparison of views — rows, searches, and
  what the rows reflect (checkpoints, change tokens, the analysis generation).
- ``StoreWriter``: the projector — binds the shard count, commits changes atomically with the log
  offsets they reach, records the generation, erases history after a forget.
- ``ViewCatalog``: replay, reanalysis, log repair and ``adamem views`` — the store's *views*
  (generations of the projection tables side by side), which one is active, opening one to read
  or write, switching atomically, removing the others after an erasure.

``MemoryStore`` (``base.py``) is a reader and a writer of one view. Every adapter — LanceDB
(``lance.py``) and the in-memory store (``memory.py``) — implements all three; the contract suite
``tests/projections/test_store_contract.py`` runs each port's tests over both. This module names
no adapter: ``factory.py`` chooses one by URL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from adamem.projections.folds.changes import Change
from adamem.projections.folds.rows import MessageRow, Row

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

__all__ = [
    "DEFAULT_VIEW",
    "ArchiveSplit",
    "Hit",
    "MemoryStore",
    "OwnerChanges",
    "OwnerColumns",
    "StoreReader",
    "StoreWriter",
    "ViewCatalog",
]

DEFAULT_VIEW = "main"
"""The view a store is active in until another is switched to."""


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the row and its score (cosine similarity, or BM25)."""

    row: Row
    score: float


@dataclass(frozen=True, slots=True)
class OwnerChanges:
    """How an owner's rows changed between two change tokens of its shard (``StoreReader.owner_changes``).

    Apply by dropping the ``gone`` ids, then putting ``rows``: that gives exactly the owner's rows
    as of ``token``. ``gone`` holds, per table, the ids deleted in the shard since (of any owner: a
    delete does not name its owner) and ids of the owner's rows that no longer exist.
    """

    token: str
    rows: tuple[Row, ...] = ()
    gone: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ArchiveSplit:
    """Where an owner's messages split into the newest ``hot`` (held by a query process) and the older, cold ones.

    ``StoreReader.archive_split`` gives it; the cold messages are then reached through the store's
    searches (``below_seq``) and ``messages_by_id``, the hot ones loaded with
    ``load_owner(owner_id, messages_from_seq=cold_below_seq)``.
    """

    cold_below_seq: int  # messages with seq < this are cold
    cold_messages: int  # how many messages are cold
    messages: int  # every message of the owner
    speakers: tuple[tuple[str, str], ...]  # every (speaker, role) pair of the owner's messages, sorted


@dataclass(frozen=True)
class OwnerColumns:
    """An owner's rows as a query process loads them (``StoreReader.load_owner_columns``): the graph nodes
    and edges and the searched tables' vectors as columns, not one Python object per node, edge or vector value."""

    rows: list[Row]  # every row but the graph's; messages, records and traits without their vectors
    vectors: dict[str, tuple[list[str], npt.NDArray[np.float32]]]  # table -> (row ids, their vectors; zeros: none)
    edges: pa.Table  # the graph edges, ``base.EDGE_COLUMNS``
    nodes: pa.Table  # the graph nodes, ``base.NODE_COLUMNS``
    tokens: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    """``base.TOKENS_KEPT`` table -> row id -> its full-text ``tokens`` as the store holds them
    (``lance_arrow.row_tokens``), for a table whose tokens are current (``lance_arrow.tokens_current``); an adapter
    that holds rows, not columns, hands none (the reader cuts the text)."""


class StoreReader(Protocol):
    """Reads one view of a store: an owner's rows, searches, and the log position they reflect."""

    url: str

    @property
    def view(self) -> str:
        """The view this handle reads (the change feed names it; a cache follows a switch by it)."""

    def held_view(self) -> AbstractContextManager[str]:
        """Follow a switch now, then stay on that view until the block ends; its name.

        A unit of work that reads a shard's checkpoint and then commits past it sees one view: a switch made
        meanwhile (by another process, or another thread on this handle) is followed after the block. Blocks
        nest; a handle opened on a named view stays on it as always.
        """

    def partition_count(self) -> int:
        """The shard count the store is bound to (0 before ``bind``, or when nothing was written yet)."""

    def checkpoint(self, partition: int) -> dict[str, int]:
        """Next offset to apply per topic, for a shard (empty if it has never committed)."""

    def change_token(self, partition: int) -> str:
        """A token of a shard's contents, cheap to read: it moves on every commit and on a view switch."""

    def owner_changes(self, owner_id: str, since: str) -> OwnerChanges | None:
        """How an owner's rows changed since ``since`` (a ``change_token`` of its shard).

        None when the store cannot tell (another view, a token older than ``CHANGE_HISTORY``
        commits, a shard written before the store kept changes): load the owner again.
        """

    def generation(self) -> dict[str, str]:
        """The analysis generation the rows come from (name, extractor, embedder, ...); {} if none recorded."""

    def rebuild_job(self) -> dict[str, Any]:
        """The rebuild job of this view that a group of members shares (``streams.replay_group``); {} if none.

        Its ``erased`` lists the partitions in which a rebuild's writer folded forgets (the views the
        rebuild replaces may still hold what they removed); its ``erasing``, the partitions whose
        writer committed forgets and has not yet erased the history they leave (``note_forgets``).
        """

    def archive_split(self, owner_id: str, hot_messages: int) -> ArchiveSplit | None:
        """Where the owner's newest ``hot_messages`` messages begin; None when it has at most that many
        (or none): load it whole.

        Otherwise ``cold_below_seq`` is the ``seq`` of the ``hot_messages``-th newest message (seq:
        the arrival number within the owner, newest highest); the messages below it are cold.
        """

    def load_owner(self, owner_id: str, messages_from_seq: int = 0) -> list[Row]:
        """Every row of an owner, in any order (the fold state is rebuilt from them); messages only
        those with ``seq >= messages_from_seq`` (every one by default)."""

    def load_owner_columns(self, owner_id: str, messages_from_seq: int = 0) -> OwnerColumns:
        """``load_owner``'s rows as of one checkpoint, with the graph edges and vectors as columns
        (``base.owner_columns`` makes them from rows)."""

    def rows(self, table: str, owner_id: str) -> list[Row]:
        """Every row of one table for an owner."""

    def owners(self) -> list[str]:
        """Owners with any memory, sorted."""

    def vector_search(
        self, table: str, owner_id: str, vector: Sequence[float], k: int, below_seq: int | None = None
    ) -> list[Hit]:
        """The ``k`` rows of an owner most similar to ``vector`` (cosine), best first, with their vectors.

        ``below_seq``: only rows with ``seq < below_seq`` (table ``messages`` only; another table
        with it is refused: ``StoreError``).
        """

    def text_search(
        self, table: str, owner_id: str, query: str, k: int, below_seq: int | None = None, *, context: bool = False
    ) -> list[Hit]:
        """The ``k`` rows of an owner that best match ``query`` (BM25 over bilingual tokens), best first,
        with their vectors; ``below_seq`` as in ``vector_search``. ``context``: a message matches by its own words
        and by its ``context`` (the words of the owner's message before it) alike."""

    def messages_by_id(self, owner_id: str, ids: Sequence[str]) -> list[MessageRow]:
        """The owner's messages with these ids (absent ids, and other owners', skipped), in id order;
        one read, not one per id."""

    def message_ids(self, owner_id: str, below_seq: int | None = None) -> list[str]:
        """Ids of the owner's messages (only those with ``seq < below_seq`` when given), sorted; one read
        of the id column, no row made."""

    def message_columns(
        self, owner_id: str, from_seq: int = 0, below_seq: int | None = None, columns: Sequence[str] | None = None
    ) -> pa.Table | None:
        """The owner's messages with ``from_seq <= seq`` (and ``seq < below_seq`` when given) as the Arrow of the
        ``messages`` table: every field, the full-text ``tokens`` (``lance_arrow.row_tokens``) and the vectors
        (zeros for a row without one), or only ``columns`` (those the table has: a table made before a column was
        added has none); rows in any order; one read, no row made. None when the store has no messages table."""

    def close(self) -> None:
        """Release resources."""


class StoreWriter(Protocol):
    """Writes one view of a store: changes committed atomically with the log offsets they reach."""

    url: str

    def bind(self, partitions: int) -> None:
        """Fix the shard count to the log's partition count; a different count is refused (rebuild instead)."""

    def commit(self, partition: int, changes: Sequence[Change], offsets: dict[str, int]) -> None:
        """Apply changes and record ``offsets`` (topic -> next offset) atomically."""

    def record_generation(self, info: dict[str, str]) -> None:
        """Record which analysis generation this store projects (kept with the store, or its view)."""

    def record_rebuild_job(self, job: dict[str, Any]) -> None:
        """Record the rebuild job of this view, where the members of a group find it (``rebuild_job``)."""

    def note_forgets(self, partition: int) -> None:
        """Before a commit that folds forgets: the shard owes ``erase_history`` until it has run.

        A writer that claims the shard while it is owed (the one before stopped between its commit
        and its erasure) erases it first. A rebuild's view also lists the partition in
        ``rebuild_job()["erased"]``, for the process that switches to it.
        """

    def erase_history(self, partition: int) -> list[str]:
        """After a forget reached a shard: keep no copy of deleted rows anywhere (old versions, other views).

        Returns the views removed with it (a writer of the active view removes every other view;
        a store that keeps no history and has no other view returns []). The shard then owes no
        erasure (``note_forgets``).
        """

    def optimize(self) -> None:
        """Compact and index what was written (a view opened with ``optimize_every=0`` needs it at the end)."""

    def release(self, partitions: Sequence[int]) -> None:
        """Forget cached handles of shards this process no longer (or newly) owns; the next use reopens them."""

    def owns(self, partition: int) -> bool:
        """Writers: True while no other writer claimed the shard since this one did (after a refused commit)."""

    def close(self) -> None:
        """Release resources."""


class MemoryStore(StoreReader, StoreWriter, Protocol):
    """Rows of the memory tables, sharded by partition, with the log offsets they reflect: a reader and
    a writer of one view (the projector folds from what it reads)."""


class ViewCatalog(Protocol):
    """The views of a store: generations of its tables side by side, one of them active.

    A view exists once something was written to it (``bind``, ``record_generation``). A handle
    opened without a name reads the active view and follows a switch on its next call; a named
    handle stays on its view.
    """

    url: str

    def active_view(self) -> str:
        """The name of the view readers are served from (``DEFAULT_VIEW`` until a switch)."""

    def views(self) -> list[str]:
        """Names of the views the store holds, sorted."""

    def open_view(
        self,
        name: str | None = None,
        *,
        read_only: bool = False,
        bulk: bool = False,
        optimize_every: int | None = None,
    ) -> MemoryStore:
        """A reader and writer of view ``name`` (None: the active one, following switches).

        ``bulk``: a view nobody reads until it is switched to (a rebuild), which the adapter may
        write faster, indexing it at ``optimize``. ``optimize_every``: commits between compactions
        (0: only at ``optimize``; None: the adapter's default). ``read_only`` handles refuse writes.
        """

    def switch_view(self, name: str) -> None:
        """Make ``name`` the active view, atomically; a view the store does not hold is refused (``StoreError``)."""

    def remove_other_views(self, keep: str) -> list[str]:
        """Delete every view but ``keep`` (after a forget they may hold what was forgotten); their names."""
