"""The projector: batches of many owners fold exactly as owner-by-owner folds, whatever the cache size."""

from __future__ import annotations

from adamem.projections.folds.apply import Positioned
from adamem.projections.folds.rows import Row
from adamem.projections.folds.testing import fold, scenario
from adamem.projections.projector import Projector
from adamem.projections.store.memory import InMemoryStore

TOPIC = "adamem.analyses"


def interleaved(users: list[str]) -> list[Positioned]:
    """The scenario of every user, one event of each in turn, as one partition's offsets."""
    streams = [scenario(u) for u in users]
    mixed = [s[i] for i in range(max(map(len, streams))) for s in streams if i < len(s)]
    return [Positioned(p.event, TOPIC, 0, offset) for offset, p in enumerate(mixed)]


def stored(store: InMemoryStore, users: list[str]) -> list[Row]:
    return [r for u in users for r in store.load_owner(f"default:{u}")]


def test_a_batch_of_more_owners_than_the_cache_holds_folds_like_each_owner_alone() -> None:
    users = ["alice", "bob", "carol"]
    events = interleaved(users)
    store = InMemoryStore()
    store.bind(1)
    projector = Projector(store, cache_size=1)
    result = projector.apply_batch(0, TOPIC, events)
    assert result.applied == len(events)
    alone = [r for u in users for r in fold([p for p in events if p.event.user_id == u], user=u)[0].rows()]
    assert stored(store, users) == alone
    assert store.checkpoint(0) == {TOPIC: len(events)}


def test_owners_evicted_between_batches_are_reloaded_from_the_store() -> None:
    users = ["alice", "bob"]
    events = interleaved(users)
    whole, parts = InMemoryStore(), InMemoryStore()
    whole.bind(1)
    parts.bind(1)
    Projector(whole).apply_batch(0, TOPIC, events)
    small = Projector(parts, cache_size=1)
    for start in range(0, len(events), 7):
        small.apply_batch(0, TOPIC, events[start : start + 7])
    assert stored(parts, users) == stored(whole, users)
