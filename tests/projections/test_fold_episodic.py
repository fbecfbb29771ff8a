"""Episodic memory: the ADD / UPDATE / IGNORE routers and the validity history they keep."""

from __future__ import annotations

from adamem.events import MessageAnalyzed
from adamem.projections.folds import EpisodicRow, OwnerMemory, Positioned
from adamem.projections.folds.testing import DAY, HOUR, T0, Chat, attr, event, fact, fold


def _records(state: OwnerMemory) -> list[EpisodicRow]:
    rows = [r for r in state.tables["episodic"].values() if isinstance(r, EpisodicRow)]
    return sorted(rows, key=lambda r: (r.valid_from, r.content))


def message_id(p: Positioned) -> str:
    assert isinstance(p.event, MessageAnalyzed)
    return p.event.message.event_id


def _end_session(chat: Chat, at: int) -> Positioned:
    return chat.say("(new session)", at=at, conv=f"later-{at}")


def test_moving_city_updates_the_fact_and_keeps_the_old_one_as_superseded() -> None:
    chat = Chat()
    t1, t2 = T0 + 9 * HOUR, T0 + 30 * DAY
    moved = chat.say(
        "I moved from Shanghai to Beijing.", at=t2, conv="s2", facts=[fact("lives in Beijing", 0.9, key="lives_in")]
    )
    state, _ = fold(
        [
            chat.say("I live in Shanghai.", at=t1, conv="s1", facts=[fact("lives in Shanghai", 0.9, key="lives_in")]),
            moved,
            chat.say("(later)", at=t2 + DAY, conv="s3"),
        ]
    )
    old, new = _records(state)
    assert (old.content, old.status, old.valid_from, old.valid_to) == ("lives in Shanghai", "superseded", t1, t2)
    assert old.superseded_by == new.id
    assert (new.content, new.status, new.valid_to, new.router) == ("lives in Beijing", "active", -1, "UPDATE")
    assert new.supersedes == old.id and new.key == old.key == "lives_in"
    assert new.source_message_ids == [message_id(moved)]


def test_moving_city_in_chinese() -> None:
    chat = Chat(user="xiaoming")
    t1, t2 = T0, T0 + 14 * DAY
    state, _ = fold(
        [
            chat.say("我住在上海。", at=t1, conv="会话1", speaker="小明", facts=[fact("住在上海", 0.85, key="居住地")]),
            chat.say(
                "我从上海搬到北京了。", at=t2, conv="会话2", speaker="小明", facts=[fact("住在北京", 0.9, key="居住地")]
            ),
            chat.say("你好", at=t2 + HOUR, conv="会话3", speaker="小明"),
        ],
        user="xiaoming",
    )
    old, new = _records(state)
    assert (old.content, old.status, old.valid_to, old.superseded_by) == ("住在上海", "superseded", t2, new.id)
    assert (new.content, new.status, new.valid_to) == ("住在北京", "active", -1)


def test_low_confidence_items_are_ignored() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say(
                "Maybe I like jazz? And I might go hiking.",
                at=T0,
                facts=[fact("might own a cat", 0.7)],
                attributes=[attr("likes", "jazz", 0.5)],
                events=[event("might go hiking", 0.6)],
            ),
            chat.say("I have a dog.", at=T0 + HOUR, facts=[fact("has a dog", 0.71)]),
            _end_session(chat, T0 + DAY),
        ]
    )
    assert [r.content for r in _records(state)] == ["has a dog"]
    assert state.tables["persona"] == {}


def test_a_redundant_fact_is_not_duplicated_but_gains_the_new_source() -> None:
    chat = Chat()
    a = chat.say(
        "My company is in Haidian, Beijing.", at=T0, conv="s1", facts=[fact("the company is in Haidian, Beijing", 0.9)]
    )
    b = chat.say(
        "As I said, the company is in Haidian, Beijing!",
        at=T0 + 7 * DAY,
        conv="s2",
        facts=[fact("The company is in Haidian,  Beijing.", 0.8)],
    )
    state, _ = fold([a, b, _end_session(chat, T0 + 8 * DAY)])
    (record,) = _records(state)
    assert record.content == "the company is in Haidian, Beijing"
    assert record.confidence == 0.9
    assert record.source_message_ids == [message_id(a), message_id(b)]


def test_a_less_reliable_conflicting_fact_is_ignored_and_a_tie_goes_to_the_newer() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say("I'm 30.", at=T0, conv="s1", facts=[fact("is 30 years old", 0.9, key="age")]),
            chat.say("lol I'm 18", at=T0 + DAY, conv="s2", facts=[fact("is 18 years old", 0.75, key="age")]),
            chat.say("I'm 31 now.", at=T0 + 400 * DAY, conv="s3", facts=[fact("is 31 years old", 0.9, key="age")]),
            _end_session(chat, T0 + 401 * DAY),
        ]
    )
    assert [(r.content, r.status) for r in _records(state)] == [
        ("is 30 years old", "superseded"),
        ("is 31 years old", "active"),
    ]


def test_likes_then_dislikes_the_same_thing_conflict() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say("I love cilantro.", at=T0, conv="s1", attributes=[attr("likes", "cilantro", 0.8)]),
            chat.say(
                "Actually I hate cilantro.", at=T0 + DAY, conv="s2", attributes=[attr("dislikes", "Cilantro", 0.9)]
            ),
            _end_session(chat, T0 + 2 * DAY),
        ]
    )
    old, new = _records(state)
    assert (old.attribute_key, old.status, old.valid_to) == ("likes", "superseded", T0 + DAY)
    assert (new.attribute_key, new.status, new.key) == ("dislikes", "active", "pref:cilantro")


def test_events_are_kept_per_occurrence_and_a_repeat_on_the_same_day_is_redundant() -> None:
    chat = Chat()
    wed = T0 + 2 * DAY + 19 * HOUR
    state, _ = fold(
        [
            chat.say("Went to the gym.", at=wed, conv="s1", events=[event("went to the gym", 0.9)]),
            chat.say("Gym was great", at=wed + HOUR, conv="s1", events=[event("Went to the gym", 0.9)]),
            chat.say("Gym again", at=wed + 7 * DAY, conv="s2", events=[event("went to the gym", 0.9)]),
            _end_session(chat, wed + 8 * DAY),
        ]
    )
    records = _records(state)
    assert [(r.type, r.valid_from) for r in records] == [("event", wed), ("event", wed + 7 * DAY)]
    assert len(records[0].source_message_ids) == 2
