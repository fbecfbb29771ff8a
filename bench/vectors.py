"""Precomputed e5 vectors for the scale-out benchmark: computing them, serving them, and a process's CPU clock.

Embedding dominates a worker's CPU, so ``adamem bench scaleout`` embeds each distinct text once
with e5 (``precompute``), then lets the workers embed through ``VectorService``, an
OpenAI-compatible ``/v1/embeddings`` endpoint on the loopback that answers from those vectors
(``PrecomputedEmbedder``; an unknown text is a 400). ``proc_cpu_s`` reads a process's CPU
seconds from ``/proc/<pid>/stat``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adamem.events import ChatMessage

__all__ = ["PrecomputedEmbedder", "VectorService", "precompute", "proc_cpu_s"]

TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) a live process has used, from /proc/<pid>/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) ": field 3 (state) is fields[0]
    return (int(fields[11]) + int(fields[12])) / TICKS


class PrecomputedEmbedder:
    """e5's vectors of known texts, from a ``.npz`` file written by ``precompute``; an unknown text is an error."""

    dim = 384

    def __init__(self, path: str | Path) -> None:
        data = np.load(path, allow_pickle=False)
        self.name = str(data["name"])
        self._vectors = {str(t): v for t, v in zip(data["texts"], data["vectors"], strict=True)}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The stored vectors of the texts."""
        missing = [t for t in texts if t not in self._vectors]
        if missing:
            raise KeyError(f"no precomputed vector for {len(missing)} text(s), e.g. {missing[0][:60]!r}")
        return [self._vectors[t].tolist() for t in texts]

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Questions are not precomputed (the workers never embed one)."""
        raise KeyError("PrecomputedEmbedder holds passage vectors only")


class VectorService:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint on the loopback serving precomputed vectors (a thread)."""

    MODEL = "e5-precomputed"

    def __init__(self, embedder: PrecomputedEmbedder) -> None:
        import http.server
        import json
        import threading

        vectors = embedder

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                try:
                    got = vectors.embed(list(body["input"]))
                except KeyError as exc:
                    self._answer(400, {"error": {"message": str(exc)}})
                    return
                self._answer(200, {"data": [{"index": i, "embedding": v} for i, v in enumerate(got)]})

            def _answer(self, code: int, doc: dict[str, Any]) -> None:
                raw = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, name="vector-service", daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        """The settings that point ``adamem worker`` at this service."""
        return {
            "ADAMEM_EMBEDDER": "openai",
            "ADAMEM_EMBED_URL": self.url,
            "ADAMEM_EMBED_MODEL": self.MODEL,
            "ADAMEM_EMBED_DIM": "384",
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def precompute(messages: Sequence[ChatMessage], path: Path) -> dict[str, Any]:
    """Embed every distinct text the Memory Agent will embed with e5 (batches of 32), timed in CPU seconds."""
    from adamem.analysis.agent import embedding_text
    from adamem.analysis.e5 import E5Embedder

    texts = list(dict.fromkeys(embedding_text(m) for m in messages))
    e5 = E5Embedder()
    e5.embed(texts[:8])  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = [v for i in range(0, len(texts), 32) for v in e5.embed(texts[i : i + 32])]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    np.savez(path, name=np.array(e5.name), texts=np.array(texts), vectors=np.array(vectors, dtype=np.float32))
    return {
        "distinct_texts": len(texts),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "texts_per_s": round(len(texts) / wall, 1),
        "texts_per_cpu_s": round(len(texts) / cpu, 1),
        "name": e5.name,
    }
