"""Memory health from an owner's rows: fragmentation, repeated explanations, persona stability."""

from __future__ import annotations

from adamem.projections.folds.rows import MessageRow
from adamem.projections.folds.testing import DAY, T0, Chat, fact, fold, scenario
from adamem.projections.health import owner_health


def test_a_restated_fact_is_a_repeat_and_an_ignored_one_a_fragment() -> None:
    chat = Chat()
    state, _ = fold(
        [
            chat.say("I live in Beijing.", at=T0, facts=[fact("lives in Beijing", 0.9, key="lives_in")]),
            chat.say(
                "As I said, I live in Beijing.", at=T0 + 60_000, facts=[fact("lives in Beijing", 0.9, key="lives_in")]
            ),
            chat.say("Maybe I like jazz?", at=T0 + 120_000, facts=[fact("maybe likes jazz", 0.3)]),  # below 0.7
            chat.say("Hello there.", at=T0 + 180_000),  # nothing extracted: counts nowhere
            chat.say("(new session)", at=T0 + DAY, conv="s2"),  # consolidates the first session
        ]
    )
    rows = state.rows()
    consolidated = [r for r in rows if isinstance(r, MessageRow) and r.consolidated]
    assert len(consolidated) >= 4
    health = owner_health(rows)
    assert (health.extracted, health.repeated, health.fragmented) == (3, 1, 1)
    assert health.repeat_rate == health.fragmentation_rate == 1 / 3


def test_health_is_a_function_of_the_rows_alone() -> None:
    state, _ = fold(scenario())
    rows = state.rows()
    health = owner_health(rows)
    assert health == owner_health(list(reversed(rows)))  # no order, no clock
    assert health.has_persona and 0.0 <= health.stability <= 1.0
    assert health.extracted > 0 and 0.0 <= health.fragmentation_rate <= 1.0
