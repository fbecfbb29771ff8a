"""R@10 on LoCoMo when an answer's messages that say little are moved down (an experiment).

    .venv/bin/python -m bench.information_prior --work /tmp/loc

Among the first ten messages of an answer stand short turns that carry no fact ("Thanks John! Your support means a
lot."), reached through their neighbours or the question's names. How much a message says is measured on the owner's
own messages: the IDF mass of its distinct search words (``idf``, BM25's IDF over the owner's messages) or their
number (``count``). The shipped answer's distinct messages (``top_k`` 30) are ranked by
``1 / (k + rank) × min(1, say / τ) ** γ``, ``τ`` the owner's ``p``-th percentile of the measure (no threshold
chosen on one conversation's scale), ``k`` the product's ``rrf_k``. One JSON line per variant: each conversation's
R@10 (categories 1–4), pooled and per category; first, how many evidence messages fall at or below each
percentile; last, the held-out choice (the variant best on four conversations, scored on the fifth).
The store under ``--work`` is the one ``bench/locomo_variants.py`` builds (built here the same way when missing).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.projections.folds.rows import MessageRow
from adamem.retrieval.config import SEED_DEFAULT
from adamem.text import tokenize
from bench.locomo_quick import conversations, figures, held_out_choice, recall, shipped_retriever

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
PERCENTILES = (5, 10, 20, 30)

Variant = tuple[str, int, float]  # (measure, percentile, exponent); "base" is the answer as it is


def said(rows: list[MessageRow]) -> dict[str, dict[str, float]]:
    """How much each message says, by measure: the IDF mass of its distinct search words, and their number."""
    words = {m.message_id: set(tokenize(m.text)) for m in rows}
    df = Counter(t for s in words.values() for t in s)
    n = len(rows)
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    return {
        "idf": {m: sum(idf[t] for t in s) for m, s in words.items()},
        "count": {m: float(len(s)) for m, s in words.items()},
    }


def demoted(ids: list[str], say: dict[str, float], tau: float, gamma: float, k: int) -> list[str]:
    """The distinct ids ranked by their reciprocal rank times ``min(1, say / τ) ** γ`` (ties: the answer's order)."""
    distinct = list(dict.fromkeys(ids))
    score = {m: (1 / (k + i + 1)) * min(1.0, say.get(m, tau) / tau) ** gamma for i, m in enumerate(distinct)}
    return sorted(distinct, key=lambda m: -score[m])  # a stable sort keeps the answer's order among ties


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--work", default="/tmp/loc", help="folder of the built log and store")
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    with shipped_retriever(data, Path(args.work)) as (store, queries, retriever):
        return measure(args, data, store, queries, retriever)


def measure(args: argparse.Namespace, data: list[dict[str, Any]], store: Any, queries: Any, retriever: Any) -> int:
    """Every variant's figures and the held-out choice, printed as JSON lines."""
    variants: list[Variant] = [("base", 0, 0.0)]
    variants += [(kind, p, g) for kind in ("idf", "count") for p in PERCENTILES for g in (0.5, 1.0)]
    found: dict[Variant, dict[str, dict[int, list[float]]]] = {
        v: defaultdict(lambda: defaultdict(list)) for v in variants
    }
    below: Counter[int] = Counter()  # evidence messages at or below each percentile of the idf measure
    for conv, owner, rows, asked in conversations(data, store, retriever):
        measures = said(rows)
        cut = {
            kind: {p: float(np.percentile(list(v.values()), p)) for p in PERCENTILES} for kind, v in measures.items()
        }
        for cat, gold, question in asked:
            ids = retriever.query(owner, question, top_k=30).message_ids()
            for g in gold:
                below.update(p for p in PERCENTILES if measures["idf"][g] <= cut["idf"][p])
                below[100] += 1
            for v in variants:
                kind, p, gamma = v
                order = ids if kind == "base" else demoted(ids, measures[kind], cut[kind][p], gamma, SEED_DEFAULT.rrf_k)
                found[v][conv][cat].append(recall(order, gold))
    print(json.dumps({"evidence messages": below[100], **{f"at or below p{p}": below[p] for p in PERCENTILES}}))
    table: dict[Variant, dict[str, Any]] = {}
    for v in variants:
        table[v] = {"variant": "answer as it is" if v[0] == "base" else f"{v[0]} p{v[1]} gamma={v[2]}"}
        table[v].update(figures(found[v]))
        print(json.dumps(table[v]), flush=True)
    convs = sorted(found[variants[0]])
    print(json.dumps(held_out_choice(list(table.values()), table[variants[0]], convs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
