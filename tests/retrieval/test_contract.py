"""The same events give the same answer over the in-memory store and LanceDB.

Scores never come from the adapters: cosines are recomputed from the stored float32 vectors and
BM25 from the owner-scoped index of the snapshot. LanceDB's own BM25 counts documents of every
owner in the shard (and its scores differ from the in-memory Okapi), so through the store's
search ports (``SearchSource.STORE``) the adapters may propose different candidates at the margin;
here every table of the owner is smaller than ``fetch_k``, so both propose all matching rows and
the answers must be identical too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adamem.analysis import Embedder
from adamem.partitioning import partition_for
from adamem.retrieval import SEED_DEFAULT, AsOf, Retriever, SearchSource

QUESTIONS = [
    ("default:sam", "why did I start working out?", None),
    ("default:sam", "What food do I like?", None),
    ("default:sam", "what did I do last week?", None),
    ("default:xiaolin", "我为什么开始健身？", None),
    ("default:xiaolin", "我喜欢吃什么？", None),
    ("default:sam", "where is my office?", 1711400000000),
    ("default:xiaolin", "我姐姐什么时候来北京？", AsOf(offset=12)),
]


def _comparable(answer: Any) -> dict[str, Any]:
    data: dict[str, Any] = answer.to_dict()
    data.pop("timing_ms")
    return data


@pytest.fixture(scope="module")
def twins(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: Embedder,
    memory_class: type[Any],
    motivating_conversations: Callable[[], list[dict[str, Any]]],
) -> Iterator[tuple[Any, Any]]:
    """The motivating conversations projected into LanceDB and into the in-memory store."""
    lines = motivating_conversations()
    lance = memory_class(tmp_path_factory.mktemp("lance"), embedder)
    memory = memory_class(tmp_path_factory.mktemp("memory"), embedder, "memory://")
    for m in (lance, memory):
        m.add(lines)
    yield lance, memory
    lance.store.close()


@pytest.mark.parametrize("source", list(SearchSource))
def test_in_memory_and_lancedb_stores_answer_alike(
    twins: tuple[Any, Any], embedder: Embedder, source: SearchSource
) -> None:
    lance, memory = twins
    config = dataclasses.replace(SEED_DEFAULT, search=source)
    a = Retriever(lance.store, embedder, config, partitions=lance.partitions)
    b = Retriever(memory.store, embedder, config, partitions=memory.partitions)
    for user, question, as_of in QUESTIONS:
        left, right = a.query(user, question, as_of=as_of), b.query(user, question, as_of=as_of)
        assert left.items, question
        assert _comparable(left) == _comparable(right), question
    p = partition_for("sam", lance.partitions)
    assert lance.store.checkpoint(p) == memory.store.checkpoint(p)  # the same events applied to both
    a.close()
    b.close()
