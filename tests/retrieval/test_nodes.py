"""An owner's graph nodes held as columns answer as a dict of the node rows does, before and after changes."""

from __future__ import annotations

import random

import pytest

from adamem.projections.folds.rows import GraphNodeRow
from adamem.retrieval.config import SEED_DEFAULT
from adamem.retrieval.edges import EdgeIndex
from adamem.retrieval.graph import MemoryGraph
from adamem.retrieval.nodes import NodeIndex
from tests.retrieval.test_edges import _edge

OWNER = "default:u"
TYPES = ("message", "topic", "fact", "attribute", "event")


def _node(rng: random.Random, i: int) -> GraphNodeRow:
    return GraphNodeRow(
        id=f"n{i}",
        owner_id=OWNER,
        node_type=rng.choice(TYPES),
        ref_id=f"r{rng.randrange(10**6)}",
        label=rng.choice(["", "Haidian", "健身卡 体检", f"label {i}"]),
        confidence=round(rng.random(), 4),
        occurred_at=rng.randrange(-1, 10**12),
        active=rng.random() < 0.8,
    )


def _same(index: NodeIndex, rows: dict[str, GraphNodeRow]) -> None:
    """``index`` answers every question as the dict of rows does, in the dict's order."""
    assert list(index) == list(rows) and len(index) == len(rows)
    assert list(index.values()) == list(rows.values()) and dict(index.items()) == rows
    for node in [*rows, "absent", "n-1"]:
        assert index.get(node) == rows.get(node), node
        assert (node in index) is (node in rows)
    for node_type in (*TYPES, "none"):
        assert index.of_type(node_type) == [n for n, r in rows.items() if r.node_type == node_type]
    with pytest.raises(KeyError):
        index["nowhere"]
    assert (3 in index) is False  # type: ignore[comparison-overlap]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_nodes_are_the_rows_they_were_made_of(seed: int) -> None:
    rng = random.Random(seed)
    rows = {n.id: n for n in (_node(rng, i) for i in range(500))}
    _same(NodeIndex.of_rows(OWNER, rows.values()), rows)
    _same(NodeIndex.of_rows(OWNER, []), {})


def test_changed_nodes_answer_as_the_dict_changed_the_same_way() -> None:
    """Removed, rewritten and new nodes over three rounds: the dict's values and its order (a rewritten node
    goes to the end, as a dict popped and put again), and the index changed from is left as it was."""
    rng = random.Random(7)
    rows = {n.id: n for n in (_node(rng, i) for i in range(300))}
    index = NodeIndex.of_rows(OWNER, rows.values())
    for round_ in range(3):
        before = dict(rows)
        gone = set(rng.sample(sorted(rows), 20)) | {"never-was"}
        kept = [n for n in rows if n not in gone]
        rewritten = [_node(rng, int(n[1:])) for n in rng.sample(kept, 20)]
        new = [_node(rng, 1000 * (round_ + 1) + i) for i in range(15)]
        written = [*rewritten, *new]
        touched = gone | {r.id for r in written}
        for node in touched:
            rows.pop(node, None)
        rows.update((r.id, r) for r in written)
        changed = index.changed(written, touched)
        _same(changed, rows)
        _same(index, before)
        index = changed


def test_a_graph_over_node_columns_walks_the_arcs_of_one_over_node_rows() -> None:
    rng = random.Random(5)
    edges = EdgeIndex.of(OWNER, [_edge(rng, i, 40) for i in range(800)])
    rows = {n.id: n for n in (_node(rng, i) for i in range(39))}  # n39 is missing: its edges are not walked
    visible = lambda n: n.active and n.occurred_at % 7 != 0  # noqa: E731
    over_rows = MemoryGraph.over(rows, edges, SEED_DEFAULT, visible, None)
    over_columns = MemoryGraph.over(NodeIndex.of_rows(OWNER, rows.values()), edges, SEED_DEFAULT, visible, None)
    assert sum(len(over_rows.arcs(n)) for n in rows) > 50
    for n in [*rows, "n39"]:
        assert over_columns.arcs(n) == over_rows.arcs(n), n
