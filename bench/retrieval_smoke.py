"""In-process retrieval latency for one large owner (~11k messages), per route, on LanceDB.

    .venv/bin/python bench/retrieval_smoke.py ../shared/data/locomo/locomo_dev.json \
        [--work /tmp/retrieval-smoke] [--copies 4] [--queries 300]

The owner ``bench-10k`` holds every LoCoMo dev turn ``--copies`` times (each copy two years later,
its own conversations and message ids), built with the real pipeline: rule extractor, projector,
LanceDB. Passage vectors are e5 vectors computed once per distinct text (copies share them), so
the build does not re-embed the same text four times. Queries are the LoCoMo questions.

Reported, per route: retrieval without the question embedding (p50/p95 of ``Timing.total`` minus
the embedding), the embedding alone (e5, one question at a time), and the first query after a
change (snapshot load, indexes and graph built from the store).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.ingest import parse_time
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.retrieval import SEED_DEFAULT, CacheSettings, Retriever
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages

OWNER = "bench-10k"
YEAR_MS = 365 * 86_400_000


class VectorCache:
    """e5 with a per-text cache persisted in a JSON file: copies of a turn are embedded once."""

    def __init__(self, inner: E5Embedder, path: Path) -> None:
        self.inner, self.path = inner, path
        self.name, self.dim = inner.name, inner.dim
        self.cache: dict[str, list[float]] = json.loads(path.read_text()) if path.exists() else {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Passage vectors, from the cache when known."""
        missing = sorted({t for t in texts if t not in self.cache})
        if missing:
            self.cache.update(zip(missing, self.inner.embed(missing), strict=True))
            self.path.write_text(json.dumps(self.cache))
        return [self.cache[t] for t in texts]

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Question vectors (not cached)."""
        return self.inner.embed_query(texts)


def messages(data: list[dict[str, Any]], copies: int) -> list[dict[str, Any]]:
    """Every turn of every sample, ``copies`` times, as JSON Lines objects of one owner."""
    out = []
    for copy in range(copies):
        for sample in data:
            conv = sample["conversation"]
            for key in sorted(
                (k for k in conv if k.startswith("session_") and not k.endswith("date_time")),
                key=lambda k: int(k.split("_")[1]),
            ):
                start = parse_time(conv[f"{key}_date_time"]) + copy * 2 * YEAR_MS
                for i, turn in enumerate(conv[key]):
                    out.append(
                        {
                            "user_id": OWNER,
                            "conversation_id": f"c{copy}/{sample['sample_id']}/{key}",
                            "message_id": f"c{copy}/{sample['sample_id']}/{turn['dia_id']}",
                            "speaker": turn["speaker"],
                            "role": "user" if turn["speaker"] == conv["speaker_a"] else "other",
                            "text": turn["text"],
                            "occurred_at": start + i * 1000,
                            "metadata": {"blip_caption": turn["blip_caption"]} if turn.get("blip_caption") else {},
                        }
                    )
    out.sort(key=lambda m: (m["occurred_at"], m["message_id"]))
    return out


def build(lines: list[dict[str, Any]], work: Path, embedder: VectorCache) -> None:
    """Publish and project (skipped when the store already holds the owner)."""
    store = open_store(str(work / "store"))
    done = f"default:{OWNER}" in store.owners()
    store.close()
    if done:
        return
    from adamem.ingest import load_messages

    settings = Settings(log_url=str(work / "log"), store_url=str(work / "store"), fsync=False)
    msgs = load_messages("\n".join(json.dumps(m) for m in lines).encode(), settings, "bench", "jsonl")

    async def run() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        try:
            await publish_messages(log, msgs, settings)
            store = open_store(settings.store)
            t = time.perf_counter()
            await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), embedder), settings)
            print(f"built {len(msgs)} messages in {time.perf_counter() - t:.0f}s", file=sys.stderr)
            store.close()
        finally:
            await log.stop()

    asyncio.run(run())


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    """Build the owner if needed, then time queries."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="locomo_dev.json")
    ap.add_argument("--work", default="/tmp/retrieval-smoke")
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    e5 = E5Embedder()
    embedder = VectorCache(e5, work / "vectors.json")
    lines = messages(data, args.copies)
    build(lines, work, embedder)

    questions = [str(q["question"]) for s in data for q in s["qa"] if q.get("category") in (1, 2, 3, 4)]
    questions = questions[: args.queries]
    vectors: dict[str, list[float]] = {}
    embed_ms: list[float] = []
    for q in questions:
        t = time.perf_counter()
        vectors[q] = e5.embed_query([q])[0]
        embed_ms.append((time.perf_counter() - t) * 1000)

    class Known:
        name, dim = e5.name, e5.dim

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            raise NotImplementedError

        def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
            return [vectors[t] for t in texts]

    store = open_store(str(work / "store"), read_only=True)
    config = SEED_DEFAULT.__class__(cache=CacheSettings(query_cache=False))
    retriever = Retriever(store, Known(), config)
    t = time.perf_counter()
    first = retriever.query(f"default:{OWNER}", questions[0])
    cold = (time.perf_counter() - t) * 1000
    snap = retriever.snapshot(f"default:{OWNER}")
    by_route: dict[str, list[float]] = defaultdict(list)
    stages: dict[str, list[float]] = defaultdict(list)
    for q in questions:
        answer = retriever.query(f"default:{OWNER}", q)
        by_route[answer.route.route.value].append(answer.timing.total)
        for stage, ms in answer.timing.to_dict().items():
            stages[stage].append(ms)
    retriever.close()
    print(
        f"owner {OWNER}: {len(snap.messages)} messages, {len(snap.records)} records, {len(snap.traits)} traits, "
        f"{len(snap.nodes)} graph nodes, {len(snap.edges)} edges"
    )
    print(
        f"first query after a change (snapshot load + indexes + graph): {cold:.0f} ms "
        f"(its own timing: {first.timing.to_dict()})"
    )
    print(f"question embedding (e5, one at a time): p50 {pct(embed_ms, 0.5):.1f} ms, p95 {pct(embed_ms, 0.95):.1f} ms")
    for route, values in sorted(by_route.items()):
        print(
            f"retrieval without embedding, {route:8} n={len(values):3}: p50 {pct(values, 0.5):.1f} ms, "
            f"p95 {pct(values, 0.95):.1f} ms, mean {statistics.fmean(values):.1f} ms"
        )
    print("stages (mean ms): " + ", ".join(f"{k} {statistics.fmean(v):.1f}" for k, v in stages.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
