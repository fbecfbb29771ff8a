"""Threads, records that span messages: sessions and speaker-topic threads, their search, and where a hit leads.

Pure unit tests over folded rows (``projections.folds.testing``: hashed 4-dim vectors stand in for
the embedder); the retrieval effect on real memory is measured by ``adamem bench locomo --lco``.
"""

from __future__ import annotations

import numpy as np

from adamem.projections.folds.params import SEED_DEFAULT as MEMORY
from adamem.projections.folds.rows import MessageRow
from adamem.projections.folds.testing import Chat, fold, replay_changes
from adamem.retrieval.snapshot import OwnerSnapshot
from adamem.retrieval.threads import SESSION, TOPIC, Threads, sessions_of, topic_threads_of
from adamem.text import tokenize

HOUR = 3_600_000
T0 = 1_700_000_000_000


def _chat() -> list[MessageRow]:
    chat = Chat()
    events = [
        chat.say("I adopted a puppy called Biscuit.", at=T0, conv="a", topics=("pets",)),
        chat.say("Biscuit chewed my running shoes.", at=T0 + 60_000, conv="a", topics=("pets", "fitness")),
        chat.say("Lovely!", at=T0 + 120_000, conv="a", speaker="Bot", role="assistant"),
        # the same conversation id after a gap of three hours: a new session
        chat.say("I ran five kilometres this morning.", at=T0 + 4 * HOUR, conv="a", topics=("fitness",)),
        chat.say("Another conversation about the dog park.", at=T0 + 5 * HOUR, conv="b", topics=("pets",)),
    ]
    state, _ = fold(events)
    return sorted((m for m in state.tables["messages"].values() if isinstance(m, MessageRow)), key=lambda m: m.seq)


def test_a_session_ends_at_a_new_conversation_or_a_gap_in_event_time() -> None:
    messages = _chat()
    sessions = sessions_of(messages, MEMORY)
    assert [len(s.members) for s in sessions] == [3, 1, 1]
    assert {s.kind for s in sessions} == {SESSION}
    assert sessions[0].members == tuple(m.id for m in messages[:3])


def test_a_topic_thread_is_one_speaker_on_one_topic_across_sessions() -> None:
    messages = _chat()
    threads = {t.label: t.members for t in topic_threads_of(messages)}
    ids = [m.id for m in messages]
    assert threads == {"Alice on fitness": (ids[1], ids[3]), "Alice on pets": (ids[0], ids[1], ids[4])}
    assert {t.kind for t in topic_threads_of(messages)} == {TOPIC}


def test_threads_are_the_same_from_live_and_replayed_rows() -> None:
    chat = Chat()
    events = [chat.say(f"message {i}", at=T0 + i * HOUR, conv="c", topics=("t",)) for i in range(6)]
    state, changes = fold(events)
    live = sorted((m for m in state.tables["messages"].values() if isinstance(m, MessageRow)), key=lambda m: m.seq)
    stored = replay_changes(changes)
    replayed = sorted((r for r in stored.values() if isinstance(r, MessageRow)), key=lambda m: m.seq)
    assert sessions_of(live, MEMORY) == sessions_of(replayed, MEMORY)
    assert topic_threads_of(live) == topic_threads_of(replayed)


def _index(messages: list[MessageRow]) -> tuple[Threads, OwnerSnapshot]:
    snap = OwnerSnapshot(messages[0].owner_id, messages)
    vi = snap.vector_index("messages")
    return Threads(sessions_of(messages, MEMORY), snap.messages, vi.matrix, vi.position), snap


def test_a_thread_vector_is_the_normalised_mean_of_its_members() -> None:
    messages = _chat()
    threads, _ = _index(messages)
    mean = np.sum([np.asarray(m.vector) / np.linalg.norm(m.vector) for m in messages[:3]], axis=0)
    assert np.allclose(threads.vectors[0], mean / np.linalg.norm(mean), atol=1e-6)
    assert np.allclose(np.linalg.norm(threads.vectors, axis=1), 1.0)


def test_a_word_of_one_member_finds_its_thread_and_the_hit_leads_to_members_agreeing_with_the_question() -> None:
    messages = _chat()
    threads, snap = _index(messages)
    lexical = threads.bm25(tokenize("kilometres"))
    assert lexical[1] > 0 and lexical[0] == lexical[2] == 0  # only the session that said it
    query = np.asarray(messages[1].vector, dtype=np.float64)
    query /= np.linalg.norm(query)
    scores = threads.scores(query, tokenize("Biscuit"), 60)
    assert int(np.argmax(scores)) == 0  # both the cosine and the only BM25 hit rank the first session first
    assert 0 < scores.max() <= 1.0
    cosines = snap.vector_index("messages").cosines(query)
    reached = threads.lift([(0, float(scores[0]))], cosines, 1, lambda _: True)
    assert list(reached) == [messages[1].id]  # the member most similar to the question
    none = threads.lift([(0, float(scores[0]))], cosines, 2, lambda mid: mid != messages[1].id)
    assert messages[1].id not in none and len(none) == 2  # a member the view cannot use is passed over
