"""A long-lived owner's cold messages held as columns in the query process: exact searches, no store read.

``ColdArchive`` (``retrieval.archive``) answers an owner's first question through the store's
vector and full-text indexes, then reads the cold part's columns once (``message_columns``) into a
``ColdIndex``: its vectors as one float32 matrix of unit rows, a BM25 index made from the stored
``tokens`` column (never tokenised again), and the other fields as Arrow, made into rows only for
the messages a question returns. Its searches are exact: the cosine with every cold message, and
Okapi BM25 (k1 1.2, b 0.75) over the cold part as the corpus, ties broken by id, as the in-memory
store's searches are.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from adamem.projections.folds.rows import MessageRow
from adamem.projections.store.lance_arrow import rows_from_arrow, vector_matrix
from adamem.projections.store.scoring import BM25_B, BM25_K1, bm25_idf
from adamem.retrieval.index import Beside, stored_words, term_postings
from adamem.text import search_text

__all__ = ["ColdCounts", "ColdIndex"]

Vector = npt.NDArray[np.float32]


def _unit_rows(column: pa.ChunkedArray, out: Vector, present: npt.NDArray[np.bool_]) -> None:
    """Write a vector column into ``out`` as unit rows, chunk by chunk, and which rows have a vector into ``present``
    (zero rows, and rows of another length than ``out``'s, stay zero and absent): the column's own buffers are
    read in place, the division writes ``out``."""
    at = 0
    for chunk in column.chunks:
        rows = len(chunk)
        fixed = pa.types.is_fixed_size_list(chunk.type) and not chunk.null_count
        if fixed and chunk.type.list_size == out.shape[1]:
            matrix = chunk.flatten().to_numpy(zero_copy_only=False).reshape(rows, out.shape[1])
        else:
            matrix = vector_matrix(pa.chunked_array([chunk], chunk.type))
            if matrix.shape[1] != out.shape[1]:
                present[at : at + rows] = False
                at += rows
                continue
        norms = np.linalg.norm(matrix, axis=1)  # as ``VectorIndex.of_matrix`` makes the hot rows unit: the same bits
        np.divide(matrix, np.where(norms > 0, norms, 1.0)[:, None], out=out[at : at + rows], dtype=np.float32)
        present[at : at + rows] = norms > 0
        at += rows


def _dim(column: pa.ChunkedArray) -> int:
    if pa.types.is_fixed_size_list(column.type):
        return int(column.type.list_size)
    return int(vector_matrix(column).shape[1])


_SCAN_THREADS = min(4, os.cpu_count() or 1)
_SCANS = ThreadPoolExecutor(max(1, _SCAN_THREADS - 1), thread_name_prefix="adamem-cold-scan")
"""Threads sharing a long cold part's matrix-vector product with the asking thread (NumPy releases the GIL; one
BLAS thread each)."""
_SCAN_ROWS = 8_192
"""Rows of the matrix in one slice of the product."""


class _Product:
    """``matrix @ q`` under way: its slices are taken one at a time by the ``_SCANS`` threads and, once it has done
    what it could meanwhile, by the asking thread (``result``), so the product and the question's other work share
    the cores. A short matrix is multiplied at once, by the asking thread."""

    def __init__(self, matrix: Vector, q: Vector) -> None:
        self._matrix, self._q = matrix, q
        self.out = np.empty(len(matrix), dtype=np.float32)
        self._next = 0
        self._lock = threading.Lock()
        self._helpers: list[Future[None]] = []
        if len(matrix) > _SCAN_ROWS and _SCAN_THREADS > 1:
            slices = -(-len(matrix) // _SCAN_ROWS)
            self._helpers = [_SCANS.submit(self._work) for _ in range(min(_SCAN_THREADS - 1, slices - 1))]

    def _work(self) -> None:
        """Multiply slices until none is left."""
        while True:
            with self._lock:
                lo = self._next
                self._next += _SCAN_ROWS
            if lo >= len(self._matrix):
                return
            np.dot(self._matrix[lo : lo + _SCAN_ROWS], self._q, out=self.out[lo : lo + _SCAN_ROWS])

    def result(self) -> Vector:
        """The product: the slices left are multiplied here, then those other threads took are waited for."""
        self._work()
        for helper in self._helpers:
            helper.result()
        return self.out


def _combined(columns: dict[str, list[pa.Array]]) -> pa.Table:
    """One table from each column's pieces (the pieces of one table, so of one schema), one column at a time: each
    column's pieces are dropped, and the memory they held handed back to Arrow's pool, before the next is made (a
    table of contiguous columns: taking rows from 50 chunks costs 20 times as much)."""
    out = {}
    for name in list(columns):
        out[name] = pa.concat_arrays(columns.pop(name))
        pa.default_memory_pool().release_unused()
    return pa.table(out)


_Ints = npt.NDArray[np.int64]


def with_context(tokens: pa.Array, part: pa.Table) -> pa.Array:
    """Each message's stored ``tokens`` and its ``context`` (the words of the owner's message before it) as one string
    of words; the tokens alone where the piece has no ``context`` (a table made before messages held it)."""
    if "context" not in part.column_names:
        return tokens
    context = pc.fill_null(part.column("context").combine_chunks(), "")
    return pc.binary_join_element_wise(pc.fill_null(tokens, ""), context, " ")


def _piece_postings(term: dict[str, int], tokens: pa.Array) -> tuple[_Ints, _Ints, _Ints, _Ints]:
    """A piece's stored ``tokens`` as postings, sorted by word, then row: each (word number, row) once, with how
    often, words numbered in ``term`` as first met over the pieces (``term`` grows); and each row's length."""
    words, codes, at = stored_words(tokens)
    numbers = np.asarray([term.setdefault(t, len(term)) for t in words], dtype=np.int64)
    terms, rows, counts = term_postings(numbers[codes] if len(numbers) else codes, at, len(tokens))
    return terms, rows, counts, np.bincount(at, minlength=len(tokens))


def _documents(tokens: pa.Array, part: pa.Table, context: bool) -> tuple[pa.Array, ...]:
    """The words of each message as the documents its BM25 counts: alone, and with ``context`` also with its
    ``context``."""
    return (tokens, with_context(tokens, part)) if context else (tokens,)


class ColdCounts:
    """The BM25 statistics of a cold part searched through the store (too large to hold as a ``ColdIndex``): how many
    messages, their words in all, and in how many messages each word occurs, counted from the stored ``tokens``
    column read in pieces; about 100 bytes a distinct word."""

    def __init__(self, parts: Iterable[pa.Table], *, context: bool = True) -> None:
        """``parts``: the cold messages' ``tokens`` and ``context`` columns (``context`` absent from a table made
        before messages held it), in pieces read one after another. ``context``: count the messages each with its
        ``context`` too (``context_statistics``; None without)."""
        self._term: dict[str, int] = {}
        frequencies = [np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)]
        rows, length = 0, [0, 0]
        for part in parts:
            tokens = part.column("tokens").combine_chunks()
            for wide, words in enumerate(_documents(tokens, part, context)):
                terms, _, _, lengths = _piece_postings(self._term, words)
                counted = np.bincount(terms, minlength=len(self._term))
                counted[: len(frequencies[wide])] += frequencies[wide]
                frequencies[wide] = counted
                length[wide] += int(lengths.sum())
            rows += len(tokens)
        self._df = frequencies
        self.statistics = Beside(rows, float(length[0]), self.document_frequency)
        """The statistics, for the hot window's index to score hot and cold messages against both together."""
        self.context_statistics = Beside(rows, float(length[1]), self._context_frequency) if context else None
        """The statistics of the messages each with its ``context`` (None: not counted)."""

    def document_frequency(self, term: str) -> int:
        """How many cold messages hold the word."""
        return self._frequency(term, 0)

    def _context_frequency(self, term: str) -> int:
        return self._frequency(term, 1)

    def _frequency(self, term: str, wide: int) -> int:
        t = self._term.get(term)
        return 0 if t is None or t >= len(self._df[wide]) else int(self._df[wide][t])

    @property
    def nbytes(self) -> int:
        """Approximate resident bytes: the words and their counts."""
        return 100 * len(self._term) + sum(int(f.nbytes) for f in self._df)


_I32 = npt.NDArray[np.int32]
_F32 = npt.NDArray[np.float32]
_Piece = tuple[_I32, _I32, _F32]  # a piece's postings: word numbers, rows, frequencies


class _Postings:
    """Per word, the cold messages holding it and each one's share of its BM25 before the idf, over one document a
    message (its stored words, or those and its ``context``)."""

    def __init__(self, pieces: list[_Piece], lengths: list[_Ints], term: dict[str, int]) -> None:
        """The pieces' postings (sorted by word, then row: the pieces come in row order and a stable sort by word keeps
        it) and each row's length; ``term``: the words' numbers."""
        terms = np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0, dtype=np.int32)
        self.starts = np.concatenate([[0], np.cumsum(np.bincount(terms, minlength=len(term)))])
        order = np.argsort(terms, kind="stable")
        del terms  # each array is dropped once made use of: a long cold part's postings are tens of MB
        self.docs = (np.concatenate([p[1] for p in pieces]) if pieces else np.zeros(0, dtype=np.int32))[order]
        self.tf = (np.concatenate([p[2] for p in pieces]) if pieces else np.zeros(0, dtype=np.float32))[order]
        """How often each posting's word occurs in its row."""
        del order
        pieces.clear()
        sizes = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
        self.lengths = sizes.astype(np.float32)
        """Each row's length in words."""
        self.statistics = Beside(len(sizes), float(sizes.sum()), lambda word: self.frequency(term.get(word)))
        """The BM25 statistics of these documents."""

    def shares(self, lo: int, hi: int, average: float) -> npt.NDArray[np.float64]:
        """The BM25 share before its word's idf of each posting from ``lo`` to ``hi`` (one word's), in a corpus whose
        documents are ``average`` words long: ``tf (k1 + 1) / (tf + k1 (1 - b + b len / avg))``."""
        tf = self.tf[lo:hi].astype(np.float64)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[self.docs[lo:hi]].astype(np.float64) / (average or 1.0))
        out: npt.NDArray[np.float64] = tf * (BM25_K1 + 1) / (tf + norm)
        return out

    def frequency(self, t: int | None) -> int:
        """How many rows hold the word numbered ``t`` (None: a word of no row)."""
        return 0 if t is None else int(self.starts[t + 1] - self.starts[t])

    @property
    def nbytes(self) -> int:
        return int(self.docs.nbytes + self.tf.nbytes + self.lengths.nbytes + self.starts.nbytes)


class ColdIndex:
    """The cold messages of one owner (the Arrow of ``MemoryStore.message_columns``), searched in process."""

    def __init__(self, parts: Iterable[pa.Table], capacity: int = 0, *, context: bool = True) -> None:
        """``parts``: the cold messages' Arrow, in one table or in pieces read one after another; each piece is
        copied out of (its vectors into one matrix, its words into postings, its other columns into a table of
        their own) and dropped, so only the index and one piece are held at a time. ``capacity``: how many rows to
        expect (the matrix is made once at that size, and grown if more come). ``context``: index the messages each
        with its ``context`` too (for ``matching(..., context=True)`` and ``context_statistics``)."""
        kinds = (0, 1) if context else (0,)
        matrix = np.zeros((0, 0), dtype=np.float32)
        present = np.zeros(0, dtype=bool)
        n = 0
        columns: dict[str, list[pa.Array]] = {}
        hashes: list[npt.NDArray[np.int64]] = []
        self._term: dict[str, int] = {}
        postings: tuple[list[_Piece], list[_Piece]] = ([], [])
        lengths: tuple[list[_Ints], list[_Ints]] = ([], [])
        for part in parts:
            rows = part.num_rows
            if not rows:
                continue
            if not matrix.shape[1]:
                matrix = np.zeros((max(capacity, rows), _dim(part.column("vector"))), dtype=np.float32)
                present = np.zeros(len(matrix), dtype=bool)
            if n + rows > len(matrix):
                grown = np.zeros((max(2 * len(matrix), n + rows), matrix.shape[1]), dtype=np.float32)
                grown[:n] = matrix[:n]
                matrix, present = grown, np.concatenate([present[:n], np.zeros(len(grown) - n, dtype=bool)])
            _unit_rows(part.column("vector"), matrix[n : n + rows], present[n : n + rows])
            names = part.column_names
            if "tokens" in names:
                tokens = part.column("tokens").combine_chunks()
                for wide, words in enumerate(_documents(tokens, part, context)):
                    term, row, count, length = self._piece_postings(words, n)
                    postings[wide].append((term, row, count))
                    lengths[wide].append(length)
            else:
                for wide in kinds:
                    lengths[wide].append(np.zeros(rows, dtype=np.int64))
            for name in names:
                if name not in ("vector", "tokens"):  # a copy: a slice would hold the piece's buffers
                    columns.setdefault(name, []).append(pa.concat_arrays(part.column(name).chunks))
            hashes.append(np.fromiter((hash(i) for i in columns["id"][-1].to_pylist()), dtype=np.int64, count=rows))
            n += rows
        self._vectors: Vector = matrix[:n]
        self._has_vector: npt.NDArray[np.bool_] = present[:n]
        self._with_vector = np.flatnonzero(self._has_vector)
        self._table = _combined(columns)
        self._ids: pa.Array = self._table.column("id").combine_chunks() if n else pa.array([], pa.string())
        self._n = n
        every = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.int64)
        self._by_hash = np.argsort(every, kind="stable")
        self.id_hashes = every[self._by_hash]
        """The cold messages' ids as sorted hashes (``hash``), as ``ColdArchive.existing`` holds them."""
        self._words = tuple(_Postings(postings[wide], lengths[wide], self._term) for wide in kinds)
        self.statistics = self._words[0].statistics
        """The cold part's BM25 statistics (over its stored words: a message's speaker, text and extraction), for the
        hot window's index to score hot and cold messages against both together."""
        self.context_statistics = self._words[1].statistics if context else None
        """The same over each message's words and its ``context`` (the words of the owner's message before it); None
        when not indexed."""

    def _piece_postings(self, tokens: pa.Array, first: int) -> tuple[_I32, _I32, _F32, _Ints]:
        """``_piece_postings`` of a piece, compacted, its rows numbered from ``first``."""
        term, row, count, lengths = _piece_postings(self._term, tokens)
        return term.astype(np.int32), (row + first).astype(np.int32), count.astype(np.float32), lengths

    def __len__(self) -> int:
        return self._n

    def document_frequency(self, term: str) -> int:
        """How many cold messages hold the word."""
        return self._words[0].frequency(self._term.get(term))

    @property
    def nbytes(self) -> int:
        """Approximate resident bytes: the matrix, the postings, the columns, the id map."""
        arrays = self._vectors.nbytes + sum(w.nbytes for w in self._words)
        arrays += self.id_hashes.nbytes + self._by_hash.nbytes + self._with_vector.nbytes
        return int(arrays + self._table.nbytes) + 80 * len(self._term)

    def _best(self, rows: npt.NDArray[np.int64], scores: npt.NDArray[np.floating[Any]], k: int) -> list[int]:
        """The ``k`` best of ``rows`` by their ``scores``, ties by id."""
        if k <= 0 or not len(rows):
            return []
        if len(rows) > k:
            kth = np.partition(scores, len(rows) - k)[len(rows) - k]
            kept = scores >= kth
            rows, scores = rows[kept], scores[kept]
        at = rows.tolist()
        ranked = sorted(zip(scores.tolist(), self.ids_of(at), at, strict=True), key=lambda p: (-p[0], p[1]))
        return [i for _, _, i in ranked[:k]]

    def nearest(self, vector: Sequence[float], k: int) -> list[int]:
        """Rows of the ``k`` cold messages most similar to ``vector`` (cosine), best first."""
        return self.nearest_of(self.begin_cosines(vector)(), k)

    def begin_cosines(self, vector: Sequence[float]) -> Callable[[], Vector | None]:
        """The cosine of ``vector`` with every cold message in row order (0 for one without a vector), its product
        begun on other threads, as a call; the call gives None when ``vector`` is not of the vectors' length."""
        if not self._n or not self._vectors.shape[1]:
            return lambda: None
        q = np.asarray(vector, dtype=np.float32)
        if q.shape != (self._vectors.shape[1],):
            return lambda: None
        return _Product(self._vectors, q).result

    def nearest_of(self, scores: Vector | None, k: int) -> list[int]:
        """Rows of the ``k`` cold messages with a vector best by ``scores`` (``begin_cosines``), best first."""
        if scores is None:
            return []
        if len(self._with_vector) == self._n:  # every cold message has a vector (the usual case): no copy
            return self._best(self._with_vector, scores, k)
        return self._best(self._with_vector, scores[self._with_vector], k)

    def matching(
        self,
        query: str,
        k: int,
        *,
        context: bool = False,
        beside: Beside | None = None,
        terms: Sequence[str] | None = None,
    ) -> list[int]:
        """Rows of the ``k`` cold messages with the best BM25 for the words of ``query``, best first (``context``: each
        message by its words and its ``context``). ``beside``: the statistics of the messages held apart from the
        cold part (a tiered owner's hot window), scored with as one corpus together with it, as an index over every
        message scores (the cold part alone is the corpus without). ``terms``: the words to match, already cut
        (then ``query`` is not cut again: cutting a word twice may change it, "writing" to "writ")."""
        words_asked = search_text(query).split() if terms is None else terms
        terms = [t for t in dict.fromkeys(words_asked) if t in self._term]
        if not terms:
            return []
        if context and len(self._words) < 2:
            raise ValueError("this cold index holds no postings of the messages with their context")
        n = self._n
        scores = np.zeros(n, dtype=np.float64)
        words = self._words[context]
        corpus = n + (beside.rows if beside is not None else 0)
        length = words.statistics.length + (beside.length if beside is not None else 0.0)
        average = length / corpus if corpus else 1.0
        for t in terms:  # each term's postings: its rows (once each) and their share of the score
            at = self._term[t]
            lo, hi = int(words.starts[at]), int(words.starts[at + 1])
            if hi > lo:
                df = hi - lo + (beside.document_frequency(t) if beside is not None else 0)
                scores[words.docs[lo:hi]] += bm25_idf(corpus, df) * words.shares(lo, hi, average)
        matched = np.flatnonzero(scores > 0)
        return self._best(matched, scores[matched], k)

    def ids_of(self, positions: Sequence[int]) -> list[str]:
        """The ids of the messages at these rows."""
        return list(self._ids.take(pa.array(positions, pa.int64())).to_pylist()) if positions else []

    def positions(self, ids: Iterable[str]) -> dict[str, int]:
        """Rows of the cold messages among ``ids`` (others skipped)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted or not self._n:
            return {}
        asked = np.fromiter((hash(i) for i in wanted), dtype=np.int64, count=len(wanted))
        lo = np.searchsorted(self.id_hashes, asked, side="left")
        hi = np.searchsorted(self.id_hashes, asked, side="right")
        found: dict[str, int] = {}
        for id_, a, b in zip(wanted, lo.tolist(), hi.tolist(), strict=True):
            for p in self._by_hash[a:b].tolist():  # the rows sharing the id's hash: the one holding the id
                if self._ids[p].as_py() == id_:
                    found[id_] = p
        return found

    def rows(self, positions: Sequence[int]) -> list[tuple[MessageRow, Vector | None]]:
        """The messages at these rows without their vectors, each with its unit vector (None without one)."""
        if not positions:
            return []
        made = rows_from_arrow("messages", self._table.take(pa.array(positions, pa.int64())), vectors=False)
        present = self._has_vector[list(positions)].tolist()
        return [
            (row, self._vectors[p] if has else None)  # type: ignore[misc]
            for row, p, has in zip(made, positions, present, strict=True)
        ]
