"""R@10 on LoCoMo when the messages an answer ranks are ranked again by how well their session matches (an experiment).

    .venv/bin/python -m bench.session_prior --work /tmp/loc

A hierarchical prior: each session of an owner (its messages' texts together) is one document. The question ranks
the sessions by BM25 over those documents (``bm25``, the usual k1 = 1.2, b = 0.75), by the cosine of the question
with the mean of the session's message vectors (``dense``), or by the reciprocal-rank fusion of the two (``both``).
The distinct messages of the shipped answer (``top_k`` 30) are then ranked by ``1 / (k + rank) + w / (k + session
rank)`` with the product's ``rrf_k`` as k, and the first ten are scored. ``w`` 0 is the answer as it is. One JSON
line per (prior, w): each conversation's R@10 (categories 1–4) and the pooled figures per category, then a line
with the held-out choice: the (prior, w) best on four conversations scored on the fifth.
The store under ``--work`` is the one ``bench/locomo_variants.py`` builds (built here the same way when missing).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.projections.folds.rows import MessageRow
from adamem.retrieval.base import query_terms
from adamem.retrieval.config import SEED_DEFAULT
from adamem.text import tokenize
from bench.locomo_quick import conversations, figures, held_out_choice, recall, shipped_retriever

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
PRIORS = ("bm25", "dense", "both")
WEIGHTS = (0.0, 0.25, 0.5, 1.0)


class Sessions:
    """One owner's sessions as documents: their tokens (BM25) and the mean of their messages' unit vectors."""

    def __init__(self, rows: list[MessageRow]) -> None:
        by: dict[str, list[MessageRow]] = defaultdict(list)
        for r in rows:
            by[r.conversation_id].append(r)
        self.names = sorted(by)
        self.session_of = {r.message_id: r.conversation_id for r in rows}
        self.tf = [Counter(t for r in by[s] for t in tokenize(r.text)) for s in self.names]
        self.length = [sum(c.values()) for c in self.tf]
        self.avg = statistics.fmean(self.length) if self.length else 0.0
        self.df = Counter(t for c in self.tf for t in c)
        means = []
        for s in self.names:
            v = np.mean([np.asarray(r.vector, dtype=np.float32) for r in by[s]], axis=0)
            means.append(v / (float(np.linalg.norm(v)) or 1.0))
        self.means = np.stack(means)

    def bm25(self, terms: list[str]) -> list[float]:
        n, out = len(self.names), []
        for tf, dl in zip(self.tf, self.length, strict=True):
            s = 0.0
            for t in set(terms):
                f = tf.get(t, 0)
                if f:
                    idf = math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                    s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * dl / self.avg))
            out.append(s)
        return out

    def ranks(self, prior: str, terms: list[str], qvec: np.ndarray) -> dict[str, int]:
        """Session -> rank (0 best) by the prior; sessions no word of the question matches rank last for ``bm25``."""
        dense = self.means @ qvec
        lexical = self.bm25(terms)
        order_d = sorted(range(len(self.names)), key=lambda i: (-dense[i], self.names[i]))
        order_b = sorted(range(len(self.names)), key=lambda i: (-lexical[i], self.names[i]))
        if prior == "dense":
            order = order_d
        elif prior == "bm25":
            order = order_b
        else:
            k = SEED_DEFAULT.rrf_k
            fused: dict[int, float] = defaultdict(float)
            for r, i in enumerate(order_d):
                fused[i] += 1 / (k + r + 1)
            for r, i in enumerate(order_b):
                if lexical[i] > 0:
                    fused[i] += 1 / (k + r + 1)
            order = sorted(range(len(self.names)), key=lambda i: (-fused[i], self.names[i]))
        return {self.names[i]: r for r, i in enumerate(order)}


def reranked(ids: list[str], sessions: Sessions, ranks: dict[str, int], w: float) -> list[str]:
    """The distinct message ids ranked by their rank in the answer and, with weight ``w``, their session's rank."""
    k = SEED_DEFAULT.rrf_k
    distinct = list(dict.fromkeys(ids))
    last = len(ranks)
    scored = [
        (-(1 / (k + i + 1) + w / (k + ranks.get(sessions.session_of.get(m, ""), last) + 1)), i, m)
        for i, m in enumerate(distinct)
    ]
    return [m for _, _, m in sorted(scored)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--work", default="/tmp/loc", help="folder of the built log and store")
    ap.add_argument("--top-k", type=int, default=30)
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    with shipped_retriever(data, Path(args.work)) as (store, queries, retriever):
        return measure(args, data, store, queries, retriever)


def measure(args: argparse.Namespace, data: list[dict[str, Any]], store: Any, queries: Any, retriever: Any) -> int:
    """Every variant's figures and the held-out choice, printed as JSON lines."""
    variants = [("base", 0.0)] + [(p, w) for p in PRIORS for w in WEIGHTS if w]
    found: dict[tuple[str, float], dict[str, dict[int, list[float]]]] = {
        v: defaultdict(lambda: defaultdict(list)) for v in variants
    }
    shipped: dict[str, list[float]] = defaultdict(list)
    for conv, owner, rows, asked in conversations(data, store, retriever):
        sessions = Sessions(rows)
        for cat, gold, question in asked:
            ids = retriever.query(owner, question, top_k=args.top_k).message_ids()
            shipped[conv].append(recall(retriever.query(owner, question, top_k=10).message_ids(), gold))
            qvec = np.asarray(queries.embed_query([question])[0], dtype=np.float32)
            terms = query_terms(question)
            ranks = {prior: sessions.ranks(prior, terms, qvec) for prior in PRIORS}  # once per question
            for prior, w in variants:
                order = ids if prior == "base" else reranked(ids, sessions, ranks[prior], w)
                found[(prior, w)][conv][cat].append(recall(order, gold))
    convs = sorted(shipped)
    table: dict[tuple[str, float], dict[str, Any]] = {}
    print(
        json.dumps({"variant": "shipped top_k 10", **{c: round(100 * statistics.fmean(shipped[c]), 1) for c in convs}})
    )
    for v in variants:
        table[v] = {"variant": f"{v[0]} w={v[1]}", **figures(found[v])}
        print(json.dumps(table[v]), flush=True)
    print(json.dumps(held_out_choice(list(table.values()), table[("base", 0.0)], convs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
