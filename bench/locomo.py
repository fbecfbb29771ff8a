"""``adamem bench locomo``: evidence recall@k and answer-token coverage on a LoCoMo-format file.

Every conversation is ingested through the real pipeline (publish to an embedded log in a temp
folder → Memory Agent → projections into LanceDB); every question is asked through the
``Retriever`` the query service uses. On the same ingested data the run also measures ablations
(``RetrievalConfig`` variants, and a store view without persona/episodic rows) and two flat
baselines over the raw turns (dense with the same e5 vectors, and BM25).

Recall@k, MRR@k and nDCG@k: the answer's items are flattened, in rank order, into distinct source message ids
(``dia_id``; each item contributes its provenance in order); the first k are compared with the
question's evidence ids (MRR: 1 / rank of the first evidence id; nDCG: binary relevance). The
answer asked for is the one for ``top_k = k``. The route the full system took is tallied against the
question's LoCoMo category (``route_confusion``). Coverage@k: share of the
gold answer's content words found in the retrieved text — the first k messages, each written as
``speaker (date): text [image: caption]``, plus the contents of the items that brought them.

Systems: ``full``; ``no-graph`` (no graph expansion); ``no-fusion`` (semantic score only);
``no-persona-episodic`` (the persona and episodic rows hidden, graph expansion over messages kept);
``messages-only`` (the same hybrid retrieval over messages alone: no persona, episodic or graph).

Leave-conversations-out (``--lco``): every tunable variant in ``lco_grid()`` is measured per
question at k = 10; for each fold (one conversation held out) the variant with the best R@10 over
categories 1–4 on the *other* conversations is chosen, and its figures on the held-out one are
reported; the pooled held-out figures (every question is held out exactly once) are the
leave-conversations-out result.

Baselines: ``flat-dense`` ranks the stored turns by cosine of the e5 query vector with the turn
vectors the system stored; ``flat-bm25`` by Okapi BM25 over the project's tokens of speaker and
text; ``flat-bm25-ref`` follows the protocol of the shared reference figures (lower-case words of
``speaker (session date-time): text [image: caption]``), a check that the evaluator reproduces them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import build_embedder, build_extractor
from adamem.events import ChatMessage
from adamem.owners import owner_key
from adamem.progress import Progress
from adamem.projections.folds.rows import MessageRow, Row
from adamem.projections.store.base import ArchiveSplit, Hit, MemoryStore, OwnerChanges, OwnerColumns, owner_columns
from adamem.projections.store.factory import open_store
from adamem.projections.store.scoring import bm25_scores
from adamem.retrieval import SEED_DEFAULT, Answer, FusionWeights, RetrievalConfig, Retriever
from adamem.settings import Settings
from adamem.text import tokenize
from bench.build import build_memory, built_by
from bench.common import (
    DEFAULT_LOCOMO,
    CachingEmbedder,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    standalone_main,
)
from bench.metrics import (
    CATEGORIES,
    coverage,
    flatten,
    mean,
    ndcg_at,
    parse_evidence,
    recall_at,
    reciprocal_rank,
    summary_ms,
    words,
)

__all__ = ["MessagesOnly", "lco_folds", "lco_grid", "main", "run", "run_lco", "system_configs"]

HIDDEN = frozenset({"persona", "episodic"})
FLAT = ("flat-dense", "flat-bm25", "flat-bm25-ref")
OVERALL = "1-4"


class MessagesOnly:
    """A read-only view of a store without the persona and episodic layers (the "messages only" ablation).

    ``RetrievalConfig`` has no switch for the searched layers, so the ablation hides their rows from
    the retriever: base retrieval searches messages only and graph expansion cannot surface records.
    """

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.url = inner.url

    def bind(self, partitions: int) -> None:  # pragma: no cover - read-only use
        self.inner.bind(partitions)

    def partition_count(self) -> int:
        return self.inner.partition_count()

    def checkpoint(self, partition: int) -> dict[str, int]:
        return self.inner.checkpoint(partition)

    def change_token(self, partition: int) -> str:
        return self.inner.change_token(partition)

    def owner_changes(self, user_id: str, since: str) -> OwnerChanges | None:
        changes = self.inner.owner_changes(user_id, since)
        if changes is None:
            return None
        rows = tuple(r for r in changes.rows if r.TABLE not in HIDDEN)
        return OwnerChanges(changes.token, rows, {t: ids for t, ids in changes.gone.items() if t not in HIDDEN})

    def commit(self, partition: int, changes: Any, offsets: dict[str, int]) -> None:  # pragma: no cover
        raise RuntimeError("the messages-only view is read-only")

    def archive_split(self, user_id: str, hot_messages: int) -> ArchiveSplit | None:
        return self.inner.archive_split(user_id, hot_messages)

    def load_owner(self, user_id: str, messages_from_seq: int = 0) -> list[Row]:
        return [r for r in self.inner.load_owner(user_id, messages_from_seq) if r.TABLE not in HIDDEN]

    def load_owner_columns(self, user_id: str, messages_from_seq: int = 0) -> OwnerColumns:
        return owner_columns(self.load_owner(user_id, messages_from_seq))

    def messages_by_id(self, user_id: str, ids: Sequence[str]) -> list[MessageRow]:
        return self.inner.messages_by_id(user_id, ids)

    def rows(self, table: str, user_id: str) -> list[Row]:
        return [] if table in HIDDEN else self.inner.rows(table, user_id)

    def owners(self) -> list[str]:
        return self.inner.owners()

    def vector_search(
        self, table: str, user_id: str, vector: Sequence[float], k: int, below_seq: int | None = None
    ) -> list[Hit]:
        return [] if table in HIDDEN else self.inner.vector_search(table, user_id, vector, k, below_seq)

    def text_search(
        self, table: str, user_id: str, query: str, k: int, below_seq: int | None = None, *, context: bool = False
    ) -> list[Hit]:
        return [] if table in HIDDEN else self.inner.text_search(table, user_id, query, k, below_seq, context=context)

    def erase_history(self, partition: int) -> list[str]:  # pragma: no cover - read-only use
        raise RuntimeError("the messages-only view is read-only")

    def release(self, partitions: Sequence[int]) -> None:
        self.inner.release(partitions)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # anything else the retriever may use: the inner store's
        return getattr(self.inner, name)


TIERED_HOT = 100
"""Messages the ``tiered`` system holds per conversation (each has 300-700): the rest are read as cold ones."""


def index_vectors(store_url: str, min_rows: int) -> None:
    """Give every table of a local LanceDB store with ``min_rows`` rows or more its vector index, checkpointed."""
    from adamem.projections.store.lance import LanceStore

    writer = LanceStore(store_url, vector_index_min_rows=min_rows)
    try:
        for p in range(writer.partition_count()):
            writer._shard(p, create=False)  # open every shard: ``optimize`` indexes and checkpoints open ones
        writer.optimize()
    finally:
        writer.close()


def system_configs(base: RetrievalConfig = SEED_DEFAULT) -> dict[str, tuple[RetrievalConfig, bool]]:
    """The full system and its ablations: name → (config, messages-only view)."""
    return {
        "full": (base, False),
        "no-graph": (replace(base, name=f"{base.name}/no-graph", graph_seeds=0), False),
        "no-fusion": (
            replace(base, name=f"{base.name}/semantic-only", fusion=FusionWeights(1.0, 0.0, 0.0, 0.0)),
            False,
        ),
        "no-persona-episodic": (replace(base, name=f"{base.name}/no-persona-episodic"), True),
        "messages-only": (replace(base, name=f"{base.name}/messages-only", graph_seeds=0), True),
        # a long-lived owner's reads: the newest TIERED_HOT messages held, the older ones through the store's indexes
        "tiered": (
            replace(base, name=f"{base.name}/tiered-{TIERED_HOT}", cache=replace(base.cache, hot_messages=TIERED_HOT)),
            False,
        ),
    }


def _date(ms: int) -> str:
    d = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return f"{d.day} {d.strftime('%B %Y')}"


def render(m: ChatMessage) -> str:
    """A turn as shown to a reader: ``speaker (date): text [image: caption]``."""
    caption = m.metadata.get("blip_caption")
    text = f"{m.speaker.name} ({_date(m.occurred_at)}): {m.text}"
    return f"{text} [image: {caption}]" if caption else text


def reference_texts(doc: dict[str, Any]) -> dict[str, str]:
    """Turns as the shared reference figures index them: ``speaker (session date-time): text [image: caption]``."""
    conv = doc.get("conversation") or {}
    out: dict[str, str] = {}
    for key, turns in conv.items():
        if not re.fullmatch(r"session_\d+", key) or not isinstance(turns, list):
            continue
        date = conv.get(f"{key}_date_time", "")
        for t in turns:
            if isinstance(t, dict) and t.get("dia_id"):
                text = f"{t.get('speaker', '')} ({date}): {t.get('text', '')}"
                out[str(t["dia_id"])] = f"{text} [image: {t['blip_caption']}]" if t.get("blip_caption") else text
    return out


class Tally:
    """Recall and coverage of one system, per k and category; latencies per route."""

    def __init__(self) -> None:
        self.recall: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.cover: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.mrr: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.ndcg: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.latency: dict[str, list[float]] = defaultdict(list)

    def add(
        self, k: int, cat: int, ranked: Sequence[str], gold: Sequence[str], answer: Any, texts: Sequence[str]
    ) -> None:
        self.recall[k][cat].append(recall_at(ranked, gold, k))
        self.mrr[k][cat].append(reciprocal_rank(ranked, gold, k))
        self.ndcg[k][cat].append(ndcg_at(ranked, gold, k))
        if cat != 5:
            c = coverage(answer, texts)
            if c is not None:
                self.cover[k][cat].append(c)

    def table(self, which: dict[int, dict[int, list[float]]]) -> dict[str, dict[str, float | None]]:
        out: dict[str, dict[str, float | None]] = {}
        for k, per in sorted(which.items()):
            row: dict[str, float | None] = {}
            for cat in CATEGORIES:
                m = mean(per.get(cat, []))
                row[str(cat)] = None if m is None else round(100 * m, 2)
            core = [v for cat in (1, 2, 3, 4) for v in per.get(cat, [])]
            m = mean(core)
            row[OVERALL] = None if m is None else round(100 * m, 2)
            out[str(k)] = row
        return out

    def to_dict(self) -> dict[str, Any]:
        ks = sorted(self.recall)
        n = {str(c): len(self.recall[ks[0]].get(c, [])) for c in CATEGORIES} if ks else {}
        return {
            "recall": self.table(self.recall),
            "coverage": self.table(self.cover),
            "mrr": self.table(self.mrr),
            "ndcg": self.table(self.ndcg),
            "n": n,
            "latency_ms": {route: dict(summary_ms(v)) for route, v in sorted(self.latency.items())},
        }


def _order(scores: Sequence[float]) -> list[int]:
    """Indexes by score, best first; ties in stored order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def _answer_view(answer: Answer, k: int, text_of: dict[str, str]) -> tuple[list[str], list[str]]:
    """(ranked message ids, retrieved texts for coverage@k) of a system answer."""
    ranked = flatten([[p.message_id for p in item.provenance] for item in answer.items])
    top = set(ranked[:k])
    texts = [text_of[mid] for mid in ranked[:k] if mid in text_of]
    for item in answer.items:  # the items that brought the first k messages (their own words count too)
        if any(p.message_id in top for p in item.provenance) and item.kind != "message":
            texts.append(item.content)
    return ranked, texts


def run(
    data: str | Path,
    ks: Sequence[int] = (5, 10, 25),
    *,
    samples: Sequence[str] | None = None,
    work: str | None = None,
    systems: Sequence[str] | None = None,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
    ann_min_rows: int = 0,
) -> dict[str, Any]:
    """Build memory from ``data`` with the real pipeline and measure every system and baseline.

    ``ann_min_rows``: first give every table of at least that many rows the store's vector index
    (IVF_PQ, as a writer's ``optimize`` makes past its threshold), so the store's vector searches
    (a tiered owner's cold messages) are approximate, as they are on a large store."""
    say = progress or (lambda s: None)
    ks = sorted(set(ks))
    docs = load_locomo(data)
    if samples:
        docs = [d for d in docs if d.get("sample_id") in set(samples)]
    root = Path(work) if work else Path(tempfile.mkdtemp(prefix="adamem-bench-locomo-"))
    settings = Settings.from_env(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False)
    messages = locomo_messages(docs, settings)
    embedder = CachingEmbedder(build_embedder(settings), passages=False)  # questions repeat across systems
    reused = (root / "store").exists()
    build: dict[str, Any] = {"reused": reused, "work": str(root)}
    if not reused:
        say(f"ingesting {len(messages)} turns of {len(docs)} conversation(s) through the pipeline …")
        built = build_memory(messages, settings, MemoryAgent(build_extractor(settings), embedder))
        build.update(
            messages=built.messages,
            publish_s=round(built.publish_s, 2),
            pipeline_s=round(built.pipeline_s, 2),
            analyzed=built.stats.analyzed,
            applied=built.stats.applied,
            dead_lettered=built.stats.dead_lettered,
            pipeline_msg_per_s=round(built.messages / built.pipeline_s, 2),
        )
        say(f"built in {built.pipeline_s:.0f}s ({built.messages / built.pipeline_s:.1f} msg/s)")
    build["built_by"] = _checked_build(root)
    if ann_min_rows:
        index_vectors(settings.store_url, ann_min_rows)
        say(f"vector indexes made on tables of {ann_min_rows}+ rows")
    store = open_store(settings.store, read_only=True)
    chosen = {n: v for n, v in system_configs().items() if systems is None or n in systems}
    retrievers = {
        n: Retriever(MessagesOnly(store) if hide else store, embedder, cfg) for n, (cfg, hide) in chosen.items()
    }
    tallies: dict[str, Tally] = defaultdict(Tally)
    counts: Counter[str] = Counter()
    routes: Counter[str] = Counter()
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    by_owner: dict[str, list[ChatMessage]] = defaultdict(list)
    for m in messages:
        by_owner[m.user_id].append(m)
    t_start = time.perf_counter()
    asked = sum(len((doc.get("qa") or [])[:limit]) for doc in docs)
    bar = Progress("locomo: questions", asked, unit="q", quiet=not settings.progress, every=settings.progress_seconds)
    for doc in docs:
        user = str(doc.get("sample_id"))
        owner = owner_key(settings.default_tenant, user)
        rows = [r for r in store.rows("messages", owner) if isinstance(r, MessageRow)]
        rows.sort(key=lambda r: r.seq)
        turns = {r.message_id for r in rows}
        text_of = {m.message_id: render(m) for m in by_owner[user]}
        ids = [r.message_id for r in rows]
        bm_docs = [tokenize(f"{r.speaker} {r.text}") for r in rows]
        ref_of = reference_texts(doc)
        ref_docs = [words(ref_of.get(r.message_id, r.text)) for r in rows]
        mat = np.asarray([r.vector for r in rows], dtype=np.float64)
        qas = doc.get("qa") or []
        if limit is not None:
            qas = qas[:limit]
        for qa in qas:
            bar.update()
            counts["questions"] += 1
            cat = qa.get("category")
            if cat not in CATEGORIES:
                counts["skipped_category"] += 1
                continue
            raw = qa.get("evidence")
            gold = parse_evidence(raw, turns)
            n_raw = len(parse_evidence(raw))
            counts["dropped_ids"] += max(0, n_raw - len(gold))
            if not gold:
                counts["skipped_no_evidence"] += 1
                continue
            counts["evaluated"] += 1
            question = str(qa.get("question", ""))
            gold_answer = qa.get("answer")
            for name, retriever in retrievers.items():
                for k in ks:
                    t = time.perf_counter()
                    answer = retriever.query(owner, question, top_k=k)
                    ms = (time.perf_counter() - t) * 1000
                    if name == "full" and k == ks[0]:
                        routes[answer.route.route.value] += 1
                        confusion[answer.route.route.value][f"{cat} {CATEGORIES[cat]}"] += 1
                    tallies[name].latency[answer.route.route.value].append(ms)
                    ranked, texts = _answer_view(answer, k, text_of)
                    tallies[name].add(k, cat, ranked, gold, gold_answer, texts)
            qv = np.asarray(embedder.embed_query([question])[0], dtype=np.float64)
            dense = mat @ qv if len(rows) else np.zeros(0)
            bm = bm25_scores(bm_docs, tokenize(question))
            ref = bm25_scores(ref_docs, words(question))
            for name, scores in (("flat-dense", list(dense)), ("flat-bm25", bm), ("flat-bm25-ref", ref)):
                order = _order(scores)
                ranked = [ids[i] for i in order]
                for k in ks:
                    tallies[name].add(k, cat, ranked, gold, gold_answer, [text_of.get(x, "") for x in ranked[:k]])
        say(f"{owner}: {counts['evaluated']} question(s) so far, {time.perf_counter() - t_start:.0f}s")
    bar.close()
    for r in retrievers.values():
        r.close()
    store.close()
    if not work:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "data": str(data),
        "conversations": len(docs),
        "messages": len(messages),
        "ks": list(ks),
        "questions": dict(counts),
        "routes_full": dict(routes),
        "route_confusion": {route: dict(sorted(per.items())) for route, per in sorted(confusion.items())},
        "build": build,
        "embedder": {"name": embedder.name, "query_cache": embedder.stats()},
        "query_seconds": round(time.perf_counter() - t_start, 1),
        "systems": {name: tallies[name].to_dict() for name in [*chosen, *FLAT]},
        "configs": {n: cfg.name for n, (cfg, _) in chosen.items()},
    }


def _checked_build(root: Path) -> dict[str, Any]:
    """The stamp of the store in ``root`` (``bench.build.built_by``), with a warning on stderr when this code
    would not build the same rows: its figures would be of another store's rows."""
    stamp = built_by(root)
    if stamp["same_code"] is None:
        said = f"the store in {root} has no stamp of the code that built it"
    elif not stamp["same_code"]:
        said = f"the store in {root} was built by other code (commit {stamp.get('git', {}).get('commit', '')[:12]})"
    else:
        return stamp
    print(
        f"warning: {said}; the figures are of its rows, which this code may not build (remove the folder to "
        "build it again)",
        file=sys.stderr,
        flush=True,
    )
    return stamp


def lco_grid(base: RetrievalConfig = SEED_DEFAULT) -> dict[str, RetrievalConfig]:
    """The tunable variants leave-conversations-out chooses among (the shipped default first).

    Measured and dropped (notes.md): ``newest_first`` off (indifferent), ``graph_relevance`` 0.5 / 1
    (never chosen), ``recency_topic_margin`` 0 (the same R@10), ``aggregate_graph`` 0.3, ``aggregate_seeds`` 10 /
    20, ``graph_seeds`` 10, a graph weight of 0.25 / 0.35, ``walk_other_edges``, ``persona_evidence`` 3 (each
    lower or equal on the five conversations; a wider grid lost 0.6 point held out by choosing them by chance).
    """
    return {
        "shipped": base,
        "rrf-60": replace(base, name=f"{base.name}/rrf60", rrf_k=60),  # the default before 2026-12-02 evening
        "broad-rrf-off": replace(base, name=f"{base.name}/broad-off", broad_rrf_k=0),
        "seed-self-graph-off": replace(base, name=f"{base.name}/seed-self-off", seed_self_graph=False),
        "hub-fanout-10": replace(base, name=f"{base.name}/fanout10", hub_fanout=10),
        "hub-fanout-20": replace(base, name=f"{base.name}/fanout20", hub_fanout=20),
        "hub-fanout-40": replace(base, name=f"{base.name}/fanout40", hub_fanout=40),
        "dialogue-context-off": replace(base, name=f"{base.name}/dialogue-off", dialogue_turns=0),
        # the window before 2026-12-02 night: one turn each way at 0.7
        "dialogue-one-turn": replace(base, name=f"{base.name}/dialogue-one", dialogue_context=0.7, dialogue_turns=1),
        "dialogue-0.85": replace(base, name=f"{base.name}/dialogue85", dialogue_context=0.85),
        "dialogue-0.95": replace(base, name=f"{base.name}/dialogue95", dialogue_context=0.95),
    }


LCO_SYSTEMS = ("full", "no-graph", "messages-only")
"""The systems leave-conversations-out tunes and reports (each chooses its own variant per fold)."""


def lco_folds(
    scores: dict[str, dict[str, list[tuple[str, int, float, float, float]]]],
    conversations: Sequence[str],
) -> dict[str, Any]:
    """Leave-one-conversation-out over per-question scores.

    ``scores[system][variant]`` lists ``(conversation, category, recall, mrr, ndcg)`` per question. For
    each held-out conversation, each system takes the variant with the best mean R@10 over categories
    1–4 on the other conversations (ties: grid order); the held-out questions are scored with it. The
    pooled result gathers every held-out question once.
    """
    folds: list[dict[str, Any]] = []
    pooled: dict[str, list[tuple[str, int, float, float, float]]] = defaultdict(list)
    for held in conversations:
        fold: dict[str, Any] = {"held_out": held, "systems": {}}
        for system, variants in scores.items():
            best, best_train = "", -1.0
            for variant, rows in variants.items():
                train = mean([r[2] for r in rows if r[0] != held and r[1] in (1, 2, 3, 4)])
                if train is not None and train > best_train:
                    best, best_train = variant, train
            test = [r for r in variants.get(best, []) if r[0] == held]
            pooled[system] += test
            fold["systems"][system] = {"variant": best, "train_r10_1_4": round(100 * best_train, 2), **_lco_table(test)}
        folds.append(fold)
    return {"folds": folds, "pooled": {system: _lco_table(rows) for system, rows in pooled.items()}}


def _lco_table(rows: Sequence[tuple[str, int, float, float, float]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for what, col in (("recall@10", 2), ("mrr@10", 3), ("ndcg@10", 4)):
        row: dict[str, Any] = {}
        for cat in CATEGORIES:
            m = mean([float(r[col]) for r in rows if r[1] == cat])
            row[str(cat)] = None if m is None else round(100 * m, 2)
        m = mean([float(r[col]) for r in rows if r[1] in (1, 2, 3, 4)])
        row[OVERALL] = None if m is None else round(100 * m, 2)
        out[what] = row
    out["n"] = {str(c): sum(1 for r in rows if r[1] == c) for c in CATEGORIES}
    return out


def run_lco(
    data: str | Path,
    *,
    samples: Sequence[str] | None = None,
    work: str | None = None,
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Leave-conversations-out: measure every variant of ``lco_grid`` per question, then choose per fold."""
    say = progress or (lambda s: None)
    k = 10
    docs = load_locomo(data)
    if samples:
        docs = [d for d in docs if d.get("sample_id") in set(samples)]
    root = Path(work) if work else Path(tempfile.mkdtemp(prefix="adamem-bench-locomo-"))
    settings = Settings.from_env(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False)
    embedder = CachingEmbedder(build_embedder(settings), passages=False)
    if not (root / "store").exists():
        messages = locomo_messages(docs, settings)
        say(f"ingesting {len(messages)} turns of {len(docs)} conversation(s) through the pipeline …")
        build_memory(messages, settings, MemoryAgent(build_extractor(settings), embedder))
    stamp = _checked_build(root)
    store = open_store(settings.store, read_only=True)
    systems = system_configs()
    grid = lco_grid()
    scores: dict[str, dict[str, list[tuple[str, int, float, float, float]]]] = defaultdict(lambda: defaultdict(list))
    flat: dict[str, list[tuple[str, int, float, float, float]]] = defaultdict(list)
    retrievers: list[Retriever] = []
    t_start = time.perf_counter()
    for doc in docs:
        user = str(doc.get("sample_id"))
        owner = owner_key(settings.default_tenant, user)
        rows = [r for r in store.rows("messages", owner) if isinstance(r, MessageRow)]
        rows.sort(key=lambda r: r.seq)
        turns = {r.message_id for r in rows}
        ids = [r.message_id for r in rows]
        bm_docs = [tokenize(f"{r.speaker} {r.text}") for r in rows]
        mat = np.asarray([r.vector for r in rows], dtype=np.float64)
        qas = (doc.get("qa") or [])[:limit] if limit is not None else doc.get("qa") or []
        asked: list[tuple[int, str, list[str]]] = []
        for qa in qas:
            cat = qa.get("category")
            gold = parse_evidence(qa.get("evidence"), turns)
            if cat in CATEGORIES and gold:
                asked.append((int(cat), str(qa.get("question", "")), gold))
        for system in LCO_SYSTEMS:
            cfg0, hide = systems[system]
            done: dict[RetrievalConfig, str] = {}
            for variant, cfg in grid.items():
                cfg = replace(cfg, name=f"{system}", graph_seeds=cfg0.graph_seeds and cfg.graph_seeds)
                if not cfg.graph_seeds:  # without expansion the graph knobs change nothing: the same answers
                    cfg = replace(
                        cfg,
                        graph_relevance=0.0,
                        seed_self_graph=cfg0.seed_self_graph,
                        walk_other_edges=cfg0.walk_other_edges,
                        hub_fanout=cfg0.hub_fanout,
                        fusion=cfg0.fusion,  # no graph score to weigh
                    )
                if cfg in done:  # the same retrieval as an earlier variant: its scores
                    same = [r for r in scores[system][done[cfg]] if r[0] == user]
                    scores[system][variant].extend(same)
                    continue
                done[cfg] = variant
                retriever = Retriever(MessagesOnly(store) if hide else store, embedder, cfg)
                retrievers.append(retriever)
                for cat, question, gold in asked:
                    ranked = flatten(
                        [
                            [p.message_id for p in it.provenance]
                            for it in retriever.query(owner, question, top_k=k).items
                        ]
                    )
                    scores[system][variant].append(
                        (
                            user,
                            cat,
                            recall_at(ranked, gold, k),
                            reciprocal_rank(ranked, gold, k),
                            ndcg_at(ranked, gold, k),
                        )
                    )
                retriever.close()
        for cat, question, gold in asked:
            qv = np.asarray(embedder.embed_query([question])[0], dtype=np.float64)
            dense = list(mat @ qv) if len(rows) else []
            for name, sc in (("flat-dense", dense), ("flat-bm25", bm25_scores(bm_docs, tokenize(question)))):
                ranked = [ids[i] for i in _order(sc)]
                flat[name].append(
                    (user, cat, recall_at(ranked, gold, k), reciprocal_rank(ranked, gold, k), ndcg_at(ranked, gold, k))
                )
        say(f"{owner}: {len(asked)} question(s), {time.perf_counter() - t_start:.0f}s")
    store.close()
    if not work:
        shutil.rmtree(root, ignore_errors=True)
    conversations = [str(d.get("sample_id")) for d in docs]
    result = lco_folds({s: dict(v) for s, v in scores.items()}, conversations)
    result["flat"] = {name: _lco_table(rows) for name, rows in flat.items()}
    result["per_variant_all"] = {
        s: {v: _lco_table(rows)["recall@10"] for v, rows in variants.items()} for s, variants in scores.items()
    }
    result.update(
        data=str(data),
        conversations=conversations,
        built_by=stamp,
        k=k,
        grid={v: c.name for v, c in grid.items()},
        query_seconds=round(time.perf_counter() - t_start, 1),
    )
    return result


def print_lco(result: dict[str, Any], file: Any = None) -> None:
    """Held-out tables: pooled, then each fold."""
    out = file or sys.stdout
    cats = [str(c) for c in CATEGORIES]
    headers = ["system", *[f"{c} {CATEGORIES[c]}" for c in CATEGORIES], "1-4"]
    for what in ("recall@10", "mrr@10", "ndcg@10"):
        print(f"\nleave-conversations-out, pooled held-out {what} (%)", file=out)
        rows: list[list[Any]] = [
            [s, *[t[what].get(c) for c in cats], t[what].get(OVERALL)] for s, t in result["pooled"].items()
        ]
        rows += [[s, *[t[what].get(c) for c in cats], t[what].get(OVERALL)] for s, t in result["flat"].items()]
        print_table(headers, rows, file=out)
    print("\nper fold (held-out R@10; the variant chosen on the other conversations)", file=out)
    fold_rows = []
    for fold in result["folds"]:
        for s, t in fold["systems"].items():
            r = t["recall@10"]
            fold_rows.append(
                [fold["held_out"], s, t["variant"], t["train_r10_1_4"], *[r.get(c) for c in cats], r.get(OVERALL)]
            )
    print_table(["held out", "system", "variant", "train 1-4", *headers[1:]], fold_rows, file=out)


def print_report(result: dict[str, Any], file: Any = None) -> None:
    """Recall and coverage tables."""
    out = file or sys.stdout
    for what in ("recall", "mrr", "ndcg", "coverage"):
        for k in result["ks"]:
            if what in ("mrr", "ndcg") and k != 10 and 10 in result["ks"]:
                continue
            print(f"\n{what}@{k} (%)", file=out)
            headers = ["system", *[f"{c} {CATEGORIES[c]}" for c in CATEGORIES], "1-4"]
            if what == "coverage":
                headers = ["system", *[f"{c} {CATEGORIES[c]}" for c in (1, 2, 3, 4)], "1-4"]
            rows = []
            for name, sysres in result["systems"].items():
                row = sysres[what].get(str(k), {})
                cats = [1, 2, 3, 4] if what == "coverage" else list(CATEGORIES)
                rows.append([name, *[row.get(str(c)) for c in cats], row.get(OVERALL)])
            print_table(headers, rows, file=out)
    n = result["systems"].get("full", {}).get("n", {})
    print(
        f"\nquestions per category: {n}; counts: {result['questions']}; routes (full): {result['routes_full']}",
        file=out,
    )
    confusion = result.get("route_confusion") or {}
    if confusion:
        print("\nroute taken (full system) × LoCoMo category", file=out)
        names = [f"{c} {CATEGORIES[c]}" for c in CATEGORIES]
        table: list[list[Any]] = [[r, *[per.get(c, 0) for c in names]] for r, per in confusion.items()]
        print_table(["route", *names], table, file=out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench locomo``."""
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="a LoCoMo-format JSON file")
    p.add_argument("--k", type=int, nargs="+", default=[5, 10, 25], help="cut-offs of recall@k (default 5 10 25)")
    p.add_argument("--samples", nargs="*", help="only these sample ids")
    p.add_argument("--systems", nargs="*", choices=list(system_configs()), help="only these systems (default all)")
    p.add_argument("--limit", type=int, help="at most this many questions per conversation (development)")
    p.add_argument(
        "--ann-min-rows",
        type=int,
        default=0,
        help="index the vectors of every table with this many rows or more (IVF_PQ) before asking (default: as built)",
    )
    p.add_argument("--work", help="keep the log and store here and reuse them next time (default: a temp dir)")
    p.add_argument("--json", dest="out", help="result file (default bench/results/locomo.json)")
    p.add_argument(
        "--lco",
        action="store_true",
        help="leave-conversations-out over lco_grid() (default result file bench/results/locomo_lco.json)",
    )


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments, print the tables, write the JSON."""
    if args.lco:
        return measure_and_record(
            "locomo_lco",
            argv,
            args.out,
            lambda: run_lco(
                args.data,
                samples=args.samples,
                work=args.work,
                limit=args.limit,
                progress=lambda s: print(s, file=sys.stderr, flush=True),
            ),
            print_lco,
        )
    return measure_and_record(
        "locomo",
        argv,
        args.out,
        lambda: run(
            args.data,
            args.k,
            samples=args.samples,
            work=args.work,
            systems=args.systems,
            limit=args.limit,
            progress=lambda s: print(s, file=sys.stderr, flush=True),
            ann_min_rows=args.ann_min_rows,
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.locomo``."""
    return standalone_main("locomo", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
