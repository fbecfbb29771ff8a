"""Graph expansion over an owner's memory graph, from the top base hits.

Arcs: every stored edge is walked in its stored direction; ``direction='both'`` edges both ways;
``mentions``, ``supports`` and ``supersedes`` are associations, so they are also walked from
``dst`` back to ``src`` (topic → message, record → its message, event → fact). ``temporal_next``
is walked only as stored: its backward rows carry their own (low) weights. Parallel rows between
two nodes keep the best weight (ties: the higher-priority type).

A path's score is ``seed score × Π edge weights × hop_decay ** hops`` for at most ``max_hops``
hops. Nodes below ``min_node_confidence``, edges below ``min_edge_weight`` and nodes the view
cannot see are never walked. ``Direction.ANTECEDENT`` only reaches nodes no later than the
seed (a cause comes before its effect), ``CONSEQUENT`` only nodes no earlier. Topic nodes are
hubs: walked through (to the ``hub_fanout`` messages nearest in time to the node that entered),
never returned. Seeds expand in parallel (up to ``max_parallel_seeds``); results are merged in
seed order, so the outcome does not depend on which finishes first.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from adamem.projections.folds.rows import GraphEdgeRow, GraphNodeRow
from adamem.retrieval.config import Direction, RetrievalConfig
from adamem.retrieval.edges import EdgeIndex

__all__ = ["REVERSIBLE", "Hop", "MemoryGraph", "PositionRelevance", "Reach", "Relevance", "edges_by_node", "expand"]


class PositionRelevance:
    """Relevance of message nodes: the question's cosine with each message (0 for other nodes).

    ``cosines`` is indexed by ``positions`` (message node id -> row of the snapshot's vector index).
    A graph keeps, per topic hub, the positions of its neighbours, so a hub entered again (by another
    seed, or by another question of the same snapshot) costs one array lookup, not one per neighbour.
    """

    __slots__ = ("cosines", "positions")

    def __init__(self, cosines: np.ndarray, positions: Mapping[str, int]) -> None:
        self.cosines, self.positions = cosines, positions

    def __call__(self, nodes: Sequence[str]) -> Sequence[float]:
        found: list[float] = self.at(
            np.fromiter((self.positions.get(n, -1) for n in nodes), dtype=np.int64, count=len(nodes))
        ).tolist()
        return found

    def at(self, index: np.ndarray) -> np.ndarray:
        """Relevance at message positions (-1: not a message)."""
        if not len(self.cosines):
            return np.zeros(len(index))
        return np.where(index >= 0, self.cosines[index], 0.0)


Relevance = Callable[[Sequence[str]], Sequence[float]] | PositionRelevance
"""Relevance of nodes to the question, in the order given."""

REVERSIBLE = frozenset({"mentions", "supports", "supersedes"})
"""Edge types also walked from ``dst`` to ``src``."""


def edges_by_node(edges: Iterable[GraphEdgeRow]) -> dict[str, list[GraphEdgeRow]]:
    """The edges at each node (as source or destination), in id order; a loop is listed once."""
    out: dict[str, list[GraphEdgeRow]] = {}
    for e in sorted(edges, key=lambda e: e.id):
        out.setdefault(e.src, []).append(e)
        if e.dst != e.src:
            out.setdefault(e.dst, []).append(e)
    return out


@dataclass(frozen=True, slots=True)
class Hop:
    """One step of a path: the node reached, over which edge type, with which weight."""

    node: str
    edge_type: str
    weight: float


@dataclass(frozen=True, slots=True)
class Reach:
    """The best path found to a node: its score, the seed it came from and the hops taken."""

    node: str
    score: float
    seed: str
    path: tuple[Hop, ...]

    @property
    def hops(self) -> int:
        """Number of edges walked."""
        return len(self.path)


class MemoryGraph:
    """An owner's graph of walkable arcs, with per-topic time indexes; a node's arcs are made when first walked.

    Built over every node and edge of a snapshot (``over``) it shows only what a view can see:
    nodes ``node_visible`` accepts and edges ``edge_visible`` accepts between two of them, exactly
    as if it had been built from those alone (``MemoryGraph(nodes, edges, config)``).
    """

    def __init__(self, nodes: Iterable[GraphNodeRow], edges: Iterable[GraphEdgeRow], config: RetrievalConfig) -> None:
        self._setup({n.id: n for n in sorted(nodes, key=lambda n: n.id)}, edges_by_node(edges), config, None, None)

    @classmethod
    def over(
        cls,
        nodes: Mapping[str, GraphNodeRow],
        edges_at: Mapping[str, Sequence[GraphEdgeRow]],
        config: RetrievalConfig,
        node_visible: Callable[[GraphNodeRow], bool],
        edge_visible: Callable[[GraphEdgeRow], bool] | None = None,
    ) -> MemoryGraph:
        """The graph a view sees of ``nodes`` and the edges at each node (``edges_by_node``)."""
        graph = object.__new__(cls)
        graph._setup(nodes, edges_at, config, node_visible, edge_visible)
        return graph

    def _setup(
        self,
        nodes: Mapping[str, GraphNodeRow],
        edges_at: Mapping[str, Sequence[GraphEdgeRow]],
        config: RetrievalConfig,
        node_visible: Callable[[GraphNodeRow], bool] | None,
        edge_visible: Callable[[GraphEdgeRow], bool] | None,
    ) -> None:
        self._nodes, self._edges_at, self._config = nodes, edges_at, config
        self._node_visible, self._edge_visible = node_visible, edge_visible
        self._visible: dict[str, bool] = {}
        self._hub_times: dict[str, tuple[list[int], list[str]]] = {}
        self._hub_positions: dict[str, tuple[Mapping[str, int], np.ndarray]] = {}
        self._order: dict[str, list[tuple[int, str, float, str]]] = {}
        self._by_target: dict[str, dict[str, tuple[int, str, float, str]]] = {}

    def __contains__(self, node: object) -> bool:
        if not isinstance(node, str):
            return False
        seen = self._visible.get(node)
        if seen is None:
            row = self._nodes.get(node)
            seen = row is not None and (self._node_visible is None or self._node_visible(row))
            self._visible[node] = seen
        return seen

    def node_type(self, node: str) -> str:
        """Type of a node (message, topic, fact, attribute, event)."""
        return self._nodes[node].node_type

    def time(self, node: str) -> int:
        """Event time of a node."""
        return self._nodes[node].occurred_at

    def confidence(self, node: str) -> float:
        """Confidence of a node."""
        return self._nodes[node].confidence

    def arcs(self, node: str) -> list[tuple[int, str, float, str]]:
        """Outgoing arcs as (priority rank, target, weight, type), in expansion order.

        Every edge at the node whose two ends are in the graph gives an arc to the other end
        (stored direction; ``both`` and reversible ``forward`` edges also backwards); parallel arcs
        keep the best weight, ties the higher-priority type, then the lowest edge id.
        """
        order = self._order.get(node)
        if order is None:
            config, others = self._config, len(self._config.edge_priority)
            best: dict[str, tuple[float, int, str]] = {}
            for src, dst, edge_type, weight, direction in self._ends(node):
                if src not in self or dst not in self:
                    continue
                rank = config.edge_rank(edge_type)
                if rank == others and not config.walk_other_edges:
                    continue
                targets = [dst] if src == node else []
                if dst == node and (direction == "both" or (direction == "forward" and edge_type in REVERSIBLE)):
                    targets.append(src)
                for v in targets:
                    old = best.get(v)
                    if old is None or (weight, -rank) > (old[0], -old[1]):
                        best[v] = (weight, rank, edge_type)
            order = sorted((rank, v, weight, kind) for v, (weight, rank, kind) in best.items())
            self._order[node] = order
        return order

    def _ends(self, node: str) -> Iterable[tuple[str, str, str, float, str]]:
        """``(src, dst, edge_type, weight, direction)`` of the edges at ``node`` this graph shows, in id order
        (from an ``EdgeIndex``'s columns when every edge is shown: no rows made)."""
        if self._edge_visible is None and isinstance(self._edges_at, EdgeIndex):
            return self._edges_at.ends_at(node)
        shown = self._edge_visible
        return [
            (e.src, e.dst, e.edge_type, e.weight, e.direction)
            for e in self._edges_at.get(node, ())
            if shown is None or shown(e)
        ]

    def arcs_by_target(self, node: str) -> dict[str, tuple[int, str, float, str]]:
        """``arcs(node)`` by target node (each target has one arc); made once per node."""
        found = self._by_target.get(node)
        if found is None:
            found = self._by_target[node] = {a[1]: a for a in self.arcs(node)}
        return found

    def hub_neighbours(
        self,
        hub: str,
        near: int,
        fanout: int,
        direction: Direction,
        limit: int,
        skip: frozenset[str] = frozenset(),
        relevance: Relevance | None = None,
    ) -> list[str]:
        """The ``fanout`` neighbours of a topic hub (not in ``skip``, within the direction limit).

        The most ``relevance``-ant ones when a relevance is given (ties: nearest in time), else the
        ones nearest in time to ``near``.
        """
        index = self._hub_times.get(hub)
        if index is None:
            pairs = sorted((self.time(v), v) for _, v, _, _ in self.arcs(hub))
            index = ([t for t, _ in pairs], [v for _, v in pairs])
            self._hub_times[hub] = index
        times, ids = index
        lo, hi = 0, len(ids)
        if direction is Direction.ANTECEDENT:
            hi = bisect.bisect_right(times, limit)
        elif direction is Direction.CONSEQUENT:
            lo = bisect.bisect_left(times, limit)
        if relevance is not None:
            span = ids[lo:hi]
            if isinstance(relevance, PositionRelevance):
                held = self._hub_positions.get(hub)
                if held is None or held[0] is not relevance.positions:
                    where = relevance.positions
                    at = np.fromiter((where.get(v, -1) for v in ids), dtype=np.int64, count=len(ids))
                    held = self._hub_positions[hub] = (where, at)
                scores = np.asarray(relevance.at(held[1][lo:hi]), dtype=np.float64)
            else:
                scores = np.asarray(relevance(span), dtype=np.float64)
            distance = np.abs(np.asarray(times[lo:hi], dtype=np.int64) - near)
            chosen: list[str] = []
            for i in np.lexsort((np.arange(len(span)), distance, -scores)):  # relevance, then time, then order
                if span[i] not in skip:
                    chosen.append(span[i])
                    if len(chosen) == fanout:
                        break
            return chosen
        mid = min(max(bisect.bisect_left(times, near, lo, hi), lo), hi)
        left, right = mid - 1, mid
        out: list[str] = []
        while len(out) < fanout and (left >= lo or right < hi):
            take_left = right >= hi or (left >= lo and near - times[left] <= times[right] - near)
            if take_left:
                pick = ids[left]
                left -= 1
            else:
                pick = ids[right]
                right += 1
            if pick not in skip:
                out.append(pick)
        return out


def _expand_one(
    graph: MemoryGraph,
    seed: str,
    score: float,
    config: RetrievalConfig,
    direction: Direction,
    usable: Callable[[str], bool],
    relevance: Relevance | None,
) -> dict[str, Reach]:
    """Best path (max score, then fewer hops, then higher-priority edges) to every node within the hop limit."""
    limit = graph.time(seed)
    best: dict[str, Reach] = {seed: Reach(seed, score, seed, ())}
    layer: dict[str, Reach] = {seed: best[seed]}
    for _ in range(config.max_hops):
        nxt: dict[str, tuple[tuple[float, int, str], Reach]] = {}
        for u in sorted(layer):
            reach = layer[u]
            if reach.path and reach.path[-1].edge_type == "similar" and not config.walk_past_similar:
                continue  # the path ends here: its arcs are not made
            visited = {seed, *(h.node for h in reach.path)}
            arcs = graph.arcs(u)
            if graph.node_type(u) == "topic":
                entered = reach.path[-2].node if len(reach.path) >= 2 else seed
                allowed = set(
                    graph.hub_neighbours(
                        u, graph.time(entered), config.hub_fanout, direction, limit, frozenset(visited), relevance
                    )
                )
                by_target = graph.arcs_by_target(u)
                arcs = sorted(by_target[v] for v in allowed if v in by_target)  # ``arcs`` order: one arc a target
            similar = len(reach.path) < config.similar_hops
            for rank, v, weight, edge_type in arcs:
                if weight < config.min_edge_weight or v in visited or not usable(v):
                    continue
                if not similar and edge_type == "similar":
                    continue
                if graph.node_type(v) != "topic":
                    t = graph.time(v)
                    if (direction is Direction.ANTECEDENT and t > limit) or (
                        direction is Direction.CONSEQUENT and t < limit
                    ):
                        continue
                s = reach.score * weight * config.hop_decay
                key = (s, -rank, u)
                old = nxt.get(v)
                if old is None or key[:2] > old[0][:2] or (key[:2] == old[0][:2] and u < old[0][2]):
                    nxt[v] = (key, Reach(v, s, seed, (*reach.path, Hop(v, edge_type, weight))))
        layer = {}
        for v, (_, reach) in nxt.items():
            known = best.get(v)
            if known is None or reach.score > known.score:
                best[v] = layer[v] = reach
        if not layer:
            break
    del best[seed]
    return best


def expand(
    graph: MemoryGraph,
    seeds: Sequence[tuple[str, float]],
    config: RetrievalConfig,
    direction: Direction = Direction.ANY,
    usable: Callable[[str], bool] = lambda _: True,
    executor: Executor | None = None,
    related: Callable[[str, str], bool] = lambda _a, _b: False,
    relevance: Relevance | None = None,
) -> dict[str, Reach]:
    """Expand every seed and keep, per node, the best reach from a seed other than the node itself.

    ``seeds`` are (node id, score in [0, 1]) in rank order; seeds missing from the graph or not
    ``usable`` are skipped. A reach from a seed ``related`` to the node (the same evidence: a
    message and a record made from it) does not count. Ties between seeds go to the earlier seed.
    ``relevance`` (nodes → their relevance to the question) makes topic hubs pass on to their most
    relevant messages instead of those nearest in time.
    """
    valid = [(n, s) for n, s in seeds if n in graph and usable(n) and graph.confidence(n) >= config.min_node_confidence]

    def ok(node: str) -> bool:
        return graph.confidence(node) >= config.min_node_confidence and usable(node)

    if executor is not None and len(valid) > 1:
        futures = [executor.submit(_expand_one, graph, n, s, config, direction, ok, relevance) for n, s in valid]
        results = [f.result() for f in futures]
    else:
        results = [_expand_one(graph, n, s, config, direction, ok, relevance) for n, s in valid]
    merged: dict[str, Reach] = {}
    for found in results:
        for node in sorted(found):
            reach = found[node]
            if related(reach.seed, node):
                continue
            old = merged.get(node)
            if old is None or reach.score > old.score:
                merged[node] = reach
    return merged
