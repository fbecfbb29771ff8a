"""The change feed of the folds: kinds read from the fold's own state, deterministic events, increments only."""

from __future__ import annotations

from collections import Counter

from adamem.feed import MemoryChanged
from adamem.projections.feed import PART_SIZE, change_events
from adamem.projections.folds.apply import Positioned, apply
from adamem.projections.folds.state import OwnerMemory
from adamem.projections.folds.testing import DAY, HOUR, T0, Chat, fact, scenario
from adamem.projections.projector import Projector
from adamem.projections.store.memory import InMemoryStore
from adamem.schemas.serde import decode_as, encode_event
from tests.projections.test_projector import TOPIC, interleaved


def _feed(events: list[Positioned], user: str = "alice", view: str = "") -> list[MemoryChanged]:
    state = OwnerMemory(f"default:{user}")
    out: list[MemoryChanged] = []
    for p in events:
        _, delta = apply(state, p)
        out.extend(change_events(p, delta, view))
    return out


def _kinds(feed: list[MemoryChanged]) -> Counter[tuple[str, str]]:
    return Counter((c.layer, c.kind) for e in feed for c in e.changes)


def test_moving_city_is_an_added_record_and_a_superseded_one() -> None:
    chat = Chat()
    first = chat.say("I live in Shanghai.", at=T0, conv="s1", facts=[fact("lives in Shanghai", 0.9, key="lives_in")])
    moved = chat.say(
        "I moved to Beijing.", at=T0 + DAY, conv="s2", facts=[fact("lives in Beijing", 0.9, key="lives_in")]
    )
    later = chat.say("(later)", at=T0 + 2 * DAY, conv="s3")  # a new session consolidates "moved"
    feed = _feed([first, moved, later])
    assert [e.source_offset for e in feed] == [0, 1, 2]
    assert {(c.layer, c.kind) for c in feed[0].changes} == {("messages", "added"), ("graph_nodes", "added")}
    episodic = [(c.kind, c.fields) for c in feed[2].changes if c.layer == "episodic"]
    kinds = [k for k, _ in episodic]
    assert kinds.count("added") == 1 and kinds.count("superseded") == 1
    superseded = next(f for k, f in episodic if k == "superseded")
    assert {"status", "valid_to", "superseded_by"} <= set(superseded)
    # the superseded record's graph node went inactive: that is history too
    assert ("graph_nodes", "superseded") in _kinds(feed[2:])
    # working memory: "moved" was consolidated, an update of its message row naming the column
    updated = [c for c in feed[2].changes if c.layer == "messages" and c.kind == "updated"]
    assert updated and all("consolidated" in c.fields for c in updated)


def test_the_scenario_has_every_kind_and_no_owner_bookkeeping() -> None:
    feed = _feed(scenario())
    kinds = _kinds(feed)
    assert {k for _, k in kinds} == {"added", "updated", "superseded", "removed"}
    assert {layer for layer, _ in kinds} == {"messages", "episodic", "persona", "graph_nodes", "graph_edges"}
    assert ("episodic", "removed") in kinds  # the item forget
    # ids are deterministic and unique: the same log gives the same events, byte for byte
    again = _feed(scenario())
    assert [encode_event(e) for e in again] == [encode_event(e) for e in feed]
    assert len({e.event_id for e in feed}) == len(feed)
    assert all(decode_as(encode_event(e), MemoryChanged) == e for e in feed)


def test_the_view_is_the_only_difference_between_two_views_feeds() -> None:
    a, b = _feed(scenario(), view="r1"), _feed(scenario(), view="r2")
    assert [e.event_id for e in a] == [e.event_id for e in b]
    assert [e.view for e in a] == ["r1"] * len(a) and a != b
    assert [dict(e.to_record(), view="") for e in a] == [dict(e.to_record(), view="") for e in b]


def test_folding_the_same_events_again_changes_nothing_and_reports_nothing() -> None:
    events = scenario()[:30]
    state = OwnerMemory("default:alice")
    for p in events:
        apply(state, p)
    for p in events:  # redelivered
        _, delta = apply(state, p)
        assert change_events(p, delta) == []


def test_a_restarted_projector_reads_before_from_the_store_and_reports_the_same_feed() -> None:
    users = ["alice", "bob"]
    events = interleaved(users)
    whole = InMemoryStore()
    whole.bind(1)
    one = Projector(whole).apply_batch(0, TOPIC, events)
    parts = InMemoryStore()
    parts.bind(1)
    pieces: list[MemoryChanged] = []
    for start in range(0, len(events), 7):  # a new projector per batch: every state reloaded from rows
        pieces.extend(Projector(parts, cache_size=1).apply_batch(0, TOPIC, events[start : start + 7]).feed)
    assert pieces == list(one.feed)
    assert one.reach == len(events)
    assert whole.view == "main"  # the projector names the view its store reads, as on LanceDB
    by_user = {u: _feed([p for p in events if p.event.user_id == u], user=u, view=whole.view) for u in users}
    assert sorted(one.feed, key=lambda e: e.event_id) == sorted(
        (e for f in by_user.values() for e in f), key=lambda e: e.event_id
    )
    # applying the batch again is skipped below the checkpoint: no feed
    assert Projector(whole).apply_batch(0, TOPIC, events).feed == ()


def test_a_projector_without_feed_reports_nothing() -> None:
    store = InMemoryStore()
    store.bind(1)
    assert Projector(store, feed=False).apply_batch(0, TOPIC, interleaved(["alice"])).feed == ()


def test_forgetting_a_whole_owner_is_split_into_parts() -> None:
    chat = Chat()
    events = [
        chat.say(f"message {i} about work", at=T0 + i * HOUR, conv=f"s{i // 10}", topics=["work"]) for i in range(200)
    ]
    events.append(chat.forget("user", None, at=T0 + 300 * HOUR))
    feed = _feed(events)
    forget = [e for e in feed if e.source_offset == events[-1].offset]
    removed = sum(len(e.changes) for e in forget)
    assert removed > PART_SIZE and [e.part for e in forget] == list(range(len(forget)))
    assert all(len(e.changes) <= PART_SIZE for e in forget)
    assert {c.kind for e in forget for c in e.changes} == {"removed"}
    assert len({e.event_id for e in forget}) == len(forget)
