"""Control events: forgetting an item, a message or a user, and correcting a record or a trait."""

from __future__ import annotations

import pytest

from adamem.events import MessageAnalyzed
from adamem.projections.folds import (
    Delete,
    EpisodicRow,
    GraphEdgeRow,
    GraphNodeRow,
    MessageRow,
    OwnerMemory,
    PersonaRow,
    Positioned,
    Upsert,
    apply,
)
from adamem.projections.folds.rows import row_json
from adamem.projections.folds.testing import DAY, HOUR, T0, WEEK, Chat, attr, event, fact, fold
from adamem.text import search_text


def mid(p: Positioned) -> str:
    assert isinstance(p.event, MessageAnalyzed)
    return p.event.message.event_id


def records(state: OwnerMemory) -> dict[str, EpisodicRow]:
    return {r.content: r for r in state.tables["episodic"].values() if isinstance(r, EpisodicRow)}


def traits(state: OwnerMemory) -> dict[str, PersonaRow]:
    return {f"{t.key}={t.value}": t for t in state.tables["persona"].values() if isinstance(t, PersonaRow)}


def node_labels(state: OwnerMemory) -> set[tuple[str, str]]:
    return {(n.node_type, n.label) for n in state.tables["graph_nodes"].values() if isinstance(n, GraphNodeRow)}


def two_sessions(chat: Chat) -> tuple[Positioned, Positioned, Positioned]:
    m1 = chat.say(
        "I'm vegetarian and I like tea.",
        at=T0,
        conv="s1",
        topics=["diet"],
        facts=[fact("is vegetarian", 0.9, key="diet")],
        attributes=[attr("diet", "vegetarian", 0.9), attr("likes", "tea", 0.9)],
    )
    m2 = chat.say(
        "Tea again, please.", at=T0 + WEEK, conv="s2", topics=["drinks"], attributes=[attr("likes", "tea", 0.9)]
    )
    m3 = chat.say("(later)", at=T0 + 2 * WEEK, conv="s3")
    return m1, m2, m3


def test_forgetting_a_message_removes_what_only_it_supported_and_recomputes_the_rest() -> None:
    chat = Chat()
    m1, m2, m3 = two_sessions(chat)
    state, _ = fold([m1, m2, m3])
    assert set(traits(state)) == {"diet=vegetarian", "likes=tea"}
    assert traits(state)["likes=tea"].mention_count == 2

    state, changes = apply(state, chat.forget("message", mid(m1), at=T0 + 3 * WEEK))

    assert mid(m1) not in state.tables["messages"]
    assert set(records(state)) == {"likes tea"}  # the record survives through m2, its other source
    assert records(state)["likes tea"].source_message_ids == [mid(m2)]
    assert set(traits(state)) == {"likes=tea"}  # diet=vegetarian had no other evidence
    tea = traits(state)["likes=tea"]
    assert (tea.mention_count, tea.evidence_message_ids) == (1, [mid(m2)])
    assert node_labels(state) == {
        ("message", "Tea again, please."),
        ("message", "(later)"),
        ("topic", "drinks"),
        ("attribute", "likes tea"),
    }
    node_ids = set(state.tables["graph_nodes"])
    assert all(
        e.src in node_ids and e.dst in node_ids
        for e in state.tables["graph_edges"].values()
        if isinstance(e, GraphEdgeRow)
    )
    deleted = {(c.table, c.id) for c in changes if isinstance(c, Delete)}
    assert ("messages", mid(m1)) in deleted
    assert {t for t, _ in deleted} == {"messages", "episodic", "persona", "graph_nodes", "graph_edges"}


def test_a_forgotten_message_is_not_archived_again_when_redelivered() -> None:
    chat = Chat()
    m1, m2, m3 = two_sessions(chat)
    state, _ = fold([m1, m2, m3, chat.forget("message", mid(m1), at=T0 + 3 * WEEK)])
    state, changes = apply(state, m1)
    assert changes == [] and mid(m1) not in state.tables["messages"]


def test_forgetting_the_user_leaves_nothing() -> None:
    chat = Chat()
    state, _ = fold([*two_sessions(chat)])
    n = len(state.rows())
    state, changes = apply(state, chat.forget("user", None, at=T0 + 3 * WEEK))
    assert state.rows() == []
    assert len(changes) == n and all(isinstance(c, Delete) for c in changes)
    state, again = apply(state, chat.forget("user", None, at=T0 + 3 * WEEK))
    assert again == []


def test_forgetting_an_attribute_record_also_removes_the_persona_evidence_it_gave() -> None:
    chat = Chat()
    m1, m2, m3 = two_sessions(chat)
    state, _ = fold([m1, m2, m3])
    diet = records(state)["diet vegetarian"]
    state, _ = apply(state, chat.forget("item", diet.id, at=T0 + 3 * WEEK))
    assert "diet vegetarian" not in records(state) and "diet=vegetarian" not in traits(state)
    assert ("attribute", "diet vegetarian") not in node_labels(state)
    assert "is vegetarian" in records(state)  # the fact is another item


def test_forgetting_a_trait_or_a_graph_node_by_id() -> None:
    chat = Chat()
    state, _ = fold([*two_sessions(chat)])
    tea = traits(state)["likes=tea"]
    state, _ = apply(state, chat.forget("item", tea.id, at=T0 + 3 * WEEK))
    assert "likes=tea" not in traits(state) and "likes tea" in records(state)  # only the trait goes
    fact_node = next(
        n for n in state.tables["graph_nodes"].values() if isinstance(n, GraphNodeRow) and n.node_type == "fact"
    )
    state, _ = apply(state, chat.forget("item", fact_node.id, at=T0 + 3 * WEEK))
    assert "is vegetarian" not in records(state) and fact_node.id not in state.tables["graph_nodes"]


def test_forgetting_the_newer_record_restores_the_one_it_superseded() -> None:
    chat = Chat()
    moved = chat.say("I moved to Beijing.", at=T0 + DAY, conv="s2", facts=[fact("lives in Beijing", key="lives_in")])
    state, _ = fold(
        [
            chat.say("I live in Shanghai.", at=T0, conv="s1", facts=[fact("lives in Shanghai", key="lives_in")]),
            moved,
            chat.say("(later)", at=T0 + 2 * DAY, conv="s3"),
            chat.forget("message", mid(moved), at=T0 + 3 * DAY),
        ]
    )
    (shanghai,) = records(state).values()
    assert (shanghai.content, shanghai.status, shanghai.valid_to, shanghai.superseded_by) == (
        "lives in Shanghai",
        "active",
        -1,
        "",
    )
    assert any(
        n.active
        for n in state.tables["graph_nodes"].values()
        if isinstance(n, GraphNodeRow) and n.label == "lives in Shanghai"
    )


def test_a_correction_keeps_the_history() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say("I live in Beijing.", at=T0, conv="s1", facts=[fact("lives in Beijing", 0.9, key="lives_in")]),
            chat.say("(later)", at=T0 + DAY, conv="s2"),
        ]
    )
    old = records(state)["lives in Beijing"]
    correction = chat.correct(old.id, "lives in Tianjin", at=T0 + 2 * DAY, confidence=0.95)
    state, changes = apply(state, correction)

    before, after = records(state)["lives in Beijing"], records(state)["lives in Tianjin"]
    assert (before.status, before.valid_to, before.superseded_by) == ("superseded", T0 + 2 * DAY, after.id)
    assert (after.status, after.router, after.confidence, after.valid_from, after.supersedes) == (
        "active",
        "CORRECT",
        0.95,
        T0 + 2 * DAY,
        old.id,
    )
    assert after.key == "lives_in" and after.origin_event_id == correction.event.event_id
    assert {c.table for c in changes if isinstance(c, Upsert)} == {"owners", "episodic", "graph_nodes", "graph_edges"}
    state, again = apply(state, correction)
    assert again == []
    # a later statement conflicts with the corrected record, not with the superseded one
    state, _ = fold(
        [
            chat.say(
                "Tianjin is nice, but I'm in Beijing again",
                at=T0 + 3 * DAY,
                conv="s3",
                facts=[fact("lives in Beijing", 0.96, key="lives_in")],
            ),
            chat.say("(later)", at=T0 + 4 * DAY, conv="s4"),
        ],
        state,
    )
    active = [r.content for r in records(state).values() if r.status == "active"]
    assert active == ["lives in Beijing"] and records(state)["lives in Tianjin"].status == "superseded"


def test_a_correction_of_a_chinese_trait_keeps_the_old_value_superseded() -> None:
    chat = Chat(user="xm")
    state, _ = fold(
        [
            chat.say("我喜欢咖啡。", at=T0, conv="c1", speaker="小明", attributes=[attr("喜欢", "咖啡", 0.9)]),
            chat.say("嗯", at=T0 + DAY, conv="c2", speaker="小明"),
        ],
        user="xm",
    )
    coffee = traits(state)["likes=咖啡"]
    state, _ = apply(state, chat.correct(coffee.id, "绿茶", at=T0 + 2 * DAY))
    old, new = traits(state)["likes=咖啡"], traits(state)["likes=绿茶"]
    assert (old.status, old.superseded_by, old.valid_to) == ("superseded", new.id, T0 + 2 * DAY)
    assert (new.status, new.cluster, new.mention_count) == ("active", "coffee and tea", 1)
    # a later mention of the corrected value is evidence for the corrected trait
    state, _ = fold(
        [
            chat.say("绿茶真好", at=T0 + 3 * DAY, conv="c3", speaker="小明", attributes=[attr("喜欢", "绿茶", 0.9)]),
            chat.say("嗯", at=T0 + 4 * DAY, conv="c4", speaker="小明"),
        ],
        state,
    )
    assert traits(state)["likes=绿茶"].mention_count == 2


def test_forgetting_an_event_occurrence_removes_a_habit_that_no_longer_recurs() -> None:
    chat = Chat()
    gyms = [
        chat.say(f"gym {i}", at=T0 + 2 * DAY + i * WEEK, conv=f"g{i}", events=[event("went to the gym")])
        for i in range(3)
    ]
    state, _ = fold([*gyms, chat.say("(later)", at=T0 + 4 * WEEK, conv="end")])
    assert [t.kind for t in traits(state).values()] == ["habit"]
    state, _ = apply(state, chat.forget("message", mid(gyms[1]), at=T0 + 5 * WEEK))
    assert traits(state) == {}


def _messages(state: OwnerMemory) -> dict[str, MessageRow]:
    return {m.text: m for m in state.tables["messages"].values() if isinstance(m, MessageRow)}


@pytest.mark.parametrize(
    "texts",
    [
        ("Where did you go hiking?", "To the Yellow Mountains.", "The sunrise there was amazing."),
        ("你上周去哪里徒步了？", "去了黄山。", "那里的日出太美了。"),
    ],
    ids=["en", "zh"],
)
def test_a_message_holds_the_words_of_the_one_before_it_and_a_forget_leaves_none_of_the_forgotten(
    texts: tuple[str, str, str],
) -> None:
    """A message's ``context`` is the previous message's text as search tokens (the first message's: none). Forgetting
    a message gives the one after it the words of the message now before it: the rows a replay of the log without
    the forgotten message gives."""
    chat = Chat()
    said = [chat.say(t, at=T0 + i * 60_000, conv="s1") for i, t in enumerate(texts)]
    state, _ = fold(said)
    held = _messages(state)
    assert [held[t].context for t in texts] == ["", search_text(texts[0]), search_text(texts[1])]
    assert all(held[t].context for t in texts[1:])
    assert "context" not in row_json(held[texts[1]])  # shown as the message before it, not as its words

    state, _ = apply(state, chat.forget("message", mid(said[1]), at=T0 + 5 * 60_000))
    after = _messages(state)
    assert texts[1] not in after
    assert after[texts[2]].context == search_text(texts[0])
    assert not set(search_text(texts[1]).split()) & set(after[texts[2]].context.split()) - set(
        search_text(texts[0]).split()
    )

    replayed, _ = fold([said[0], said[2]])  # the log as a rebuild reads it: the forgotten message shredded
    again = _messages(replayed)
    assert {t: m.context for t, m in after.items()} == {t: m.context for t, m in again.items()}


def test_a_message_after_the_newest_was_forgotten_holds_the_words_of_the_one_before_that() -> None:
    """Forget the newest message, then a message arrives: its ``context`` is the words of the message before the
    forgotten one, as a replay of the log without it gives (the fold's newest message is recomputed on a delete)."""
    chat = Chat()
    first = chat.say("我在深圳找到了新工作。", at=T0, conv="s1")
    newest = chat.say("I start on Monday.", at=T0 + HOUR, conv="s1")
    state, _ = fold([first, newest])
    state, _ = apply(state, chat.forget("message", mid(newest), at=T0 + 2 * HOUR))
    later = chat.say("The office is near the sea.", at=T0 + 2 * HOUR, conv="s1")
    state, _ = apply(state, later)
    assert _messages(state)["The office is near the sea."].context == search_text("我在深圳找到了新工作。")
    replayed, _ = fold([first, later])
    assert {t: m.context for t, m in _messages(state).items()} == {t: m.context for t, m in _messages(replayed).items()}


@pytest.mark.parametrize("gap", ["conversation", "time"])
def test_a_message_that_opens_a_session_holds_no_words_of_the_one_before(gap: str) -> None:
    """A reply is said in the session of what it answers: across another conversation or a gap of
    ``session_gap_ms`` (3 h) a message's ``context`` is empty, also once a forget leaves it next to an earlier
    session's message."""
    chat = Chat()
    conv = "s2" if gap == "conversation" else "s1"
    early = chat.say("I like oolong tea.", at=T0, conv="s1")
    middle = chat.say("我们下周去爬山吧。", at=T0 + 2 * HOUR, conv=conv)
    later = chat.say("I ran along the river.", at=T0 + 4 * HOUR, conv=conv)
    state, _ = fold([early, middle, later])
    held = _messages(state)
    expected = "" if gap == "conversation" else search_text("I like oolong tea.")
    assert held["我们下周去爬山吧。"].context == expected
    assert held["I ran along the river."].context == search_text("我们下周去爬山吧。")
    state, _ = apply(state, chat.forget("message", mid(middle), at=T0 + 5 * HOUR))
    assert _messages(state)["I ran along the river."].context == ""  # another conversation, or 4 h after
    replayed, _ = fold([early, later])
    assert _messages(replayed)["I ran along the river."].context == ""
