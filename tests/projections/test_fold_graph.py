"""Graph memory: the exact nodes and weighted edges of a short conversation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adamem.owners import owner_key
from adamem.projections.folds import GraphEdgeRow, GraphNodeRow, OwnerMemory
from adamem.projections.folds.apply import apply
from adamem.projections.folds.params import SEED_DEFAULT, MemoryParameters
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


def _fold_with(events: list, params: MemoryParameters) -> OwnerMemory:  # type: ignore[type-arg]
    state = OwnerMemory(owner_key("default", "alice"))
    for e in events:
        state, _ = apply(state, e, params)
    return state


EARLIER = replace(SEED_DEFAULT, earlier_link_limit=2)


@pytest.mark.parametrize(
    ("finding", "aside", "decision", "entity"),
    [
        (
            "Dr. Weber says my knees can't take running anymore.",
            "Dinner with Dr. Weber's nurse was fun.",
            "Bought a road bike, Dr. Weber would approve.",
            "Dr. Weber",
        ),
        ("王医生说我的膝盖不能再跑步了。", "今天天气不错。", "听王医生的，买了一辆公路车。", "王医生"),
    ],
)
def test_a_change_links_to_what_its_speaker_said_days_before_about_the_same_entity(
    finding: str, aside: str, decision: str, entity: str
) -> None:
    chat = Chat()
    events = [
        chat.say(finding, at=T0, conv="s1", entities=[entity]),
        chat.say(aside, at=T0 + 60_000, conv="s1", speaker="Bob", role="assistant", entities=[entity]),
        chat.say("(same session)", at=T0 + 2 * 60_000, conv="s1", entities=[entity]),
        chat.say(decision, at=T0 + 10 * DAY, conv="s2", entities=[entity], events=[event(decision, 0.9)]),
        chat.say(f"{entity}!", at=T0 + 10 * DAY + 60_000, conv="s2", entities=[entity]),  # no change stated
    ]
    _, edges = graph(_fold_with(events, EARLIER))
    assert {e for e in edges if e[0].startswith("earlier_")} == {
        ("earlier_entity", decision, finding, 0.70, "both"),
        ("earlier_entity", decision, "(same session)", 0.70, "both"),  # the two newest; Bob's is not Alice's
    }
    _, off = graph(_fold_with(events, SEED_DEFAULT))
    assert not {e for e in off if e[0].startswith("earlier_")}


def test_only_messages_a_session_gap_earlier_are_linked_and_topics_link_too() -> None:
    chat = Chat()
    events = [
        chat.say("The clinic called about my sleep.", at=T0, conv="s1", topics=["health"]),
        chat.say(
            "I quit coffee today.", at=T0 + 3_600_000, conv="s2", topics=["health"], events=[event("quit coffee")]
        ),
        chat.say("I started yoga.", at=T0 + 5 * DAY, conv="s3", topics=["health"], events=[event("started yoga")]),
    ]
    _, edges = graph(_fold_with(events, EARLIER))
    assert {e for e in edges if e[0].startswith("earlier_")} == {
        ("earlier_topic", "I started yoga.", "The clinic called about my sleep.", 0.70, "both"),
        ("earlier_topic", "I started yoga.", "I quit coffee today.", 0.70, "both"),
    }  # an hour later is the same stretch of time (session_gap_ms): no link from "I quit coffee today."
