"""Caches: a fresh answer after new events (never a stale one), the semantic query cache and its guard, LFU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from adamem.analysis.e5 import E5Embedder
from retrieval import Retriever
from retrieval.cache import LFUCache, QueryCache

Lines = list[dict[str, Any]]


def test_a_contradicting_fact_wins_as_soon_as_it_is_projected(
    build: Callable[..., Any], embedder: E5Embedder, moving: tuple[Lines, Lines, Lines]
) -> None:
    before, move, after = moving
    memory = build("move")
    memory.add(before)
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    first = retriever.query("alice", "where do I live?")
    assert "Beijing" in first.items[0].content and not first.cached
    assert retriever.query("alice", "Where do I live?").cached  # same words, cosine ≥ 0.92: reused
    memory.add(move)  # in working memory, not consolidated yet
    moved = retriever.query("alice", "where do I live?")
    assert not moved.cached
    assert moved.items[0].content == "I just moved to Shenzhen for a new job."
    assert all("Beijing" not in i.content for i in moved.items[:3])  # the old record waits to be superseded
    memory.add(after)  # a new session consolidates the move: the Beijing record is superseded
    later = retriever.query("alice", "where do I live?")
    assert not later.cached and "Shenzhen" in later.items[0].content
    assert [i.content for i in later.items if "lives in" in i.content] in ([], ["Alice lives in Shenzhen"])
    retriever.close()


def test_the_query_cache_guard_refuses_similar_questions_with_other_words(
    build: Callable[..., Any], embedder: E5Embedder, moving: tuple[Lines, Lines, Lines]
) -> None:
    memory = build("guard")
    memory.add(moving[0])
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    retriever.query("alice", "where do I live?")
    a, b = np.asarray(embedder.embed_query(["where do I live?", "where does my sister live?"]))
    assert float(a @ b) >= 0.9  # e5 finds them nearly the same ...
    assert not retriever.query("alice", "where does my sister live?").cached  # ... the guard does not
    assert not retriever.query("alice", "why do I live in Beijing?").cached  # another route
    assert retriever.query("alice", "where do I live").cached
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


def test_query_cache_is_per_owner_and_dropped_when_the_token_moves() -> None:
    cache: QueryCache[str] = QueryCache(8, 0.92)
    v = np.array([1.0, 0.0])
    near = np.array([0.95, np.sqrt(1 - 0.95**2)])
    far = np.array([0.9, np.sqrt(1 - 0.81)])
    token = ("", (("t", 1),))
    cache.put("u", token, v, "g", "answer")
    assert cache.get("u", token, near, "g") == "answer"
    assert cache.get("u", token, far, "g") is None  # cosine 0.90 < 0.92
    assert cache.get("u", token, v, "other guard") is None
    assert cache.get("someone else", token, v, "g") is None
    assert cache.get("u", ("", (("t", 2),)), v, "g") is None  # projections changed
    assert cache.get("u", token, v, "g") is None  # and the old entries are gone
