"""Threads: records that span messages — a session's episode, or one speaker's thread on one topic.

A message-level record (``episodic``) is a rewrite of one message, so it can only lead back to the
message it came from. A thread gathers messages: every message of a *session* (a conversation id,
split where ``occurred_at`` jumps by ``session_gap_ms`` or more — the fold's own session rule), or
every message in which one speaker touches one analysed *topic*, across sessions. A thread is a
pure function of the folded message rows (their order, event times, topics and stored vectors):
no clock, no randomness, no re-embedding, so a replayed store has the very same threads as a live
one, and an old store has them without a rebuild.

Each thread is searchable like a record: its vector is the L2-normalised mean of its members'
stored vectors, its text the members' speaker names, texts and topics (Okapi BM25 over threads).
A question scores the threads by reciprocal-rank fusion of the two rankings; a hit on a thread
routes to the members that also agree with the question (``Threads.lift``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adamem.projections.folds.lexicon import normalize
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import MessageRow
from adamem.text import tokenize

__all__ = ["SESSION", "TOPIC", "Thread", "Threads", "sessions_of", "topic_threads_of"]

SESSION = "session"
TOPIC = "topic"
_Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Thread:
    """Messages that belong together: ``kind`` session or topic, member message ids oldest first."""

    id: str
    kind: str
    label: str
    members: tuple[str, ...]


def sessions_of(messages: Sequence[MessageRow], params: MemoryParameters) -> list[Thread]:
    """The owner's sessions, in arrival order (``messages`` sorted by ``seq``)."""
    out: list[Thread] = []
    current: list[MessageRow] = []

    def close() -> None:
        if current:
            first = current[0]
            label = f"{first.conversation_id or 'session'} from {first.occurred_at}"
            out.append(Thread(f"session:{first.id}", SESSION, label, tuple(m.id for m in current)))

    for m in messages:
        prev = current[-1] if current else None
        if prev is not None and (
            prev.conversation_id != m.conversation_id or m.occurred_at - prev.occurred_at >= params.session_gap_ms
        ):
            close()
            current = []
        current.append(m)
    close()
    return out


def topic_threads_of(messages: Sequence[MessageRow], min_members: int = 2) -> list[Thread]:
    """One thread per (speaker, analysed topic) with at least ``min_members`` messages, members in arrival order."""
    groups: dict[tuple[str, str], list[str]] = {}
    for m in messages:
        for topic in sorted({normalize(t) for t in m.topics} - {""}):
            groups.setdefault((m.speaker, topic), []).append(m.id)
    return [
        Thread(f"topic:{speaker}:{topic}", TOPIC, f"{speaker} on {topic}", tuple(ids))
        for (speaker, topic), ids in sorted(groups.items())
        if len(ids) >= min_members
    ]


class Threads:
    """The threads of one owner's messages, indexed for search (vectors and BM25), immutable once built."""

    def __init__(
        self,
        threads: Sequence[Thread],
        messages: dict[str, MessageRow],
        matrix: npt.NDArray[np.float32],
        position: dict[str, int],
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        """``matrix`` / ``position``: the messages' normalised stored vectors and each message's row in it."""
        self.threads = list(threads)
        self.thread_of: dict[str, int] = {}
        """Message id → index of the first thread it belongs to (a session for each message of sessions)."""
        for n, t in enumerate(self.threads):
            for mid in t.members:
                self.thread_of.setdefault(mid, n)
        self.member_positions = [
            np.fromiter((position.get(i, -1) for i in t.members), dtype=np.int64, count=len(t.members))
            for t in self.threads
        ]
        dim = matrix.shape[1] if matrix.ndim == 2 else 0
        vectors = np.zeros((len(self.threads), dim), dtype=np.float64)
        for n, pos in enumerate(self.member_positions):
            pos = pos[pos >= 0]
            if len(pos) and dim:
                mean = matrix[pos].astype(np.float64).sum(axis=0)
                norm = float(np.linalg.norm(mean))
                vectors[n] = mean / norm if norm else mean
        self.vectors = vectors
        self._k1, self._b = k1, b
        postings: dict[str, tuple[list[int], list[float]]] = {}
        lengths: list[float] = []
        for n, t in enumerate(self.threads):
            words: list[str] = []
            for mid in t.members:
                m = messages.get(mid)
                if m is not None:
                    words += tokenize(f"{m.speaker} {m.text} {' '.join(m.topics)}")
            lengths.append(float(len(words)))
            for term, count in Counter(words).items():
                slots, counts = postings.setdefault(term, ([], []))
                slots.append(n)
                counts.append(float(count))
        self._lengths = np.asarray(lengths, dtype=np.float64)
        self._avg = float(self._lengths.mean()) if len(lengths) else 0.0
        self._postings = {
            term: (np.asarray(s, dtype=np.int64), np.asarray(c, dtype=np.float64)) for term, (s, c) in postings.items()
        }

    def __len__(self) -> int:
        return len(self.threads)

    def bm25(self, terms: Iterable[str]) -> _Floats:
        """Okapi BM25 of the question's terms against every thread (in ``threads`` order)."""
        scores = np.zeros(len(self.threads), dtype=np.float64)
        n = len(self.threads)
        if not n or self._avg <= 0:
            return scores
        for term in set(terms):
            found = self._postings.get(term)
            if found is None:
                continue
            slots, tf = found
            idf = math.log(1.0 + (n - len(slots) + 0.5) / (len(slots) + 0.5))
            norm = self._k1 * (1.0 - self._b + self._b * self._lengths[slots] / self._avg)
            scores[slots] += idf * tf * (self._k1 + 1.0) / (tf + norm)
        return scores

    def scores(self, query: _Floats, terms: Sequence[str], rrf_k: int) -> _Floats:
        """Each thread's agreement with the question in [0, 1]: RRF of its cosine rank and its BM25 rank."""
        n = len(self.threads)
        if not n:
            return np.zeros(0, dtype=np.float64)
        cos = self.vectors @ query if self.vectors.shape[1] == len(query) else np.zeros(n)
        fused = 1.0 / (rrf_k + 1.0 + _ranks(cos))
        bm = self.bm25(terms)
        hit = bm > 0
        if hit.any():
            fused = fused + np.where(hit, 1.0 / (rrf_k + 1.0 + _ranks(bm)), 0.0)
        out: _Floats = fused * (rrf_k + 1.0) / 2.0
        return out

    def top(self, query: _Floats, terms: Sequence[str], rrf_k: int, count: int) -> list[tuple[int, float]]:
        """The ``count`` best threads as (index, score), best first; ties by index."""
        if count <= 0 or not self.threads:
            return []
        s = self.scores(query, terms, rrf_k)
        order = np.lexsort((np.arange(len(s)), -s))[:count]
        return [(int(i), float(s[i])) for i in order]

    def lift(
        self,
        hits: Sequence[tuple[int, float]],
        cosines: _Floats,
        members: int,
        usable: Callable[[str], bool],
    ) -> dict[str, tuple[float, int]]:
        """Members the thread hits route to: per hit, its ``members`` members most similar to the question.

        Returns message id → (thread score, thread index), the best thread per message (ties: the
        better-ranked hit).
        """
        out: dict[str, tuple[float, int]] = {}
        for index, score in hits:
            pos = self.member_positions[index]
            ids = self.threads[index].members
            sims = np.where(pos >= 0, cosines[np.maximum(pos, 0)], -np.inf) if len(cosines) else np.zeros(len(pos))
            taken = 0
            for j in np.lexsort((np.arange(len(ids)), -sims)):
                if taken >= members:
                    break
                mid = ids[j]
                if not usable(mid):
                    continue
                taken += 1
                if mid not in out or score > out[mid][0]:
                    out[mid] = (score, index)
        return out


def _ranks(scores: _Floats) -> _Floats:
    """0-based rank of every score, best first (ties share the better rank)."""
    ordered = np.sort(-scores)
    ranks: _Floats = np.searchsorted(ordered, -scores, side="left").astype(np.float64)
    return ranks
