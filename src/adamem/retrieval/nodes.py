"""An owner's graph nodes held as columns: a node found through a dict of ids, made into a row when asked.

A long-lived owner has a graph node per message and record and one per topic (a 100k-message owner:
128k). ``NodeColumns`` holds them as one list a column (no object a node) and a dict from node id to
row number; ``NodeIndex`` is the snapshot's mapping of node ids to ``GraphNodeRow``, making the rows
a question walks when it first asks for them and keeping them. A snapshot updated by an owner's
changes shares the columns and lays the changed nodes over them (``NodeIndex.changed``), in the
order a dict of rows updated the same way would iterate them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from adamem.projections.folds.rows import GraphNodeRow
from adamem.projections.store.base import NODE_COLUMNS, NODE_SCHEMA, node_table
from adamem.retrieval.edges import _codes

__all__ = ["NodeColumns", "NodeIndex"]


class NodeColumns:
    """One owner's graph nodes as columns, in the table's order, and each node id's row number (immutable)."""

    def __init__(self, owner_id: str, table: pa.Table) -> None:
        self.owner_id = owner_id
        table = table.select(list(NODE_COLUMNS)).cast(NODE_SCHEMA)
        self.ids: list[str] = table["id"].to_pylist()
        self.number: dict[str, int] = {node: i for i, node in enumerate(self.ids)}
        types, codes = _codes(table["node_type"])
        self._types: list[str] = types
        self._type: list[int] = codes.tolist()
        self._refs: list[str] = table["ref_id"].to_pylist()
        self._labels: list[str] = table["label"].to_pylist()
        self._confidence: list[float] = table["confidence"].to_numpy().tolist()
        self._occurred: list[int] = table["occurred_at"].to_numpy().tolist()
        self._active: list[bool] = table["active"].to_numpy(zero_copy_only=False).tolist()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """Resident bytes, approximately: 250 a node (its strings, numbers and dict entry)."""
        return 250 * len(self.ids)

    def row(self, i: int) -> GraphNodeRow:
        """The node at row number ``i``."""
        return GraphNodeRow(
            self.ids[i],
            self.owner_id,
            self._types[self._type[i]],
            self._refs[i],
            self._labels[i],
            self._confidence[i],
            self._occurred[i],
            self._active[i],
        )

    def of_type(self, node_type: str) -> list[str]:
        """Ids of the nodes of one type, in the table's order."""
        if node_type not in self._types:
            return []
        code = self._types.index(node_type)
        return [node for node, c in zip(self.ids, self._type, strict=True) if c == code]


class NodeIndex(Mapping[str, GraphNodeRow]):
    """Graph nodes by id: those of the columns less the ones removed or written since, then those written
    since (``changed``), in the order they were written."""

    def __init__(
        self,
        columns: NodeColumns,
        written: dict[str, GraphNodeRow] | None = None,
        hidden: frozenset[str] = frozenset(),
        rows: dict[str, GraphNodeRow] | None = None,
    ) -> None:
        self.columns = columns
        self._written = written if written is not None else {}
        self._hidden = hidden  # ids of the columns removed or written since
        self._rows = rows if rows is not None else dict(self._written)  # the rows made or written, by id

    @classmethod
    def of_rows(cls, owner_id: str, rows: Iterable[GraphNodeRow]) -> NodeIndex:
        """The index of rows held in this process."""
        return cls(NodeColumns(owner_id, node_table(rows)))

    def get(self, key: str, default: Any = None) -> Any:
        """The node of this id, or ``default``."""
        row = self._rows.get(key)
        if row is not None:
            return row
        i = self.columns.number.get(key)
        if i is None or key in self._hidden:
            return default
        row = self._rows[key] = self.columns.row(i)
        return row

    def __getitem__(self, key: str) -> GraphNodeRow:
        try:
            return self._rows[key]
        except KeyError:
            pass
        row: GraphNodeRow | None = self.get(key)
        if row is None:
            raise KeyError(key)
        return row

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return key in self._rows or (key in self.columns.number and key not in self._hidden)

    def __iter__(self) -> Iterator[str]:
        hidden = self._hidden
        if hidden:
            yield from (node for node in self.columns.ids if node not in hidden)
        else:
            yield from self.columns.ids
        yield from self._written

    def __len__(self) -> int:
        return len(self.columns) - len(self._hidden) + len(self._written)

    def of_type(self, node_type: str) -> list[str]:
        """Ids of the nodes of one type, in this index's order."""
        hidden = self._hidden
        found = [node for node in self.columns.of_type(node_type) if node not in hidden]
        return found + [node for node, row in self._written.items() if row.node_type == node_type]

    @property
    def nbytes(self) -> int:
        """Resident bytes, approximately: the columns, and 800 a row held as an object."""
        return self.columns.nbytes + 800 * len(self._rows)

    def changed(self, written: Iterable[GraphNodeRow], touched: Iterable[str]) -> NodeIndex:
        """This index with the nodes ``touched`` removed, then ``written`` put (the columns shared)."""
        touched = set(touched)
        new = {node: row for node, row in self._written.items() if node not in touched}
        new.update((row.id, row) for row in written)
        rows = {node: row for node, row in self._rows.items() if node not in touched}
        rows.update(new)
        number = self.columns.number
        hidden = self._hidden | {node for node in touched if node in number}
        return NodeIndex(self.columns, new, frozenset(hidden), rows)
