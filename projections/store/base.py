"""What the store adapters share: change-log entries, net changes, the row <-> Arrow mapping.

The ports themselves (``MemoryStore``, ``StoreReader``, ``StoreWriter``, ``ViewCatalog``) are in ``ports.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import struct
import typing
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from adamem.errors import ConfigError
from adamem.projections.folds.changes import Change, Delete, Upsert
from adamem.projections.folds.rows import TABLES, Row, row_types
from adamem.projections.store.ports import Hit, MemoryStore, OwnerChanges
from adamem.text import search_text

__all__ = [
    "CHANGE_HISTORY",
    "TEXT_FIELDS",
    "ChangeEntry",
    "Hit",
    "MemoryStore",
    "OwnerChanges",
    "arrow_schema",
    "change_entry",
    "final_rows",
    "owner_ids",
    "row_from_dict",
    "row_to_dict",
    "row_tokens",
    "rows_from_arrow",
    "rows_to_arrow",
    "store_folder",
]

TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "messages": ("speaker", "text"),
    "episodic": ("content",),
    "persona": ("value", "cluster"),
    "graph_nodes": ("label",),
}
"""Fields whose words make a table's full-text ``tokens`` column."""


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


def _arrow_type(hint: Any, dim: int) -> pa.DataType:
    if hint is str:
        return pa.string()
    if hint is int:
        return pa.int64()
    if hint is float:
        return pa.float64()
    if hint is bool:
        return pa.bool_()
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and args and args[0] is float:
        return pa.list_(pa.float32(), dim)
    if origin is list and args:
        return pa.list_(_arrow_type(args[0], dim))
    raise ConfigError(f"row field type {hint!r} has no Arrow mapping")


@functools.cache
def _hints(table: str) -> dict[str, Any]:
    return typing.get_type_hints(row_types()[table])


def arrow_schema(table: str, dim: int) -> pa.Schema:
    """Arrow schema of a table: the row's fields (``id`` the primary key) plus ``tokens`` for full text."""
    fields = []
    for name, hint in _hints(table).items():
        if typing.get_origin(hint) is typing.ClassVar:
            continue
        if name == "id":
            fields.append(
                pa.field("id", pa.string(), nullable=False, metadata={"lance-schema:unenforced-primary-key": "true"})
            )
        else:
            fields.append(pa.field(name, _arrow_type(hint, dim)))
    if table in TEXT_FIELDS:
        fields.append(pa.field("tokens", pa.string()))
    return pa.schema(fields)


def has_vector(table: str) -> bool:
    """Whether the table has a ``vector`` column."""
    return "vector" in _hints(table)


_CACHED_TEXT_CHARS = 2_000


@functools.lru_cache(maxsize=1 << 14)
def _cached_tokens(text: str) -> str:
    return search_text(text)


def _field_tokens(text: str) -> str:
    return _cached_tokens(text) if len(text) <= _CACHED_TEXT_CHARS else search_text(text)


def row_tokens(table: str, row: Row) -> str:
    """The ``tokens`` column of a row of a full-text table: its text fields, tokenised.

    The tokens of the fields joined by a space, i.e. of each field in turn (a token never spans a
    space), memoised per field text (short texts only, so the cache stays small): a row is written
    again whenever any of its fields changes, its speaker recurs, and a message's graph node is
    labelled with the message's text.
    """
    return " ".join(t for t in (_field_tokens(str(getattr(row, f))) for f in TEXT_FIELDS[table]) if t)


def row_to_dict(table: str, row: Row, dim: int) -> dict[str, Any]:
    """A row as a column dict; empty vectors become zeros, ``tokens`` is derived from the text fields."""
    out = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
    if "vector" in out:
        vec = out["vector"]
        out["vector"] = list(vec) if vec else [0.0] * dim
    if table in TEXT_FIELDS:
        out["tokens"] = row_tokens(table, row)
    return out


@functools.lru_cache(maxsize=8)
def _float32s(dim: int) -> struct.Struct:
    return struct.Struct(f"<{dim}f")


def _vector_column(vectors: Sequence[tuple[float, ...]], kind: pa.FixedSizeListType) -> pa.Array:
    """The fixed-size float32 vector column, from one buffer of packed vectors (empty vectors become zeros)."""
    dim = kind.list_size
    zeros = (0.0,) * dim
    filled = [v or zeros for v in vectors]
    wrong = next((len(v) for v in filled if len(v) != dim), None)
    if wrong is not None:
        raise ValueError(f"a vector of {wrong} values does not fit the table's {dim}-dimensional column")
    packing = _float32s(dim)
    try:  # vectors read from the log keep their float32 bytes (Float32Vector.packed)
        flat = np.frombuffer(b"".join([getattr(v, "packed", None) or packing.pack(*v) for v in filled]), dtype="<f4")
    except OverflowError:  # a value beyond float32's range: round it to infinity, as Arrow does
        with np.errstate(over="ignore"):
            flat = np.fromiter(itertools.chain.from_iterable(filled), dtype=np.float32, count=len(filled) * dim)
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, type=kind.value_type), dim)


def rows_to_arrow(table: str, rows: Sequence[Row], schema: pa.Schema) -> pa.Table:
    """Rows of one table as an Arrow table of ``schema``, built column by column.

    The same table as ``pa.Table.from_pylist([row_to_dict(...) ...], schema=schema)``, without a
    dict per row and a Python list per vector.
    """
    names = [f.name for f in schema if f.name != "tokens"]
    values = dict(zip(names, zip(*map(operator.attrgetter(*names), rows), strict=True), strict=True)) if rows else {}
    columns = []
    for f in schema:
        if f.name == "tokens":
            columns.append(pa.array([row_tokens(table, r) for r in rows], type=f.type))
        elif f.name == "vector":
            columns.append(_vector_column(values.get("vector", ()), f.type))
        else:
            columns.append(pa.array(values.get(f.name, ()), type=f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def row_from_dict(table: str, data: dict[str, Any]) -> Row:
    """The row of a column dict (the inverse of ``row_to_dict``)."""
    cls = row_types()[table]
    values = {}
    for f in dataclasses.fields(cls):
        value = data[f.name]
        if f.name == "vector":
            value = tuple(float(x) for x in value) if value is not None and any(value) else ()
        elif isinstance(value, list):
            value = list(value)
        values[f.name] = value
    return cls(**values)


def store_folder(url: str) -> str:
    """The folder of a LanceDB store URL; views, replays and reanalyses need one (not ``memory://``)."""
    if url.startswith("memory://"):
        raise ConfigError("views (replay, reanalyze) need a store folder, not memory://; set ADAMEM_STORE to a folder")
    if "://" in url and not url.startswith(("file://", "lancedb://")):
        raise ConfigError(f"store URL {url!r} is not lancedb://PATH or a folder path")
    return url.removeprefix("lancedb://").removeprefix("file://")


def _vectors(column: pa.ChunkedArray) -> list[tuple[float, ...]]:
    """A fixed-size vector column as tuples, through one NumPy array; zero vectors become ``()``."""
    array = column.combine_chunks()
    dim = array.type.list_size
    flat = array.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
    return [tuple(v) if present else () for v, present in zip(flat.tolist(), flat.any(axis=1).tolist(), strict=True)]


def rows_from_arrow(table: str, data: pa.Table) -> list[Row]:
    """The rows of an Arrow table of ``table``: the same rows as ``row_from_dict`` gives, built column by column."""
    cls = row_types()[table]
    names = [f.name for f in dataclasses.fields(cls)]
    columns: list[list[Any]] = []
    for name in names:
        column = data.column(name)
        if name == "vector" and not column.null_count and pa.types.is_fixed_size_list(column.type):
            columns.append(_vectors(column))
        elif name == "vector":
            columns.append([tuple(float(x) for x in v) if v is not None and any(v) else () for v in column.to_pylist()])
        else:
            columns.append(column.to_pylist())
    return [cls(*values) for values in zip(*columns, strict=True)]


ALL_TABLES = TABLES
