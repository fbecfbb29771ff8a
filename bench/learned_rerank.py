"""R@10 on LoCoMo when an answer's messages are ranked again by a model fitted on other conversations (an experiment).

    .venv/bin/python -m bench.learned_rerank --work /tmp/loc

The shipped answer (``top_k`` 30) is asked for every question; each distinct message it cites becomes one candidate
with features the query already has or could have at no extra search: its first rank in the answer, the best item
score and the four fusion components (semantic, graph, temporal, fact) over the items citing it, how many items cite
it and of which layer, whether it was reached over the graph, and two scores of the message alone against the
question (BM25 over the owner's messages, the cosine of the e5 vectors), each also as its rank among the candidates,
the share of the candidates' scores its session holds, and whether it is within two turns of a top-3 candidate.
A logistic model (L2, plain gradient descent on standardised features; both classes weighted alike) is fitted on four
conversations' candidates (label: the message is evidence) and ranks the fifth's; the first ten are scored. Three
forms: the features as they are (``linear``), a copy of them per route (``per route``) and with their pairwise
products (``quadratic``), each at three L2 weights. One JSON line per variant: each conversation's R@10 (categories
1–4), pooled and per category, against the answer as it is.
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
from adamem.text import tokenize
from bench.locomo_quick import conversations, figures, held_out_choice, recall, shipped_retriever

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"

FEATURES = (
    "first_rank_rrf",
    "first_rank_log",
    "score",
    "semantic",
    "graph",
    "temporal",
    "fact",
    "items_log",
    "from_message",
    "from_record",
    "from_persona",
    "via_graph",
    "bm25",
    "bm25_rank",
    "cosine",
    "cosine_rank",
    "session_share",
    "near_top3",
)


class Messages:
    """One owner's messages: BM25 statistics over their tokens (own words and the turn before) and unit vectors."""

    def __init__(self, rows: list[MessageRow]) -> None:
        self.tf = {r.message_id: Counter(tokenize(r.text) + (r.context or "").split()) for r in rows}
        self.length = {m: sum(c.values()) for m, c in self.tf.items()}
        self.avg = statistics.fmean(self.length.values()) if self.length else 0.0
        self.df = Counter(t for c in self.tf.values() for t in c)
        self.n = len(self.tf)
        self.vec = {r.message_id: np.asarray(r.vector, dtype=np.float32) for r in rows}
        self.place = {r.message_id: (r.conversation_id, r.seq) for r in rows}

    def bm25(self, m: str, terms: list[str]) -> float:
        tf, dl, s = self.tf.get(m, Counter()), self.length.get(m, 0), 0.0
        for t in set(terms):
            f = tf.get(t, 0)
            if f:
                idf = math.log(1 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * dl / self.avg))
        return s

    def cosine(self, m: str, qvec: np.ndarray) -> float:
        v = self.vec.get(m)
        return 0.0 if v is None else float(v @ qvec / (float(np.linalg.norm(v)) or 1.0))


def candidates(answer: Any, msgs: Messages, terms: list[str], qvec: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The answer's distinct messages in rank order and their feature rows."""
    agg: dict[str, dict[str, float]] = {}
    for item in answer.items:
        for p in item.provenance:
            a = agg.setdefault(
                p.message_id,
                {
                    "first": float(item.rank),
                    "score": 0.0,
                    "semantic": 0.0,
                    "graph": 0.0,
                    "temporal": 0.0,
                    "fact": 0.0,
                    "items": 0.0,
                    "from_message": 0.0,
                    "from_record": 0.0,
                    "from_persona": 0.0,
                    "via_graph": 0.0,
                },
            )
            a["score"] = max(a["score"], item.score)
            for c in ("semantic", "graph", "temporal", "fact"):
                a[c] = max(a[c], getattr(item.breakdown, c))
            a["items"] += 1
            kind = (
                "from_message"
                if item.kind == "message"
                else "from_persona"
                if item.layer.value == "persona"
                else "from_record"
            )
            a[kind] = 1.0
            if item.hop_path:
                a["via_graph"] = 1.0
    ids = list(agg)
    bm = np.array([msgs.bm25(m, terms) for m in ids])
    co = np.array([msgs.cosine(m, qvec) for m in ids])
    bm_rank = np.argsort(np.argsort(-bm, kind="stable"), kind="stable")
    co_rank = np.argsort(np.argsort(-co, kind="stable"), kind="stable")
    session: dict[str, float] = defaultdict(float)
    for m in ids:
        session[msgs.place.get(m, ("", 0))[0]] += agg[m]["score"]
    total = sum(session.values()) or 1.0
    top3 = [msgs.place.get(m, ("", -9)) for m in ids[:3]]
    rows = []
    for i, m in enumerate(ids):
        conv, seq = msgs.place.get(m, ("", -99))
        near = float(any(c == conv and 0 < abs(s - seq) <= 2 for c, s in top3))
        a = agg[m]
        rows.append(
            [
                1 / (60 + a["first"]),
                math.log1p(a["first"]),
                a["score"],
                a["semantic"],
                a["graph"],
                a["temporal"],
                a["fact"],
                math.log1p(a["items"]),
                a["from_message"],
                a["from_record"],
                a["from_persona"],
                a["via_graph"],
                bm[i] / (bm.max() or 1.0),
                1 / (1 + bm_rank[i]),
                co[i],
                1 / (1 + co_rank[i]),
                session[conv] / total,
                near,
            ]
        )
    return ids, np.asarray(rows, dtype=np.float64)


def fit(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 3000, lr: float = 0.5) -> tuple[np.ndarray, ...]:
    """Logistic regression on standardised features: (mean, std, weights, bias)."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = (x - mu) / sd
    w, b = np.zeros(z.shape[1]), 0.0
    pos = max(float(y.mean()), 1e-6)
    sw = np.where(y > 0, 0.5 / pos, 0.5 / (1 - pos))  # both classes weigh alike
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = sw * (p - y)
        w -= lr * (z.T @ g / len(y) + l2 * w)
        b -= lr * float(g.mean())
    return mu, sd, w, np.array(b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--work", default="/tmp/loc", help="folder of the built log and store")
    ap.add_argument("--top-k", type=int, default=30)
    ap.add_argument("--dump", help="features file to write (or read when it exists)")
    args = ap.parse_args()
    dump = Path(args.dump) if args.dump else None
    if dump is not None and dump.exists():
        table = json.loads(dump.read_text())
    else:
        table = collect(json.loads(Path(args.data).read_text()), Path(args.work), args.top_k)
        if dump is not None:
            dump.write_text(json.dumps(table))
    evaluate(table)
    return 0


def collect(data: list[dict[str, Any]], work: Path, top_k: int) -> list[dict[str, Any]]:
    """One entry per question: conversation, category, route, gold, candidate ids, features, shipped top 10."""
    out = []
    with shipped_retriever(data, work) as (store, queries, retriever):
        for conv, owner, rows, asked in conversations(data, store, retriever):
            msgs = Messages(rows)
            for cat, gold, question in asked:
                answer = retriever.query(owner, question, top_k=top_k)
                qvec = np.asarray(queries.embed_query([question])[0], dtype=np.float32)
                ids, x = candidates(answer, msgs, query_terms(question), qvec)
                shipped = retriever.query(owner, question, top_k=10).message_ids()
                out.append(
                    {
                        "conv": conv,
                        "cat": cat,
                        "route": answer.route.route.value,
                        "gold": gold,
                        "ids": ids,
                        "x": x.tolist(),
                        "shipped": shipped,
                    }
                )
    return out


def evaluate(table: list[dict[str, Any]]) -> None:
    convs = sorted({q["conv"] for q in table})
    routes = sorted({q["route"] for q in table})

    def design(q: dict[str, Any], form: str) -> np.ndarray:
        x = np.asarray(q["x"], dtype=np.float64).reshape(-1, len(FEATURES))
        if form == "linear":
            return x
        if form == "quadratic":
            i, j = np.triu_indices(x.shape[1])
            return np.hstack([x, x[:, i] * x[:, j]])
        blocks = [x * (q["route"] == r) for r in routes]
        return np.hstack([x, *blocks])

    lines: list[dict[str, Any]] = []

    def report(name: str, ranked: dict[int, list[str]]) -> None:
        by: dict[str, dict[int, list[float]]] = {c: defaultdict(list) for c in convs}
        for i, q in enumerate(table):
            by[q["conv"]][q["cat"]].append(recall(ranked[i], q["gold"]))
        row: dict[str, Any] = {"variant": name, **figures(by)}
        print(json.dumps(row), flush=True)
        lines.append(row)

    report("shipped top_k 10", {i: q["shipped"] for i, q in enumerate(table)})
    report("answer top_k 30, first 10", {i: q["ids"] for i, q in enumerate(table)})
    for form in ("linear", "per route", "quadratic"):
        for l2 in (1e-3, 1e-2, 1e-1):
            ranked: dict[int, list[str]] = {}
            for c in convs:
                train = [q for q in table if q["conv"] != c]
                x = np.vstack([design(q, form) for q in train])
                y = np.concatenate([[float(m in q["gold"]) for m in q["ids"]] for q in train])
                mu, sd, w, b = fit(x, y, l2, lr=0.05 if form == "quadratic" else 0.5)
                for i, q in enumerate(table):
                    if q["conv"] == c:
                        s = ((design(q, form) - mu) / sd) @ w + b
                        order = sorted(range(len(q["ids"])), key=lambda j: (-s[j], j))
                        ranked[i] = [q["ids"][j] for j in order]
            report(f"logistic {form} l2={l2}", ranked)

    print(json.dumps(held_out_choice(lines[1:], lines[1], convs)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
