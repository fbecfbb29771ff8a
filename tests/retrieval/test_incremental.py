"""A hot owner kept up to date from the store's changes answers exactly like one loaded afresh.

The service (a read-only store, as in production) holds Alice's snapshot with its indexes and
graph made; then new messages are projected, a later session consolidates (records superseded),
a message is forgotten (rows deleted), and a rebuilt view is switched to. After each, every
answer and every index of the kept snapshot must equal those of a fresh load.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from adamem.analysis import Embedder
from adamem.partitioning import partition_for
from adamem.projections.store import MemoryStore
from adamem.projections.store.factory import open_store
from adamem.projections.store.lance import switch_view
from adamem.retrieval import SEED_DEFAULT, AsOf, Retriever
from adamem.retrieval.config import CacheSettings
from adamem.retrieval.graph import MemoryGraph
from adamem.retrieval.snapshot import SEARCHED, OwnerSnapshot, View
from adamem.streams.factory import open_log
from adamem.streams.replay import rebuild_view
from adamem.text import tokenize

Lines = list[dict[str, Any]]
QUESTIONS = [
    "where do I live?",
    "What food do I like?",
    "why did I move to Shenzhen?",
    "what did I do last month?",
    "Is work still busy?",
    "我住在哪里？",
]
FRESH = dataclasses.replace(SEED_DEFAULT, cache=CacheSettings(hot_owners=0, query_cache=False))


def ms(day: str) -> int:
    return int(dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp() * 1000)


def _comparable(answer: Any) -> dict[str, Any]:
    data: dict[str, Any] = answer.to_dict()
    data.pop("timing_ms")
    data.pop("cached", None)
    return data


def _same_as_fresh(live: Retriever, url: str, embedder: Embedder, partitions: int) -> OwnerSnapshot:
    """Every answer and index of ``live``'s Alice equals a fresh load's; the kept snapshot."""
    fresh = Retriever(open_store(url, read_only=True), embedder, FRESH, partitions=partitions)
    try:
        for question in QUESTIONS:
            for as_of in (None, ms("2024-04-15"), AsOf(offset=3)):
                got, want = (
                    live.query("default:alice", question, as_of=as_of),
                    fresh.query("default:alice", question, as_of=as_of),
                )
                assert _comparable(got) == _comparable(want), (question, as_of)
        kept, loaded = live.snapshot("default:alice"), fresh.snapshot("default:alice")
        _same_snapshot(kept, loaded)
    finally:
        fresh.close()
    return kept


def _same_snapshot(kept: OwnerSnapshot, loaded: OwnerSnapshot) -> None:
    assert (kept.owner, kept.messages, kept.records, kept.traits) == (
        loaded.owner,
        loaded.messages,
        loaded.records,
        loaded.traits,
    )
    assert (kept.nodes, kept.edges, kept.by_seq) == (loaded.nodes, loaded.edges, loaded.by_seq)
    assert (kept.node_of, kept.pending, kept.message_position) == (
        loaded.node_of,
        loaded.pending,
        loaded.message_position,
    )
    terms = sorted({t for q in QUESTIONS for t in tokenize(q)} | {"shenzhen", "beijing", "spicy", "work"})
    for table in SEARCHED:
        a, b = kept.vector_index(table), loaded.vector_index(table)
        assert a.ids == b.ids and np.array_equal(a.matrix, b.matrix), table
        for context in (False, True):  # the messages each by its words, and with the words of the one before it
            a_text, b_text = kept.text_index(table, context=context), loaded.text_index(table, context=context)
            assert a_text.ids == b_text.ids
            for term in terms:  # bit for bit, term by term
                assert np.array_equal(a_text.scores([term]), b_text.scores([term])), (term, context)
    arcs = {}
    for snap in (kept, loaded):
        graph = MemoryGraph.over(snap.nodes, snap.edges_at, SEED_DEFAULT, View(snap).node)
        arcs[id(snap)] = {n: graph.arcs(n) for n in sorted(snap.nodes) if n in graph}
    assert arcs[id(kept)] == arcs[id(loaded)]


@pytest.fixture
def served(build: Callable[..., Any], embedder: Embedder, moving: tuple[Lines, Lines, Lines]) -> Iterator[Any]:
    """Alice before her move, and a service over a read-only store whose Alice is hot (indexes and graph made)."""
    memory = build("incremental")
    memory.add(moving[0])
    live = Retriever(open_store(memory.settings.store_url, read_only=True), embedder, partitions=memory.partitions)
    for question in QUESTIONS:
        live.query("default:alice", question)
    yield memory, live
    live.close()


def test_new_consolidated_and_forgotten_rows_update_the_hot_owner_exactly(
    served: Any, embedder: Embedder, moving: tuple[Lines, Lines, Lines], loads: Callable[[MemoryStore], list[str]]
) -> None:
    memory, live = served
    _, move, after = moving
    url, partitions = memory.settings.store_url, memory.partitions
    reloaded = loads(live.store)
    before = live.snapshot("default:alice")

    memory.add(move)  # new messages, in working memory
    moved = _same_as_fresh(live, url, embedder, partitions)
    assert moved is not before and len(moved.messages) == len(before.messages) + len(move)

    memory.add(after)  # a new session consolidates the move: the Beijing record is superseded
    consolidated = _same_as_fresh(live, url, embedder, partitions)
    assert any(r.status == "superseded" for r in consolidated.records.values())

    forgotten = next(m for m in consolidated.messages.values() if m.text.startswith("I love spicy food"))
    memory.forget("alice", forgotten.id, ms("2024-05-20"))
    after_forget = _same_as_fresh(live, url, embedder, partitions)
    assert forgotten.id not in after_forget.messages and len(after_forget.messages) < len(consolidated.messages)

    assert reloaded == []  # every change came from the store's change log: Alice was never loaded again


def test_a_commit_for_another_owner_of_the_shard_keeps_the_hot_owner_and_its_answers(
    served: Any, loads: Callable[[MemoryStore], list[str]]
) -> None:
    memory, live = served
    reloaded = loads(live.store)
    before, token = live.snapshot("default:alice"), live.token("default:alice")
    shard = partition_for("alice", memory.partitions)
    neighbour = next(u for u in (f"user{i}" for i in range(100)) if partition_for(u, memory.partitions) == shard)
    memory.add(
        [
            {"user_id": neighbour, "conversation_id": "n", "message_id": f"n{i}", "speaker": "Bo", "role": "user",
             "text": text, "occurred_at": f"2024-03-0{i + 1}T09:00:00Z"}
            for i, text in enumerate(("I live in Paris.", "I like cheese."))
        ]
    )  # fmt: skip
    assert live.token("default:alice") != token  # the shard moved on ...
    assert live.query("default:alice", QUESTIONS[0]).cached  # ... but nothing of Alice changed: her answers still hold
    assert live.snapshot("default:alice") is before and reloaded == []


def test_a_view_switch_serves_the_rebuilt_view(
    served: Any, embedder: Embedder, moving: tuple[Lines, Lines, Lines], loads: Callable[[MemoryStore], list[str]]
) -> None:
    memory, live = served
    memory.add(moving[1] + moving[2])
    now = live.query("default:alice", "where do I live?")
    assert "Shenzhen" in now.items[0].content
    reloaded = loads(live.store)

    async def rebuild() -> None:
        log = open_log(memory.settings.log_url, memory.settings)
        await log.start()
        try:  # a view of Alice before her move (time travel: not switched to by itself)
            await rebuild_view(
                log, memory.settings.store_url, memory.settings, view="april", until_time=ms("2024-04-30")
            )
        finally:
            await log.stop()

    asyncio.run(rebuild())
    assert live.query("default:alice", "where do I live?").cached  # built beside the active view: nothing changed
    switch_view(memory.settings.store_url, "april")
    switched = live.query("default:alice", "where do I live?")
    assert not switched.cached and "Beijing" in switched.items[0].content
    _same_as_fresh(live, memory.settings.store_url, embedder, memory.partitions)
    assert reloaded == ["default:alice"]  # another view: loaded once, afresh


def test_each_text_index_is_made_on_first_need_and_a_carried_snapshot_makes_the_rest(
    build: Callable[..., Any], embedder: Embedder, moving: tuple[Lines, Lines, Lines]
) -> None:
    """A "why" question scores each message by its own words: the messages' index with their ``context`` is not made
    (the stored words stay until it is); a snapshot carried over new rows makes it from its rows, equal to a fresh
    load's."""
    memory = build("incremental-lazy")
    memory.add(moving[0])
    url, partitions = memory.settings.store_url, memory.partitions
    live = Retriever(open_store(url, read_only=True), embedder, partitions=partitions)
    try:
        live.query("default:alice", "why did I move to Beijing?")
        first = live.snapshot("default:alice")
        assert "messages" in first._text_indexes and "messages+context" not in first._text_indexes
        assert "messages" in first._tokens  # kept for the index still to make
        memory.add(moving[1])
        _same_as_fresh(live, url, embedder, partitions)
        assert "messages+context" not in first._text_indexes  # made by the carried snapshot, not by its predecessor
        fresh = Retriever(open_store(url, read_only=True), embedder, partitions=partitions)
        try:
            fresh.query("default:alice", "where do I live?")
            loaded = fresh.snapshot("default:alice")
            assert {"messages", "messages+context"} <= loaded._text_indexes.keys()
            assert "messages" not in loaded._tokens  # let go once both indexes of the messages are made
        finally:
            fresh.close()
    finally:
        live.close()
