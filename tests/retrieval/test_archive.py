"""A long-lived owner held as its newest messages, with the older ones read through the store's indexes.

Alice's memory is built with the real write path (rule extractor, the default embedder, projector) into a LanceDB
store and read by a service that holds only her newest ``HOT`` messages (``hot_messages``), and
by one that holds her whole. The tiered service must still find what only an old message says,
answer as-of questions exactly as the whole one does, follow a forget of a cold message, and
hold no more messages than its window.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from adamem.analysis import Embedder
from adamem.projections.store.base import TEXT_FIELDS
from adamem.projections.store.factory import open_store
from adamem.retrieval import SEED_DEFAULT, AsOf, Retriever
from adamem.retrieval.base import SemanticScorer, base_candidates, query_terms
from adamem.retrieval.config import CacheSettings, RetrievalConfig
from adamem.retrieval.fusion import fact_support
from adamem.retrieval.graph import PositionRelevance
from adamem.retrieval.index import TextIndex, extracted_text
from adamem.retrieval.service import _with_cold
from adamem.retrieval.snapshot import View
from adamem.retrieval.whose import whose_memory

Lines = list[dict[str, Any]]
HOT = 4
OWNER = "default:alice"


def ms(day: str) -> int:
    return int(dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp() * 1000)


def _config(hot: int) -> RetrievalConfig:
    return dataclasses.replace(SEED_DEFAULT, cache=CacheSettings(query_cache=False, hot_messages=hot))


def _comparable(answer: Any) -> dict[str, Any]:
    data: dict[str, Any] = answer.to_dict()
    data.pop("timing_ms")
    data.pop("cached", None)
    return data


def _sources(answer: Any) -> list[str]:
    """Message ids of an answer's evidence, best item first."""
    return [p.message_event_id for item in answer.items for p in item.provenance]


@pytest.fixture
def alice(build: Callable[..., Any], moving: tuple[Lines, Lines, Lines]) -> Any:
    """Alice's move (before it, the move, the conversation after): 9 messages projected into LanceDB."""
    memory = build("archive")
    memory.add(moving[0] + moving[1] + moving[2])
    return memory


@pytest.fixture
def services(alice: Any, embedder: Embedder) -> Iterator[tuple[Retriever, Retriever]]:
    """(tiered: newest ``HOT`` messages held, whole: every message held) over read-only handles of one store."""
    made = [
        Retriever(open_store(alice.settings.store_url, read_only=True), embedder, _config(hot), partitions=2)
        for hot in (HOT, 0)
    ]
    yield made[0], made[1]
    for r in made:
        r.close()


def test_a_tiered_owner_holds_its_newest_messages_and_knows_the_rest(services: tuple[Retriever, Retriever]) -> None:
    tiered, whole = services
    held, every = tiered.snapshot(OWNER), whole.snapshot(OWNER)
    newest = sorted(every.messages.values(), key=lambda m: m.seq)[-HOT:]
    assert sorted(held.messages) == sorted(m.id for m in newest)
    assert held.archive is not None and every.archive is None
    assert held.archive.split.messages == len(every.messages)
    assert held.archive.split.cold_messages == len(every.messages) - HOT
    assert held.speakers == every.speakers  # speakers of cold messages too
    assert (held.records, held.traits, held.nodes) == (every.records, every.traits, every.nodes)


def test_what_only_an_old_message_says_is_found_through_the_store(services: tuple[Retriever, Retriever]) -> None:
    tiered, whole = services
    held = tiered.snapshot(OWNER)
    old = next(m for m in whole.snapshot(OWNER).messages.values() if "Sichuan hotpot" in m.text)
    assert old.id not in held.messages  # cold
    for retriever in services:
        answer = retriever.query(OWNER, "Which spicy food do I love, Sichuan hotpot?")
        assert old.id in _sources(answer)[:3], retriever is tiered
        snap = retriever.snapshot(OWNER)
        question = "Which spicy food do I love, Sichuan hotpot?"
        scorer = SemanticScorer(View(snap), question, retriever.embed(question), SEED_DEFAULT, whose_memory("", ()))
        found = {(c.table, c.row.id): c for c in base_candidates(retriever.store, scorer, question)}
        assert ("messages", old.id) in found, retriever is tiered  # a candidate itself, not only as evidence
    assert held.node_for(old.id) == whole.snapshot(OWNER).node_of[old.id]  # it seeds graph expansion too
    cold = held.archive
    assert cold is not None and cold.reads > 0
    found = [m for m in held.messages_for(i for i in whole.snapshot(OWNER).messages) if m]
    assert len(found) == len(whole.snapshot(OWNER).messages)  # every id resolves, hot or cold


def test_as_of_answers_of_a_tiered_owner_equal_the_whole_owners(services: tuple[Retriever, Retriever]) -> None:
    tiered, whole = services
    for question in ("where do I live?", "What food do I like?", "Is work still busy?"):
        for as_of in (ms("2024-04-15"), AsOf(offset=3)):
            got, want = tiered.query(OWNER, question, as_of=as_of), whole.query(OWNER, question, as_of=as_of)
            assert _comparable(got) == _comparable(want), (question, as_of)


def test_a_forgotten_cold_message_is_never_served_again(alice: Any, services: tuple[Retriever, Retriever]) -> None:
    tiered, whole = services
    question = "Which spicy food do I love, Sichuan hotpot?"
    old = next(m for m in whole.snapshot(OWNER).messages.values() if "Sichuan hotpot" in m.text)
    assert old.id in _sources(tiered.query(OWNER, question))  # memoised by the tiered snapshot
    alice.forget("alice", old.id, ms("2024-05-20"))
    assert old.id not in _sources(tiered.query(OWNER, question))
    snap = tiered.snapshot(OWNER)
    assert snap.message(old.id) is None and snap.archive is not None
    assert snap.archive.split.messages == len(whole.snapshot(OWNER).messages)


def test_an_owner_within_the_window_is_held_whole_and_answers_alike(
    alice: Any, embedder: Embedder, services: tuple[Retriever, Retriever]
) -> None:
    _, whole = services
    wide = Retriever(open_store(alice.settings.store_url, read_only=True), embedder, _config(1000), partitions=2)
    try:
        assert wide.snapshot(OWNER).archive is None
        for question in ("where do I live?", "What food do I like?", "我住在哪里？"):
            assert _comparable(wide.query(OWNER, question)) == _comparable(whole.query(OWNER, question))
    finally:
        wide.close()


def test_cold_candidates_are_scored_like_hot_ones(services: tuple[Retriever, Retriever]) -> None:
    """A cold message's cosine is its stored vector's; its BM25 that of an index of the hot window plus it."""
    tiered, whole = services
    question = "Which spicy food do I love, Sichuan hotpot?"
    tiered.query(OWNER, question)
    held, every = tiered.snapshot(OWNER), whole.snapshot(OWNER)
    assert held.archive is not None
    q = tiered.embed(question)
    cold = [m for m in every.messages.values() if m.id not in held.messages and held.archive.get(m.id)]
    assert cold
    index = every.vector_index("messages")
    terms = query_terms(question)
    for m in cold:
        v = held.archive.vector(m.id)
        assert v is not None
        got = float(v @ q.astype(np.float32))
        assert got == pytest.approx(float(index.cosines(q)[index.position[m.id]]), abs=1e-5)
        row = held.archive.get(m.id)
        assert row is not None
        alone = TextIndex([*held.messages.values(), row], TEXT_FIELDS["messages"], extra=extracted_text)
        want = float(alone.scores(terms)[alone.position[m.id]])
        assert held.text_index("messages").score_outside(row, terms) == pytest.approx(want, rel=1e-9)


def test_support_and_evidence_of_cold_messages_are_counted_without_reading_them(
    services: tuple[Retriever, Retriever],
) -> None:
    """In the current view a record's source or a trait's evidence counts when the message exists: the tiered
    owner answers from the cold part's ids (one read of that column): the same counts as the whole owner's,
    no row read."""
    tiered, whole = services
    held, every = tiered.snapshot(OWNER), whole.snapshot(OWNER)
    assert held.archive is not None
    cold = sorted(set(every.messages) - set(held.messages))
    assert cold and held.existing_messages([*cold, "no-such-message"]) == set(cold)
    assert held.existing_messages(every.messages) == set(every.messages)
    reads = held.archive.reads
    for r in every.records.values():
        assert fact_support(r, View(held), SEED_DEFAULT) == fact_support(r, View(every), SEED_DEFAULT), r.content
    for t in every.traits.values():
        assert View(held).evidence(t) == View(every).evidence(t), t.value
    assert held.archive.reads <= reads + 1  # the id column once, if not read before
    assert not any(held.archive.get(i) for i in cold)  # no cold row was read to count them


def test_hub_relevance_of_a_tiered_owner_is_the_cosine_of_the_cold_messages_the_query_read(
    services: tuple[Retriever, Retriever],
) -> None:
    tiered, _ = services
    question = "Which spicy food do I love, Sichuan hotpot?"
    snap = tiered.snapshot(OWNER)
    scorer = SemanticScorer(View(snap), question, tiered.embed(question), SEED_DEFAULT, whose_memory("", ()))
    base_candidates(tiered.store, scorer, question)  # reads the cold messages the store's searches find
    assert scorer.cold_vectors
    relevance = _with_cold(View(snap), scorer)
    assert isinstance(relevance, PositionRelevance)
    hot = scorer.cosines("messages")
    nodes = sorted(snap.nodes)
    want = []
    for node in nodes:
        n = snap.nodes[node]
        if node in snap.message_position:
            want.append(float(hot[snap.message_position[node]]))
        elif n.node_type == "message":
            want.append(scorer.read_cosine(n.ref_id) or 0.0)
        else:
            want.append(0.0)
    assert list(relevance(nodes)) == want
    assert any(w != 0.0 for node, w in zip(nodes, want, strict=True) if node not in snap.message_position)


def test_after_its_first_question_a_tiered_owner_searches_its_cold_part_in_process(
    alice: Any, embedder: Embedder, services: tuple[Retriever, Retriever]
) -> None:
    """The first question finds cold messages through the store's indexes and begins reading the cold part's
    columns; the questions after it wait for that read and search the cold part in process (exact cosine, BM25
    over it) with no store read, and still find what only an old message says. Without room for it
    (``cold_index_bytes`` 0) every question reads the store."""
    tiered, whole = services
    every = whole.snapshot(OWNER)
    held = tiered.snapshot(OWNER)
    assert held.archive is not None and held.archive.indexed and held.archive.held() is None
    cold = sorted(set(every.messages) - set(held.messages))
    tiered.query(OWNER, "where do I live?")
    index = held.archive.held()
    assert index is not None and len(index) == len(cold) and sorted(index.positions(cold)) == cold
    tiered.query(OWNER, "What food do I like?")
    reads = held.archive.reads
    question = "Which spicy food do I love, Sichuan hotpot?"
    old = next(m for m in every.messages.values() if "Sichuan hotpot" in m.text)
    assert old.id in _sources(tiered.query(OWNER, question))[:3]
    assert held.archive.reads == reads  # searched and read in process
    q = tiered.embed(question)
    vectors = every.vector_index("messages")
    cosine = vectors.cosines(q)
    want = sorted(cold, key=lambda i: -cosine[vectors.position[i]])[:3]
    assert index.ids_of(index.nearest(q.tolist(), 3)) == want

    config = dataclasses.replace(
        _config(HOT), cache=CacheSettings(query_cache=False, hot_messages=HOT, cold_index_bytes=0)
    )
    off = Retriever(open_store(alice.settings.store_url, read_only=True), embedder, config, partitions=2)
    try:
        off.query(OWNER, "where do I live?")
        snap = off.snapshot(OWNER)
        assert snap.archive is not None and not snap.archive.indexed and snap.archive.held() is None
        reads = snap.archive.reads
        assert old.id in _sources(off.query(OWNER, question))[:3]
        assert snap.archive.reads > reads and snap.archive.held() is None
    finally:
        off.close()


def test_the_cold_parts_held_in_process_are_reported_with_the_caches(services: tuple[Retriever, Retriever]) -> None:
    """``cache_stats`` (``/metrics``): one cold part held after the first answer, its bytes, and the cold searches
    answered in process (hits) and by the store (misses) of this process."""
    tiered, _ = services

    def cold() -> tuple[str, int, int, int, int, int]:
        return next(c for c in tiered.cache_stats() if c[0] == "cold_parts")

    before = cold()
    tiered.query(OWNER, "where do I live?")
    snap = tiered.snapshot(OWNER)
    assert snap.archive is not None and snap.archive.held() is not None
    after_first = cold()
    assert after_first[3] == 1 and after_first[4] == snap.archive.held().nbytes > 0  # type: ignore[union-attr]
    assert after_first[2] == before[2] + 1 and after_first[1] == before[1]  # the first: through the store
    tiered.query(OWNER, "What food do I like?")
    assert cold()[1] == after_first[1] + 1 and cold()[2] == after_first[2]  # then in process


@pytest.mark.parametrize("context", [True, False], ids=["with-context", "own-words"])
@pytest.mark.parametrize("in_process", [True, False], ids=["held", "through-the-store"])
@pytest.mark.parametrize(
    ("owner", "asked"),
    [
        ("default:sam", ("Why did I start working out?", "Did Emma like the hotpot?", "my cat", "gym")),
        ("default:xiaolin", ("我为什么开始健身？", "姐姐喜欢那家火锅店吗？", "猫", "健身房")),
    ],
)
def test_after_its_first_answer_a_tiered_owner_scores_words_as_the_owner_held_whole(
    motivating: Any, embedder: Embedder, owner: str, asked: tuple[str, ...], in_process: bool, context: bool
) -> None:
    """After the first answer the cold part is read into the process (or, too large for it, its words are counted,
    ``ColdCounts``), and the hot window scores with the cold part's statistics beside it: the BM25 of every message,
    hot or cold, is the one the owner held whole gives it (the store's tokens of a message hold the words of its
    extraction, as the hot window's index counts them). Before, the hot window's own statistics gave other
    scores. The same with each message scored with its ``context`` (the cold part made with it) and without (made
    without it)."""
    cache = CacheSettings(query_cache=False, hot_messages=HOT, cold_index_bytes=1 << 29 if in_process else 0)
    tiered = Retriever(
        open_store(motivating.settings.store_url, read_only=True),
        embedder,
        dataclasses.replace(SEED_DEFAULT, cache=cache, context_words=context),
        partitions=2,
    )
    whole = Retriever(open_store(motivating.settings.store_url, read_only=True), embedder, _config(0), partitions=2)
    try:
        held, every = tiered.snapshot(owner), whole.snapshot(owner)
        assert held.archive is not None and len(held.messages) == HOT < len(every.messages)
        assert held.archive.indexed is in_process
        rows = {i: held.message(i) for i in every.messages}

        def scores(snap: Any, question: str, retriever: Retriever) -> dict[str, float]:
            vector = retriever.embed(question)
            scorer = SemanticScorer(View(snap), question, vector, SEED_DEFAULT, whose_memory("", ()), context=context)
            return {i: scorer.bm25_raw("messages", row) for i, row in rows.items() if row is not None}

        before = {q: scores(held, q, tiered) for q in asked}
        tiered.query(owner, asked[0])
        assert (held.archive.held() is not None) is in_process and held.archive.statistics() is not None
        assert held.archive.context is context
        matched: set[bool] = set()  # whether hot messages, cold ones, hold the questions' words
        for question in asked:
            want = scores(every, question, whole)
            got = scores(held, question, tiered)
            assert set(got) == set(want)
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), question
            matched |= {i in held.messages for i, s in want.items() if s > 0}
        assert matched == {True, False}
        assert any(before[q] != pytest.approx(scores(every, q, whole), rel=1e-9) for q in asked)
    finally:
        tiered.close()
        whole.close()


@pytest.mark.parametrize("fetch_k", [40, 2])
def test_after_its_first_answer_a_tiered_owner_answers_as_the_owner_held_whole(
    alice: Any, embedder: Embedder, fetch_k: int
) -> None:
    """Once its cold part is held in process, a tiered owner's base retrieval takes the ``fetch_k`` best of hot and
    cold messages together, by cosine and by words (every message's statistics, the question's words as cut once),
    after leaving aside what whose memory rules out; hub relevance has the cosine of every cold message: the
    candidates and answers are those of the owner held whole (scores to the last bits of float32 products)."""

    def made(hot: int) -> Retriever:
        config = dataclasses.replace(_config(hot), fetch_k=fetch_k)
        return Retriever(open_store(alice.settings.store_url, read_only=True), embedder, config, partitions=2)

    tiered, whole = made(HOT), made(0)
    try:
        tiered.query(OWNER, "where do I live?")
        held, every = tiered.snapshot(OWNER), whole.snapshot(OWNER)
        assert held.archive is not None and held.archive.held() is not None
        for question in ("Which spicy food do I love, Sichuan hotpot?", "What did I tell you about work?", "城市"):
            pools = []
            for retriever, snap in ((tiered, held), (whole, every)):
                scorer = SemanticScorer(
                    View(snap), question, retriever.embed(question), retriever.config, whose_memory(question, ())
                )
                pools.append(
                    {(c.table, c.row.id): c.semantic for c in base_candidates(retriever.store, scorer, question)}
                )
                if snap is held:
                    assert scorer.cold_cosines is not None
                    relevance = _with_cold(View(held), scorer)
                    nodes = sorted(n for n in every.nodes if every.nodes[n].node_type == "message")
                    cosines = every.vector_index("messages").cosines(scorer.q)
                    want = [cosines[every.message_position[n]] for n in nodes]
                    assert list(relevance(nodes)) == pytest.approx(want, abs=1e-6)
            assert pools[0].keys() == pools[1].keys(), question
            assert pools[0] == pytest.approx(pools[1], abs=1e-6), question
            got, want_answer = tiered.query(OWNER, question), whole.query(OWNER, question)
            assert _sources(got) == _sources(want_answer), question
            assert [i.score for i in got.items] == pytest.approx([i.score for i in want_answer.items], abs=1e-6)
    finally:
        tiered.close()
        whole.close()
