"""An owner's edges held as columns answer as the edge rows indexed by node do, before and after changes."""

from __future__ import annotations

import random

import pytest

from adamem.projections.folds.rows import GraphEdgeRow, GraphNodeRow
from adamem.retrieval import edges as edges_module
from adamem.retrieval.config import SEED_DEFAULT
from adamem.retrieval.edges import EdgeIndex
from adamem.retrieval.graph import MemoryGraph, edges_by_node

OWNER = "default:u"


def _edge(rng: random.Random, i: int, nodes: int) -> GraphEdgeRow:
    src = f"n{rng.randrange(nodes)}"
    dst = src if rng.random() < 0.05 else f"n{rng.randrange(nodes)}"  # some loops, some parallel edges
    return GraphEdgeRow(
        id=f"e{rng.randrange(10**6):06d}-{i}",
        owner_id=OWNER,
        src=src,
        dst=dst,
        edge_type=rng.choice(["mentions", "temporal_next", "same_topic"]),
        weight=round(rng.random(), 3),
        direction=rng.choice(["forward", "backward", "both"]),
        occurred_at=rng.randrange(10**6),
        message_id=f"m{rng.randrange(50)}",
    )


def _same(index: EdgeIndex, rows: list[GraphEdgeRow], nodes: int) -> None:
    """``index`` answers every question as ``edges_by_node(rows)`` and the rows themselves do."""
    expected = edges_by_node(rows)
    for n in [f"n{i}" for i in range(nodes + 3)]:
        assert index.get(n) == expected.get(n), n
        assert index.get(n, ()) == expected.get(n, ())
        assert index.degree(n) == len(expected.get(n, ()))
        assert index.ends_at(n) == [(e.src, e.dst, e.edge_type, e.weight, e.direction) for e in expected.get(n, ())]
    assert list(index) == sorted(expected) and len(index) == len(expected)
    by_id = {e.id: e for e in rows}
    assert index.count() == len(by_id) == len(index.by_id) and index.all() == sorted(rows, key=lambda e: e.id)
    probe = [*list(by_id)[:20], "absent"]
    assert index.held(probe) == set(probe) & by_id.keys()
    assert all(index.edge(i) == by_id.get(i) for i in probe) and ("absent" in index.by_id) is False
    with pytest.raises(KeyError):
        index["nowhere"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_edges_at_a_node_are_the_rows_edges_by_node_gives(seed: int) -> None:
    rng = random.Random(seed)
    rows = [_edge(rng, i, 40) for i in range(600)]
    _same(EdgeIndex.of(OWNER, rows), rows, 40)
    _same(EdgeIndex.of(OWNER, []), [], 40)


@pytest.mark.parametrize("compact_min", [1 << 30, 0], ids=["overlaid", "merged"])
def test_changed_edges_answer_as_the_changed_rows_indexed_afresh(
    compact_min: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rewritten, removed and new edges, over three rounds of changes: laid over the columns, or merged into them."""
    monkeypatch.setattr(edges_module, "_COMPACT_MIN", compact_min)
    rng = random.Random(11)
    rows = {e.id: e for e in (_edge(rng, i, 30) for i in range(400))}
    index = EdgeIndex.of(OWNER, rows.values())
    for round_ in range(3):
        before = dict(rows)
        ids = sorted(rows)
        gone = set(rng.sample(ids, 25)) | {"never-was"}
        rewritten = [_rewrite(rows[i], rng) for i in rng.sample([i for i in ids if i not in gone], 25)]
        new = [_edge(rng, 1000 * (round_ + 1) + i, 33) for i in range(30)]
        for i in gone:
            rows.pop(i, None)
        rows.update((e.id, e) for e in [*rewritten, *new])
        changed = index.changed([*rewritten, *new], gone)
        _same(changed, list(rows.values()), 33)
        _same(index, list(before.values()), 33)  # the index it was made from is unchanged
        index = changed


def _rewrite(e: GraphEdgeRow, rng: random.Random) -> GraphEdgeRow:
    """The same edge id, moved to other nodes with another weight."""
    return GraphEdgeRow(e.id, OWNER, f"n{rng.randrange(33)}", e.dst, e.edge_type, 0.123, e.direction, 5, e.message_id)


@pytest.mark.parametrize("as_of", [None, 500_000], ids=["live", "as-of"])
def test_a_graph_over_the_columns_walks_the_arcs_of_one_over_rows(as_of: int | None) -> None:
    """Every node's arcs (targets, weights, types, their order), live (from the columns) and as of a time (rows)."""
    rng = random.Random(5)
    rows = [_edge(rng, i, 40) for i in range(800)]
    nodes = {
        f"n{i}": GraphNodeRow(f"n{i}", OWNER, "fact" if i % 3 else "message", f"r{i}", "", 0.9, i, True)
        for i in range(39)  # n39 is missing: its edges are not walked
    }
    shown = None if as_of is None else (lambda e: e.occurred_at <= as_of)
    over_rows = MemoryGraph.over(nodes, edges_by_node(rows), SEED_DEFAULT, lambda n: n.occurred_at != 7, shown)
    over_columns = MemoryGraph.over(nodes, EdgeIndex.of(OWNER, rows), SEED_DEFAULT, lambda n: n.occurred_at != 7, shown)
    assert sum(len(over_rows.arcs(n)) for n in nodes) > 100
    for n in nodes:
        assert over_columns.arcs(n) == over_rows.arcs(n), n
