"""In-process search structures of one owner's snapshot: BM25 over bilingual tokens, and a vector matrix.

Both are built once per snapshot from the stored rows, so their scores are the same whichever store
holds the rows: the vectors are the stored float32 values, and BM25 statistics are the owner's own
(LanceDB's full-text index counts every owner of a shard).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from adamem.text import tokenize
from projections.folds.rows import EpisodicRow, MessageRow, PersonaRow

__all__ = ["TextIndex", "Vector", "VectorIndex", "extracted_text"]

Vector = npt.NDArray[np.float64]
_Row = MessageRow | EpisodicRow | PersonaRow


def extracted_text(row: _Row) -> str:
    """The recorded extraction of a message as words: its facts, attributes and events in the third person."""
    if not isinstance(row, MessageRow) or not row.extraction_json:
        return ""
    data = json.loads(row.extraction_json)
    parts = [f["content"] for f in data.get("facts", ())]
    parts += [f"{a['key'].replace('_', ' ')} {a['value']}" for a in data.get("attributes", ())]
    parts += [e["content"] for e in data.get("events", ())]
    return " ".join(parts)


class TextIndex:
    """Owner-scoped Okapi BM25 (k1 1.2, b 0.75) over one table's text fields (plus ``extra`` text per row)."""

    def __init__(self, rows: Sequence[_Row], fields: tuple[str, ...], k1: float = 1.2, b: float = 0.75,
                 extra: Callable[[_Row], str] | None = None) -> None:
        self._tf: dict[str, Counter[str]] = {}
        self._len: dict[str, int] = {}
        self._postings: dict[str, list[str]] = {}
        for row in sorted(rows, key=lambda r: r.id):
            text = " ".join(str(getattr(row, f)) for f in fields)
            words = tokenize(f"{text} {extra(row)}" if extra is not None else text)
            counts = Counter(words)
            self._tf[row.id] = counts
            self._len[row.id] = len(words)
            for term in counts:
                self._postings.setdefault(term, []).append(row.id)
        n = len(rows)
        self._idf = {t: math.log(1 + (n - len(ids) + 0.5) / (len(ids) + 0.5)) for t, ids in self._postings.items()}
        self._avg = (sum(self._len.values()) / n or 1.0) if n else 1.0
        self._k1, self._b = k1, b

    def score(self, row_id: str, terms: Iterable[str]) -> float:
        """BM25 of one row against the query terms (0 for an unknown row)."""
        tf = self._tf.get(row_id)
        if tf is None:
            return 0.0
        norm = self._k1 * (1 - self._b + self._b * self._len[row_id] / self._avg)
        s = 0.0
        for t in set(terms):
            f = tf.get(t, 0)
            if f:
                s += self._idf[t] * f * (self._k1 + 1) / (f + norm)
        return s

    def scores(self, terms: Iterable[str]) -> dict[str, float]:
        """BM25 of every row containing at least one query term."""
        unique = set(terms)
        ids = {i for t in unique for i in self._postings.get(t, ())}
        return {i: self.score(i, unique) for i in sorted(ids)}


class VectorIndex:
    """One table's vectors as an L2-normalised float64 matrix (zero rows for rows without a vector)."""

    def __init__(self, rows: Sequence[_Row]) -> None:
        ordered = sorted(rows, key=lambda r: r.id)
        self.ids: list[str] = [r.id for r in ordered]
        self.position: dict[str, int] = {r.id: i for i, r in enumerate(ordered)}
        dim = max((len(r.vector) for r in ordered), default=0)
        matrix = np.zeros((len(ordered), dim), dtype=np.float64)
        for i, r in enumerate(ordered):
            if r.vector and len(r.vector) == dim:
                matrix[i] = r.vector
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        self.matrix: npt.NDArray[np.float64] = matrix / norms[:, None]

    def cosines(self, query: Vector) -> Vector:
        """Cosine of the (unit) query vector with every row, in ``ids`` order."""
        if self.matrix.shape[0] == 0 or self.matrix.shape[1] != query.shape[0]:
            return np.zeros(self.matrix.shape[0], dtype=np.float64)
        result: Vector = self.matrix @ query
        return result
