"""A second round of retrieval from the evidence of the first: the question's vector and terms moved toward it.

Relevance feedback without a person in the loop (pseudo-relevance feedback): the first round's best
messages are taken as relevant, and the question is moved toward them.

- **Vector** (Rocchio): ``q' = q + β · mean(v_d)`` over the feedback messages' stored vectors,
  normalised. A multi-hop question names one side of what it asks; its first evidence carries the
  other side's words and topics into the second round.
- **Terms** (relevance model, RM3's weighting): each word of the feedback messages that the question
  lacks scores ``Σ_d tf(t, d) / |d| · idf(t)``; the best ``terms`` words, found in at least two of the
  owner's messages (a word only its own message holds finds nothing new), join the question's BM25
  terms, weighted ``β · score / best score``.

Nothing here is a word list: the cues are what the owner's own messages make rare and frequent.
The functions are pure: the same rows give the same cues.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from adamem.projections.folds.rows import MessageRow
from adamem.retrieval.index import TextIndex, Vector, VectorIndex
from adamem.text import tokenize

__all__ = ["Feedback", "feedback_of", "surface_words"]


@dataclass(frozen=True, slots=True)
class Feedback:
    """The cues one round of evidence gives the next: a moved question vector and weighted terms."""

    vector: Vector
    terms: dict[str, float]
    sources: tuple[str, ...]
    """Ids of the messages the cues were taken from."""
    words: dict[str, str] = field(default_factory=dict)
    """A term's word as the messages wrote it (terms are search tokens: stemmed, lower-cased)."""

    def cues(self) -> list[str]:
        """The added words, strongest first (what a person reads as "searched again for")."""
        ranked = sorted(self.terms.items(), key=lambda kv: (-kv[1], kv[0]))
        return [self.words.get(t, t) for t, _ in ranked]


def feedback_of(
    question_vector: Vector,
    question_terms: Sequence[str],
    rows: Sequence[MessageRow],
    vectors: VectorIndex,
    text: TextIndex,
    weight: float,
    terms: int,
) -> Feedback:
    """The cues of ``rows`` (the first round's best messages) for a second round, at Rocchio weight ``weight``."""
    moved = np.asarray(question_vector, dtype=np.float64).copy()
    found = [vectors.position[r.id] for r in rows if r.id in vectors.position]
    if found and weight > 0:
        mean = vectors.matrix[sorted(found)].astype(np.float64).mean(axis=0)
        if len(mean) == len(moved):
            moved = moved + weight * mean
    norm = float(np.linalg.norm(moved))
    moved = moved / norm if norm else moved
    have = set(question_terms)
    score: dict[str, float] = {}
    for row in rows:
        words = tokenize(row.text)
        if not words:
            continue
        for word, count in Counter(words).items():
            if word not in have and text.document_frequency(word) >= 2:
                score[word] = score.get(word, 0.0) + count / len(words) * text.idf(word)
    best = sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[: max(0, terms)]
    top = best[0][1] if best else 0.0
    weighted = {t: weight * s / top for t, s in best} if top > 0 and weight > 0 else {}
    return Feedback(moved, weighted, tuple(r.id for r in rows), surface_words(weighted, [r.text for r in rows]))


def surface_words(terms: Iterable[str], texts: Iterable[str]) -> dict[str, str]:
    """Each term's first word in ``texts`` that tokenises to it (a stem shown as the word it came from)."""
    wanted, out = set(terms), {}
    for text in texts:
        for word in text.split():
            for token in tokenize(word):
                if token in wanted and token not in out:
                    out[token] = word.strip(".,;:!?\"'()[]{}«»“”‘’。，；：！？、（）")
    return out
