"""Persona memory: evidence strength, stability, conflicts, preference clusters, habits, stability index."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from adamem.projections.folds import (
    SEED_DEFAULT,
    OwnerMemory,
    PersonaRow,
    Positioned,
    is_healthy_stability,
    stability_index,
    strength_at,
)
from adamem.projections.folds.keys import trait_slot
from adamem.projections.folds.testing import DAY, HOUR, T0, WEEK, Chat, attr, event, fold

HALF_LIFE = SEED_DEFAULT.half_life_ms


def decay(age_ms: int) -> float:
    return float(0.5 ** (age_ms / HALF_LIFE))


def traits(state: OwnerMemory, kind: str | None = None) -> dict[tuple[str, str], PersonaRow]:
    rows = [t for t in state.tables["persona"].values() if isinstance(t, PersonaRow)]
    return {(t.key, t.value): t for t in rows if kind is None or t.kind == kind}


def weekly(chat: Chat, says: list[tuple[str, list[object]]], start: int = T0) -> list[Positioned]:
    """One message per weekly session, plus a final session that consolidates the last one."""
    out = [
        chat.say(text, at=start + i * WEEK, conv=f"w{i}", attributes=a)  # type: ignore[arg-type]
        for i, (text, a) in enumerate(says)
    ]
    out.append(chat.say("(next week)", at=start + len(says) * WEEK, conv="end"))
    return out


def test_a_preference_said_three_times_across_weeks_becomes_stable() -> None:
    chat = Chat()
    state, _ = fold(weekly(chat, [("I love spicy food.", [attr("likes", "spicy food", 0.9)])] * 3))
    trait = traits(state)[("likes", "spicy food")]
    now = T0 + 3 * WEEK
    expected = 0.9 * math.log(4) * (decay(3 * WEEK) + decay(2 * WEEK) + decay(WEEK)) / 3
    assert trait.mention_count == 3
    assert trait.strength == pytest.approx(expected)
    assert trait.stable and not trait.disputed
    assert (trait.first_seen, trait.last_seen, trait.updated_at, trait.changed_at) == (T0, T0 + 2 * WEEK, now, now)
    assert trait.cluster == "strong flavours"
    assert math.isclose(sum(x * x for x in trait.vector), 1.0, rel_tol=1e-6)


def test_said_once_or_twice_is_not_stable() -> None:
    chat = Chat()
    once, _ = fold(weekly(chat, [("I love spicy food.", [attr("likes", "spicy food", 0.9)])]))
    trait = traits(once)[("likes", "spicy food")]
    assert trait.strength == pytest.approx(0.9 * math.log(2) * decay(WEEK))
    assert not trait.stable
    twice, _ = fold(weekly(Chat(), [("I love spicy food.", [attr("likes", "spicy food", 0.9)])] * 2))
    trait = traits(twice)[("likes", "spicy food")]
    assert trait.strength > SEED_DEFAULT.persona_stable_strength and trait.mention_count == 2
    assert not trait.stable  # needs three pieces of evidence


def test_a_chinese_preference_said_three_times_becomes_stable() -> None:
    chat = Chat(user="xiaohong")
    state, _ = fold(weekly(chat, [("我特别喜欢吃辣。", [attr("喜欢", "吃辣", 0.85)])] * 3), user="xiaohong")
    trait = traits(state)[("likes", "吃辣")]
    assert trait.stable and trait.kind == "preference" and trait.cluster == "strong flavours"


def test_similar_preferences_merge_into_a_cluster_trait() -> None:
    chat = Chat()
    state, _ = fold(
        weekly(
            chat,
            [
                ("I love Sichuan food.", [attr("likes", "Sichuan food", 0.9)]),
                ("湖南菜也很好吃，我喜欢。", [attr("喜欢", "湖南菜", 0.9)]),
                ("Hotpot night!", [attr("loves", "spicy hotpot", 0.9)]),
            ],
        )
    )
    items = traits(state, "preference")
    assert {v for (_, v) in items} == {"sichuan food", "湖南菜", "spicy hotpot"}
    assert all(t.cluster == "strong flavours" and not t.stable for t in items.values())
    cluster = traits(state, "preference_cluster")[("likes", "strong flavours")]
    assert cluster.members == ["sichuan food", "spicy hotpot", "湖南菜"]
    assert cluster.mention_count == 3 and cluster.stable
    assert len(cluster.evidence_message_ids) == 3


def test_a_cluster_of_preferences_said_in_chinese_is_shown_in_chinese() -> None:
    chat = Chat(user="xiaoming")
    says = [
        ("我特别喜欢吃辣的川菜。", [attr("喜欢", "辣的川菜", 0.9)]),
        ("辣的湖南菜也不错。", [attr("喜欢", "辣的湖南菜", 0.9)]),
    ]
    state, _ = fold(weekly(chat, says), user="xiaoming")
    (cluster,) = traits(state, "preference_cluster").values()
    assert (cluster.key, cluster.value, cluster.cluster) == ("likes", "重口味", "strong flavours")
    english, _ = fold(
        weekly(
            Chat(),
            [("I love Sichuan food.", [attr("likes", "Sichuan food", 0.9)])] * 1
            + [("Hunan food too.", [attr("likes", "Hunan food", 0.9)])],
        )
    )
    (same,) = traits(english, "preference_cluster").values()
    assert (same.value, same.cluster) == ("strong flavours", "strong flavours")
    assert trait_slot(cluster) == trait_slot(same)  # one slot whichever language shows it


def test_values_outside_the_lexicon_cluster_by_shared_tokens() -> None:
    chat = Chat()
    state, _ = fold(
        weekly(
            chat,
            [
                ("Japanese ramen is the best.", [attr("likes", "Japanese ramen", 0.9)]),
                ("And Japanese curry.", [attr("likes", "Japanese curry", 0.9)]),
            ],
        )
    )
    items = traits(state, "preference")
    assert items[("likes", "japanese curry")].cluster == "japanese ramen"
    assert traits(state, "preference_cluster")[("likes", "japanese ramen")].members == [
        "japanese curry",
        "japanese ramen",
    ]


def test_a_single_contrary_mention_is_ignored_as_an_outlier() -> None:
    chat = Chat()
    says = [("I love spicy food.", [attr("likes", "spicy food", 0.9)])] * 3
    says.append(("Ugh, I don't like spicy food today.", [attr("dislikes", "spicy food", 0.9)]))
    state, _ = fold(weekly(chat, says))
    t = traits(state, "preference")
    likes, dislikes = t[("likes", "spicy food")], t[("dislikes", "spicy food")]
    assert likes.stable and not likes.disputed and likes.updated_at == T0 + 3 * WEEK  # untouched since week 3
    assert dislikes.mention_count == 1 and dislikes.strength == 0.0 and not dislikes.stable


def test_equal_contrary_evidence_keeps_both_marked_disputed() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say("I like durian.", at=T0, conv="s1", attributes=[attr("likes", "durian", 0.9)]),
            chat.say(
                "No wait, I dislike durian.", at=T0 + 60_000, conv="s1", attributes=[attr("dislikes", "durian", 0.9)]
            ),
            chat.say("(next day)", at=T0 + DAY, conv="s2"),
        ]
    )
    t = traits(state, "preference")
    assert t[("likes", "durian")].disputed and t[("dislikes", "durian")].disputed
    assert t[("dislikes", "durian")].strength == pytest.approx(0.9 * math.log(2) * decay(DAY - 60_000))


def test_stronger_contrary_evidence_adjusts_gradually() -> None:
    chat = Chat()
    state, _ = fold(
        weekly(
            chat,
            [
                ("I like cilantro.", [attr("likes", "cilantro", 0.8)]),
                ("Cilantro tastes like soap to me.", [attr("dislikes", "cilantro", 0.9)]),
            ],
        )
    )
    t = traits(state, "preference")
    old = 0.8 * math.log(2) * decay(WEEK) * decay(WEEK)  # written at week 1, decayed to week 2
    current = 0.9 * math.log(2) * decay(WEEK)
    assert current - old > SEED_DEFAULT.persona_tie_tolerance
    assert t[("dislikes", "cilantro")].strength == pytest.approx(old * 0.9 + current * 0.1)
    assert t[("likes", "cilantro")].strength == pytest.approx(old * 0.9)
    assert not t[("likes", "cilantro")].disputed and not t[("dislikes", "cilantro")].disputed


def test_a_single_valued_attribute_conflicts_with_its_other_values() -> None:
    chat = Chat()
    state, _ = fold(
        weekly(
            chat,
            [
                ("I'm a teacher.", [attr("occupation", "teacher", 0.75)]),
                ("I'm a doctor now.", [attr("occupation", "doctor", 0.95)]),
                ("(I also like tea)", [attr("hobby", "tea ceremony", 0.9)]),  # multi-valued: conflicts with nothing
            ],
        )
    )
    t = traits(state, "trait")
    old = 0.75 * math.log(2) * decay(2 * WEEK)
    current = 0.95 * math.log(2) * decay(WEEK)
    assert t[("occupation", "doctor")].strength == pytest.approx(old * 0.9 + current * 0.1)
    assert t[("occupation", "teacher")].strength == pytest.approx(old * 0.9)
    assert t[("hobby", "tea ceremony")].strength == pytest.approx(0.9 * math.log(2) * decay(WEEK))


def test_a_recurring_event_becomes_a_habit() -> None:
    chat = Chat()
    wednesday_evening = T0 + 2 * DAY + 19 * HOUR
    visits = [
        chat.say(
            f"Gym session {i}", at=wednesday_evening + i * WEEK, conv=f"g{i}", events=[event("went to the gym", 0.9)]
        )
        for i in range(3)
    ]
    state, _ = fold([*visits[:2], chat.say("(later)", at=wednesday_evening + 15 * DAY, conv="x")])
    assert traits(state, "habit") == {}
    state, _ = fold([visits[2], chat.say("(later)", at=wednesday_evening + 3 * WEEK, conv="y")], state)
    (habit,) = traits(state, "habit").values()
    assert habit.value == "gym every Wednesday evening"
    assert habit.mention_count == 3 and habit.members == ["gym"] and habit.stable


def test_a_chinese_recurring_event_becomes_a_habit_with_a_looser_label() -> None:
    chat = Chat(user="xm")
    times = [T0 + 2 * DAY + 20 * HOUR, T0 + 9 * DAY + 7 * HOUR, T0 + 17 * DAY + 13 * HOUR]  # Wed, Wed, Thu
    msgs = [
        chat.say("今天去健身房了", at=t, conv=f"c{i}", speaker="小明", events=[event("去健身房锻炼", 0.9)])
        for i, t in enumerate(times)
    ]
    state, _ = fold([*msgs, chat.say("嗨", at=T0 + 30 * DAY, conv="end", speaker="小明")], user="xm")
    (habit,) = traits(state, "habit").values()
    assert habit.value == "每周三健身"  # told in Chinese, shown in Chinese
    assert habit.members == ["gym"]


def test_strength_decays_by_event_time() -> None:
    chat = Chat()
    state, _ = fold(weekly(chat, [("I love tea.", [attr("likes", "tea", 0.9)])] * 3))
    trait = traits(state)[("likes", "tea")]
    later = trait.updated_at + int(HALF_LIFE)
    assert strength_at(trait, later, SEED_DEFAULT) == pytest.approx(trait.strength / 2)


def _trait(i: int, *, stable: bool, changed_at: int) -> PersonaRow:
    return PersonaRow(
        f"t{i}",
        "u",
        "preference",
        "likes",
        f"v{i}",
        "",
        [f"v{i}"],
        1.0,
        0.9,
        3,
        [],
        [],
        [],
        T0,
        T0,
        changed_at,
        changed_at,
        stable,
        False,
        "active",
        "",
        -1,
        (),
    )


def test_stability_index_is_the_weekly_change_rate_of_core_traits() -> None:
    week = (T0 + 4 * WEEK, T0 + 5 * WEEK)
    rows = [_trait(i, stable=True, changed_at=T0 + DAY) for i in range(8)]
    rows += [
        _trait(8, stable=True, changed_at=T0 + 4 * WEEK + DAY),  # became core this week
        _trait(9, stable=False, changed_at=T0 + 4 * WEEK + 2 * DAY),
    ]  # lost stability this week
    rows.append(_trait(10, stable=False, changed_at=T0 + DAY))  # never core: not counted
    rows.append(replace(_trait(11, stable=True, changed_at=T0 + 6 * WEEK), first_seen=T0 + 6 * WEEK))  # future
    rate = stability_index(rows, *week)
    assert rate == pytest.approx(2 / 10)
    assert is_healthy_stability(rate, SEED_DEFAULT)
    assert not is_healthy_stability(stability_index(rows[:8], *week), SEED_DEFAULT)  # 0 %: rigid


def test_the_assistants_attributes_and_events_are_not_the_owners_persona() -> None:
    chat = Chat()
    says = [
        chat.say(
            "I love jazz, and I went to the gym.",
            at=T0 + i * WEEK,
            conv=f"a{i}",
            speaker="Assistant",
            role="assistant",
            attributes=[attr("likes", "jazz", 0.9)],
            events=[event("went to the gym")],
        )
        for i in range(3)
    ]
    state, _ = fold([*says, chat.say("(later)", at=T0 + 3 * WEEK, conv="end")])
    assert traits(state) == {}
    assert {r.speaker_role for r in state.tables["episodic"].values()} == {"assistant"}  # type: ignore[union-attr]


def test_a_trait_vector_reads_only_the_newest_window_of_its_evidence() -> None:
    """The vector over the newest ``persona_vector_window`` evidence messages, as when all evidence was read."""
    import itertools
    from array import array
    from operator import truediv

    from adamem.projections.folds import persona
    from adamem.projections.folds.state import Transaction

    def reference(state: OwnerMemory, ids: list[str], window: int) -> tuple[float, ...]:
        vectors = [m.vector for m in (state.message(i) for i in ids) if m is not None and m.vector]
        vectors = vectors[-window:]
        if not vectors:
            return ()
        dim = len(vectors[-1])
        sums = list(map(math.fsum, zip(*(v for v in vectors if len(v) == dim), strict=True)))
        norm = math.hypot(*sums)
        return tuple(array("f", map(truediv, sums, itertools.repeat(norm)) if norm > 0 else sums))

    chat = Chat()
    state, _ = fold([chat.say(f"message {i}", at=T0 + i * HOUR, conv=f"c{i // 7}") for i in range(60)])
    ids = sorted(state.tables["messages"])
    with_gaps = [*ids[:10], "forgotten-1", *ids[10:], "forgotten-2"]
    tx = Transaction(state)
    for window in (0, 1, 5, 20, 100):
        params = replace(SEED_DEFAULT, persona_vector_window=window)
        for evidence in (ids, with_gaps, ids[:3], [], ["forgotten-1"]):
            assert persona._vector(tx, evidence, params) == reference(state, evidence, window)
            assert persona._vector(tx, iter(evidence), params) == reference(state, evidence, window)
