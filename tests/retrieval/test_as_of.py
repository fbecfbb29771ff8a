"""Time travel: an answer from the memory as it was at an event time or a log offset."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from adamem.analysis import Embedder
from adamem.retrieval import AsOf, Layer, Retriever

Lines = list[dict[str, Any]]


def ms(day: str) -> int:
    return int(dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp() * 1000)


def test_a_fact_updated_later_answers_old_before_and_new_after(
    build: Callable[..., Any], embedder: Embedder, moving: tuple[Lines, Lines, Lines]
) -> None:
    memory = build("asof")
    before, move, after = moving
    memory.add(before + move + after)
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    question = "where do I live?"

    then = retriever.query("default:alice", question, as_of=ms("2024-04-15"))
    assert "Beijing" in then.items[0].content
    assert all("Shenzhen" not in i.content for i in then.items)  # not said yet
    assert all(p.occurred_at <= ms("2024-04-15") for i in then.items for p in i.provenance)
    assert then.as_of == AsOf(time=ms("2024-04-15")) and then.reference_time == ms("2024-04-15")
    assert {i.layer for i in then.items} <= {Layer.EPISODIC, Layer.PERSONA, Layer.WORKING, Layer.GRAPH}

    later = retriever.query("default:alice", question, as_of=ms("2024-05-20"))
    assert "Shenzhen" in later.items[0].content
    assert all(i.content != "Alice lives in Beijing" for i in later.items)  # the record was superseded by then
    assert all("Beijing" not in i.content for i in later.items[:2])
    assert retriever.query("default:alice", question).items[0].content == later.items[0].content  # as now

    move_offset = next(
        m.source_offset for m in memory.store.rows("messages", "default:alice") if m.text.startswith("I just moved")
    )
    at_offset = retriever.query("default:alice", question, as_of=AsOf(offset=move_offset))
    assert "Beijing" in at_offset.items[0].content
    assert all(p.source_offset < move_offset for i in at_offset.items for p in i.provenance)
    after_move = retriever.query("default:alice", question, as_of=AsOf(offset=move_offset + 1))
    assert "Shenzhen" in after_move.items[0].content
    retriever.close()
