"""Working memory: a FIFO of 20 that evicts and consolidates the oldest 5 as one batch."""

from __future__ import annotations

from adamem.projections.folds import Delete, MessageRow, OwnerMemory, Upsert, apply
from adamem.projections.folds.testing import HOUR, T0, Chat, fact, fold


def _messages(state: OwnerMemory) -> dict[str, MessageRow]:
    return {k: v for k, v in state.tables["messages"].items() if isinstance(v, MessageRow)}


def test_twenty_messages_fill_working_memory_without_consolidating() -> None:
    chat = Chat()
    state, _ = fold(chat.say(f"message {i}", at=T0 + i * 60_000, facts=[fact(f"fact {i}")]) for i in range(20))
    assert len(state.working_ids()) == 20
    assert all(not m.consolidated for m in _messages(state).values())
    assert state.tables["episodic"] == {}


def test_the_21st_message_evicts_the_oldest_five_as_one_batch() -> None:
    chat = Chat()
    events = [chat.say(f"message {i}", at=T0 + i * 60_000, facts=[fact(f"fact {i}")]) for i in range(21)]
    state, _ = fold(events[:20])
    state, changes = apply(state, events[20])

    working = state.working_ids()
    assert len(working) == 16
    ids = [e.event.message.event_id for e in events]  # type: ignore[union-attr]
    assert working == ids[5:]
    rows = _messages(state)
    assert len(rows) == 21  # every message stays archived
    for mid in ids[:5]:
        assert rows[mid].in_working is False and rows[mid].working_seq == -1 and rows[mid].consolidated
    for mid in ids[5:]:
        assert rows[mid].in_working and not rows[mid].consolidated
    assert [r.working_seq for r in (rows[m] for m in working)] == list(range(5, 21))
    # the batch was consolidated: exactly the five oldest facts reached episodic memory
    assert sorted(r.content for r in state.tables["episodic"].values()) == [f"fact {i}" for i in range(5)]
    assert not any(isinstance(c, Delete) for c in changes)
    touched = {c.row.id for c in changes if isinstance(c, Upsert) and c.table == "messages"}
    assert touched == {*ids[:5], ids[20]}


def test_eviction_repeats_every_five_messages_past_capacity() -> None:
    chat = Chat()
    state, _ = fold(chat.say(f"m{i}", at=T0 + i * 1000) for i in range(31))
    # 21 -> 16, 22..26 -> 21 -> 16 again at the 26th, then 27..31 -> 21 -> 16
    assert len(state.working_ids()) == 16
    assert sum(1 for m in _messages(state).values() if m.consolidated) == 15


def test_a_new_conversation_consolidates_the_previous_session_but_keeps_it_in_working_memory() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say("I work at a startup.", at=T0, conv="s1", facts=[fact("works at a startup", key="employer")]),
            chat.say("Nice!", at=T0 + 60_000, conv="s1", speaker="Assistant", role="assistant"),
            chat.say("我在北京工作。", at=T0 + 120_000, conv="s1", facts=[fact("在北京工作", key="work_city")]),
        ]
    )
    assert state.tables["episodic"] == {}
    state, _ = fold([chat.say("Back again", at=T0 + 5 * HOUR, conv="s2")], state)
    rows = _messages(state)
    s1 = [m for m in rows.values() if m.conversation_id == "s1"]
    assert all(m.consolidated and m.in_working for m in s1)
    assert not next(m for m in rows.values() if m.conversation_id == "s2").consolidated
    assert sorted(r.content for r in state.tables["episodic"].values()) == ["works at a startup", "在北京工作"]
    assert len(state.working_ids()) == 4


def test_a_gap_in_event_time_opens_a_session_in_a_stream_without_conversation_ids() -> None:
    chat = Chat()
    events = [
        chat.say("I work at a startup.", at=T0, conv="default", facts=[fact("works at a startup", key="employer")]),
        chat.say("我在北京工作。", at=T0 + HOUR, conv="default", facts=[fact("在北京工作", key="work_city")]),
        chat.say("Back again", at=T0 + 4 * HOUR, conv="default"),
    ]
    # an hour apart: one session, nothing consolidated (fewer than 20 messages)
    state, _ = fold(events[:2])
    assert state.tables["episodic"] == {}
    # three hours after the last message (the default session_gap_ms): a new session consolidates the first
    state, _ = fold(events[2:], state)
    rows = _messages(state)
    assert [m.consolidated for m in sorted(rows.values(), key=lambda m: m.seq)] == [True, True, False]
    assert sorted(r.content for r in state.tables["episodic"].values()) == ["works at a startup", "在北京工作"]
    # replay of the same events gives the same rows: the boundary is event time, not a clock
    again, _ = fold(events)
    assert again.tables == state.tables


def test_a_gap_just_under_the_session_gap_keeps_one_session() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say("I work at a startup.", at=T0, conv="default", facts=[fact("works at a startup", key="employer")]),
            chat.say("Still here", at=T0 + 3 * HOUR - 1, conv="default"),
        ]
    )
    assert state.tables["episodic"] == {}


def test_a_duplicate_publish_of_the_same_message_changes_nothing() -> None:
    chat = Chat()
    first = chat.say("hello", at=T0, message_id="m-1")
    state, _ = fold([first])
    again = Chat().say("hello", at=T0, message_id="m-1")  # same ids, a later offset
    state, changes = apply(state, again)
    assert changes == []
    assert len(state.tables["messages"]) == 1
