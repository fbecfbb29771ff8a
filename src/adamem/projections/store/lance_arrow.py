"""The LanceDB adapter's row <-> Arrow mapping: a table's Arrow schema, and rows to columns and back.

Only the LanceDB adapter stores rows as Arrow; the ports and the in-memory store hold them as the
folds' row dataclasses. ``tokens`` (the full-text column) is derived here from ``TEXT_FIELDS``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import struct
import types
import typing
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from adamem.errors import ConfigError
from adamem.projections.folds.rows import Row, row_types
from adamem.projections.store.base import TEXT_FIELDS, text_parts
from adamem.text import memo_search_text

__all__ = [
    "arrow_schema",
    "has_vector",
    "row_from_dict",
    "row_to_dict",
    "row_tokens",
    "rows_from_arrow",
    "rows_to_arrow",
    "tokens_current",
    "vector_matrix",
]


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
    if origin is types.UnionType and len(args) == 2 and type(None) in args:  # optional: a nullable column
        return _arrow_type(next(a for a in args if a is not type(None)), dim)
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
        fields.append(pa.field("tokens", pa.string(), metadata=TOKENS_MARK if table == "messages" else None))
    return pa.schema(fields)


TOKENS_MARK = {"adamem:tokens": "text_parts"}
"""On a messages table's ``tokens`` field: its rows' tokens are their ``text_parts`` (speaker, text and extraction).
A table made before they held the extraction's words has no mark (its rows appended since keep its schema), and a
reader cuts its messages' texts again rather than take their tokens."""


def tokens_current(table: str, schema: pa.Schema) -> bool:
    """Whether a table's stored ``tokens`` are its rows' words as ``row_tokens`` cuts them now (a messages table
    made before its tokens held the extraction's words is not: no ``TOKENS_MARK``)."""
    if "tokens" not in schema.names:
        return False
    if table != "messages":
        return True
    marked = schema.field("tokens").metadata or {}
    return all(marked.get(k.encode()) == v.encode() for k, v in TOKENS_MARK.items())


def has_vector(table: str) -> bool:
    """Whether the table has a ``vector`` column."""
    return "vector" in _hints(table)


def row_tokens(table: str, row: Row) -> str:
    """The ``tokens`` column of a row of a full-text table: the words of its ``text_parts`` (its text fields, and a
    message's extraction).

    The tokens of the parts joined by a space, i.e. of each part in turn (a token never spans a
    space), memoised per part's text (short texts only, so the cache stays small): a row is written
    again whenever any of its fields changes (a message when it is consolidated, its text and
    extraction unchanged), its speaker recurs, and a message's graph node is labelled with the
    message's text.
    """
    return " ".join(t for t in map(memo_search_text, text_parts(table, row)) if t)


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
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data and f.default is None:  # a column added since the table was made: null
            values[f.name] = None
            continue
        value = data[f.name]
        if f.name == "vector":
            value = tuple(float(x) for x in value) if value is not None and any(value) else ()
        elif isinstance(value, list):
            value = list(value)
        values[f.name] = value
    return cls(**values)


def _vectors(column: pa.ChunkedArray) -> list[tuple[float, ...]]:
    """A fixed-size vector column as tuples, through one NumPy array; zero vectors become ``()``."""
    array = column.combine_chunks()
    dim = array.type.list_size
    flat = array.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
    return [tuple(v) if present else () for v, present in zip(flat.tolist(), flat.any(axis=1).tolist(), strict=True)]


def vector_matrix(column: pa.ChunkedArray) -> npt.NDArray[np.float32]:
    """A vector column as one float32 matrix (zero rows: no vector); no Python float made."""
    array = column.combine_chunks()
    if not pa.types.is_fixed_size_list(array.type) or array.null_count:
        return np.asarray([v or () for v in array.to_pylist()], dtype=np.float32).reshape(len(array), -1)
    dim = array.type.list_size
    return np.array(array.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


def rows_from_arrow(table: str, data: pa.Table, *, vectors: bool = True) -> list[Row]:
    """The rows of an Arrow table of ``table``: the same rows as ``row_from_dict`` gives, built column by column
    (``vectors=False``: every vector empty, the column not read)."""
    cls = row_types()[table]
    fields = dataclasses.fields(cls)
    columns: list[list[Any]] = []
    for f in fields:
        name = f.name
        if name == "vector" and not vectors:
            columns.append([()] * data.num_rows)
            continue
        if name not in data.column_names and f.default is None:  # a column added since the table was made
            columns.append([None] * data.num_rows)
            continue
        column = data.column(name)
        if name == "vector" and not column.null_count and pa.types.is_fixed_size_list(column.type):
            columns.append(_vectors(column))
        elif name == "vector":
            columns.append([tuple(float(x) for x in v) if v is not None and any(v) else () for v in column.to_pylist()])
        else:
            columns.append(column.to_pylist())
    return [cls(*values) for values in zip(*columns, strict=True)]
