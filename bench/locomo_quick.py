"""Evidence recall@10 of retrieval on LoCoMo, against flat BM25 and flat dense retrieval on the same turns.

    .venv/bin/python bench/locomo_quick.py ../shared/data/locomo/locomo_dev.json \
        [--work /tmp/locomo-work] [--samples conv-26,conv-30] [--set base_fusion=mix --set rrf_k=60]

Memory is built with the real pipeline (rule extractor + e5 embedder + projector) into a LanceDB
store under ``--work`` (reused when it already holds the samples). Each conversation is one owner
(``sample_id``); speaker_a has role user, speaker_b role other. For every question of categories
1–4 with at least one valid evidence id, the answer's provenance message ids are flattened in rank
order and the first 10 distinct ones are compared with the evidence ``dia_id``s (a message row's
``message_id``). Flat baselines rank the same stored turns: BM25 over their bilingual tokens
(owner-scoped, k1 1.2, b 0.75), dense by cosine of the question vector with the stored turn vectors,
and their reciprocal-rank fusion (k 60). Latency percentiles are per route, in-process, warm caches.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from adamem.analysis import Embedder
from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.ingest import load_messages
from adamem.projections.folds.params import SEED_DEFAULT as MEMORY_DEFAULT
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import MessageRow
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.projections.store.scoring import bm25_scores
from adamem.retrieval import SEED_DEFAULT, BaseFusion, CacheSettings, RetrievalConfig, Retriever, SearchSource
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.text import tokenize
from bench.common import store_embedder

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def work_embedder(work: Path) -> Embedder:
    """The embedder of the store under ``work``, as its generation records it (the default embedder for a store not
    built yet, as ``adamem bench locomo`` builds it): questions are embedded as its messages were."""
    store = open_store(str(work / "store"))
    try:
        return store_embedder(store)
    finally:
        store.close()


def build(
    data: list[dict[str, Any]], work: Path, embedder: Embedder, params: MemoryParameters = MEMORY_DEFAULT
) -> None:
    """Publish the samples to an embedded log and project them into a LanceDB store (skipped if done)."""
    store = open_store(str(work / "store"))
    have = set(store.owners())
    store.close()
    wanted = {f"default:{s['sample_id']}" for s in data}
    if wanted <= have:
        return
    settings = Settings(log_url=str(work / "log"), store_url=str(work / "store"), fsync=False)
    messages = load_messages(json.dumps(data).encode(), settings, "locomo", "locomo")

    async def run() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        try:
            if not have:
                await publish_messages(log, messages, settings)
            store = open_store(settings.store)
            t = time.perf_counter()
            stats = await run_pipeline(log, Projector(store, params), MemoryAgent(RuleExtractor(), embedder), settings)
            print(f"built {stats.applied} analyses in {time.perf_counter() - t:.0f}s", file=sys.stderr)
            store.close()
        finally:
            await log.stop()

    asyncio.run(run())


class CachedQueries:
    """An embedder with its question vectors cached in a JSON file (they are deterministic): fast re-runs. A file
    written by another embedder is not read (its questions are embedded again and the file rewritten)."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner, self.path = inner, path
        self.name, self.dim = inner.name, inner.dim
        saved = json.loads(path.read_text()) if path.exists() else {}
        self.cache: dict[str, list[float]] = saved.get("vectors", {}) if saved.get("embedder") == inner.name else {}
        self.dirty = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Stored texts are not cached."""
        return self.inner.embed(texts)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Question vectors, from the cache when known."""
        missing = [t for t in texts if t not in self.cache]
        if missing:
            self.cache.update(zip(missing, self.inner.embed_query(missing), strict=True))
            self.dirty = True
        return [self.cache[t] for t in texts]

    def save(self) -> None:
        """Write the cache back."""
        if self.dirty:
            self.path.write_text(json.dumps({"embedder": self.name, "vectors": self.cache}))


def built_store(
    data: list[dict[str, Any]], work: Path, params: MemoryParameters = MEMORY_DEFAULT
) -> tuple[Embedder, Any, CachedQueries]:
    """The store's embedder (``work_embedder``), the store under ``work`` opened read-only (built first when missing,
    ``build``) and the question vectors cached in ``work/questions.json``."""
    embedder = work_embedder(work)
    build(data, work, embedder, params)
    return embedder, open_store(str(work / "store"), read_only=True), CachedQueries(embedder, work / "questions.json")


@contextmanager
def shipped_retriever(data: list[dict[str, Any]], work: Path) -> Iterator[tuple[Any, CachedQueries, Retriever]]:
    """The store under ``work`` (``built_store``), its cached question vectors and a ``Retriever`` with the shipped
    configuration (answer cache off); on leaving, the question vectors are saved and both closed."""
    _, store, queries = built_store(data, work)
    retriever = Retriever(store, queries, parse_set([]))
    try:
        yield store, queries, retriever
    finally:
        queries.save()
        retriever.close()
        store.close()


def evidence_ids(qa: dict[str, Any], turns: set[str]) -> list[str]:
    """Valid evidence dia_ids of a question (malformed and dangling ids dropped)."""
    out: list[str] = []
    for raw in qa.get("evidence") or []:
        for part in re.split(r"[;\s]+", str(raw)):
            if part in turns and part not in out:
                out.append(part)
    return out


def conversations(
    data: list[dict[str, Any]], store: Any, retriever: Retriever
) -> Iterator[tuple[str, str, list[MessageRow], list[tuple[int, list[str], str]]]]:
    """Per conversation, its owner warmed up first (snapshot and graph loaded): its sample id, owner key, message
    rows, and its questions of categories 1–4 that have evidence, as (category, evidence ids, question)."""
    for sample in data:
        owner = f"default:{sample['sample_id']}"  # LoCoMo is published for the default tenant
        rows = [m for m in store.rows("messages", owner) if isinstance(m, MessageRow)]
        turns = {m.message_id for m in rows}
        asked = [
            (int(qa["category"]), gold, str(qa["question"]))
            for qa in sample["qa"]
            if qa.get("category") in CATEGORIES and (gold := evidence_ids(qa, turns))
        ]
        retriever.query(owner, "warm up")
        yield sample["sample_id"], owner, rows, asked


def recall(ranked: list[str], gold: list[str], k: int = 10) -> float:
    """Share of the gold ids among the first k distinct ranked ids."""
    top: list[str] = []
    for r in ranked:
        if r not in top:
            top.append(r)
        if len(top) == k:
            break
    return sum(g in top for g in gold) / len(gold)


def figures(found: Mapping[str, Mapping[int, Sequence[float]]]) -> dict[str, float]:
    """R@10 in percent (one decimal) from per-question recalls by conversation and category: each conversation's over
    categories 1–4, all of them pooled (``1-4``), and each category pooled (by its ``CATEGORIES`` name)."""
    convs = sorted(found)

    def percent(values: list[float]) -> float:
        return round(100 * statistics.fmean(values), 1)

    out = {c: percent([x for k in CATEGORIES for x in found[c][k]]) for c in convs}
    out["1-4"] = percent([x for c in convs for k in CATEGORIES for x in found[c][k]])
    out.update({name: percent([x for c in convs for x in found[c][k]]) for k, name in CATEGORIES.items()})
    return out


def held_out_choice(rows: Sequence[Mapping[str, Any]], base: Mapping[str, Any], convs: list[str]) -> dict[str, Any]:
    """Each conversation's figure in the row (``variant`` and ``figures``) best on the other conversations (ties go to
    ``base``), with that row's name, and the mean of those figures against ``base``'s: a choice scored on what it was
    not made on."""
    held: dict[str, Any] = {"variant": "held-out choice"}
    for c in convs:
        best = max(rows, key=lambda r: (statistics.fmean(r[o] for o in convs if o != c), r is base))
        held[c], held[f"{c} chose"] = best[c], best["variant"]
    held["mean"] = round(statistics.fmean(held[c] for c in convs), 2)
    held["base mean"] = round(statistics.fmean(base[c] for c in convs), 2)
    return held


def parse_set(values: list[str]) -> RetrievalConfig:
    """``SEED_DEFAULT`` with ``key=value`` replacements (``cache.<field>=<int>`` for ``CacheSettings``)."""
    changes: dict[str, Any] = {"cache": CacheSettings(query_cache=False)}
    for item in values:
        key, _, raw = item.partition("=")
        if key.startswith("cache."):  # a cache setting, e.g. cache.hot_messages=100 (an integer)
            changes["cache"] = dataclasses.replace(changes["cache"], **{key.removeprefix("cache."): int(raw)})
            continue
        current = getattr(SEED_DEFAULT, key)
        if isinstance(current, (BaseFusion, SearchSource)):
            changes[key] = type(current)(raw)
        elif isinstance(current, bool):
            changes[key] = raw.lower() in ("1", "true", "yes")
        elif isinstance(current, int):
            changes[key] = int(raw)
        elif isinstance(current, float):
            changes[key] = float(raw)
        elif isinstance(current, tuple):
            changes[key] = tuple(v for v in raw.split(",") if v)
        elif key == "fusion":
            from adamem.retrieval import FusionWeights

            changes[key] = FusionWeights(*map(float, raw.split(",")))
        else:
            changes[key] = raw
    return dataclasses.replace(SEED_DEFAULT, **changes)


def main() -> int:
    """Run the measurement and print a table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="locomo_dev.json (or any LoCoMo-format file)")
    ap.add_argument("--work", default="/tmp/locomo-work", help="folder for the log and the LanceDB store")
    ap.add_argument("--samples", default="", help="comma-separated sample ids (default: all)")
    ap.add_argument("--set", action="append", default=[], help="config field=value (repeatable)")
    ap.add_argument("--misses", type=int, default=0, help="print this many missed questions per category")
    ap.add_argument("--no-baselines", action="store_true", help="skip the flat baselines")
    ap.add_argument(
        "--cache-questions",
        action="store_true",
        help="reuse question vectors from WORK/questions.json (latency then excludes embedding)",
    )
    args = ap.parse_args()

    data = json.loads(Path(args.data).read_text())
    if args.samples:
        keep = set(args.samples.split(","))
        data = [s for s in data if s["sample_id"] in keep]
    work = Path(args.work)
    embedder = work_embedder(work)
    build(data, work, embedder)
    config = parse_set(args.set)
    store = open_store(str(work / "store"), read_only=True)
    queries = CachedQueries(embedder, work / "questions.json")
    retriever = Retriever(store, queries if args.cache_questions else embedder, config)

    scores: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    latency: dict[str, list[float]] = defaultdict(list)
    misses: dict[int, list[str]] = defaultdict(list)
    for sample in data:
        owner = f"default:{sample['sample_id']}"  # the owner key: LoCoMo is published for the default tenant
        msgs = [r for r in store.rows("messages", owner) if isinstance(r, MessageRow)]
        turns = {m.message_id for m in msgs}
        docs = [tokenize(f"{m.speaker} {m.text}") for m in msgs]
        mat = np.asarray([m.vector for m in msgs], dtype=np.float64)
        retriever.query(owner, "warm up")  # loads the snapshot and the graph
        for qa in sample["qa"]:
            cat = qa.get("category")
            gold = evidence_ids(qa, turns)
            if cat not in CATEGORIES or not gold:
                continue
            q = str(qa["question"])
            t = time.perf_counter()
            answer = retriever.query(owner, q, top_k=10)
            latency[answer.route.route.value].append((time.perf_counter() - t) * 1000)
            r = recall(answer.message_ids(), gold)
            scores["ours"][cat].append(r)
            if r < 1 and len(misses[cat]) < args.misses:
                misses[cat].append(f"{q} gold={gold} got={answer.message_ids(10)} route={answer.route.route}")
            if args.no_baselines:
                continue
            bm = bm25_scores(docs, tokenize(q))
            qv = np.asarray(queries.embed_query([q])[0])
            cos = mat @ qv
            bm_rank = sorted(range(len(msgs)), key=lambda i: (-bm[i], i))
            dn_rank = sorted(range(len(msgs)), key=lambda i: (-cos[i], i))
            rrf: dict[int, float] = defaultdict(float)
            for ranking in (bm_rank, dn_rank):
                for pos, i in enumerate(ranking):
                    rrf[i] += 1 / (60 + pos + 1)
            fused = sorted(rrf, key=lambda i: (-rrf[i], i))
            for name, ranking in (("flat-bm25", bm_rank), ("flat-e5", dn_rank), ("flat-rrf", fused)):
                scores[name][cat].append(recall([msgs[i].message_id for i in ranking[:10]], gold))

    print(f"config: {config.name} " + " ".join(args.set))
    header = "| retriever | " + " | ".join(f"{c} {CATEGORIES[c]} (n)" for c in CATEGORIES) + " | overall (n) |"
    print(header)
    print("|" + "---|" * (len(CATEGORIES) + 2))
    queries.save()
    for name in ("ours", "flat-bm25", "flat-e5", "flat-rrf"):
        if not scores[name]:
            continue
        cells = []
        allr: list[float] = []
        for c in CATEGORIES:
            vals = scores[name][c]
            allr += vals
            cells.append(f"{100 * statistics.fmean(vals):.1f} ({len(vals)})" if vals else "–")
        print(f"| {name} | " + " | ".join(cells) + f" | {100 * statistics.fmean(allr):.1f} ({len(allr)}) |")
    for route, vals in sorted(latency.items()):
        vals.sort()
        p50, p95 = vals[len(vals) // 2], vals[min(len(vals) - 1, int(len(vals) * 0.95))]
        print(f"latency {route}: n={len(vals)} p50={p50:.1f} ms p95={p95:.1f} ms")
    for cat, lines in misses.items():
        print(f"-- misses, category {cat}")
        for line in lines:
            print("  " + line)
    retriever.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
