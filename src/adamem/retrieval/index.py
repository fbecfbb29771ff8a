"""In-process search structures of one owner's snapshot: BM25 over bilingual tokens, and a vector matrix.

Both are built from the stored rows, so their scores are the same whichever store holds the rows:
the vectors are the stored float32 values, and BM25 statistics are the owner's own (LanceDB's
full-text index counts every owner of a shard).

A snapshot made from its predecessor and a few changed rows (``OwnerSnapshot.updated``) updates
both instead of building them again: ``VectorIndex.updated`` copies the unchanged rows' normalised
vectors, ``TextIndex.updated`` tokenises only the changed rows. Either gives, bit for bit, the
scores an index built from scratch over the same rows gives (tests/retrieval/test_incremental.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from adamem.projections.folds.rows import EpisodicRow, MessageRow, PersonaRow
from adamem.projections.store.base import extraction_text
from adamem.projections.store.scoring import BM25_B, BM25_K1, bm25_idf
from adamem.text import tokenize

__all__ = [
    "Beside",
    "TextIndex",
    "Vector",
    "VectorIndex",
    "best_first",
    "extracted_text",
    "stored_words",
    "term_postings",
]

Vector = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.int64]
_Row = MessageRow | EpisodicRow | PersonaRow
_Postings = tuple[_Ints, Vector]  # row slots, term frequencies


OUTSIDE_WORDS_KEPT = 4096
"""Rows outside a text index whose words it keeps for scoring them again (about 1 KB each)."""


def extracted_text(row: _Row) -> str:
    """The recorded extraction of a message as words: its facts, attributes and events in the third person."""
    if not isinstance(row, MessageRow) or not row.extraction_json:
        return ""
    return extraction_text(row.extraction_json)


def stored_words(tokens: pa.Array) -> tuple[list[str], _Ints, _Ints]:
    """The words of a column of stored ``tokens`` (``search_text``: words joined by spaces; null: none): the distinct
    words in the order first met, and each word's number among them and its row."""
    lists = pc.split_pattern(pc.fill_null(tokens, ""), " ")
    flat = pc.list_flatten(lists)
    kept = pc.not_equal(flat, "")
    encoded = pc.dictionary_encode(flat.filter(kept))
    rows = pc.list_parent_indices(lists).filter(kept).to_numpy(zero_copy_only=False).astype(np.int64)
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), rows


def term_postings(codes: _Ints, rows: _Ints, n: int) -> tuple[_Ints, _Ints, _Ints]:
    """Each (word number, row) pair once, with how often it occurs, sorted by word number, then row (rows < ``n``)."""
    pairs, counts = np.unique(codes * n + rows, return_counts=True)
    return pairs // n, pairs % n, counts


def best_first(scores: Vector, m: int) -> _Ints:
    """Positions of the ``m`` best scores (and every tie of the m-th), best first, ties in position order.

    The same positions, in the same order, as the head of ``np.argsort(-scores, kind="stable")``,
    without sorting every score.
    """
    n = len(scores)
    if m >= n:
        return np.argsort(-scores, kind="stable")
    negated = -scores
    kth = np.partition(negated, m - 1)[m - 1]
    head = np.flatnonzero(negated <= kth)
    return head[np.argsort(negated[head], kind="stable")]


@dataclass(frozen=True)
class Beside:
    """The BM25 statistics of rows held apart from a text index (a long-lived owner's cold messages,
    ``retrieval.cold.ColdIndex``), counted over the same words: with them, the index scores its rows and rows outside
    it against the statistics of both together, as one index over every row would."""

    rows: int
    length: float
    """The rows' words, in all."""
    document_frequency: Callable[[str], int]


def _words(parts: Iterable[str]) -> list[str]:
    """The words of a row's texts, each text cut on its own (as ``lance_arrow.row_tokens`` cuts them: a word never
    spans two texts)."""
    return [w for part in parts for w in tokenize(part)]


def _weighted(terms: Iterable[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    """The query's terms at weight 1, and the further ``weights`` terms at theirs."""
    weighted = dict.fromkeys(terms, 1.0)
    for t, w in (weights or {}).items():
        weighted.setdefault(t, w)
    return weighted


def _ordered_ids(rows: Iterable[_Row]) -> tuple[list[str], dict[str, int]]:
    ids = sorted(r.id for r in rows)
    return ids, {id_: i for i, id_ in enumerate(ids)}


class TextIndex:
    """Owner-scoped Okapi BM25 (k1 1.2, b 0.75) over one table's text fields (plus ``extra`` text per row).

    Postings are kept per row *slot* — a number given to each row version as it is indexed, never
    reused — in a compact base (one array per kind, sliced per term) plus the postings of rows
    indexed since (``updated``). Positions (the rank of a row's id: the order of ``ids`` and of
    ``scores``) are looked up per slot; slots of removed or rewritten rows map to -1 and are skipped,
    and document frequencies count live slots only, so scores equal those of an index built afresh.
    """

    def __init__(
        self,
        rows: Sequence[_Row],
        fields: tuple[str, ...],
        k1: float = BM25_K1,
        b: float = BM25_B,
        extra: Callable[[_Row], str] | None = None,
        tokens: Mapping[str, str] | None = None,
        cut: Callable[[_Row], str] | None = None,
    ) -> None:
        """``tokens``: a row's words as the store holds them (``OwnerColumns.tokens``: ``lance_arrow.row_tokens``,
        each of its text parts cut on its own when it was written, as this index cuts ``fields`` and ``extra``),
        taken instead of cutting its texts again. ``cut``: more words of a row, already cut (search tokens joined by
        spaces: a message's ``context``), counted with its own."""
        self._fields, self._extra, self._cut, self._k1, self._b = fields, extra, cut, k1, b
        self._slot_of: dict[str, int] = {}
        lengths: list[float] = []
        postings: dict[str, tuple[list[int], list[float]]] = {}
        stored = tokens if tokens is not None else {}
        ordered = sorted(rows, key=lambda r: r.id)
        if ordered and all(r.id in stored for r in ordered):
            self._base_of_tokens([r.id for r in ordered], [self._with_cut(r, stored[r.id]) for r in ordered])
        else:
            for row in ordered:
                self._index_row(row, len(lengths), lengths, postings, stored.get(row.id))
            self._lengths = np.asarray(lengths, dtype=np.float64)
            self._base(postings)
        self._delta: dict[str, _Postings] = {}
        self._delta_size = 0
        self._outside_words: dict[tuple[str, ...], tuple[Counter[str], int]] = {}
        self._place(rows)

    def _index_row(
        self,
        row: _Row,
        slot: int,
        lengths: list[float],
        postings: dict[str, tuple[list[int], list[float]]],
        tokens: str | None = None,
    ) -> None:
        """Tokenise a row into ``slot`` (or take its stored ``tokens``): its length and its postings."""
        words = tokens.split() if tokens is not None else _words(self._parts(row))
        if self._cut is not None:
            words += self._cut(row).split()
        self._slot_of[row.id] = slot
        lengths.append(float(len(words)))
        for term, count in Counter(words).items():
            slots, counts = postings.setdefault(term, ([], []))
            slots.append(slot)
            counts.append(float(count))

    def _with_cut(self, row: _Row, tokens: str) -> str:
        """A row's stored ``tokens`` and its ``cut`` words, one string of words."""
        more = self._cut(row) if self._cut is not None else ""
        return f"{tokens} {more}" if more else tokens

    def _parts(self, row: _Row) -> list[str]:
        """The texts whose words index a row: its fields, and its ``extra``."""
        parts = [str(getattr(row, f)) for f in self._fields]
        return [*parts, self._extra(row)] if self._extra is not None else parts

    def _base_of_tokens(self, ids: list[str], tokens: list[str]) -> None:
        """The base of rows whose words the store holds, in slot order (``tokens`` of ``ids``), made as columns:
        the same terms, slots and frequencies as ``_index_row`` and ``_base`` make row by row."""
        self._slot_of = {id_: slot for slot, id_ in enumerate(ids)}
        words, codes, slots = stored_words(pa.array(tokens, pa.string()))
        n = len(ids)
        terms, self._slots, counts = term_postings(codes, slots, n)
        starts = np.searchsorted(terms, np.arange(len(words) + 1))
        self._term: dict[str, tuple[int, int]] = {w: (int(starts[i]), int(starts[i + 1])) for i, w in enumerate(words)}
        self._tf = counts.astype(np.float64)
        self._lengths = np.bincount(slots, minlength=n).astype(np.float64)

    def _base(self, postings: dict[str, tuple[list[int], list[float]]]) -> None:
        """Make ``postings`` the compact base: per term a slice of one slots array and one frequencies array."""
        self._term = {}
        slots: list[int] = []
        counts: list[float] = []
        for term, (s, c) in postings.items():
            self._term[term] = (len(slots), len(slots) + len(s))
            slots += s
            counts += c
        self._slots = np.asarray(slots, dtype=np.int64)
        self._tf = np.asarray(counts, dtype=np.float64)

    def _place(self, rows: Iterable[_Row]) -> None:
        """Positions of this version's rows, the slot → position map, and the per-row length norms."""
        self.ids, self.position = _ordered_ids(rows)
        self._live_slots = np.fromiter((self._slot_of[i] for i in self.ids), dtype=np.int64, count=len(self.ids))
        self._position_of = np.full(len(self._lengths), -1, dtype=np.int64)
        self._position_of[self._live_slots] = np.arange(len(self.ids), dtype=np.int64)
        lengths = self._lengths[self._live_slots]
        n = len(self.ids)
        avg = float(lengths.mean()) if n and lengths.mean() > 0 else 1.0
        self._total_length = float(lengths.sum())
        self._position_lengths = lengths
        self._norm = self._k1 * (1 - self._b + self._b * lengths / avg)  # per position

    def updated(self, rows: Sequence[_Row], changed: Iterable[str]) -> TextIndex:
        """The index of ``rows`` (this index's rows with ``changed`` ids rewritten, added or removed).

        Only the changed rows still present are tokenised; this index is left as it was.
        """
        new = object.__new__(TextIndex)
        new._fields, new._extra, new._cut, new._k1, new._b = self._fields, self._extra, self._cut, self._k1, self._b
        new._outside_words = self._outside_words  # a row's words depend on the row alone
        new._slot_of = dict(self._slot_of)
        new._term, new._slots, new._tf = self._term, self._slots, self._tf
        changed = set(changed)
        for id_ in changed:
            new._slot_of.pop(id_, None)
        lengths: list[float] = []
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for row in sorted((r for r in rows if r.id in changed), key=lambda r: r.id):
            new._index_row(row, len(self._lengths) + len(lengths), lengths, postings)
        new._lengths = np.concatenate([self._lengths, np.asarray(lengths, dtype=np.float64)])
        new._delta = dict(self._delta)
        for term, (s, c) in postings.items():
            extra = (np.asarray(s, dtype=np.int64), np.asarray(c, dtype=np.float64))
            old = new._delta.get(term)
            new._delta[term] = (
                extra if old is None else (np.concatenate([old[0], extra[0]]), np.concatenate([old[1], extra[1]]))
            )
        new._delta_size = self._delta_size + sum(len(s) for s, _ in postings.values())
        new._place(rows)
        if new._delta_size * 4 > len(new._slots) or len(new._lengths) > 2 * len(new.ids) + 64:
            new._compact()
        return new

    def _compact(self) -> None:
        """Fold the added postings into the base and drop dead slots (renumbering the live ones)."""
        renumber = np.full(len(self._lengths), -1, dtype=np.int64)
        renumber[self._live_slots] = np.arange(len(self._live_slots), dtype=np.int64)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for term in set(self._term) | set(self._delta):
            slots, tf = self._postings(term)
            kept = renumber[slots]
            alive = kept >= 0
            if alive.any():
                postings[term] = (kept[alive].tolist(), tf[alive].tolist())
        self._slot_of = {id_: int(renumber[slot]) for id_, slot in self._slot_of.items()}
        self._lengths = self._lengths[self._live_slots]
        self._base(postings)
        self._delta, self._delta_size = {}, 0
        self._place_slots()

    def _place_slots(self) -> None:
        """After renumbering: slots are positions again."""
        self._live_slots = np.fromiter((self._slot_of[i] for i in self.ids), dtype=np.int64, count=len(self.ids))
        self._position_of = np.full(len(self._lengths), -1, dtype=np.int64)
        self._position_of[self._live_slots] = np.arange(len(self.ids), dtype=np.int64)

    def _postings(self, term: str) -> _Postings:
        """Every posting of a term (live or not): slots and frequencies."""
        parts: list[_Postings] = []
        span = self._term.get(term)
        if span is not None:
            parts.append((self._slots[span[0] : span[1]], self._tf[span[0] : span[1]]))
        added = self._delta.get(term)
        if added is not None:
            parts.append(added)
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def scores(
        self, terms: Iterable[str], weights: Mapping[str, float] | None = None, beside: Beside | None = None
    ) -> Vector:
        """BM25 of every row against the query terms, in ``ids`` order (0 where no term occurs).

        ``weights``: more terms, each counted with its weight (a query expanded by feedback). ``beside``: rows held
        apart whose statistics count too (document frequencies, number and average length of rows)."""
        n = len(self.ids)
        out = np.zeros(n, dtype=np.float64)
        weighted = _weighted(terms, weights)
        norm, corpus = self._norm, n
        if beside is not None:
            corpus = n + beside.rows
            avg = (self._total_length + beside.length) / corpus if corpus else 1.0
            norm = self._k1 * (1 - self._b + self._b * self._position_lengths / (avg or 1.0))
        for t in sorted(weighted):
            rows, tf = self._live_postings(t)
            df = len(rows)
            if df:
                idf = bm25_idf(corpus, df + (beside.document_frequency(t) if beside is not None else 0))
                out[rows] += weighted[t] * idf * tf * (self._k1 + 1) / (tf + norm[rows])
        return out

    def score_outside(self, row: _Row, terms: Iterable[str], weights: Mapping[str, float] | None = None) -> float:
        """BM25 of a row this index does not hold, as if it were added to it (its statistics plus the row).

        A cold message of a long-lived owner (``retrieval.archive``) is so scored against the hot window's
        index before the cold part is read: the same formula, with the hot rows' document frequencies and lengths.
        """
        return self.outside(terms, weights)(row)

    def outside(
        self, terms: Iterable[str], weights: Mapping[str, float] | None = None, beside: Beside | None = None
    ) -> Callable[[_Row], float]:
        """``score_outside`` for one query's terms, each term's document frequency counted once for every row.

        ``beside``: the statistics of the rows held apart, the scored row among them (a cold message once the cold
        part is read): every row is scored against this index's statistics and theirs together."""
        weighted = _weighted(terms, weights)
        k1, b = self._k1, self._b
        n = len(self.ids) + (beside.rows if beside is not None else 1)
        total = self._total_length + (beside.length if beside is not None else 0.0)

        def df(t: str) -> int:
            return len(self._live_postings(t)[0]) + (beside.document_frequency(t) if beside is not None else 1)

        weights_idf = [(t, weighted[t] * bm25_idf(n, df(t))) for t in sorted(weighted)]

        def score(row: _Row) -> float:
            counts, length = self._words_outside(row)
            avg = (total + (length if beside is None else 0)) / n or 1.0
            norm = k1 * (1 - b + b * length / avg)
            out = 0.0
            for t, w_idf in weights_idf:
                tf = counts.get(t, 0)
                if tf:
                    out += w_idf * tf * (k1 + 1) / (tf + norm)
            return out

        return score

    def _words_outside(self, row: _Row) -> tuple[Counter[str], int]:
        """A row's words as this index would count them, and how many, memoised by the texts they are cut from: the
        cold messages a long-lived owner's questions find recur from one question to the next."""
        parts = tuple(self._parts(row))
        if self._cut is not None:
            parts += (self._cut(row),)
        found = self._outside_words.get(parts)
        if found is None:
            words = _words(parts[:-1]) + parts[-1].split() if self._cut is not None else _words(parts)
            if len(self._outside_words) >= OUTSIDE_WORDS_KEPT:
                self._outside_words.clear()
            found = self._outside_words[parts] = (Counter(words), len(words))
        return found

    def _live_postings(self, term: str) -> _Postings:
        """A term's postings among this version's rows: positions and frequencies."""
        slots, tf = self._postings(term)
        rows = self._position_of[slots]
        live = rows >= 0
        return (rows, tf) if live.all() else (rows[live], tf[live])

    @property
    def statistics(self) -> Beside:
        """This index's BM25 statistics, for rows held apart from it to be scored with its rows as one corpus."""
        return Beside(len(self.ids), self._total_length, self.document_frequency)

    def idf(self, term: str) -> float:
        """The term's inverse document frequency over this version's rows (0 where it occurs nowhere)."""
        n, df = len(self.ids), len(self._live_postings(term)[0])
        return bm25_idf(n, df) if df else 0.0

    def document_frequency(self, term: str) -> int:
        """How many of this version's rows contain the term."""
        return len(self._live_postings(term)[0])


class VectorIndex:
    """One table's vectors as an L2-normalised float32 matrix (zero rows for rows without a vector)."""

    def __init__(self, rows: Sequence[_Row]) -> None:
        ordered = sorted(rows, key=lambda r: r.id)
        self.ids, self.position = _ordered_ids(ordered)
        self._lengths = np.fromiter((len(r.vector) for r in ordered), dtype=np.int64, count=len(ordered))
        dim = int(self._lengths.max(initial=0))
        self.matrix: npt.NDArray[np.float32] = _normalised(ordered, dim)

    @classmethod
    def of_matrix(cls, ids: Sequence[str], vectors: npt.NDArray[np.float32]) -> VectorIndex:
        """The index of rows given as ids and their vectors (zero rows: none), as ``VectorIndex(rows)`` makes it."""
        order = sorted(range(len(ids)), key=ids.__getitem__)
        new = object.__new__(cls)
        new.ids = [ids[i] for i in order]
        new.position = {id_: i for i, id_ in enumerate(new.ids)}
        matrix = np.asarray(vectors, dtype=np.float32)[order] if len(ids) else np.zeros((0, 0), dtype=np.float32)
        present = matrix.any(axis=1) if matrix.size else np.zeros(len(ids), dtype=bool)
        dim = matrix.shape[1] if present.any() else 0
        new._lengths = np.where(present, dim, 0).astype(np.int64)
        matrix = matrix[:, :dim]
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        new.matrix = matrix / norms[:, None]
        return new

    def updated(self, rows: Sequence[_Row], changed: Iterable[str]) -> VectorIndex | None:
        """The index of ``rows`` reusing this one's vectors for rows not in ``changed``; None: build afresh.

        Rows kept from this index may have had their vectors dropped (``OwnerSnapshot`` keeps them
        here only), so the matrix's width (the longest vector) can only change with every row new.
        """
        changed = set(changed)
        new = object.__new__(VectorIndex)
        new.ids, new.position = _ordered_ids(rows)
        by_id = {r.id: r for r in rows}
        kept = [i for i in new.ids if i not in changed and i in self.position]
        fresh = [i for i in new.ids if i in changed or i not in self.position]
        lengths = np.zeros(len(new.ids), dtype=np.int64)
        lengths[[new.position[i] for i in kept]] = self._lengths[[self.position[i] for i in kept]]
        lengths[[new.position[i] for i in fresh]] = [len(by_id[i].vector) for i in fresh]
        dim = int(lengths.max(initial=0))
        if dim != self.matrix.shape[1] and kept:
            return None
        new._lengths = lengths
        matrix = np.zeros((len(new.ids), dim), dtype=np.float32)
        if kept:
            matrix[[new.position[i] for i in kept]] = self.matrix[[self.position[i] for i in kept]]
        matrix[[new.position[i] for i in fresh]] = _normalised([by_id[i] for i in fresh], dim)
        new.matrix = matrix
        return new

    def cosines(self, query: Vector) -> Vector:
        """Cosine of the (unit) query vector with every row, in ``ids`` order (float32 product, float64 out)."""
        if self.matrix.shape[0] == 0 or self.matrix.shape[1] != query.shape[0]:
            return np.zeros(self.matrix.shape[0], dtype=np.float64)
        return (self.matrix @ query.astype(np.float32)).astype(np.float64)


def _normalised(rows: Sequence[_Row], dim: int) -> npt.NDArray[np.float32]:
    """The rows' vectors of length ``dim`` as unit float32 rows (zeros for the others)."""
    matrix = np.zeros((len(rows), dim), dtype=np.float32)
    for i, r in enumerate(rows):
        if r.vector and len(r.vector) == dim:
            matrix[i] = r.vector
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    normalised: npt.NDArray[np.float32] = matrix / norms[:, None]
    return normalised
