"""Feedback on answers (``Memory.feedback``) ranks an owner's later answers, and replay keeps what it taught."""

from __future__ import annotations

from pathlib import Path

import pytest

from adamem import InvalidArgument, Memory
from adamem.errors import ItemNotFound
from adamem.projections.folds.style import STYLE_KIND
from adamem.retrieval.answer import Answer

SAID = [
    ("I like green tea in the morning.", "2026-03-01T08:00:00Z"),
    ("I ran a 5k race in the park on Saturday.", "2026-03-03T18:00:00Z"),
    ("I like oolong tea more than coffee.", "2026-03-06T08:00:00Z"),
    ("我喜欢喝普洱茶。", "2026-03-09T08:00:00Z"),
    ("I ran along the river on Sunday.", "2026-03-12T18:00:00Z"),
    ("Tomorrow I want to try a new tea shop.", "2026-03-15T08:00:00Z"),
]
QUESTIONS = ["What tea do I like?", "我喜欢什么茶？", "Where did I run?"]


def _summaries(answer: Answer, head: int = 6) -> int:
    """Records and traits among the first ``head`` items."""
    return sum(i.kind != "message" for i in answer.items[:head])


def _memory(tmp_path: Path) -> Memory:
    m = Memory(log=str(tmp_path / "log"), store=str(tmp_path / "store"))
    for text, at in SAID:
        m.add("ada", text, occurred_at=at)
    return m


def _judge_like_a_summary_reader(m: Memory, question: str) -> None:
    items = m.query("ada", question, top_k=6).items
    m.feedback(
        "ada",
        helped=[i.id for i in items if i.kind != "message"][:3],
        unhelpful=[i.id for i in items if i.kind == "message"][:3],
    )


def test_a_reader_of_summaries_gets_records_and_traits_raised_and_told_so(tmp_path: Path) -> None:
    with _memory(tmp_path) as m:
        before = {q: m.query("ada", q, top_k=6) for q in QUESTIONS}
        assert all(_summaries(a) and any(i.kind == "message" for i in a.items) for a in before.values())
        assert not any("answer style" in n for a in before.values() for n in a.notices)
        _judge_like_a_summary_reader(m, "What do I drink?")
        one = m.query("ada", QUESTIONS[0], top_k=6)
        assert not any("answer style" in n for n in one.notices)  # one judged answer is not enough to rank by
        _judge_like_a_summary_reader(m, "What sport do I do?")
        after = {q: m.query("ada", q, top_k=6) for q in QUESTIONS}
    raised = 0
    for q in QUESTIONS:
        old, new = _summaries(before[q], 3), _summaries(after[q], 3)
        assert new >= old, (q, before[q].items, after[q].items)  # no fewer records and traits at the head
        raised += new > old
        if new > old:
            assert any("answer style" in n for n in after[q].notices)
            assert any("answer style" in i.ordered_by for i in after[q].items)
    assert raised >= 2


def test_the_style_survives_a_replay_and_ranks_the_same(tmp_path: Path) -> None:
    with _memory(tmp_path) as m:
        _judge_like_a_summary_reader(m, "What do I drink?")
        _judge_like_a_summary_reader(m, "Where did I run?")
        style = [t for t in m.store.rows("persona", m.owner("ada")) if getattr(t, "kind", "") == STYLE_KIND]
        ranked = [[i.id for i in m.query("ada", q, top_k=6).items] for q in QUESTIONS]
        report = m.replay()
        assert report.switched
        again = [t for t in m.store.rows("persona", m.owner("ada")) if getattr(t, "kind", "") == STYLE_KIND]
        assert len(style) == 1 and again == style and style[0].value == "summaries"
        assert [[i.id for i in m.query("ada", q, top_k=6).items] for q in QUESTIONS] == ranked


def test_feedback_names_items_of_the_owner_once_each(tmp_path: Path) -> None:
    with _memory(tmp_path) as m:
        items = m.query("ada", "What tea do I like?").items
        with pytest.raises(InvalidArgument):
            m.feedback("ada")
        with pytest.raises(InvalidArgument):
            m.feedback("ada", helped=[items[0].id], unhelpful=[items[0].id])
        with pytest.raises(ItemNotFound):
            m.feedback("ada", helped=["no-such-item"])
        m.add("bea", "I like black coffee.")
        with pytest.raises(ItemNotFound):  # another owner's item is not this owner's
            m.feedback("bea", helped=[items[0].id])
        assert not any(getattr(t, "kind", "") == STYLE_KIND for t in m.store.rows("persona", m.owner("ada")))
