"""The Retriever's API around a query: unknown owners, whose-memory restriction, persona first, working memory."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from adamem.analysis import Embedder
from adamem.errors import AdaMemError
from adamem.retrieval import SEED_DEFAULT, AsOf, CacheSettings, Layer, Retriever, Route, Subject, UnknownOwner, service
from adamem.retrieval.route import route_query
from adamem.retrieval.service import parallel_expansion


@pytest.fixture
def retriever(motivating: Any, embedder: Embedder) -> Any:
    r = Retriever(motivating.store, embedder, partitions=motivating.partitions)
    yield r
    r.close()


def test_an_unknown_owner_is_a_clear_error(retriever: Retriever) -> None:
    with pytest.raises(
        UnknownOwner,
        match=r"no memory for user 'nobody' of tenant 'default' in .*; "
        r"known owners \(tenant:user_id\): default:sam, default:xiaolin",
    ) as err:
        retriever.query("default:nobody", "why did I start working out?")
    assert isinstance(err.value, AdaMemError) and err.value.user_id == "nobody"


def test_an_explicit_reference_restricts_to_that_side(retriever: Retriever) -> None:
    answer = retriever.query("default:sam", "What did you say about my plan?")
    assert (answer.whose.subject, answer.whose.restrict) == (Subject.ASSISTANT, True)
    assert answer.items and {i.role for i in answer.items} == {"assistant"}
    mine = retriever.query("default:xiaolin", "我说过我的猫怎么了？")
    assert (mine.whose.subject, mine.whose.restrict) == (Subject.USER, True)
    assert {i.role for i in mine.items} == {"user"}


def test_an_ambiguous_question_draws_from_both_sides(retriever: Retriever) -> None:
    answer = retriever.query("default:sam", "What about the hotpot place?", top_k=6)
    assert answer.whose.subject is Subject.AMBIGUOUS
    roles = [i.role for i in answer.items]
    assert roles.count("user") == 3 and roles.count("assistant") == 3


def test_attribute_questions_put_persona_traits_first(build: Any, embedder: Embedder, moving: Any) -> None:
    memory = build("persona")
    memory.add(moving[0])
    r = Retriever(memory.store, embedder, partitions=memory.partitions)
    for question in ("What food do I like?", "我喜欢吃什么？"):
        answer = r.query("default:alice", question)
        assert answer.route.route is Route.PERSONA
        first = answer.items[0]
        assert (first.layer, first.kind) == (Layer.PERSONA, "preference")
        assert first.content in ("likes spicy food", "likes sichuan hotpot")
        assert [p.message_id for p in first.provenance] == ["alice-2024-03-04-3"]
    r.close()


def test_working_memory_is_served_oldest_first(retriever: Retriever, motivating: Any) -> None:
    working = retriever.working_memory("default:sam")
    assert 0 < len(working) <= 20
    assert [m.working_seq for m in working] == sorted(m.working_seq for m in working)
    assert working[-1].text == "I'm thinking about adopting a second cat."
    assert retriever.working_memory("default:sam") is working  # pinned in the hot cache until the token moves


def test_the_async_wrapper_gives_the_same_answer(retriever: Retriever) -> None:
    sync = retriever.query("default:xiaolin", "我为什么开始健身？")
    answer = asyncio.run(retriever.aquery("default:xiaolin", "我为什么开始健身？"))
    assert [i.id for i in answer.items] == [i.id for i in sync.items] and answer.cached


def test_questions_are_embedded_by_the_active_generations_embedder(build: Any, embedder: Embedder, moving: Any) -> None:
    """After a switch to a reanalysis with another embedder, questions must be embedded like its rows."""
    memory = build("generations")
    memory.add(moving[0])
    memory.store.record_generation({"name": "g1", "embedder": "e5"})
    used: list[str] = []

    class Named:
        def __init__(self, name: str) -> None:
            self.name, self.dim = name, embedder.dim

        def embed(self, texts: Any) -> list[list[float]]:
            return embedder.embed(texts)

        def embed_query(self, texts: Any) -> list[list[float]]:
            used.append(self.name)
            return embedder.embed_query(texts)

    made: list[str] = []

    def embedder_for(record: dict[str, str]) -> Named:
        made.append(record["embedder"])
        return Named(record["embedder"])

    r = Retriever(memory.store, Named("e5"), partitions=memory.partitions, embedder_for=embedder_for)
    try:
        r.query("default:alice", "What food do I like?")
        memory.store.record_generation({"name": "g2", "embedder": "other"})
        r.query("default:alice", "Where do I live?")
        memory.store.record_generation({"name": "g1", "embedder": "e5"})
        r.query("default:alice", "Where did I move?")
    finally:
        r.close()
    assert used == ["e5", "other", "e5"]
    assert made == ["other"]  # each embedder is made once


def test_seeds_expand_in_threads_only_without_the_gil() -> None:
    four, one = SEED_DEFAULT, dataclasses.replace(SEED_DEFAULT, max_parallel_seeds=1)
    assert four.max_parallel_seeds == 4  # the seed's limit stays; the interpreter decides whether threads help
    assert parallel_expansion(four, gil=False) and not parallel_expansion(one, gil=False)
    assert not parallel_expansion(four, gil=True)


def test_expanding_seeds_in_the_querys_thread_gives_the_same_answers(
    motivating: Any, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    inline = dataclasses.replace(SEED_DEFAULT, max_parallel_seeds=1, cache=CacheSettings(query_cache=False))
    threads = dataclasses.replace(inline, max_parallel_seeds=4)
    # as a free-threaded interpreter would: 4 seeds in threads
    monkeypatch.setattr(service, "parallel_expansion", lambda config: config.max_parallel_seeds > 1)
    a = Retriever(motivating.store, embedder, inline, partitions=motivating.partitions)
    b = Retriever(motivating.store, embedder, threads, partitions=motivating.partitions)
    assert a._executor is None and b._executor is not None
    for user, question in (("default:sam", "why did I start working out?"), ("default:xiaolin", "我为什么开始健身？")):
        left, right = a.query(user, question).to_dict(), b.query(user, question).to_dict()
        assert left["items"] and left["items"] == right["items"]
    a.close()
    b.close()


def test_an_as_of_without_time_or_offset_answers_as_now(motivating: Any, embedder: Embedder) -> None:
    no_hot_owners = dataclasses.replace(SEED_DEFAULT, cache=CacheSettings(hot_owners=0))  # facts only, between queries
    r = Retriever(motivating.store, embedder, no_hot_owners, partitions=motivating.partitions)
    now = r.query("default:sam", "where is my office?")
    empty = r.query("default:sam", "where is my office?", as_of=AsOf())
    assert empty.items and [i.id for i in empty.items] == [i.id for i in now.items]
    assert empty.reference_time == now.reference_time
    r.close()


def _line(n: int, who: str, text: str, conv: str, at: str) -> dict[str, Any]:
    return {
        "user_id": "dana",
        "conversation_id": conv,
        "message_id": f"{conv}-{n}",
        "speaker": "Dana" if who == "u" else "Lee",
        "role": "user" if who == "u" else "other",
        "text": text,
        "occurred_at": at,
    }


def _ask(memory: Any, embedder: Embedder, question: str, **changes: Any) -> Any:
    """Dana's answer (top 20, no answer cache) under the default config with ``changes``."""
    cfg = dataclasses.replace(SEED_DEFAULT, cache=CacheSettings(query_cache=False), **changes)
    r = Retriever(memory.store, embedder, cfg, partitions=memory.partitions)
    try:
        return r.query("default:dana", question, top_k=20)
    finally:
        r.close()


def test_dialogue_context_lifts_the_turn_next_to_a_seed_in_its_session_only(build: Any, embedder: Embedder) -> None:
    """The reply shares no word with the question; the turn before it does. Off: the reply keeps its own score. (Each
    message scored by its own words only: with the words of the turn before it, the reply is found by them.)"""
    memory = build("dialogue")
    memory.add(
        [
            _line(1, "u", "The dishwasher broke again this morning.", "d1", "2024-05-01T19:00:00Z"),
            _line(2, "a", "How was your sister's visit last weekend?", "d1", "2024-05-01T19:01:00Z"),
            _line(3, "u", "We kayaked across the lake at sunrise, and she loved it.", "d1", "2024-05-01T19:02:00Z"),
            _line(1, "u", "I booked a dentist appointment for Tuesday.", "d2", "2024-05-20T19:00:00Z"),
            _line(2, "a", "Good luck at the dentist.", "d2", "2024-05-20T19:01:00Z"),
        ]
    )
    question = "How did the sister's visit go?"

    def semantics(share: float) -> dict[str, float]:
        answer = _ask(memory, embedder, question, dialogue_context=share, dedupe_evidence=False, context_words=False)
        return {i.provenance[0].message_id: i.breakdown.semantic for i in answer.items if i.kind == "message"}

    off, on = semantics(0.0), semantics(0.7)
    assert max(off, key=lambda m: off[m]) == "d1-2"  # the turn that shares the question's words is the seed
    assert off["d1-3"] < 0.7 * off["d1-2"] <= on["d1-3"]  # its reply, the next turn, is lifted
    assert on["d1-1"] >= 0.7 * on["d1-2"]  # and so is the turn before it
    for mid in ("d2-1", "d2-2"):  # another session: not a neighbour of the seed, not lifted
        assert on.get(mid) == off.get(mid)


def test_dialogue_context_reaches_dialogue_turns_away_compounding_and_broad_questions_use_their_own_share(
    build: Any, embedder: Embedder
) -> None:
    """Two turns away (the same speaker going on) a turn gets share², three away nothing; a question asking for a
    set is lifted with ``narrow_dialogue_context``. (Each message scored by its own words only.)"""
    memory = build("dialogue-turns")
    memory.add(
        [
            _line(1, "u", "The printer jammed twice before lunch.", "d1", "2024-05-01T19:00:00Z"),
            _line(2, "u", "Our team renamed the quarterly report.", "d1", "2024-05-01T19:01:00Z"),
            _line(3, "a", "Which hiking trails did you and your sister try?", "d1", "2024-05-01T19:02:00Z"),
            _line(4, "u", "Oh wow, good question!", "d1", "2024-05-01T19:03:00Z"),
            _line(5, "u", "The ridge loop, then the waterfall path; she had the map.", "d1", "2024-05-01T19:04:00Z"),
            _line(6, "u", "Anyway the kettle is whistling.", "d1", "2024-05-01T19:05:00Z"),
        ]
    )

    def semantics(question: str, **changes: Any) -> dict[str, float]:
        answer = _ask(memory, embedder, question, dedupe_evidence=False, context_words=False, **changes)
        return {i.provenance[0].message_id: i.breakdown.semantic for i in answer.items if i.kind == "message"}

    focused = "How did the hike with the sister go?"
    off = semantics(focused, dialogue_turns=0)
    assert max(off, key=lambda m: off[m]) == "d1-3"  # the turn sharing the question's words is the seed
    seed = off["d1-3"]
    one, two = semantics(focused, dialogue_turns=1), semantics(focused, dialogue_turns=2, dialogue_context=0.9)
    assert off["d1-5"] < 0.81 * seed
    assert one.get("d1-5") == off.get("d1-5")  # one turn: the turn two away keeps its own score
    assert two["d1-5"] >= 0.81 * seed > off["d1-5"]  # two turns: 0.9² of the seed's
    assert two["d1-1"] >= 0.81 * seed and two["d1-4"] >= 0.9 * seed
    assert two.get("d1-6") == off.get("d1-6")  # three turns away: not lifted

    broad = "Which trails did the sister and I hike?"
    assert route_query(broad).broad and not route_query(focused).broad
    b_off = semantics(broad, dialogue_turns=0)
    b_seed = max(b_off, key=lambda m: b_off[m])
    assert semantics(broad, dialogue_context=0.95, narrow_dialogue_context=0.0) == b_off  # not the focused share
    b_on = semantics(broad, dialogue_context=0.0, narrow_dialogue_context=0.95)
    n = int(b_seed.split("-")[1])
    near = [f"d1-{i}" for i in (n - 1, n + 1) if 1 <= i <= 6]
    assert any(b_off[m] < 0.95 * b_off[b_seed] for m in near)  # something to lift
    assert all(b_on[m] >= 0.95 * b_off[b_seed] for m in near)  # lifted by the broad share


def test_a_broad_question_is_fused_with_its_own_constant_and_a_narrow_one_with_rrf_k(
    build: Any, embedder: Embedder
) -> None:
    """``broad_rrf_k`` scores exactly as ``rrf_k`` set to it would, and only for questions asking for a set."""
    memory = build("broad")
    memory.add(
        [
            _line(1, "u", "I signed up for a pottery class yesterday.", "b1", "2024-05-01T19:00:00Z"),
            _line(2, "a", "That sounds fun, what will you make?", "b1", "2024-05-01T19:01:00Z"),
            _line(1, "u", "We went camping by the lake with the kids.", "b2", "2024-06-01T19:00:00Z"),
            _line(2, "u", "I also go swimming every Saturday morning.", "b2", "2024-06-01T19:02:00Z"),
            _line(1, "u", "Painting sunsets relaxes me after work.", "b3", "2024-07-01T19:00:00Z"),
            _line(2, "a", "Which colours do you like best?", "b3", "2024-07-01T19:01:00Z"),
        ]
    )

    def semantics(question: str, rrf_k: int, broad_rrf_k: int) -> dict[str, float]:
        answer = _ask(memory, embedder, question, rrf_k=rrf_k, broad_rrf_k=broad_rrf_k)
        return {i.id: round(i.breakdown.semantic, 9) for i in answer.items}

    broad, narrow = "What activities does Dana do?", "Where did Dana go camping?"
    assert route_query(broad).broad and not route_query(narrow).broad
    assert semantics(broad, 30, 60) == semantics(broad, 60, 0) != semantics(broad, 30, 0)
    assert semantics(narrow, 30, 60) == semantics(narrow, 30, 0) != semantics(narrow, 60, 0)
