"""Caches: a fresh answer after new events (never a stale one), the semantic query cache and its guard, LFU."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from adamem.analysis import Embedder
from adamem.retrieval import SEED_DEFAULT, CacheSettings, Retriever
from adamem.retrieval.cache import LFUCache, QueryCache

Lines = list[dict[str, Any]]


def test_a_contradicting_fact_wins_as_soon_as_it_is_projected(
    build: Callable[..., Any], embedder: Embedder, moving: tuple[Lines, Lines, Lines]
) -> None:
    before, move, after = moving
    memory = build("move")
    memory.add(before)
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    first = retriever.query("default:alice", "where do I live?")
    assert "Beijing" in first.items[0].content and not first.cached
    assert retriever.query("default:alice", "Where do I live?").cached  # same words, cosine ≥ 0.92: reused
    memory.add(move)  # in working memory, not consolidated yet
    moved = retriever.query("default:alice", "where do I live?")
    assert not moved.cached
    assert moved.items[0].content == "I just moved to Shenzhen for a new job."
    assert all("Beijing" not in i.content for i in moved.items[:3])  # the old record waits to be superseded
    memory.add(after)  # a new session consolidates the move: the Beijing record is superseded
    later = retriever.query("default:alice", "where do I live?")
    assert not later.cached and "Shenzhen" in later.items[0].content
    assert [i.content for i in later.items if "lives in" in i.content] in ([], ["Alice lives in Shenzhen"])
    retriever.close()


def test_the_query_cache_guard_refuses_similar_questions_with_other_words(
    build: Callable[..., Any], embedder: Embedder, moving: tuple[Lines, Lines, Lines]
) -> None:
    memory = build("guard")
    memory.add(moving[0])
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    retriever.query("default:alice", "where do I live?")
    a, b = np.asarray(embedder.embed_query(["where do I live?", "where does my sister live?"]))
    assert float(a @ b) >= 0.9  # the embedder finds them nearly the same ...
    assert not retriever.query("default:alice", "where does my sister live?").cached  # ... the guard does not
    assert not retriever.query("default:alice", "why do I live in Beijing?").cached  # another route
    assert retriever.query("default:alice", "where do I live").cached
    retriever.close()


def test_lfu_evicts_the_least_frequently_used_then_the_oldest() -> None:
    cache: LFUCache[str, int] = LFUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a: 2 uses, b: 1
    cache.put("c", 3)
    assert (cache.get("b"), cache.get("a"), cache.get("c")) == (None, 1, 3)
    cache.put("d", 4)  # a: 3 uses, c: 2 → c goes
    assert (cache.get("c"), cache.get("a"), cache.get("d")) == (None, 1, 4)


def test_query_cache_is_per_owner_and_dropped_when_the_version_moves() -> None:
    cache: QueryCache[str] = QueryCache(8, 0.92)
    v = np.array([1.0, 0.0])
    near = np.array([0.95, np.sqrt(1 - 0.95**2)])
    far = np.array([0.9, np.sqrt(1 - 0.81)])
    cache.put("u", 1, v, "g", "answer")
    assert cache.get("u", 1, near, "g") == "answer"
    assert cache.get("u", 1, far, "g") is None  # cosine 0.90 < 0.92
    assert cache.get("u", 1, v, "other guard") is None
    assert cache.get("someone else", 1, v, "g") is None
    assert cache.get("u", 2, v, "g") is None  # the owner's rows changed
    assert cache.get("u", 1, v, "g") is None and len(cache) == 0  # and the old entries are gone


def test_lfu_bounded_by_weight_keeps_what_is_used_and_never_evicts_what_it_just_put() -> None:
    evicted: list[str] = []
    cache: LFUCache[str, int] = LFUCache(100, budget=10, weigh=lambda v: v, on_evict=lambda k, _: evicted.append(k))
    for key, weight in (("a", 4), ("b", 4)):
        cache.put(key, weight)
    assert cache.get("a") == 4 and cache.weight == 8
    cache.put("c", 4)  # over budget: b (1 use) goes, a (2 uses) stays
    assert (cache.get("b"), cache.get("a"), cache.get("c"), evicted) == (None, 4, 4, ["b"])
    cache.put("huge", 50)  # heavier than the budget: kept alone
    assert [k for k, _ in cache.items()] == ["huge"] and cache.weight == 50


def test_answers_are_bounded_per_owner_and_in_total() -> None:
    cache: QueryCache[str] = QueryCache(2, 0.92, budget=3, weigh=lambda _: 1)
    for i in range(3):
        cache.put("u", 1, np.array([1.0, 0.0]), f"g{i}", f"u{i}")
    assert [cache.get("u", 1, np.array([1.0, 0.0]), f"g{i}") for i in range(3)] == [None, "u1", "u2"]
    cache.put("w", 1, np.array([1.0, 0.0]), "g", "w")
    cache.put("x", 1, np.array([1.0, 0.0]), "g", "x")  # over the total: the least used entry goes
    assert len(cache) == 3 and cache.get("x", 1, np.array([1.0, 0.0]), "g") == "x"
    assert cache.get("w", 1, np.array([1.0, 0.0]), "g") is None
    assert cache.get("u", 1, np.array([1.0, 0.0]), "g1") == "u1"  # used twice: kept


def test_answers_outlive_an_evicted_snapshot_until_the_rows_change(
    build: Callable[..., Any], embedder: Embedder, moving: tuple[Lines, Lines, Lines]
) -> None:
    memory = build("evicted")
    memory.add(moving[0])
    nothing_kept = dataclasses.replace(SEED_DEFAULT, cache=CacheSettings(hot_owners=0))
    retriever = Retriever(memory.store, embedder, nothing_kept, partitions=memory.partitions)
    retriever.query("default:alice", "where do I live?")
    assert not retriever.query("default:alice", "What food do I like?").cached  # a miss: every row read again
    assert retriever.query("default:alice", "where do I live?").cached  # the same token, the same rows: still valid
    memory.add(moving[1])
    moved = retriever.query("default:alice", "where do I live?")
    assert not moved.cached and moved.items[0].content == "I just moved to Shenzhen for a new job."
    retriever.close()
