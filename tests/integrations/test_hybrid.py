"""``hybrid_query``: a small catalogue and a user's memory, where the right answer needs both.

Alice (the bundled sample) loves spicy food and is allergic to peanuts; the question names
neither. The catalogue knows which snack is spicy and which contains peanuts; only memory knows
what matters to Alice. The fused list must carry both halves, each labelled with where it came
from and why — and the catalogue never enters the store.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import networkx as nx

from adamem.integrations.hybrid import KnowledgeGraph, Triple, hybrid_query
from adamem.memory import Memory

CATALOGUE = [
    ("Crunchy Satay Bar", "is_a", "snack"),
    ("Crunchy Satay Bar", "contains", "peanuts"),
    ("Crunchy Satay Bar", "flavour", "spicy"),
    ("Sichuan Chili Crisps", "is_a", "snack"),
    ("Sichuan Chili Crisps", "flavour", "spicy"),
    ("Honey Oat Cookies", "is_a", "snack"),
    ("Honey Oat Cookies", "flavour", "sweet"),
    ("Jasmine Green Tea", "is_a", "drink"),
]
QUESTION = "Which snack should I buy?"


def _files(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


def test_the_answer_needs_the_users_situation_and_the_product_facts(memory: Memory) -> None:
    catalogue = KnowledgeGraph.from_triples(CATALOGUE, name="catalogue")
    store_before = _files(Path(memory.settings.store_url))
    answer = hybrid_query(memory, catalogue, "alice", QUESTION, top_k=12)
    by_content = {i.content: i for i in answer.items}
    assert [i.rank for i in answer.items] == list(range(1, len(answer.items) + 1))
    assert {i.source for i in answer.items} == {"memory", "knowledge:catalogue"}
    # From memory: the situation (the question says neither).
    allergy = next(i for i in answer.items if i.source == "memory" and "allergic to peanuts" in i.content)
    spicy = next(i for i in answer.items if i.source == "memory" and "spicy" in i.content)
    assert allergy.detail["provenance"] and "memory" in allergy.why and "found fact" in allergy.why
    # From the catalogue: the facts that decide it, found through those memory words.
    peanuts = by_content["Crunchy Satay Bar contains peanuts"]
    crisps = by_content["Sichuan Chili Crisps flavour spicy"]
    assert peanuts.source == crisps.source == "knowledge:catalogue"
    # The words as memory wrote them, not their search stems ("spici").
    assert "peanuts from memory items" in peanuts.why and "spicy from memory items" in crisps.why
    assert "spici" not in crisps.why
    # Corroborated entries outrank facts the question alone found.
    plain = by_content["Crunchy Satay Bar is a snack"]
    assert max(peanuts.rank, crisps.rank, allergy.rank, spicy.rank) < plain.rank
    # The catalogue alone cannot tell: without memory, no flavour or allergen fact is found.
    alone = [h.triple.text() for h in catalogue.search(QUESTION)]
    assert (
        "Crunchy Satay Bar contains peanuts" not in alone[:3] and "Sichuan Chili Crisps flavour spicy" not in alone[:3]
    )
    assert all(h.triple.relation == "is_a" for h in catalogue.search(QUESTION)[:3])
    # Shared knowledge and owner memory never mix in storage: the query only read.
    assert _files(Path(memory.settings.store_url)) == store_before
    assert catalogue.triples == tuple(
        sorted((Triple(*t) for t in CATALOGUE), key=lambda t: (t.subject, t.relation, t.object))
    )
    rows = json.dumps([getattr(r, "text", "") for r in memory.store.rows("messages", "default:alice")])
    assert "Satay" not in rows


def test_another_user_gets_another_fusion(memory: Memory) -> None:
    catalogue = KnowledgeGraph.from_triples(CATALOGUE, name="catalogue")
    alice = hybrid_query(memory, catalogue, "alice", QUESTION)
    carol = hybrid_query(memory, catalogue, "carol", QUESTION, tenant="acme")  # she sails; no food in memory
    fact, plain = "Crunchy Satay Bar contains peanuts", "Crunchy Satay Bar is a snack"
    a, c = {i.content: i for i in alice.items}, {i.content: i for i in carol.items}
    assert a[fact].rank < a[plain].rank and "from memory" in a[fact].why
    # For Carol the allergen is only a neighbour of a snack the question named, below it, and not from memory.
    assert fact not in c or (c[fact].rank > c[plain].rank and "from memory" not in c[fact].why)
    assert any("sailing" in i.content for i in carol.items if i.source == "memory")
    assert all(i.detail.get("provenance", [{}])[0].get("source_topic", "") for i in carol.items if i.source == "memory")


def test_a_networkx_graph_and_several_graphs(memory: Memory) -> None:
    graph = nx.MultiDiGraph()
    graph.add_node("p1", label="Sichuan Chili Crisps")
    graph.add_node("a1", label="a nut-free facility")
    graph.add_edge("p1", "a1", relation="made_in")
    shops = KnowledgeGraph.from_triples([("Beijing Haidian store", "sells", "Sichuan Chili Crisps")], name="shops")
    answer = hybrid_query(
        memory, [KnowledgeGraph(graph, name="factories"), shops], "alice", "Where can I buy chili crisps?"
    )
    sources = {i.source: i for i in answer.items}
    assert sources["knowledge:factories"].content == "Sichuan Chili Crisps made in a nut-free facility"
    assert sources["knowledge:shops"].detail == {
        "subject": "Beijing Haidian store",
        "relation": "sells",
        "object": "Sichuan Chili Crisps",
        "graph_score": sources["knowledge:shops"].detail["graph_score"],
    }
    assert json.loads(json.dumps(answer.to_dict()))["items"][0]["rank"] == 1
