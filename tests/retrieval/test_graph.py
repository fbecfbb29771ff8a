"""Graph expansion arithmetic on a small hand-built graph: score = seed × Π weights × 0.85^hops, ≤ 3 hops."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from adamem.projections.folds.rows import GraphEdgeRow, GraphNodeRow
from adamem.retrieval import SEED_DEFAULT, Direction
from adamem.retrieval.graph import Hop, MemoryGraph, PositionRelevance, Reach, expand

D = 0.85


def node(id_: str, t: int, type_: str = "message", confidence: float = 1.0) -> GraphNodeRow:
    return GraphNodeRow(id_, "u", type_, id_, id_, confidence, t, True)


def edge(src: str, dst: str, type_: str, weight: float, direction: str = "forward") -> GraphEdgeRow:
    return GraphEdgeRow(f"{type_}:{src}>{dst}", "u", src, dst, type_, weight, direction, 0, "")


NODES = [node(f"m{i}", i) for i in range(1, 7)] + [
    node("f1", 1, "fact", 0.9),
    node("flow", 2, "fact", 0.5),
    node("T", 1, "topic"),
]
EDGES = [
    *(edge(f"m{i}", f"m{i + 1}", "temporal_next", 0.9) for i in range(1, 5)),
    *(edge(f"m{i + 1}", f"m{i}", "temporal_next", 0.45, "backward") for i in range(1, 5)),
    edge("m1", "f1", "supports", 0.85),
    edge("m2", "flow", "supports", 0.85),
    edge("m1", "T", "mentions", 0.75),
    edge("m3", "T", "mentions", 0.75),
    edge("m6", "m1", "same_topic", 0.55, "both"),
]


def scores(found: dict[str, Reach]) -> dict[str, float]:
    return {n: round(r.score, 9) for n, r in found.items()}


@pytest.fixture
def graph() -> MemoryGraph:
    return MemoryGraph(NODES, EDGES, SEED_DEFAULT)


def test_scores_after_one_two_and_three_hops(graph: MemoryGraph) -> None:
    found = expand(graph, [("m1", 1.0)], SEED_DEFAULT)
    assert scores(found) == {
        "m2": round(0.9 * D, 9),  # 1 hop
        "f1": round(0.85 * D, 9),  # 1 hop, supports
        "T": round(0.75 * D, 9),  # the topic hub is walked (the service never returns it)
        "m3": round(0.9 * 0.9 * D**2, 9),  # 2 hops: temporal (0.585) beats the hub (0.75 * 0.75 * D² = 0.406)
        "m4": round(0.9**3 * D**3, 9),  # 3 hops
    }
    assert "m5" not in found  # 4 hops away: beyond max_hops = 3
    assert found["m3"].path == (Hop("m2", "temporal_next", 0.9), Hop("m3", "temporal_next", 0.9))
    assert found["m3"].seed == "m1"


def test_the_seed_score_scales_every_path(graph: MemoryGraph) -> None:
    assert scores(expand(graph, [("m1", 0.5)], SEED_DEFAULT))["m4"] == round(0.5 * 0.9**3 * D**3, 9)


def test_low_confidence_nodes_and_light_edges_are_pruned(graph: MemoryGraph) -> None:
    found = expand(graph, [("m1", 1.0)], SEED_DEFAULT)
    assert "flow" not in found  # node confidence 0.5 < 0.6
    assert "m6" not in found  # only reachable over same_topic 0.55 < 0.6
    back = expand(graph, [("m2", 1.0)], SEED_DEFAULT)["m1"]  # backward temporal rows weigh 0.45: not walked
    assert back.path == (Hop("m3", "temporal_next", 0.9), Hop("T", "mentions", 0.75), Hop("m1", "mentions", 0.75))
    assert round(back.score, 9) == round(0.9 * 0.75 * 0.75 * D**3, 9)
    loose = dataclasses.replace(SEED_DEFAULT, min_node_confidence=0.4, min_edge_weight=0.5, walk_other_edges=True)
    found = expand(MemoryGraph(NODES, EDGES, loose), [("m1", 1.0)], loose)
    assert round(found["flow"].score, 9) == round(0.9 * D * 0.85 * D, 9)
    assert round(found["m6"].score, 9) == round(0.55 * D, 9)


def test_only_the_prioritised_edge_types_are_walked_unless_asked() -> None:
    nodes, edges = [node("a", 1), node("b", 2)], [edge("a", "b", "speaker_related", 0.65, "both")]
    assert expand(MemoryGraph(nodes, edges, SEED_DEFAULT), [("a", 1.0)], SEED_DEFAULT) == {}
    every = dataclasses.replace(SEED_DEFAULT, walk_other_edges=True)
    assert round(expand(MemoryGraph(nodes, edges, every), [("a", 1.0)], every)["b"].score, 9) == round(0.65 * D, 9)


def test_similar_edges_are_walked_both_ways_for_as_many_hops_as_asked() -> None:
    nodes = [node("a", 1), node("b", 2), node("c", 3), node("d", 4)]
    edges = [
        edge("b", "a", "similar", 0.6, "both"),  # stored from the later message to the earlier one
        edge("c", "b", "similar", 0.6, "both"),
        edge("c", "d", "temporal_next", 0.9),
    ]

    def reached(hops: int, past: bool = True) -> set[str]:
        config = dataclasses.replace(SEED_DEFAULT, similar_hops=hops, walk_past_similar=past)
        return set(expand(MemoryGraph(nodes, edges, config), [("a", 1.0)], config))

    assert (SEED_DEFAULT.similar_hops, SEED_DEFAULT.walk_past_similar) == (1, False)
    assert reached(0) == set()
    assert reached(1) == {"b"}  # from the seed only
    assert reached(2) == {"b", "c", "d"}  # then on, and other edges after them
    assert reached(2, past=False) == {"b"}  # a node a similar edge reached ends its path
    assert round(expand(MemoryGraph(nodes, edges, SEED_DEFAULT), [("a", 1.0)], SEED_DEFAULT)["b"].score, 9) == round(
        0.6 * D, 9
    )


def test_edge_priority_breaks_ties_between_equally_good_paths() -> None:
    nodes = [node("s", 1), node("x", 2), node("y", 2, "fact"), node("t", 3)]
    edges = [
        edge("s", "x", "temporal_next", 0.8),
        edge("x", "t", "temporal_next", 0.8),
        edge("s", "y", "supports", 0.8),
        edge("y", "t", "supports", 0.8),
    ]
    reach = expand(MemoryGraph(nodes, edges, SEED_DEFAULT), [("s", 1.0)], SEED_DEFAULT)["t"]
    assert [h.edge_type for h in reach.path] == ["supports", "supports"]  # supports > temporal_next


def test_the_hop_limit_is_configurable(graph: MemoryGraph) -> None:
    four = dataclasses.replace(SEED_DEFAULT, max_hops=4)
    assert round(expand(graph, [("m1", 1.0)], four)["m5"].score, 9) == round(0.9**4 * D**4, 9)
    assert set(expand(graph, [("m1", 1.0)], dataclasses.replace(SEED_DEFAULT, max_hops=1))) == {"m2", "f1", "T"}


def test_antecedent_walks_reach_only_earlier_nodes_through_topic_hubs(graph: MemoryGraph) -> None:
    found = expand(graph, [("m3", 1.0)], SEED_DEFAULT, Direction.ANTECEDENT)
    assert scores(found) == {
        "T": round(0.75 * D, 9),
        "m1": round(0.75 * 0.75 * D**2, 9),  # m3 → topic → m1, against the mentions edge
        "f1": round(0.75 * 0.75 * 0.85 * D**3, 9),
        "m2": round(0.75 * 0.75 * 0.9 * D**3, 9),  # on from m1, still no later than m3
    }
    later = expand(graph, [("m3", 1.0)], SEED_DEFAULT, Direction.CONSEQUENT)
    assert scores(later) == {"T": round(0.75 * D, 9), "m4": round(0.9 * D, 9), "m5": round(0.9 * 0.9 * D**2, 9)}


def test_a_topic_hub_passes_on_to_the_messages_nearest_in_time() -> None:
    nodes = [node("hub", 0, "topic"), *(node(f"n{i}", i * 10) for i in range(10))]
    edges = [edge(f"n{i}", "hub", "mentions", 0.75) for i in range(10)]
    narrow = dataclasses.replace(SEED_DEFAULT, hub_fanout=3)
    found = expand(MemoryGraph(nodes, edges, narrow), [("n5", 1.0)], narrow)
    assert set(found) == {"hub", "n4", "n6", "n3"}  # 10 ms away twice, then the earlier of the two 20 ms away
    assert all(r.hops == 2 for n, r in found.items() if n != "hub")


def test_a_hub_passes_on_to_its_most_relevant_messages_the_same_by_positions_or_by_a_function() -> None:
    """The vectorised relevance (positions kept per hub) chooses what a plain function of the nodes chooses."""
    nodes = [node("hub", 0, "topic"), *(node(f"n{i}", i * 10) for i in range(10))]
    edges = [edge(f"n{i}", "hub", "mentions", 0.75) for i in range(10)]
    narrow = dataclasses.replace(SEED_DEFAULT, hub_fanout=3)
    positions = {f"n{i}": 9 - i for i in range(10)}  # vector-index rows in another order than the hub's
    cosines = np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.4, 0.6, 0.5, 0.05])
    by_positions = PositionRelevance(cosines, positions)

    def by_function(ids: list[str]) -> list[float]:
        return [float(cosines[positions[i]]) if i in positions else 0.0 for i in ids]

    graph = MemoryGraph(nodes, edges, narrow)
    for _ in range(2):  # the second time from the positions the hub kept
        found = expand(graph, [("n5", 1.0)], narrow, relevance=by_positions)
        assert found == expand(MemoryGraph(nodes, edges, narrow), [("n5", 1.0)], narrow, relevance=by_function)
        assert set(found) == {"hub", "n8", "n6", "n4"}  # cosines 0.9, 0.8, 0.7 (rows 1, 3, 5)
    assert by_positions(["n8", "hub"]) == [0.9, 0.0]


def test_each_node_keeps_its_best_reach_over_all_seeds(graph: MemoryGraph) -> None:
    found = expand(graph, [("m1", 0.5), ("m4", 1.0)], SEED_DEFAULT)
    assert round(found["m5"].score, 9) == round(0.9 * D, 9) and found["m5"].seed == "m4"
    assert round(found["m2"].score, 9) == round(0.5 * 0.9 * D, 9)
    assert round(found["m4"].score, 9) == round(0.5 * 0.9**3 * D**3, 9)  # a seed reached from another seed


def test_reaches_from_related_seeds_do_not_count(graph: MemoryGraph) -> None:
    found = expand(graph, [("m1", 1.0)], SEED_DEFAULT, related=lambda seed, n: (seed, n) == ("m1", "f1"))
    assert "f1" not in found


def test_parallel_expansion_is_deterministic_whatever_finishes_first(graph: MemoryGraph) -> None:
    seeds = [("m1", 0.7), ("m2", 0.7), ("m3", 0.9), ("m4", 0.8)]
    expected = expand(graph, seeds, SEED_DEFAULT)
    first_seed_thread: list[int] = []

    def slow_first_seed(n: str) -> bool:  # the first seed's expansion finishes last
        if n == "m2" and not first_seed_thread:
            first_seed_thread.append(threading.get_ident())
        if first_seed_thread and threading.get_ident() == first_seed_thread[0]:
            time.sleep(0.002)
        return True

    with ThreadPoolExecutor(SEED_DEFAULT.max_parallel_seeds) as pool:
        for _ in range(5):
            assert expand(graph, seeds, SEED_DEFAULT, usable=slow_first_seed, executor=pool) == expected
