"""The seed's motivating case, end to end: real rule extractor, the default embedder, projector, LanceDB.

Weeks of conversation: a check-up shows high blood lipids; two weeks later the user decides to start
working out "for my health"; two weeks after that they report a gym visit; filler around it. Asked
"why did I start working out?", plain vector similarity prefers the gym visit to the check-up, but
the graph route (causal cue → walk to antecedents through the shared ``health`` topic, causes
before effects) returns the check-up in the top 3.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from adamem.analysis import Embedder
from adamem.retrieval import Direction, Layer, Retriever, Route, Subject

Case = tuple[str, str, str, str]


def test_vector_similarity_alone_ranks_the_gym_visit_above_the_checkup(
    motivating: Any, embedder: Embedder, case: Case
) -> None:
    user, question, checkup, gym = case
    hits = motivating.store.vector_search("messages", user, embedder.embed_query([question])[0], 50)
    texts = [h.row.text for h in hits]
    assert texts.index(gym) < texts.index(checkup)


def test_the_graph_route_returns_the_checkup_in_the_top_3(motivating: Any, embedder: Embedder, case: Case) -> None:
    user, question, checkup, gym = case
    retriever = Retriever(motivating.store, embedder, partitions=motivating.partitions)
    answer = retriever.query(user, question)
    retriever.close()
    assert (answer.route.route, answer.route.direction, answer.route.causal) == (
        Route.GRAPH,
        Direction.ANTECEDENT,
        True,
    )
    assert answer.whose.subject is Subject.USER
    top3 = answer.items[:3]
    found = [i for i in top3 if any(p.message_id == _message_id(motivating, user, checkup) for p in i.provenance)]
    assert found, [i.content for i in answer.items]
    item = found[0]
    assert item.hop_path, "the check-up is reached by graph expansion"
    # decision → the message of an earlier session nearest to it in meaning: the check-up
    assert [s.edge_type for s in item.hop_path] == ["", "similar"]
    assert checkup.startswith(item.hop_path[1].label[:40]) and item.breakdown.graph > 0
    assert all(gym not in i.content for i in top3)
    source = item.provenance[0]
    assert (source.source_topic, source.analyzer, source.conversation_id) == (
        "rt.analyses",
        "rules/1",
        _message_id(motivating, user, checkup).rsplit("-", 1)[0],
    )
    assert source.source_offset >= 0 and source.source_partition in (0, 1)
    assert item.layer in (Layer.ARCHIVE, Layer.EPISODIC, Layer.GRAPH)


def test_the_answer_is_json_ready_with_route_whose_and_timing(motivating: Any, embedder: Embedder) -> None:
    retriever = Retriever(motivating.store, embedder, partitions=motivating.partitions)
    data = retriever.query("default:sam", "why did I start working out?", top_k=5).to_dict()
    retriever.close()
    assert set(data) == {
        "user_id",
        "tenant",
        "question",
        "config",
        "cached",
        "as_of",
        "reference_time",
        "time_windows",
        "whose",
        "route",
        "items",
        "timing_ms",
        "notices",
    }
    assert data["notices"] == []
    assert len(data["items"]) == 5 and [i["rank"] for i in data["items"]] == [1, 2, 3, 4, 5]
    assert set(data["timing_ms"]) == {"resolve", "route", "retrieve", "expand", "fuse", "total"}
    assert set(data["items"][0]["breakdown"]) == {"semantic", "graph", "temporal", "fact"}
    assert data["route"]["route"] == "graph" and data["whose"]["subject"] == "user"
    last = dt.datetime(2024, 4, 15, 20, 3, tzinfo=dt.UTC)  # the owner's clock: its newest message
    assert data["reference_time"] == int(last.timestamp() * 1000)


def _message_id(memory: Any, user: str, text: str) -> str:
    return str(next(m.message_id for m in memory.store.rows("messages", user) if m.text == text))
