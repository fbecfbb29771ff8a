"""The e5 embedder: forward passes in parallel give the very vectors of one pass at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from adamem.analysis.e5 import E5Embedder, default_parallel, usable_cores

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


class _Gate:
    """A stand-in model whose passes wait until released: it records each pass's size and how many run at once."""

    def __init__(self, fail: bool = False) -> None:
        self.release = threading.Event()
        self.sizes: list[int] = []
        self.inside = 0
        self.most = 0
        self.fail = fail
        self.lock = threading.Lock()

    def encode(self, texts: list[str], is_query: bool) -> Any:
        with self.lock:
            self.sizes.append(len(texts))
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            assert self.release.wait(30)
            if self.fail:
                raise RuntimeError("the engine failed")
            return np.full((len(texts), 384), float(len(texts)), dtype=np.float32)
        finally:
            with self.lock:
                self.inside -= 1


def _until(condition: Callable[[], bool]) -> None:
    """Wait (at most 30 s) until ``condition`` holds; fail otherwise."""
    for _ in range(3000):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("the condition never held")


def _start(pool: ThreadPoolExecutor, embedder: E5Embedder, text: str) -> Future[list[list[float]]]:
    return pool.submit(embedder.embed_query, [text])


def test_passes_overlap_up_to_the_bound_and_texts_waiting_share_the_next_pass() -> None:
    embedder = E5Embedder(parallel=2)
    gate = _Gate()
    embedder._model = gate
    with ThreadPoolExecutor(5) as pool:
        first = [_start(pool, embedder, t) for t in ("a", "b")]
        _until(lambda: gate.inside == 2)  # two passes at once: neither waits for the other
        later = [_start(pool, embedder, t) for t in ("c", "d", "e")]
        _until(lambda: len(embedder._waiting) == 3)
        assert gate.inside == 2  # never more passes than the bound
        gate.release.set()
        results = [f.result(30) for f in first + later]
    assert sorted(gate.sizes) == [1, 1, 3]  # the three that waited went through as one pass
    assert [r[0][0] for r in results] == [1.0, 1.0, 3.0, 3.0, 3.0]  # each got its own row of its pass
    assert gate.most == 2 and embedder.passes == 3 and embedder.texts == 5


def test_one_pass_at_a_time_when_asked() -> None:
    embedder = E5Embedder(parallel=1)
    gate = _Gate()
    embedder._model = gate
    with ThreadPoolExecutor(3) as pool:
        first = _start(pool, embedder, "a")
        _until(lambda: gate.inside == 1)
        later = [_start(pool, embedder, t) for t in ("b", "c")]
        _until(lambda: len(embedder._waiting) == 2)
        assert gate.inside == 1
        gate.release.set()
        for f in [first, *later]:
            f.result(30)
    assert gate.sizes == [1, 2] and gate.most == 1


def test_a_failed_pass_fails_every_call_in_it_and_frees_its_turn() -> None:
    embedder = E5Embedder(parallel=1)
    gate = _Gate(fail=True)
    embedder._model = gate
    with ThreadPoolExecutor(3) as pool:
        first = _start(pool, embedder, "a")
        _until(lambda: gate.inside == 1)
        later = [_start(pool, embedder, t) for t in ("b", "c")]
        _until(lambda: len(embedder._waiting) == 2)
        gate.release.set()
        for f in [first, *later]:
            with pytest.raises(RuntimeError, match="the engine failed"):
                f.result(30)
    gate.fail = False
    assert embedder.embed_query(["d"]) == [[1.0] * 384]  # the turn was given back


def test_the_default_bound_fills_the_cores_with_passes_of_the_engines_threads() -> None:
    assert default_parallel(2, 1) == 2  # the query service: OMP_NUM_THREADS=1
    assert default_parallel(2, 2) == 1  # each pass already uses both cores: one at a time, as before
    assert default_parallel(8, 2) == 4
    assert default_parallel(1, 4) == 1
    embedder = E5Embedder()
    threads = embedder._model._lib.omp_get_max_threads()
    assert embedder.parallel == default_parallel(usable_cores(), threads) >= 1
    with pytest.raises(ValueError, match="at least 1"):
        E5Embedder(parallel=0)
