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

    def __init__(
        self,
        rows: Sequence[_Row],
        fields: tuple[str, ...],
        k1: float = 1.2,
        b: float = 0.75,
        extra: Callable[[_Row], str] | None = None,
    ) -> None:
        ordered = sorted(rows, key=lambda r: r.id)
        self.ids: list[str] = [r.id for r in ordered]
        self.position: dict[str, int] = {r.id: i for i, r in enumerate(ordered)}
        postings: dict[str, tuple[list[int], list[int]]] = {}
        lengths = np.zeros(len(ordered), dtype=np.float64)
        for i, row in enumerate(ordered):
            text = " ".join(str(getattr(row, f)) for f in fields)
            words = tokenize(f"{text} {extra(row)}" if extra is not None else text)
            lengths[i] = len(words)
            for term, count in Counter(words).items():
                rows_of, counts = postings.setdefault(term, ([], []))
                rows_of.append(i)
                counts.append(count)
        n = len(ordered)
        avg = float(lengths.mean()) if n and lengths.mean() > 0 else 1.0
        self._norm = k1 * (1 - b + b * lengths / avg)  # per row: the length part of the denominator
        self._k1 = k1
        self._postings = {
            t: (np.asarray(r, dtype=np.int64), np.asarray(c, dtype=np.float64)) for t, (r, c) in postings.items()
        }
        self._idf = {t: math.log(1 + (n - len(r) + 0.5) / (len(r) + 0.5)) for t, (r, _) in postings.items()}

    def scores(self, terms: Iterable[str]) -> Vector:
        """BM25 of every row against the query terms, in ``ids`` order (0 where no term occurs)."""
        out = np.zeros(len(self.ids), dtype=np.float64)
        for t in sorted(set(terms)):
            found = self._postings.get(t)
            if found is not None:
                rows, tf = found
                out[rows] += self._idf[t] * tf * (self._k1 + 1) / (tf + self._norm[rows])
        return out


class VectorIndex:
    """One table's vectors as an L2-normalised float32 matrix (zero rows for rows without a vector)."""

    def __init__(self, rows: Sequence[_Row]) -> None:
        ordered = sorted(rows, key=lambda r: r.id)
        self.ids: list[str] = [r.id for r in ordered]
        self.position: dict[str, int] = {r.id: i for i, r in enumerate(ordered)}
        dim = max((len(r.vector) for r in ordered), default=0)
        matrix = np.zeros((len(ordered), dim), dtype=np.float32)
        for i, r in enumerate(ordered):
            if r.vector and len(r.vector) == dim:
                matrix[i] = r.vector
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        self.matrix: npt.NDArray[np.float32] = matrix / norms[:, None]

    def cosines(self, query: Vector) -> Vector:
        """Cosine of the (unit) query vector with every row, in ``ids`` order (float32 product, float64 out)."""
        if self.matrix.shape[0] == 0 or self.matrix.shape[1] != query.shape[0]:
            return np.zeros(self.matrix.shape[0], dtype=np.float64)
        return (self.matrix @ query.astype(np.float32)).astype(np.float64)
