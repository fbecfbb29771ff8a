"""A domain pack's relation edges in graph memory: typed mentions link messages; they never become records."""

from __future__ import annotations

import dataclasses

from adamem.owners import owner_key
from adamem.projections.folds import GraphEdgeRow, GraphNodeRow, OwnerMemory, Positioned, apply
from adamem.projections.folds.params import SEED_DEFAULT, MemoryParameters
from adamem.projections.folds.testing import DAY, T0, Chat, fact, replay_changes

PARAMS = dataclasses.replace(
    SEED_DEFAULT,
    relations=(("symptom", "diagnosis", "indicates", 0.85), ("diagnosis", "treatment", "treated_with", 0.85)),
)
SYMPTOM, OTHER, DIAGNOSIS, TREATMENT = (
    "I've had a headache since Monday.",
    "The weather is lovely.",
    "The doctor said it is a migraine.",
    "She gave me ibuprofen.",
)


def term(kind: str, content: str):  # type: ignore[no-untyped-def]
    return fact(content, 0.9, type=f"term:{kind}")


def dialogue(chat: Chat) -> list[Positioned]:
    return [
        chat.say(SYMPTOM, at=T0, conv="c1", facts=[term("symptom", "headache")]),
        chat.say(OTHER, at=T0 + 60_000, conv="c1"),
        chat.say(DIAGNOSIS, at=T0 + DAY, conv="c2", facts=[term("diagnosis", "migraine")]),
        chat.say(TREATMENT, at=T0 + DAY + 60_000, conv="c2", facts=[term("treatment", "ibuprofen")]),
        chat.say("A new day.", at=T0 + 3 * DAY, conv="c3"),  # closes c2: its messages are consolidated
    ]


def fold(events: list[Positioned], params: MemoryParameters, state: OwnerMemory | None = None) -> tuple:  # type: ignore[type-arg]
    state = state if state is not None else OwnerMemory(owner_key("default", "alice"))
    changes = []
    for e in events:
        state, delta = apply(state, e, params)
        changes.extend(delta)
    return state, changes


def relation_edges(state: OwnerMemory) -> set[tuple[str, str, str, float, str]]:
    nodes = {n.id: n.label for n in state.tables["graph_nodes"].values() if isinstance(n, GraphNodeRow)}
    return {
        (e.edge_type, nodes[e.src], nodes[e.dst], e.weight, e.direction)
        for e in state.tables["graph_edges"].values()
        if isinstance(e, GraphEdgeRow) and e.edge_type in ("indicates", "treated_with")
    }


def test_messages_mentioning_related_types_are_linked_by_the_packs_relations() -> None:
    state, _ = fold(dialogue(Chat()), PARAMS)
    assert relation_edges(state) == {
        ("indicates", SYMPTOM, DIAGNOSIS, 0.85, "both"),
        ("treated_with", DIAGNOSIS, TREATMENT, 0.85, "both"),
    }


def test_without_relations_the_same_analyses_give_no_relation_edges() -> None:
    state, _ = fold(dialogue(Chat()), SEED_DEFAULT)
    assert relation_edges(state) == set()


def test_typed_mentions_never_become_episodic_records() -> None:
    state, _ = fold(dialogue(Chat()), PARAMS)
    assert all(m.consolidated for m in state.tables["messages"].values() if m.text != "A new day.")  # type: ignore[attr-defined]
    assert state.tables["episodic"] == {}


def test_a_state_rebuilt_from_rows_links_the_next_message_as_the_live_one_does() -> None:
    chat = Chat()
    events = dialogue(chat)
    live, changes = fold(events, PARAMS)
    # a restarted worker: the state comes back from the stored rows, its index rebuilt from them
    restarted = OwnerMemory.from_rows(live.owner_id, replay_changes(changes).values())
    more = chat.say("The ibuprofen helped a lot.", at=T0 + 4 * DAY, conv="c3", facts=[term("treatment", "ibuprofen")])
    live, _ = fold([more], PARAMS, live)
    restarted, _ = fold([more], PARAMS, restarted)
    assert relation_edges(restarted) == relation_edges(live)
    assert ("treated_with", DIAGNOSIS, "The ibuprofen helped a lot.", 0.85, "both") in relation_edges(live)
    # applying the same events again changes nothing
    _, again = fold(events, PARAMS, live)
    assert again == []
