"""A record reads as a person writes it: once it has named its speaker, their possessive is "their" (English)
or 自己的 (Chinese), while the stored record, which full-text search matches, keeps the name."""

from __future__ import annotations

from pathlib import Path

from adamem import Memory
from adamem.retrieval.answer import readable


def test_the_speakers_later_possessive_reads_their_or_ziji() -> None:
    assert readable("Alice finished Alice's first 5k run", "Alice") == "Alice finished their first 5k run"
    assert readable("Alice's sister Emma visited Alice's flat", "Alice") == "Alice's sister Emma visited their flat"
    assert readable("爱丽丝跑完了爱丽丝的第一个五公里", "爱丽丝") == "爱丽丝跑完了自己的第一个五公里"
    # another person's name, a name inside a longer word, a speaker not named: left as they are
    assert readable("Alice met Bob's sister at Bob's party", "Alice") == "Alice met Bob's sister at Bob's party"
    assert readable("Al met Alan's dog", "Al") == "Al met Alan's dog"
    assert readable("Finished the first 5k run", "Alice") == "Finished the first 5k run"
    assert readable("Alice finished Alice's run", "") == "Alice finished Alice's run"


def test_an_answer_shows_records_readable_and_the_store_keeps_the_name(tmp_path: Path) -> None:
    with Memory(log=str(tmp_path / "log"), store=str(tmp_path / "store")) as m:
        m.add("alice", "I finished my first 5k run yesterday!", speaker="Alice", conversation_id="c1",
              occurred_at="2024-03-02T10:00:00Z")  # fmt: skip
        # in a session of its own: each message is found by its own words, and so each record shows
        m.add("alice", "我昨天跑完了我的第一个五公里。", speaker="Alice", conversation_id="c1-zh",
              occurred_at="2024-03-02T10:01:00Z")  # fmt: skip
        m.add("alice", "Hello again.", speaker="Alice", conversation_id="c2", occurred_at="2024-03-09T10:00:00Z")
        items = m.query("alice", "What did Alice finish?", top_k=10).items
        shown = {i.content for i in items if i.kind == "event"}
        assert {"Alice finished their first 5k run yesterday!", "Alice昨天跑完了自己的第一个五公里。"} <= shown
        stored = {r.content for r in m.store.rows("episodic", m.owner("alice"))}
        assert {"Alice finished Alice's first 5k run yesterday!", "Alice昨天跑完了Alice的第一个五公里。"} <= stored
