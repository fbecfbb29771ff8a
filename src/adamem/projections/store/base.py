"""What the store adapters share: full-text fields, change-log entries, net changes, store folders.

The ports themselves (``MemoryStore``, ``StoreReader``, ``StoreWriter``, ``ViewCatalog``) are in
``ports.py`` (re-exported here); LanceDB's row <-> Arrow mapping is in ``lance_arrow.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from adamem.errors import ConfigError, StoreError
from adamem.projections.folds.changes import Change, Delete, Upsert
from adamem.projections.folds.rows import TABLES, EpisodicRow, GraphEdgeRow, GraphNodeRow, MessageRow, PersonaRow, Row
from adamem.projections.store.ports import ArchiveSplit, Hit, MemoryStore, OwnerChanges, OwnerColumns

__all__ = [
    "CHANGE_HISTORY",
    "EDGE_COLUMNS",
    "EDGE_SCHEMA",
    "FULL_TEXT_COLUMNS",
    "NODE_COLUMNS",
    "NODE_SCHEMA",
    "SEARCHED_TABLES",
    "TEXT_FIELDS",
    "TOKENS_KEPT",
    "ArchiveSplit",
    "ChangeEntry",
    "Hit",
    "MemoryStore",
    "OwnerChanges",
    "OwnerColumns",
    "change_entry",
    "check_below_seq",
    "edge_table",
    "extraction_text",
    "final_rows",
    "full_text_columns",
    "node_table",
    "owner_columns",
    "owner_ids",
    "store_folder",
    "text_parts",
]

TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "messages": ("speaker", "text"),
    "episodic": ("content",),
    "persona": ("value", "cluster"),
    "graph_nodes": ("label",),
}
"""Fields whose words make a table's full-text ``tokens`` column (a message's also its extraction: ``text_parts``)."""


def text_parts(table: str, row: Row) -> tuple[str, ...]:
    """The texts whose words make a row's full-text ``tokens``, in order: its ``TEXT_FIELDS``, and for a message the
    words of what was extracted from it (``extraction_text``), by which it is found before its records exist and
    after."""
    fields = tuple(str(getattr(row, f)) for f in TEXT_FIELDS[table])
    if isinstance(row, MessageRow) and row.extraction_json:
        return (*fields, extraction_text(row.extraction_json))
    return fields


@functools.lru_cache(maxsize=4096)
def extraction_text(extraction_json: str) -> str:
    """A message's recorded extraction as words: its facts, attributes and events in the third person."""
    data = json.loads(extraction_json)
    parts = [f["content"] for f in data.get("facts", ())]
    parts += [f"{a['key'].replace('_', ' ')} {a['value']}" for a in data.get("attributes", ())]
    parts += [e["content"] for e in data.get("events", ())]
    return " ".join(parts)


FULL_TEXT_COLUMNS: dict[str, tuple[str, ...]] = {"messages": ("tokens", "context")}
"""A text table's columns with a full-text index, ``("tokens",)`` where not listed: a message's ``context`` (the words
of the owner's message before it) is searched beside its own words by ``text_search(..., context=True)``."""


def full_text_columns(table: str) -> tuple[str, ...]:
    """The columns of a text table that have a full-text index."""
    return FULL_TEXT_COLUMNS.get(table, ("tokens",))


TOKENS_KEPT = ("episodic", "messages")
"""Tables whose stored full-text tokens ``load_owner_columns`` hands over when they are current
(``lance_arrow.tokens_current``): a row's words as a reader's full-text index counts them (``text_parts``, each cut
on its own), so it need not cut the texts again."""

SEARCHED_TABLES = ("messages", "episodic", "persona")
"""Tables with a vector column that retrieval searches."""

EDGE_COLUMNS = ("id", "src", "dst", "edge_type", "weight", "direction", "occurred_at", "message_id")
"""The columns of ``GraphEdgeRow`` in ``OwnerColumns.edges`` (not ``owner_id``: one owner's edges)."""

EDGE_SCHEMA = pa.schema(
    [(name, {"weight": pa.float64(), "occurred_at": pa.int64()}.get(name, pa.string())) for name in EDGE_COLUMNS]
)


def edge_table(edges: Iterable[GraphEdgeRow]) -> pa.Table:
    """Edge rows as ``OwnerColumns.edges``."""
    return _table(list(edges), EDGE_SCHEMA)


NODE_COLUMNS = ("id", "node_type", "ref_id", "label", "confidence", "occurred_at", "active")
"""The columns of ``GraphNodeRow`` in ``OwnerColumns.nodes`` (not ``owner_id``: one owner's nodes)."""

NODE_SCHEMA = pa.schema(
    [
        (name, {"confidence": pa.float64(), "occurred_at": pa.int64(), "active": pa.bool_()}.get(name, pa.string()))
        for name in NODE_COLUMNS
    ]
)


def node_table(nodes: Iterable[GraphNodeRow]) -> pa.Table:
    """Graph node rows as ``OwnerColumns.nodes``."""
    return _table(list(nodes), NODE_SCHEMA)


def _table(rows: Sequence[Row], schema: pa.Schema) -> pa.Table:
    """Rows as the Arrow columns of ``schema`` (each a field of the rows)."""
    return pa.table({f.name: pa.array([getattr(r, f.name) for r in rows], type=f.type) for f in schema})


def owner_columns(rows: Iterable[Row]) -> OwnerColumns:
    """``OwnerColumns`` of an owner's rows (``load_owner``'s): for adapters that hold rows, not columns."""
    kept: list[Row] = []
    edges: list[GraphEdgeRow] = []
    nodes: list[GraphNodeRow] = []
    vectors: dict[str, tuple[list[str], list[Sequence[float]]]] = {t: ([], []) for t in SEARCHED_TABLES}
    for row in rows:
        if isinstance(row, GraphEdgeRow):
            edges.append(row)
            continue
        if isinstance(row, GraphNodeRow):
            nodes.append(row)
            continue
        if isinstance(row, MessageRow | EpisodicRow | PersonaRow):
            ids, vecs = vectors[row.TABLE]
            ids.append(row.id)
            vecs.append(row.vector)
            row = dataclasses.replace(row, vector=())
        kept.append(row)
    matrices = {t: (ids, _matrix(vecs)) for t, (ids, vecs) in vectors.items()}
    return OwnerColumns(kept, matrices, edge_table(edges), node_table(nodes))


def _matrix(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """Vectors as float32 rows of the longest one's length (zeros for an empty or shorter vector)."""
    dim = max((len(v) for v in vectors), default=0)
    matrix = np.zeros((len(vectors), dim), dtype=np.float32)
    for i, v in enumerate(vectors):
        if len(v) == dim and dim:
            matrix[i] = v
    return matrix


CHANGE_HISTORY = 500
"""Commits per shard whose changes a store remembers for ``owner_changes`` (an older token reloads)."""

ChangeEntry = dict[str, dict[str, Any]]
"""What one commit changed, per table: ``{"written": {owner_id: [ids]}, "deleted": [ids]}``."""


def change_entry(net: dict[str, dict[str, Row | None]]) -> ChangeEntry:
    """The change-log entry of one commit, from its net rows (``final_rows``)."""
    entry: ChangeEntry = {}
    for table, rows in sorted(net.items()):
        written: dict[str, list[str]] = {}
        for id_, row in sorted(rows.items()):
            if row is not None:
                written.setdefault(row.owner_id, []).append(id_)
        deleted = sorted(i for i, r in rows.items() if r is None)
        entry[table] = {"written": written, "deleted": deleted}
    return entry


def owner_ids(entries: Iterable[ChangeEntry], owner_id: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Over several commits, per table: the ids written for ``owner_id``, and every id deleted."""
    written: dict[str, set[str]] = {}
    deleted: dict[str, set[str]] = {}
    for entry in entries:
        for table, change in entry.items():
            mine = change.get("written", {}).get(owner_id)
            if mine:
                written.setdefault(table, set()).update(mine)
            if change.get("deleted"):
                deleted.setdefault(table, set()).update(change["deleted"])
    return written, deleted


def final_rows(changes: Sequence[Change]) -> dict[str, dict[str, Row | None]]:
    """Net effect of a change list: per table, per id, the last row written or None if deleted."""
    net: dict[str, dict[str, Row | None]] = {}
    for change in changes:
        rows = net.get(change.table)
        if rows is None:
            rows = net[change.table] = {}
        if isinstance(change, Upsert):
            rows[change.row.id] = change.row
        elif isinstance(change, Delete):
            rows[change.id] = None
    return net


def store_folder(url: str) -> str:
    """The folder of a LanceDB store URL; views, replays and reanalyses need one (not ``memory://``)."""
    if url.startswith("memory://"):
        raise ConfigError("views (replay, reanalyze) need a store folder, not memory://; set ADAMEM_STORE to a folder")
    if "://" in url and not url.startswith(("file://", "lancedb://")):
        raise ConfigError(f"store URL {url!r} is not lancedb://PATH or a folder path")
    return url.removeprefix("lancedb://").removeprefix("file://")


ALL_TABLES = TABLES


def check_below_seq(table: str, below_seq: int | None) -> None:
    """Refuse ``below_seq`` for a table other than ``messages`` (only messages have an arrival number)."""
    if below_seq is not None and table != "messages":
        raise StoreError(f"below_seq applies to table 'messages' only, not {table!r}")
