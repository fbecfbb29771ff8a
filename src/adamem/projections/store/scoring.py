"""Scoring shared by the adapters that score in Python: cosine similarity and BM25."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

__all__ = ["BM25_B", "BM25_K1", "bm25_idf", "bm25_scores", "cosine"]

BM25_K1, BM25_B = 1.2, 0.75
"""Okapi BM25's term-frequency saturation and length normalisation, everywhere the project scores text."""


def bm25_idf(n: int, df: int) -> float:
    """Okapi BM25's inverse document frequency of a term in ``df`` of ``n`` documents (never negative)."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0 when either vector is empty or zero."""
    if not a or not b:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def bm25_scores(docs: Sequence[list[str]], query: Sequence[str], k1: float = BM25_K1, b: float = BM25_B) -> list[float]:
    """Okapi BM25 of every tokenised document against the query tokens."""
    n = len(docs)
    if n == 0:
        return []
    avg = sum(len(d) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    terms = set(query)
    scores = []
    for d in docs:
        tf = Counter(t for t in d if t in terms)
        s = 0.0
        for t, f in tf.items():
            idf = bm25_idf(n, df[t])
            s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avg))
        scores.append(s)
    return scores
