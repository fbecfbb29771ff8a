"""An owner's answer style, folded from their feedback on answers (``projections.folds.style``)."""

from __future__ import annotations

from adamem.events import AnswerFeedback
from adamem.projections.folds import OwnerMemory, PersonaRow, Positioned, apply
from adamem.projections.folds.style import STYLE_KIND, AnswerStyle, style_of
from adamem.projections.folds.testing import DAY, T0, Chat, attr, fold


def style_row(state: OwnerMemory) -> PersonaRow | None:
    rows = [t for t in state.tables["persona"].values() if isinstance(t, PersonaRow) and t.kind == STYLE_KIND]
    assert len(rows) <= 1
    return rows[0] if rows else None


def said(chat: Chat) -> list[Positioned]:
    return [
        chat.say("I like green tea.", at=T0, conv="s1", attributes=[attr("likes", "green tea", 0.9)]),
        chat.say("我喜欢跑步。", at=T0 + DAY, conv="s2", attributes=[attr("likes", "跑步", 0.9)]),
    ]


def test_records_that_helped_and_messages_that_did_not_make_a_summaries_style() -> None:
    chat = Chat()
    state, _ = fold(said(chat))
    judged = [
        ("r1", "episodic", "fact", True),
        ("t1", "persona", "preference", True),
        ("m1", "archive", "message", False),
    ]
    for n in range(3):
        state, changes = apply(state, chat.feedback(judged, at=T0 + 2 * DAY + n, n=n))
        assert changes  # each event writes the row
    row = style_row(state)
    assert row is not None
    assert (row.value, row.mention_count, row.members) == ("summaries", 3, ["summary:6/6", "detail:0/3"])
    assert row.stable and row.strength == style_of(row).preference > 0.5
    assert state.owner is not None and state.owner.last_event_time == T0 + DAY  # feedback does not move "now"


def test_messages_that_helped_make_an_examples_style_in_either_language() -> None:
    chat = Chat()
    state, _ = fold(said(chat))
    judged = [("m1", "working", "message", True), ("m2", "graph", "message", True), ("r1", "graph", "event", False)]
    state, _ = apply(state, chat.feedback(judged, at=T0 + 2 * DAY))
    row = style_row(state)
    assert row is not None and row.value == "examples" and style_of(row).preference < 0


def test_equal_help_from_both_classes_is_no_preference_however_many_messages_an_answer_holds() -> None:
    # half of each class helped; most judged items were messages: a vote count would read "summaries"
    chat = Chat()
    state, _ = fold(said(chat))
    judged = [("r1", "episodic", "fact", True), ("r2", "episodic", "event", False)]
    judged += [(f"m{i}", "archive", "message", i % 2 == 0) for i in range(8)]
    for n in range(4):
        state, _ = apply(state, chat.feedback(judged, at=T0 + 2 * DAY + n, n=n))
    row = style_row(state)
    assert row is not None and row.value == "either" and abs(style_of(row).preference) < 0.1


def test_a_redelivered_feedback_event_counts_once_and_replay_gives_the_same_row() -> None:
    chat = Chat()
    events = said(chat)
    first = chat.feedback([("r1", "episodic", "fact", True), ("m1", "archive", "message", False)], at=T0 + 2 * DAY)
    events += [first, first, chat.feedback([("t1", "persona", "habit", True)], at=T0 + 3 * DAY, n=1)]
    state, _ = fold(events)
    row = style_row(state)
    assert row is not None and row.mention_count == 2 and row.members == ["summary:2/2", "detail:0/1"]
    again, _ = fold(events)
    assert style_row(again) == row


def test_feedback_for_an_owner_without_memory_and_feedback_judging_nothing_change_nothing() -> None:
    chat = Chat()
    state, changes = fold([chat.feedback([("r1", "episodic", "fact", True)], at=T0)])
    assert style_row(state) is None and not changes
    state, _ = fold(said(chat))
    empty = AnswerFeedback("e", chat.user, (), T0 + 2 * DAY, tenant=chat.tenant)
    state, changes = apply(state, Positioned(empty, "adamem.control", 0, 99))
    assert style_row(state) is None and not changes


def test_the_preference_is_the_lift_of_summaries_among_what_helped_weighed_by_how_much_helped() -> None:
    style = AnswerStyle(3, 4, 1, 6, 2)  # 3 of the 4 helpful items were summaries, 4 of the 10 judged
    assert style.preference == (0.75 - 0.4) / (1 - 0.4) * 4 / 6
    assert style.value(0.1) == "summaries" and AnswerStyle().value(0.1) == "either"
    assert AnswerStyle(0, 4, 3, 6, 1).preference == -1 * 3 / 5  # only messages helped
    assert AnswerStyle(0, 4, 0, 6, 3).preference == 0.0  # nothing helped: nothing to learn
    assert AnswerStyle(2, 4, 0, 0, 1).preference == 0.0  # only summaries were offered: no choice was made
