"""``ColdIndex``: a long-lived owner's cold messages searched in process, against exact searches written here."""

from __future__ import annotations

import dataclasses
import itertools
import math
import typing
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from adamem.projections.folds.changes import Upsert
from adamem.projections.folds.rows import MessageRow
from adamem.projections.store.factory import open_store
from adamem.projections.store.lance_arrow import arrow_schema, row_tokens, rows_to_arrow
from adamem.projections.store.scoring import bm25_scores
from adamem.retrieval import cold
from adamem.retrieval.archive import INDEX_ROW_BYTES, ColdArchive
from adamem.retrieval.cold import ColdIndex
from adamem.text import search_text

TEXTS = [
    "we went hiking in the alps",
    "my sister bakes pastry",
    "hiking again, hiking always",
    "a concert in lisbon",
    "tea with my sister",
    "",
    "chess and tea and chess",
    "pastry in lisbon",
]


def make(cls: type[MessageRow], **values: Any) -> MessageRow:
    """A row with every field defaulted by type (optional ones absent), then the given values."""
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        if type(None) in typing.get_args(hint):
            defaults[f.name] = None
            continue
        defaults[f.name] = {str: "", int: 0, float: 0.0, bool: False}.get(
            hint, () if typing.get_origin(hint) is tuple else []
        )
    return cls(**{**defaults, **values})


def _messages(dim: int = 4) -> list[MessageRow]:
    rng = np.random.default_rng(5)
    out = []
    for i, text in enumerate(TEXTS):
        vector = () if i == 5 else tuple(float(x) for x in rng.standard_normal(dim))
        out.append(
            make(MessageRow, id=f"m{i:02d}", owner_id="default:alice", speaker="Ann", text=text, vector=vector, seq=i)
        )
    out.append(dataclasses.replace(out[0], id="m08", text="tie", seq=8))
    return out


def _bare(row: MessageRow) -> MessageRow:
    return dataclasses.replace(row, vector=())


def _table(rows: list[MessageRow], dim: int = 4) -> pa.Table:
    return rows_to_arrow("messages", rows, arrow_schema("messages", dim))


def _cosines(rows: list[MessageRow], q: np.ndarray) -> dict[str, float]:
    """Exact cosine (float64) of every row with a vector."""
    out = {}
    for r in rows:
        if r.vector:
            v = np.asarray(r.vector, dtype=np.float64)
            out[r.id] = float(v @ q) / float(np.linalg.norm(v) * np.linalg.norm(q))
    return out


def _is_exact_top(got: list[str], exact: dict[str, float], k: int) -> bool:
    """``got`` is a best-first top ``k`` of ``exact`` (float32 rounding may order scores within 1e-6 either way)."""
    best = sorted(exact.values(), reverse=True)[:k]
    scores = [exact[i] for i in got]
    in_order = all(a >= b - 1e-6 for a, b in itertools.pairwise(scores))
    return len(got) == len(best) and in_order and np.allclose(sorted(scores, reverse=True), best, atol=1e-6)


def _exact_bm25(rows: list[MessageRow], query: str, k: int, context: bool = False) -> list[str]:
    docs = [row_tokens("messages", r).split() + ((r.context or "").split() if context else []) for r in rows]
    scores = bm25_scores(docs, search_text(query).split())
    ranked = sorted((-s, r.id) for r, s in zip(rows, scores, strict=True) if s > 0)
    return [i for _, i in ranked[:k]]


@pytest.mark.parametrize("pieces", [1, 3, 9])
def test_searches_equal_exact_cosine_and_bm25_over_the_cold_part(pieces: int) -> None:
    """Read whole or in pieces, the nearest rows are the exact cosine ranking (a row without a vector never), and
    the matching rows the BM25 ranking with the cold part as the corpus (ties by id)."""
    rows = _messages()
    data = _table(rows)
    step = math.ceil(len(rows) / pieces)
    index = ColdIndex((data.slice(i, step) for i in range(0, len(rows), step)), capacity=4)  # grown past 4
    assert len(index) == len(rows)
    rng = np.random.default_rng(9)
    for q in [np.asarray(rows[0].vector), *rng.standard_normal((20, 4))]:
        for k in (1, 3, 20):
            got = index.ids_of(index.nearest(q.tolist(), k))
            assert _is_exact_top(got, _cosines(rows, q), k), (got, k)
            assert "m05" not in got  # no vector
    assert sorted(index.ids_of(index.nearest(rows[0].vector, 2))) == ["m00", "m08"]  # a tie
    for query in ("hiking", "sister pastry", "chess tea", "lisbon concert hiking", "nothing here"):
        for k in (1, 2, 10):
            assert index.ids_of(index.matching(query, k)) == _exact_bm25(rows, query, k), query
    assert index.matching("", 5) == [] and index.nearest([1.0, 0.0], 5) == []  # no words; another dimension


def test_rows_come_back_whole_without_their_vectors_with_unit_ones() -> None:
    rows = _messages()
    index = ColdIndex([_table(rows)])
    at = index.positions(["m02", "absent", "m05", "m02"])
    assert sorted(at) == ["m02", "m05"]
    made = index.rows([at["m02"], at["m05"]])
    assert [r for r, _ in made] == [_bare(rows[2]), _bare(rows[5])]
    v = made[0][1]
    assert v is not None and v.dtype == np.float32 and abs(float(np.linalg.norm(v)) - 1) < 1e-6
    assert np.allclose(v, np.asarray(rows[2].vector) / np.linalg.norm(rows[2].vector), atol=1e-6)
    assert made[1][1] is None  # m05 has no vector
    assert index.rows([]) == [] and index.positions([]) == {}


def test_a_vector_of_another_length_counts_as_none() -> None:
    rows = _messages()
    odd = _table([dataclasses.replace(rows[0], id="x1", vector=(1.0,) * 6)], dim=6)
    index = ColdIndex([_table(rows), odd])
    assert "x1" not in index.ids_of(index.nearest(rows[0].vector, 20))
    assert index.positions(["x1"]) == {"x1": len(rows)}  # held, searchable by its words, without a vector
    assert index.rows([len(rows)])[0][1] is None


def test_a_long_matrix_is_multiplied_in_slices_with_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((1000, 16)).astype(np.float32)
    q = rng.standard_normal(16).astype(np.float32)
    whole = cold._Product(matrix, q).result()
    monkeypatch.setattr(cold, "_SCAN_ROWS", 64)
    assert np.array_equal(cold._Product(matrix, q).result(), whole)  # the same products, row by row


def test_products_begun_together_on_several_threads_each_end_with_their_own_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Products under way at once share the scan threads; each, finished in any order and from any thread, is
    its own matrix-vector product."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(4)
    matrix = rng.standard_normal((2000, 16)).astype(np.float32)
    queries = rng.standard_normal((12, 16)).astype(np.float32)
    wants = [matrix @ q for q in queries]
    monkeypatch.setattr(cold, "_SCAN_ROWS", 64)
    begun = [cold._Product(matrix, q) for q in queries]
    for product, want in zip(reversed(begun), reversed(wants), strict=True):
        assert np.array_equal(product.result(), want)
    with ThreadPoolExecutor(4) as askers:
        got = list(askers.map(lambda q: cold._Product(matrix, q).result(), list(queries) * 3))
    assert all(np.array_equal(g, w) for g, w in zip(got, wants * 3, strict=True))


def test_bm25_ranks_a_varied_corpus_as_okapi_does() -> None:
    """Documents of 1-40 words over a small vocabulary, so term frequency, document frequency and length all
    change the order: every query's top 10 is the exact Okapi BM25 ranking (k1 1.2, b 0.75), up to the order of
    scores equal but for rounding."""
    rng = np.random.default_rng(11)
    vocab = [f"w{i}" for i in range(30)]
    rows = [
        make(
            MessageRow,
            id=f"m{i:03d}",
            owner_id="default:alice",
            text=" ".join(rng.choice(vocab, size=int(rng.integers(1, 40)))),
            vector=(1.0, 0.0),
            seq=i,
        )
        for i in range(300)
    ]
    index = ColdIndex([_table(rows, dim=2)])
    for _ in range(40):
        query = " ".join(rng.choice(vocab, size=int(rng.integers(1, 4)), replace=False))
        got = index.ids_of(index.matching(query, 10))
        scores = bm25_scores([row_tokens("messages", r).split() for r in rows], search_text(query).split())
        assert _is_exact_top(got, {r.id: s for r, s in zip(rows, scores, strict=True) if s > 0}, 10), query


def _archive(rows: list[MessageRow], hot: int, index_bytes: int) -> ColdArchive:
    store = open_store("memory://")
    store.bind(1)
    store.commit(0, [Upsert("messages", r) for r in rows], {"analyses": 1})
    split = store.archive_split("default:alice", hot)
    assert split is not None
    return ColdArchive(store, "default:alice", split, index_bytes=index_bytes)


def test_a_cold_part_is_read_when_asked_and_only_when_it_fits() -> None:
    rows = _messages()
    archive = _archive(rows, hot=2, index_bytes=1 << 30)
    assert archive.indexed and archive.held() is None
    first = archive.search(rows[2].vector, "hiking", 3)  # through the store's searches
    assert archive.held() is None
    archive.begin_read()
    index = archive.held()
    assert index is not None and len(index) == archive.split.cold_messages == len(rows) - 2
    reads = archive.reads
    assert {r.id for r, _ in archive.search(rows[2].vector, "hiking", 3)} == {r.id for r, _ in first}
    assert archive.fetch(["m03", "m08"]).keys() == {"m03"}  # m08 is hot: not the archive's
    assert archive.reads == reads

    small = _archive(rows, hot=2, index_bytes=(len(rows) - 2) * INDEX_ROW_BYTES - 1)
    small.search(rows[2].vector, "hiking", 3)
    small.begin_read()
    assert not small.indexed and small.held() is None


def test_a_closed_archive_never_reads_its_cold_part() -> None:
    archive = _archive(_messages(), hot=2, index_bytes=1 << 30)
    archive.close()
    archive.search((1.0, 0.0, 0.0, 0.0), "hiking", 3)
    archive.begin_read()
    assert archive.held() is None


def _with_context_rows() -> list[MessageRow]:
    """Messages in English and Chinese, each with the words of the one before it as its ``context``."""
    texts = [*TEXTS, "你上周去哪里徒步了", "去了黄山"]
    rows = [
        make(MessageRow, id=f"m{i:02d}", owner_id="default:alice", speaker="Ann", text=t, vector=(1.0, 0.0), seq=i)
        for i, t in enumerate(texts)
    ]
    return [dataclasses.replace(r, context=search_text(texts[i - 1]) if i else "") for i, r in enumerate(rows)]


@pytest.mark.parametrize("pieces", [1, 3])
def test_with_context_matching_and_statistics_count_the_words_of_the_message_before(pieces: int) -> None:
    """Each message's ``context`` (the words of the one before it, English or Chinese): ``matching(..., context=True)``
    is the BM25 ranking of the messages each with its context, and ``context_statistics`` and ``ColdCounts``' count
    those documents; without, the words of the messages alone."""
    rows = _with_context_rows()
    data = _table(rows, dim=2)
    step = math.ceil(len(rows) / pieces)
    index = ColdIndex(data.slice(i, step) for i in range(0, len(rows), step))
    counts = cold.ColdCounts(data.select(["tokens", "context"]).slice(i, step) for i in range(0, len(rows), step))
    for query in ("hiking", "sister pastry", "chess tea", "lisbon concert", "徒步", "黄山"):
        for k in (1, 3, 20):
            assert index.ids_of(index.matching(query, k, context=True)) == _exact_bm25(rows, query, k, context=True)
            assert index.ids_of(index.matching(query, k)) == _exact_bm25(rows, query, k)
    assert set(index.ids_of(index.matching("徒步", 5, context=True))) == {"m08", "m09"}  # the reply too
    assert index.ids_of(index.matching("徒步", 5)) == ["m08"]
    wide = [row_tokens("messages", r).split() + (r.context or "").split() for r in rows]
    for statistics in (index.context_statistics, counts.context_statistics):
        assert statistics.rows == len(rows)
        assert statistics.length == sum(len(d) for d in wide)
        for word in ("hike", "hik", "sister", "徒步", "黄山", "absent"):
            assert statistics.document_frequency(word) == sum(word in d for d in wide)
    assert counts.statistics.length == index.statistics.length < index.context_statistics.length


def test_without_context_the_cold_part_holds_the_messages_own_words_only() -> None:
    """A cold part made for questions that do not use the messages' ``context`` holds one set of postings: the same
    ranking and statistics of the messages' own words as one made with it, and a clear error when asked for more."""
    rows = _with_context_rows()
    data = _table(rows, dim=2)
    wide, narrow = ColdIndex([data]), ColdIndex([data], context=False)
    for query in ("hiking", "sister pastry", "徒步", "黄山"):
        assert narrow.ids_of(narrow.matching(query, 5)) == wide.ids_of(wide.matching(query, 5)) != []
    assert (narrow.statistics.rows, narrow.statistics.length) == (wide.statistics.rows, wide.statistics.length)
    assert narrow.context_statistics is None and narrow.nbytes < wide.nbytes
    with pytest.raises(ValueError, match="context"):
        narrow.matching("徒步", 5, context=True)
    counts = cold.ColdCounts([data.select(["tokens"])], context=False)
    assert counts.context_statistics is None
    assert (counts.statistics.rows, counts.statistics.length) == (wide.statistics.rows, wide.statistics.length)
    for word in ("hike", "徒步", "黄山", "absent"):
        frequency = wide.statistics.document_frequency(word)
        assert narrow.statistics.document_frequency(word) == counts.statistics.document_frequency(word) == frequency
