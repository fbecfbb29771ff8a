"""Hybrid queries (design 10.2): static shared knowledge and a user's memory, fused into one ranked list.

A ``KnowledgeGraph`` is what a user brings — a product catalogue as ``(subject, relation, object)``
triples or a ``networkx`` graph — held in memory beside the store and never written to it: owner
memory stays in the owner's rows, shared knowledge in the graph, and a query only reads both.

``hybrid_query`` asks the memory first (the user's situation: "allergic to peanuts", "loves spicy
food"), then searches the graph with the question's words **and** the words of what memory
returned (weighted by how well each memory item ranked), so a fact is found because of what this
user said even when the question does not name it. The two lists are fused by reciprocal rank
(each list's rank, not its raw scores, which are not comparable); where the lists meet — a fact
found through a memory item's words — each of the two also gets the other list's vote. Every entry says where it came
from (``memory`` or ``knowledge:<name>``) and why (its score parts, or the question and memory
words it matched and the memory items those came from).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from adamem.memory import Memory
from adamem.retrieval.answer import Answer
from adamem.retrieval.feedback import surface_words
from adamem.text import tokenize

__all__ = ["HybridAnswer", "HybridItem", "KnowledgeGraph", "KnowledgeHit", "Triple", "hybrid_query"]

RRF_K = 60
"""Reciprocal rank fusion's constant (Cormack et al. 2009): 1 / (RRF_K + rank)."""


@dataclass(frozen=True, slots=True)
class Triple:
    """One fact of shared knowledge."""

    subject: str
    relation: str
    object: str

    def text(self) -> str:
        """The fact as words (``snake_case`` relations read as words)."""
        return f"{self.subject} {self.relation.replace('_', ' ')} {self.object}"


@dataclass(frozen=True, slots=True)
class KnowledgeHit:
    """A fact the graph returned, with the words that found it."""

    triple: Triple
    score: float
    question_terms: tuple[str, ...]
    memory_terms: tuple[str, ...]
    memory_items: tuple[int, ...]  # ranks of the memory items whose words it matched


class KnowledgeGraph:
    """Static knowledge as a directed multigraph of entities; searched by words, never stored per owner."""

    def __init__(self, graph: nx.MultiDiGraph, *, name: str = "knowledge", relation: str = "relation") -> None:
        """``graph``'s nodes are entities (labelled by their ``label`` attribute, else the node itself);
        each edge's ``relation`` attribute names the fact (``related_to`` when missing)."""
        self.name = name
        self._triples: list[Triple] = []
        for src, dst, data in graph.edges(data=True):
            label = graph.nodes[src].get("label", src), graph.nodes[dst].get("label", dst)
            self._triples.append(Triple(str(label[0]), str(data.get(relation, "related_to")), str(label[1])))
        self._triples.sort(key=lambda t: (t.subject, t.relation, t.object))
        self._tokens = [Counter(tokenize(t.text())) for t in self._triples]
        df = Counter(tok for tokens in self._tokens for tok in tokens)
        n = len(self._triples)
        self._idf = {tok: math.log(1 + n / d) for tok, d in df.items()}

    @classmethod
    def from_triples(
        cls, triples: Iterable[tuple[str, str, str] | Triple], *, name: str = "knowledge"
    ) -> KnowledgeGraph:
        """A graph of ``(subject, relation, object)`` triples."""
        graph = nx.MultiDiGraph()
        for t in triples:
            s, r, o = (t.subject, t.relation, t.object) if isinstance(t, Triple) else t
            graph.add_edge(s, o, relation=r)
        return cls(graph, name=name)

    @property
    def triples(self) -> tuple[Triple, ...]:
        """Every fact, in a stable order."""
        return tuple(self._triples)

    def search(
        self, question: str, *, context: Mapping[str, tuple[float, tuple[int, ...]]] | None = None, top_k: int = 10
    ) -> list[KnowledgeHit]:
        """Facts matching the question's words, and ``context`` words (word -> (weight, memory ranks)).

        A fact scores the idf of each question word it holds plus, for each context word, its idf
        times the word's weight; then half the best score of its subject's other facts, so an
        entity that matters brings its neighbouring facts along. Ties go by the fact's text.
        """
        asked = set(tokenize(question))
        context = context or {}
        base: list[tuple[float, tuple[str, ...], tuple[str, ...], tuple[int, ...]]] = []
        for tokens in self._tokens:
            q = tuple(sorted(t for t in tokens if t in asked))
            m = tuple(sorted(t for t in tokens if t in context and t not in asked))
            score = sum(self._idf[t] for t in q) + sum(self._idf[t] * context[t][0] for t in m)
            ranks = tuple(sorted({r for t in m for r in context[t][1]}))
            base.append((score, q, m, ranks))
        best: dict[str, float] = {}
        for triple, (score, *_) in zip(self._triples, base, strict=True):
            best[triple.subject] = max(best.get(triple.subject, 0.0), score)
        hits = [
            KnowledgeHit(triple, score + 0.5 * best[triple.subject], q, m, ranks)
            for triple, (score, q, m, ranks) in zip(self._triples, base, strict=True)
            if score > 0 or best[triple.subject] > 0
        ]
        hits.sort(key=lambda h: (-h.score, h.triple.text()))
        return hits[:top_k]


@dataclass(frozen=True, slots=True)
class HybridItem:
    """One entry of the fused list: what, from which source, and why."""

    rank: int
    source: str  # "memory" or "knowledge:<name>"
    content: str
    score: float  # the fused score (reciprocal rank)
    why: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "rank": self.rank,
            "source": self.source,
            "content": self.content,
            "score": round(self.score, 6),
            "why": self.why,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class HybridAnswer:
    """The fused list, and the two answers it was made from."""

    items: tuple[HybridItem, ...]
    memory: Answer
    knowledge: tuple[KnowledgeHit, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the memory answer in full under ``memory``)."""
        return {"items": [i.to_dict() for i in self.items], "memory": self.memory.to_dict()}


def _context(answer: Answer, question: str) -> dict[str, tuple[float, tuple[int, ...]]]:
    """Words of the memory's items, each weighted by its best item's share of the top score."""
    top = max((i.score for i in answer.items), default=0.0) or 1.0
    asked = set(tokenize(question))
    words: dict[str, tuple[float, tuple[int, ...]]] = {}
    for item in answer.items:
        weight = max(0.0, item.score) / top
        for word in set(tokenize(item.content)) - asked:
            old, ranks = words.get(word, (0.0, ()))
            words[word] = (max(old, weight), (*ranks, item.rank))
    return words


def _shown(terms: Sequence[str], written: dict[str, str]) -> str:
    """Search terms as the text wrote them (``spicy``, not its stem ``spici``); a Chinese word is its own form."""
    return ", ".join(written.get(t, t) if t.isascii() else t for t in terms)


def hybrid_query(
    memory: Memory,
    knowledge: KnowledgeGraph | Sequence[KnowledgeGraph],
    user_id: str,
    question: str,
    *,
    tenant: str | None = None,
    top_k: int = 10,
    memory_k: int = 8,
    knowledge_k: int = 8,
) -> HybridAnswer:
    """The user's memory and shared knowledge for ``question``, fused into one ranked, labelled list.

    Raises ``UnknownUser`` when the user has no memory (ask ``KnowledgeGraph.search`` alone then).
    """
    graphs = [knowledge] if isinstance(knowledge, KnowledgeGraph) else list(knowledge)
    answer = memory.recall(user_id, question, tenant=tenant, top_k=memory_k)
    context = _context(answer, question)
    found = [
        (order, graph, graph.search(question, context=context, top_k=knowledge_k))
        for order, graph in enumerate(graphs, start=1)
    ]
    # A memory item whose words found facts is corroborated by the knowledge: that list's vote counts too.
    corroborated: dict[int, int] = {}
    for _, _, hits in found:
        for rank, hit in enumerate(hits, start=1):
            for r in hit.memory_items:
                corroborated[r] = min(corroborated.get(r, rank), rank)
    scored: list[tuple[float, int, HybridItem]] = []
    for item in answer.items:
        b = item.breakdown
        why = (
            f"{item.layer.value} memory ({item.kind}), rank {item.rank} on route {answer.route.route.value}: "
            f"semantic {b.semantic:.2f}, graph {b.graph:.2f}, temporal {b.temporal:.2f}, fact {b.fact:.2f}"
        )
        fused = 1 / (RRF_K + item.rank)
        if item.rank in corroborated:
            fused += 1 / (RRF_K + corroborated[item.rank])
            why += f"; its words found fact #{corroborated[item.rank]} of the knowledge"
        detail: dict[str, Any] = {
            "id": item.id,
            "layer": item.layer.value,
            "kind": item.kind,
            "memory_score": round(item.score, 6),
            "provenance": [p.to_dict() for p in item.provenance],
        }
        scored.append((fused, 0, HybridItem(0, "memory", item.content, 0.0, why, detail)))
    asked_as = surface_words({t for _, _, hits in found for h in hits for t in h.question_terms}, [question])
    told_as = surface_words(
        {t for _, _, hits in found for h in hits for t in h.memory_terms}, [i.content for i in answer.items]
    )
    for order, graph, hits in found:
        for rank, hit in enumerate(hits, start=1):
            reasons = []
            if hit.question_terms:
                reasons.append(f"question words {_shown(hit.question_terms, asked_as)}")
            if hit.memory_terms:
                sources = ", ".join(f"#{r}" for r in hit.memory_items)
                reasons.append(f"words {_shown(hit.memory_terms, told_as)} from memory items {sources}")
            why = f"fact of {graph.name}, rank {rank}: " + ("; ".join(reasons) or "a fact of a matching entity")
            fused = 1 / (RRF_K + rank)
            if hit.memory_items:  # found through memory too: that list's vote counts (its best item's rank)
                fused += 1 / (RRF_K + min(hit.memory_items))
            t = hit.triple
            fact = {"subject": t.subject, "relation": t.relation, "object": t.object, "graph_score": hit.score}
            scored.append((fused, order, HybridItem(0, f"knowledge:{graph.name}", t.text(), 0.0, why, fact)))
    scored.sort(key=lambda x: (-x[0], x[1], x[2].content))
    items = tuple(
        HybridItem(rank, i.source, i.content, score, i.why, i.detail)
        for rank, (score, _, i) in enumerate(scored[:top_k], start=1)
    )
    hits_all = tuple(h for _, _, hits in found for h in hits)
    return HybridAnswer(items, answer, hits_all)
