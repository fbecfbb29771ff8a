"""Graph memory: the exact nodes and weighted edges of a short conversation."""

from __future__ import annotations

import dataclasses

import pytest

from adamem.projections.folds import GraphEdgeRow, GraphNodeRow, MessageRow, OwnerMemory
from adamem.projections.folds.apply import apply
from adamem.projections.folds.params import SEED_DEFAULT
from adamem.projections.folds.state import MessageVectors
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
        # the three messages of the earlier session nearest in meaning: all it has
        ("similar", m4, M1, 0.60, "both"),
        ("similar", m4, M2, 0.60, "both"),
        ("similar", m4, M3, 0.60, "both"),
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


SIMILAR_TEXTS = {
    "en": (
        "My check-up report showed high blood lipids.",
        "We went to a jazz concert downtown.",
        "The doctor wants me to exercise more.",
        "I decided to start working out three times a week.",
    ),
    "zh": ("体检报告显示我血脂偏高。", "我们去市中心听了一场爵士音乐会。", "医生让我多运动。", "我决定每周健身三次。"),
}


def _similar(state: OwnerMemory) -> set[tuple[str, str, float, str]]:
    _, edges = graph(state)
    return {(src, dst, w, d) for kind, src, dst, w, d in edges if kind == "similar"}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_message_links_to_the_messages_of_earlier_sessions_nearest_in_meaning(language: str) -> None:
    """Vectors stand in for the embedder's: the decision is nearest to the doctor's advice, said in its own session,
    and then to the check-up, said days before; it links to the check-up."""
    checkup, concert, doctor, decision = SIMILAR_TEXTS[language]
    chat, params = Chat(), dataclasses.replace(SEED_DEFAULT, similar_links=1)
    events = [
        chat.say(checkup, at=T0, conv="s1", vector=(1.0, 0.0, 0.0, 0.0)),
        chat.say(concert, at=T0 + 60_000, conv="s1", vector=(0.0, 1.0, 0.0, 0.0)),
        chat.say(doctor, at=T0 + 10 * DAY, conv="s2", vector=(0.8, 0.1, 0.6, 0.0)),
        chat.say(decision, at=T0 + 10 * DAY + 60_000, conv="s2", vector=(0.7, 0.2, 0.7, 0.0)),
    ]
    state = OwnerMemory("default:alice")
    for e in events:
        state, _ = apply(state, e, params)
    assert _similar(state) == {(doctor, checkup, 0.60, "both"), (decision, checkup, 0.60, "both")}
    unlinked = OwnerMemory("default:alice")
    for e in events:
        unlinked, _ = apply(unlinked, e, dataclasses.replace(SEED_DEFAULT, similar_links=0))
    assert _similar(unlinked) == set()


def test_a_gap_in_one_conversation_opens_a_session_whose_messages_link_back() -> None:
    chat, params = Chat(), dataclasses.replace(SEED_DEFAULT, similar_links=2)
    near, far = (1.0, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0)
    state = OwnerMemory("default:alice")
    for e in [
        chat.say("one", at=T0, vector=near),
        chat.say("two", at=T0 + 60_000, vector=far),
        chat.say("three", at=T0 + 120_000, vector=near),  # the same session: no link
        chat.say("four", at=T0 + DAY, vector=near),  # a day later in the same conversation: a new session
    ]:
        state, _ = apply(state, e, params)
    assert _similar(state) == {("four", "one", 0.60, "both"), ("four", "three", 0.60, "both")}


def test_the_window_bounds_how_far_back_a_message_looks() -> None:
    chat, params = Chat(), dataclasses.replace(SEED_DEFAULT, similar_links=1, similar_window=2)
    state = OwnerMemory("default:alice")
    for e in [
        chat.say("alike", at=T0, conv="s1", vector=(1.0, 0.0, 0.0, 0.0)),
        chat.say("other", at=T0 + 60_000, conv="s1", vector=(0.0, 1.0, 0.0, 0.0)),
        chat.say("else", at=T0 + 120_000, conv="s1", vector=(0.0, 0.0, 1.0, 0.0)),
        chat.say("again", at=T0 + DAY, conv="s2", vector=(0.9, 0.3, 0.3, 0.0)),
    ]:
        state, _ = apply(state, e, params)
    assert _similar(state) == {("again", "other", 0.60, "both")}  # "alike" is out of the newest two


def test_message_vectors_held_as_messages_arrive_equal_those_built_from_the_rows() -> None:
    chat = Chat()
    state, _ = fold([chat.say(f"message {i}", at=T0 + i * DAY // 3, conv=f"s{i // 4}") for i in range(40)])
    rows = sorted((r for r in state.tables["messages"].values() if isinstance(r, MessageRow)), key=lambda r: r.seq)
    rows[10] = dataclasses.replace(rows[10], vector=())  # messages without a vector are left out
    rows[20] = dataclasses.replace(rows[20], vector=(0.0, 0.0, 0.0, 0.0))
    for keep, gap in [(0, 3_600_000), (7, 3_600_000), (7, DAY)]:
        asking = MessageVectors(keep=keep)
        for i, row in enumerate(rows):  # asked as the fold asks, before each arrival: as if built afresh each time
            assert asking.nearest(row, 3, 7, gap) == MessageVectors(rows[:i], keep).nearest(row, 3, 7, gap)
            asking.add(row)
    for keep in (0, 7):
        maintained = MessageVectors(keep=keep)
        for row in rows:
            assert maintained.add(row)
            assert maintained.add(dataclasses.replace(row, in_working=False))  # written again: nothing changes
        rebuilt = MessageVectors(reversed(rows), keep)  # any order: placed by arrival
        assert rebuilt.ids == maintained.ids
        assert len(rebuilt.ids) == (38 if keep == 0 else 10)  # the newest 7 at least, 14 at most: 38 - 4 × 7
        for row in rows:
            for window in (5, 7):
                assert rebuilt.nearest(row, 3, window, 3_600_000) == maintained.nearest(row, 3, window, 3_600_000)
        assert not maintained.add(dataclasses.replace(rows[-1], vector=(0.0, 0.0, 0.0, 1.0)))  # to be built again
