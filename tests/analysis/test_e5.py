"""The e5 embedder: forward passes in parallel give the very vectors of one pass at a time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from adamem.analysis.e5 import E5Embedder, usable_cores

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "What is Melanie's favourite way to relax?",
    "我为什么开始健身？",
    "小明上周去了哪里？",
    "",
    "   ",
    "I moved to Lisbon last month and started learning Portuguese at a school near the river.",
    "Caroline said the painting of the sunset by the lake reminded her of the summer " * 3,
    "Why did I start working out?",
    "peanuts",
]


@pytest.fixture(scope="module")
def one_at_a_time() -> list[list[float]]:
    """Every text's query and passage vector, embedded one pass at a time."""
    serial = E5Embedder(parallel=1)
    return [serial.embed_query([t])[0] for t in TEXTS] + [serial.embed([t])[0] for t in TEXTS]


def test_parallel_passes_give_the_same_vectors_bit_for_bit(one_at_a_time: list[list[float]]) -> None:
    embedder = E5Embedder(parallel=2)
    jobs = [(i, t, q) for q in (True, False) for i, t in enumerate(TEXTS)] * 2

    def run(job: tuple[int, str, bool]) -> tuple[int, list[float]]:
        i, text, query = job
        vector = (embedder.embed_query if query else embedder.embed)([text])[0]
        return i + (0 if query else len(TEXTS)), vector

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, jobs[::-1]))
    assert len(results) == 2 * len(one_at_a_time)
    for slot, vector in results:
        assert vector == one_at_a_time[slot]
    assert np.isclose(np.linalg.norm(one_at_a_time[0]), 1.0, atol=1e-4)


def test_a_batch_in_parallel_equals_the_texts_one_by_one(one_at_a_time: list[list[float]]) -> None:
    embedder = E5Embedder(batch=3, parallel=2)
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(embedder.embed_query, [TEXTS, TEXTS[::-1]])
    assert first == one_at_a_time[: len(TEXTS)]
    assert second == one_at_a_time[: len(TEXTS)][::-1]


class _Meeting:
    """A stand-in model whose passes wait for one another: it records how many run at once."""

    def __init__(self, meet: int) -> None:
        self.barrier = threading.Barrier(meet, timeout=30)
        self.inside = 0
        self.most = 0
        self.lock = threading.Lock()

    def encode(self, texts: list[str], is_query: bool) -> Any:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            self.barrier.wait()  # breaks (BrokenBarrierError) unless `meet` passes are in at once
        finally:
            with self.lock:
                self.inside -= 1
        return np.zeros((len(texts), 384), dtype=np.float32)


def test_passes_overlap_up_to_the_bound_and_never_beyond() -> None:
    embedder = E5Embedder(parallel=2)
    meeting = _Meeting(2)
    embedder._model = meeting
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda t: embedder.embed_query([t]), ["q"] * 12))
    assert meeting.most == 2


def test_one_pass_at_a_time_when_asked() -> None:
    embedder = E5Embedder(parallel=1)
    meeting = _Meeting(1)
    embedder._model = meeting
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda t: embedder.embed_query([t]), ["q"] * 8))
    assert meeting.most == 1


def test_the_default_bound_is_the_usable_cores() -> None:
    assert E5Embedder().parallel == usable_cores() >= 1
    with pytest.raises(ValueError, match="at least 1"):
        E5Embedder(parallel=0)
