"""An owner's graph edges held as columns: the edges at a node found through an array, made into rows when asked.

A long-lived owner has hundreds of thousands of edges (a 100k-message owner: 440k). ``EdgeColumns``
holds them as numpy arrays (node, type and direction numbers, weights, times) and one Arrow string
array per id column, with a compressed sparse row index of node numbers: the edges at a node are a
slice of one array. A live graph walk reads a node's ends, types, weights and directions from the
columns (``EdgeIndex.ends_at``); rows are made only when asked for (``EdgeIndex.get``, in id order as
``graph.edges_by_node`` gives them). ``bench/results/notes.md`` has what this saves at load.

A snapshot updated by an owner's changes shares the columns and lays the changed edges over them
(``EdgeIndex.changed``); when the overlay grows past a quarter of the columns, the columns are made
anew with it merged in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from adamem.projections.folds.rows import GraphEdgeRow
from adamem.projections.store.base import EDGE_COLUMNS, EDGE_SCHEMA, edge_table

__all__ = ["EdgeColumns", "EdgeIndex"]

_COMPACT_MIN = 4096
"""An overlay of fewer changed edges than this is never merged into the columns."""


def _codes(column: pa.ChunkedArray) -> tuple[list[Any], npt.NDArray[np.int64]]:
    """A column as its distinct values and each row's number among them (one dictionary over every chunk)."""
    chunks = [c for c in pc.dictionary_encode(column).chunks if len(c)]
    if not chunks:
        return [], np.zeros(0, dtype=np.int64)
    if not all(c.dictionary.equals(chunks[0].dictionary) for c in chunks[1:]):  # chunks with dictionaries of their own
        chunks = [c for c in pa.chunked_array(chunks).unify_dictionaries().chunks if len(c)]
    numbers = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks]).astype(np.int64)
    return chunks[0].dictionary.to_pylist(), numbers


def _strings(column: pa.ChunkedArray) -> pa.Array:
    """A string column as one array: a take from it costs what it takes, not a pass over every chunk."""
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


class EdgeColumns:
    """One owner's edges as columns (node and type numbers, weights, times; ids as Arrow strings), and the edges
    at each node as a slice of ``_at`` (immutable)."""

    def __init__(self, owner_id: str, table: pa.Table) -> None:
        self.owner_id = owner_id
        table = table.select(list(EDGE_COLUMNS)).cast(EDGE_SCHEMA)
        n = table.num_rows
        names, ends = _codes(pa.chunked_array([*table["src"].chunks, *table["dst"].chunks], type=pa.string()))
        self._names = names
        self._src, self._dst = ends[:n], ends[n:]
        self._types, self._type = _codes(table["edge_type"])
        self._directions, self._direction = _codes(table["direction"])
        self._weight = table["weight"].to_numpy()
        self._occurred = table["occurred_at"].to_numpy()
        self._ids, self._messages = _strings(table["id"]), _strings(table["message_id"])
        loop = self._src == self._dst
        nodes = np.concatenate([self._src, self._dst[~loop]])
        edges = np.concatenate([np.arange(n), np.nonzero(~loop)[0]])
        order = np.argsort(nodes, kind="stable")
        self._number: dict[str, int] = {name: i for i, name in enumerate(names)}
        self._at: npt.NDArray[np.int32] = edges[order].astype(np.int32)
        self._start: npt.NDArray[np.int64] = np.searchsorted(nodes[order], np.arange(len(names) + 1))

    def __len__(self) -> int:
        return len(self._src)

    @property
    def nbytes(self) -> int:
        """Resident bytes of the columns and the node index (the node names and their dict approximated)."""
        arrays = (
            self._src,
            self._dst,
            self._type,
            self._direction,
            self._weight,
            self._occurred,
            self._at,
            self._start,
        )
        strings = self._ids.nbytes + self._messages.nbytes + 200 * len(self._names)
        return int(sum(a.nbytes for a in arrays) + strings)

    def nodes(self) -> Iterator[str]:
        """Every node with an edge."""
        return iter(self._number)

    def positions_at(self, node: str) -> npt.NDArray[np.int32]:
        """Row numbers of the edges at ``node`` (as source or destination; a loop once)."""
        i = self._number.get(node)
        if i is None:
            return self._at[:0]
        return self._at[self._start[i] : self._start[i + 1]]

    def rows(self, positions: Sequence[int] | npt.NDArray[Any]) -> list[GraphEdgeRow]:
        """The edges at these row numbers, in that order."""
        at = np.asarray(positions, dtype=np.int64)
        occurred, messages = self._occurred[at].tolist(), self._messages.take(pa.array(at)).to_pylist()
        owner = self.owner_id
        return [
            GraphEdgeRow(i, owner, s, d, t, w, r, o, m)
            for (i, s, d, t, w, r), o, m in zip(self.ends(at), occurred, messages, strict=True)
        ]

    def ends(self, positions: Sequence[int] | npt.NDArray[Any]) -> list[tuple[str, str, str, str, float, str]]:
        """``(id, src, dst, edge_type, weight, direction)`` of the edges at these row numbers, in that order."""
        if not len(positions):
            return []
        at = np.asarray(positions, dtype=np.int64)
        names, types, directions = self._names, self._types, self._directions
        return list(
            zip(
                self._ids.take(pa.array(at)).to_pylist(),
                [names[i] for i in self._src[at].tolist()],
                [names[i] for i in self._dst[at].tolist()],
                [types[i] for i in self._type[at].tolist()],
                self._weight[at].tolist(),
                [directions[i] for i in self._direction[at].tolist()],
                strict=True,
            )
        )

    def table(self) -> pa.Table:
        """The edges as ``base.EDGE_COLUMNS``."""
        names = pa.array(self._names, type=pa.string())
        return pa.table(
            {
                "id": self._ids,
                "src": names.take(pa.array(self._src)),
                "dst": names.take(pa.array(self._dst)),
                "edge_type": pa.array(self._types, type=pa.string()).take(pa.array(self._type)),
                "weight": pa.array(self._weight, type=pa.float64()),
                "direction": pa.array(self._directions, type=pa.string()).take(pa.array(self._direction)),
                "occurred_at": pa.array(self._occurred, type=pa.int64()),
                "message_id": self._messages,
            }
        )

    def positions_of(self, ids: Iterable[str]) -> npt.NDArray[np.int64]:
        """Row numbers of the edges among ``ids`` (one scan of the id column)."""
        wanted = pa.array(sorted(set(ids)), type=pa.string())
        if not len(wanted) or not len(self):
            return np.zeros(0, dtype=np.int64)
        return np.nonzero(pc.is_in(self._ids, value_set=wanted).to_numpy(zero_copy_only=False))[0]


class EdgeIndex(Mapping[str, Sequence[GraphEdgeRow]]):
    """The edges at each node (as ``graph.edges_by_node`` maps them): columns, less ``removed``, plus ``added``."""

    def __init__(
        self,
        columns: EdgeColumns,
        removed: frozenset[str] = frozenset(),
        added: Mapping[str, GraphEdgeRow] | None = None,
    ) -> None:
        self.columns = columns
        self._removed = removed
        self._added: dict[str, GraphEdgeRow] = dict(added or {})
        self._added_at: dict[str, list[GraphEdgeRow]] = {}
        for e in self._added.values():
            self._added_at.setdefault(e.src, []).append(e)
            if e.dst != e.src:
                self._added_at.setdefault(e.dst, []).append(e)
        gone = columns.rows(columns.positions_of(removed)) if removed else []
        self._hidden = len(gone)  # rows of the columns that ``removed`` hides
        self._removed_at: Counter[str] = Counter()
        for e in gone:
            self._removed_at[e.src] += 1
            if e.dst != e.src:
                self._removed_at[e.dst] += 1

    @classmethod
    def of(cls, owner_id: str, edges: Iterable[GraphEdgeRow]) -> EdgeIndex:
        """The index of edge rows."""
        return cls(EdgeColumns(owner_id, edge_table(edges)))

    def get(self, node: str, default: Any = None) -> Any:
        """The edges at ``node`` in id order; ``default`` when it has none."""
        found = self.columns.rows(self.columns.positions_at(node))
        if self._removed:
            found = [e for e in found if e.id not in self._removed]
        found += self._added_at.get(node, ())
        if not found:
            return default
        found.sort(key=lambda e: e.id)
        return found

    def ends_at(self, node: str) -> list[tuple[str, str, str, float, str]]:
        """``(src, dst, edge_type, weight, direction)`` of the edges at ``node``, in id order, without making rows."""
        found = self.columns.ends(self.columns.positions_at(node))
        if self._removed:
            found = [e for e in found if e[0] not in self._removed]
        found += [(e.id, e.src, e.dst, e.edge_type, e.weight, e.direction) for e in self._added_at.get(node, ())]
        found.sort(key=lambda e: e[0])
        return [e[1:] for e in found]

    def __getitem__(self, node: str) -> Sequence[GraphEdgeRow]:
        found: Sequence[GraphEdgeRow] | None = self.get(node)
        if found is None:
            raise KeyError(node)
        return found

    def degree(self, node: str) -> int:
        """How many edges are at ``node``, without making them rows."""
        base = len(self.columns.positions_at(node)) - self._removed_at.get(node, 0)
        return base + len(self._added_at.get(node, ()))

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({n for n in self.columns.nodes() if self.degree(n)} | self._added_at.keys()))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def edge(self, edge_id: str) -> GraphEdgeRow | None:
        """One edge by id."""
        if edge_id in self._added:
            return self._added[edge_id]
        if edge_id in self._removed:
            return None
        found = self.columns.rows(self.columns.positions_of((edge_id,)))
        return found[0] if found else None

    @property
    def by_id(self) -> Mapping[str, GraphEdgeRow]:
        """The edges by id."""
        return _ById(self)

    def held(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are edges here."""
        ids = set(ids)
        found = {e.id for e in self.columns.rows(self.columns.positions_of(ids - self._removed))}
        return found | (ids & self._added.keys())

    def count(self) -> int:
        """How many edges there are."""
        return len(self.columns) - self._hidden + len(self._added)

    def all(self) -> list[GraphEdgeRow]:
        """Every edge, in id order."""
        kept = [e for e in self.columns.rows(np.arange(len(self.columns))) if e.id not in self._removed]
        return sorted([*kept, *self._added.values()], key=lambda e: e.id)

    @property
    def nbytes(self) -> int:
        """Approximate resident bytes (``_ROW_BYTES``-like for the overlay's rows)."""
        return self.columns.nbytes + 750 * (len(self._added) + len(self._removed))

    def changed(self, rows: Iterable[GraphEdgeRow], gone: Iterable[str]) -> EdgeIndex:
        """This index with ``rows`` written (new or rewritten) and the edges ``gone`` removed; itself unchanged."""
        rows = list(rows)
        touched = {e.id for e in rows} | set(gone)
        added = {k: e for k, e in self._added.items() if k not in touched}
        added.update((e.id, e) for e in rows)
        removed = self._removed | touched
        if len(added) + len(removed) < max(_COMPACT_MIN, len(self.columns) // 4):
            return EdgeIndex(self.columns, frozenset(removed), added)
        table = self.columns.table()
        keep = pc.invert(pc.is_in(table["id"], value_set=pa.array(sorted(removed), type=pa.string())))
        merged = pa.concat_tables([table.filter(keep), edge_table(added.values())])
        return EdgeIndex(EdgeColumns(self.columns.owner_id, merged))


class _ById(Mapping[str, GraphEdgeRow]):
    """An ``EdgeIndex``'s edges by id (a row made per lookup)."""

    def __init__(self, index: EdgeIndex) -> None:
        self._index = index

    def __getitem__(self, edge_id: str) -> GraphEdgeRow:
        found = self._index.edge(edge_id)
        if found is None:
            raise KeyError(edge_id)
        return found

    def __contains__(self, edge_id: object) -> bool:
        return isinstance(edge_id, str) and self._index.edge(edge_id) is not None

    def __iter__(self) -> Iterator[str]:
        return iter([e.id for e in self._index.all()])

    def __len__(self) -> int:
        return self._index.count()
