"""The grants fold: pending until confirmed, revoked for good, no clock, replay equals live."""

from __future__ import annotations

from adamem.events import GrantChanged
from adamem.projections.folds import GrantRow, OwnerMemory, apply
from adamem.projections.folds.ids import grant_row_id
from adamem.projections.folds.testing import DAY, T0, Chat, fold, replay_changes


def _grant(state: OwnerMemory, grant_id: str) -> GrantRow:
    row = state.tables["grants"][grant_row_id(state.owner_id, grant_id)]
    assert isinstance(row, GrantRow)
    return row


def test_a_grant_is_pending_until_confirmed_and_revoked_for_good() -> None:
    chat = Chat(user="alice")
    state, _ = fold([chat.grant("g1", "granted", at=T0, topics=("health", "健康"), scope_until=T0 + DAY)])
    g = _grant(state, "g1")
    assert (g.status, g.grantee_tenant, g.topics, g.scope_from, g.scope_until) == (
        "pending",
        "clinic",
        ["health", "健康"],
        -1,
        T0 + DAY,
    )
    state, _ = fold([chat.grant("g1", "confirmed", at=T0 + 1)], state)
    assert (_grant(state, "g1").status, _grant(state, "g1").confirmed_at) == ("active", T0 + 1)
    state, _ = fold([chat.grant("g1", "revoked", at=T0 + 2)], state)
    state, changes = fold([chat.grant("g1", "confirmed", at=T0 + 3)], state)
    assert changes == [] and _grant(state, "g1").status == "revoked" and _grant(state, "g1").revoked_at == T0 + 2


def test_a_grant_id_granted_again_keeps_its_first_scope_and_unknown_ids_change_nothing() -> None:
    chat = Chat(user="alice")
    state, _ = fold([chat.grant("g1", "granted", at=T0, layers=("episodic",))])
    state, again = fold([chat.grant("g1", "granted", at=T0 + 5, layers=("persona", "graph"))], state)
    assert again == [] and _grant(state, "g1").layers == ["episodic"]
    for action in ("confirmed", "revoked"):
        state, changes = fold([chat.grant("nope", action, at=T0 + 6)], state)  # type: ignore[arg-type]
        assert changes == []


def test_grants_do_not_move_the_owners_clock_or_touch_memory() -> None:
    chat = Chat(user="alice")
    state, _ = fold([chat.say("I have a cough", at=T0, topics=["health"])])
    clock = state.last_event_time
    state, changes = fold(
        [chat.grant("g1", "granted", at=T0 + 30 * DAY), chat.grant("g1", "confirmed", at=T0 + 31 * DAY)], state
    )
    assert state.last_event_time == clock
    assert {c.table for c in changes} == {"grants"}


def test_the_same_grant_id_of_two_owners_is_two_rows() -> None:
    alice, bob = Chat(user="alice"), Chat(user="bob")
    a, _ = fold([alice.grant("g1", "granted", at=T0)])
    b, _ = fold([bob.grant("g1", "granted", at=T0)], user="bob")
    assert set(a.tables["grants"]).isdisjoint(b.tables["grants"])


def test_replay_equals_live_and_applying_twice_changes_nothing() -> None:
    chat = Chat(user="alice")
    events = [
        chat.say("I have a cough", at=T0, topics=["health"]),
        chat.grant("g1", "granted", at=T0 + 1),
        chat.grant("g2", "granted", at=T0 + 2, grantee="shop", layers=("persona",)),
        chat.grant("g1", "confirmed", at=T0 + 3),
        chat.grant("g2", "revoked", at=T0 + 4),
    ]
    live, changes = fold(events)
    assert replay_changes(changes) == {(r.TABLE, r.id): r for r in live.rows()}
    state = OwnerMemory(live.owner_id)
    for e in events:
        state, _ = apply(state, e)
        state, again = apply(state, e)
        assert again == []
    assert state.rows() == live.rows() == OwnerMemory.from_rows(live.owner_id, live.rows()).rows()
    assert {g.grant_id: g.status for g in state.tables["grants"].values() if isinstance(g, GrantRow)} == {
        "g1": "active",
        "g2": "revoked",
    }
    assert isinstance(events[1].event, GrantChanged)
