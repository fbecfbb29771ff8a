"""Search indexes updated change by change score, bit for bit, like indexes built afresh over the same rows."""

from __future__ import annotations

import dataclasses
import json
import random
import typing
from typing import Any

import numpy as np

from adamem.projections.folds.rows import EpisodicRow, MessageRow, float32_vector
from adamem.projections.store.base import TEXT_FIELDS
from adamem.projections.store.lance_arrow import row_tokens
from adamem.retrieval.index import TextIndex, VectorIndex, best_first, extracted_text
from adamem.text import search_text, tokenize


def _blank(cls: type[Any]) -> dict[str, Any]:
    """Every field of a row dataclass defaulted by type (optional ones absent)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        if type(None) in typing.get_args(hint):
            out[f.name] = None
        else:
            out[f.name] = {str: "", int: 0, float: 0.0, bool: False}.get(hint, () if f.name == "vector" else [])
    return out


def _message(id_: str, text: str, vector: tuple[float, ...]) -> MessageRow:
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(MessageRow):
        hint = typing.get_type_hints(MessageRow)[f.name]
        defaults[f.name] = {str: "", int: 0, float: 0.0, bool: False}.get(hint, () if f.name == "vector" else [])
    return MessageRow(
        **{**defaults, "id": id_, "owner_id": "default:u", "speaker": "Ann", "text": text, "vector": vector}
    )


def test_indexes_updated_change_by_change_score_like_indexes_built_afresh() -> None:
    rng = random.Random(6)
    words = "alpha beta gamma delta live lives living moved cat cats".split()  # noqa: SIM905
    words += ["北京", "深圳", "住在", "喜欢", "火锅"]
    dim = 8

    def row(id_: str) -> MessageRow:
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 9)))
        vector = float32_vector(rng.uniform(-1, 1) for _ in range(dim)) if rng.random() < 0.9 else ()
        return _message(id_, text, vector)

    rows = {f"m{i:03d}": row(f"m{i:03d}") for i in range(20)}
    text = TextIndex(list(rows.values()), TEXT_FIELDS["messages"])
    vectors = VectorIndex(list(rows.values()))
    stripped = {i: dataclasses.replace(r, vector=()) for i, r in rows.items()}  # as a snapshot keeps them
    queries = [[w] for w in words] + [words[:3], words[5:12], ["absent"], words]
    for step in range(80):
        changed: set[str] = set()
        for _ in range(rng.randint(1, 12 if step % 10 else 40)):
            kind = rng.random()
            new = kind < 0.45 or len(rows) < 3  # a new row (or a rewrite of one), else an existing row
            id_ = f"m{rng.randrange(1000):03d}" if new else rng.choice(sorted(rows))
            changed.add(id_)
            if kind < 0.8:
                rows[id_] = stripped[id_] = row(id_)
            else:
                rows.pop(id_, None)
                stripped.pop(id_, None)
        text = text.updated(list(stripped.values()), changed)
        updated = vectors.updated(list(stripped.values()), changed)
        assert updated is not None
        vectors = updated
        stripped = {i: dataclasses.replace(r, vector=()) for i, r in stripped.items()}
        fresh_text, fresh_vectors = (
            TextIndex(list(rows.values()), TEXT_FIELDS["messages"]),
            VectorIndex(list(rows.values())),
        )
        assert text.ids == fresh_text.ids and vectors.ids == fresh_vectors.ids
        assert np.array_equal(vectors.matrix, fresh_vectors.matrix), step
        for terms in queries:
            assert np.array_equal(text.scores(terms), fresh_text.scores(terms)), (step, terms)


def test_best_first_is_the_head_of_a_stable_sort() -> None:
    rng = random.Random(3)
    for n in (0, 1, 5, 50, 400):
        scores = np.asarray([rng.choice((0.0, 0.25, 0.5, rng.random())) for _ in range(n)])
        full = np.argsort(-scores, kind="stable")
        for m in (1, 3, 10, 40, 1000):
            head = best_first(scores, m)
            assert len(head) >= min(m, n) and np.array_equal(head, full[: len(head)]), (n, m)


def test_an_index_of_the_stored_tokens_scores_as_one_that_cuts_the_text() -> None:
    """Records' words taken from the store's ``tokens`` (``OwnerColumns.tokens``) instead of cut again: the same
    postings and lengths, so the same BM25 for every query, phrases and Chinese included; a row the tokens miss
    is cut as before."""
    rng = random.Random(8)
    words = ["hiking", "Berlin", "worked out", "check-up", "cats'", "running", "the", "studies", "住在北京", "喜欢火锅"]
    records = [
        EpisodicRow(**{**_blank(EpisodicRow), "id": f"e{i:02d}", "owner_id": "default:a", "content": text})
        for i, text in enumerate(" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(40))
    ]
    stored = {r.id: row_tokens("episodic", r) for r in records[:-3]}  # the last three left to be cut
    cut, taken = TextIndex(records, ("content",)), TextIndex(records, ("content",), tokens=stored)
    for terms in [[t] for w in words for t in tokenize(w)] + [tokenize(" ".join(words)), ["absent"]]:
        assert np.array_equal(taken.scores(terms), cut.scores(terms)), terms
    wrong = {r.id: "absent words" for r in records}
    assert not np.array_equal(
        TextIndex(records, ("content",), tokens=wrong).scores(tokenize("hiking")), cut.scores(tokenize("hiking"))
    )


def test_a_row_outside_the_index_scores_as_if_added_to_it_and_by_its_current_words() -> None:
    """``score_outside`` is the row's BM25 in an index of the rows and it (the same statistics); asked again after
    the row's text, or its recorded extraction, changed, it scores the new words, not the kept ones."""
    texts = ["the dog ran home", "a cat sat", "dog and cat", "我的狗"]
    rows = [_message(f"m{i}", text, ()) for i, text in enumerate(texts)]
    index = TextIndex(rows, TEXT_FIELDS["messages"], extra=extracted_text)
    terms = tokenize("dog home 狗")
    outside = _message("m9", "my dog went home", ())
    whole = TextIndex([*rows, outside], TEXT_FIELDS["messages"], extra=extracted_text)
    want = float(whole.scores(terms)[whole.position["m9"]])
    assert index.score_outside(outside, terms) == want
    assert index.score_outside(outside, terms) == want  # from the kept words
    changed = dataclasses.replace(outside, text="我的狗 went home")
    whole = TextIndex([*rows, changed], TEXT_FIELDS["messages"], extra=extracted_text)
    assert index.score_outside(changed, terms) == float(whole.scores(terms)[whole.position["m9"]])
    assert index.score_outside(changed, terms) != want
    facts = json.dumps({"facts": [{"content": "Ann walks her dog daily"}]})
    extracted = dataclasses.replace(outside, extraction_json=facts)
    whole = TextIndex([*rows, extracted], TEXT_FIELDS["messages"], extra=extracted_text)
    assert index.score_outside(extracted, terms) == float(whole.scores(terms)[whole.position["m9"]])
    assert index.score_outside(extracted, terms) != want  # "dog" twice, in a longer text


def test_an_index_made_as_columns_from_every_rows_stored_tokens_is_the_one_made_row_by_row() -> None:
    """With the store's tokens for every row the index is made as columns (Arrow split, one sort): the same terms,
    slots, frequencies and lengths as cutting each row, so the same BM25, phrases, Chinese and empty rows
    included; and it is updated change by change like the other."""
    rng = random.Random(9)
    words = ["hiking", "Berlin", "worked out", "check-up", "cats'", "running", "the", "住在北京", "喜欢火锅", ""]
    records = [
        EpisodicRow(**{**_blank(EpisodicRow), "id": f"e{i:02d}", "owner_id": "default:a", "content": text})
        for i, text in enumerate(" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(60))
    ]
    stored = {r.id: row_tokens("episodic", r) for r in records}
    assert any(not t for t in stored.values())  # a record with no words at all
    cut, taken = TextIndex(records, ("content",)), TextIndex(records, ("content",), tokens=stored)
    assert taken._slot_of == cut._slot_of and np.array_equal(taken._lengths, cut._lengths)
    assert {t: (cut._slots[a:b].tolist(), cut._tf[a:b].tolist()) for t, (a, b) in cut._term.items()} == {
        t: (taken._slots[a:b].tolist(), taken._tf[a:b].tolist()) for t, (a, b) in taken._term.items()
    }
    queries = [[t] for w in words for t in tokenize(w)] + [tokenize(" ".join(words)), ["absent"]]
    for terms in queries:
        assert np.array_equal(taken.scores(terms), cut.scores(terms)), terms
    kept = sorted(
        [dataclasses.replace(records[3], content="hiking in 北京"), *records[:3], *records[4:10]], key=lambda r: r.id
    )
    ids = {records[3].id, *(r.id for r in records[10:])}  # one rewritten, fifty removed
    fresh = TextIndex(kept, ("content",))
    for index in (taken.updated(kept, ids), cut.updated(kept, ids)):
        for terms in queries:
            assert np.array_equal(index.scores(terms), fresh.scores(terms)), terms


def test_a_hot_index_beside_a_cold_part_scores_every_message_as_one_index_over_both() -> None:
    """A long-lived owner's hot window scores with the cold part's statistics beside it (``ColdIndex.statistics``,
    counted from the store's ``tokens``, which hold a message's extraction too): hot rows (``scores``) and cold
    rows (``outside``) get the BM25 of one index over every message, in English and Chinese; without them, the
    hot window's own statistics give other scores."""
    from adamem.projections.store.lance_arrow import arrow_schema, rows_to_arrow
    from adamem.retrieval.cold import ColdCounts, ColdIndex

    rng = random.Random(12)
    words = "dog cat home ran moved job Acme Berlin the a".split()  # noqa: SIM905
    words += ["北京", "深圳", "住在", "喜欢", "火锅", "报到"]
    facts = ["Ann works at Acme", "Ann 住在 深圳", "Ann moved to Berlin", "Ann 喜欢 火锅"]

    def message(i: int) -> MessageRow:
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        vector = float32_vector(rng.uniform(-1, 1) for _ in range(4))
        row = MessageRow(**{**_blank(MessageRow), "id": f"m{i:03d}", "speaker": "Ann", "text": text, "vector": vector})
        if rng.random() < 0.5:
            row = dataclasses.replace(row, extraction_json=json.dumps({"facts": [{"content": rng.choice(facts)}]}))
        return row

    rows = [message(i) for i in range(60)]
    hot, cold = rows[45:], rows[:45]
    cold_index = ColdIndex([rows_to_arrow("messages", cold, arrow_schema("messages", 4))])
    pieces = [rows_to_arrow("messages", cold[a:b], arrow_schema("messages", 4)) for a, b in ((0, 7), (7, 30), (30, 45))]
    counts = ColdCounts(p.select(["tokens"]) for p in pieces)  # a part too large to hold: its words counted
    every_word = {w for r in cold for w in row_tokens("messages", r).split()} | {"absent"}
    assert (counts.statistics.rows, counts.statistics.length) == (
        cold_index.statistics.rows,
        cold_index.statistics.length,
    )
    assert {w: counts.document_frequency(w) for w in every_word} == {
        w: cold_index.document_frequency(w) for w in every_word
    }
    assert counts.document_frequency("absent") == 0 and max(counts.document_frequency(w) for w in every_word) > 1
    index = TextIndex(hot, TEXT_FIELDS["messages"], extra=extracted_text)
    whole = TextIndex(rows, TEXT_FIELDS["messages"], extra=extracted_text)
    for question in ("where does Ann work, Acme?", "Ann 住在 哪里 深圳", "dog home", "火锅 the"):
        terms = tokenize(question)
        want = whole.scores(terms)
        got = index.scores(terms, beside=cold_index.statistics)
        assert np.allclose(got, [want[whole.position[i]] for i in index.ids], rtol=1e-12, atol=0)
        score = index.outside(terms, beside=cold_index.statistics)
        assert np.allclose([score(r) for r in cold], [want[whole.position[r.id]] for r in cold], rtol=1e-12, atol=0)
        assert any(w > 0 for w in want)
        alone = index.outside(terms)
        assert not np.allclose([alone(r) for r in cold], [want[whole.position[r.id]] for r in cold])


def test_a_message_index_made_from_stored_tokens_is_the_one_cut_from_speaker_text_and_extraction() -> None:
    """A message's stored tokens (``row_tokens``: speaker, text and extraction, each cut on its own) make the same
    index as cutting the message: English and Chinese, with and without an extraction, and a text that ends with
    its extraction's words."""
    rng = random.Random(14)
    texts = ["I start at Acme on Monday", "我下周一去星辰科技报到", "worked out at the gym", "住在深圳", "the", ""]
    facts = ["Ann joined Acme", "Ann 加入了 星辰科技", "Ann works out", "Ann 住在 深圳"]
    rows = []
    for i in range(40):
        row = MessageRow(**{**_blank(MessageRow), "id": f"m{i:02d}", "speaker": rng.choice(["Ann", "小林"])})
        row = dataclasses.replace(row, text=" ".join(rng.choice(texts) for _ in range(rng.randint(1, 3))))
        if rng.random() < 0.6:
            row = dataclasses.replace(row, extraction_json=json.dumps({"facts": [{"content": rng.choice(facts)}]}))
        rows.append(row)
    stored = {r.id: row_tokens("messages", r) for r in rows}
    said = {r.id: row_tokens("messages", dataclasses.replace(r, extraction_json="")) for r in rows}
    assert any(said[r.id].endswith(search_text(extracted_text(r))) for r in rows if extracted_text(r))
    cut = TextIndex(rows, TEXT_FIELDS["messages"], extra=extracted_text)
    taken = TextIndex(rows, TEXT_FIELDS["messages"], extra=extracted_text, tokens=stored)
    for question in ("where does Ann work now, Acme?", "小林 住在 哪里", "work out gym", "星辰科技", "absent"):
        assert np.array_equal(taken.scores(tokenize(question)), cut.scores(tokenize(question))), question
