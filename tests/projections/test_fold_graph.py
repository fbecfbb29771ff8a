"""Graph memory: the exact nodes and weighted edges of a short conversation."""

from __future__ import annotations

from adamem.projections.folds import GraphEdgeRow, GraphNodeRow, OwnerMemory
from adamem.projections.folds.testing import DAY, T0, Chat, attr, event, fact, fold

Edge = tuple[str, str, str, float, str]


def graph(state: OwnerMemory) -> tuple[set[tuple[str, str]], set[Edge]]:
    nodes = {n.id: n for n in state.tables["graph_nodes"].values() if isinstance(n, GraphNodeRow)}
    edges = {
        (e.edge_type, nodes[e.src].label, nodes[e.dst].label, e.weight, e.direction)
        for e in state.tables["graph_edges"].values()
        if isinstance(e, GraphEdgeRow)
    }
    return {(n.node_type, n.label) for n in nodes.values()}, edges


M1, M2, M3 = "I just moved to Beijing for a new job.", "Welcome to Beijing!", "I love spicy food."


def conversation(chat: Chat) -> list:  # type: ignore[type-arg]
    return [
        chat.say(
            M1,
            at=T0,
            topics=["moving", "Beijing"],
            entities=["Beijing"],
            facts=[fact("lives in Beijing", 0.9, key="lives_in")],
            events=[event("moved to Beijing", 0.9)],
        ),
        chat.say(M2, at=T0 + 60_000, speaker="Assistant", role="assistant", topics=["beijing"]),
        chat.say(M3, at=T0 + 120_000, topics=["food"], attributes=[attr("likes", "spicy food", 0.9)]),
    ]


def test_arrival_writes_message_topic_and_temporal_structure() -> None:
    state, _ = fold(conversation(Chat()))
    nodes, edges = graph(state)
    assert nodes == {
        ("message", M1),
        ("message", M2),
        ("message", M3),
        ("topic", "moving"),
        ("topic", "Beijing"),
        ("topic", "food"),
    }
    assert edges == {
        ("mentions", M1, "moving", 0.75, "forward"),
        ("mentions", M1, "Beijing", 0.75, "forward"),
        ("mentions", M2, "Beijing", 0.75, "forward"),
        ("mentions", M3, "food", 0.75, "forward"),
        ("temporal_next", M1, M2, 0.70, "forward"),  # different speakers
        ("temporal_next", M2, M1, 0.35, "backward"),
        ("temporal_next", M2, M3, 0.70, "forward"),
        ("temporal_next", M3, M2, 0.35, "backward"),
        ("same_topic", M2, M1, 0.55, "both"),
    }


def test_consolidation_adds_records_with_supports_edges_and_sessions_link_by_speaker() -> None:
    chat = Chat()
    m4 = "Back from the gym."
    state, _ = fold([*conversation(chat), chat.say(m4, at=T0 + DAY, conv="s2", topics=["food"])])
    nodes, edges = graph(state)
    assert {n for n in nodes if n[0] not in ("message", "topic")} == {
        ("fact", "lives in Beijing"),
        ("event", "moved to Beijing"),
        ("attribute", "likes spicy food"),
    }
    assert {e for e in edges if e[0] not in ("mentions", "temporal_next")} == {
        ("same_topic", M2, M1, 0.55, "both"),
        ("supports", M1, "lives in Beijing", 0.85, "forward"),
        ("supports", M1, "moved to Beijing", 0.80, "forward"),
        ("supports", "lives in Beijing", "moved to Beijing", 0.80, "forward"),
        ("supports", M3, "likes spicy food", 0.80, "forward"),
        ("same_topic", m4, M3, 0.55, "both"),
        ("speaker_related", m4, M3, 0.65, "both"),  # Alice's latest message in another conversation
    }
    assert ("temporal_next", M3, m4, 0.90, "forward") in edges  # same speaker
    assert ("temporal_next", m4, M3, 0.45, "backward") in edges


def test_a_new_event_links_to_recent_facts_sharing_an_entity() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say(
                "My checkup showed high blood lipids.",
                at=T0,
                conv="s1",
                entities=["checkup"],
                facts=[fact("checkup showed high blood lipids", 0.9)],
            ),
            chat.say(
                "So I started going to the gym after the checkup.",
                at=T0 + 14 * DAY,
                conv="s2",
                entities=["checkup", "gym"],
                events=[event("started going to the gym", 0.9)],
            ),
            chat.say("(later)", at=T0 + 15 * DAY, conv="s3"),
        ]
    )
    _, edges = graph(state)
    assert ("supports", "checkup showed high blood lipids", "started going to the gym", 0.80, "forward") in edges


def test_an_update_links_the_new_record_to_the_one_it_supersedes() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say("I live in Shanghai.", at=T0, conv="s1", facts=[fact("lives in Shanghai", 0.9, key="lives_in")]),
            chat.say("Now Beijing.", at=T0 + DAY, conv="s2", facts=[fact("lives in Beijing", 0.9, key="lives_in")]),
            chat.say("(later)", at=T0 + 2 * DAY, conv="s3"),
        ]
    )
    _, edges = graph(state)
    assert ("supersedes", "lives in Beijing", "lives in Shanghai", 0.60, "forward") in edges
    active = {
        n.label: n.active
        for n in state.tables["graph_nodes"].values()
        if isinstance(n, GraphNodeRow) and n.node_type == "fact"
    }
    assert active == {"lives in Shanghai": False, "lives in Beijing": True}
