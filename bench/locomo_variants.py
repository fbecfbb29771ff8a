"""R@10 of retrieval variants on LoCoMo, per conversation: the fold-by-fold view of an ablation or a change.

    .venv/bin/python bench/locomo_variants.py --work /tmp/loc-base base "dialogue_turns=1" "rrf_k=60;broad_rrf_k=0"

Each variant is ``base`` (the shipped ``SEED_DEFAULT``) or ``;``-separated ``field=value`` changes of it
(``bench/locomo_quick.py``'s ``--set`` syntax); a ``messages-only:`` prefix asks over the messages alone, without
graph expansion (the ``messages-only`` ablation of ``adamem bench locomo``), ``no-graph:`` without expansion;
``compression:`` asks a copy of the store whose episodic records were compressed (``WORK/compressed``, made by
``bench/locomo_compression.py``: its sizes before and after are printed first), ``no-compression:`` the store as
built (the same as no prefix).
``--fold FIELD=VALUE`` builds a missing store with those ``MemoryParameters`` (a fold change needs its own store).
The store under ``--work`` is the one ``adamem bench locomo --work`` builds (built here the same way when
missing). Every question of categories 1–4 with evidence is asked once per variant with the answer cache
off; a conversation is a held-out fold for any variant whose values were not chosen on it, so "helps in
4 of 5 folds" is read straight off the per-conversation columns.
One JSON line per variant: each conversation's R@10 (1–4), the pooled R@10 per category, and the ranking CPU
per question (question vectors memoised in ``WORK/questions.json``, so the embedder's pass is not counted after
the first run). Questions are embedded by the embedder the store's generation records.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from typing import Any

from adamem.projections.folds.params import SEED_DEFAULT as MEMORY_DEFAULT
from adamem.projections.store.factory import open_store
from adamem.retrieval import Retriever
from bench.locomo import MessagesOnly
from bench.locomo_compression import compressed_copy
from bench.locomo_quick import CachedQueries, build, conversations, figures, parse_set, recall, work_embedder


def measure(
    store: Any, data: list[dict[str, Any]], queries: CachedQueries, variant: str, label: str = ""
) -> dict[str, object]:
    """One variant's row (named ``label``, default the variant): R@10 per conversation, pooled per category,
    and the ranking CPU per question."""
    ablation, _, changes = variant.rpartition(":")
    config = parse_set([] if changes == "base" else [v for v in changes.split(";") if v])
    if ablation in ("messages-only", "no-graph"):
        config = dataclasses.replace(config, graph_seeds=0)
    retriever = Retriever(store if ablation != "messages-only" else MessagesOnly(store), queries, config)
    found: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    asked, started = 0, time.process_time()
    for conv, owner, _, questions in conversations(data, store, retriever):
        for cat, gold, question in questions:
            answer = retriever.query(owner, question, top_k=10)
            found[conv][cat].append(recall(answer.message_ids(), gold))
            asked += 1
    cpu = (time.process_time() - started) / max(1, asked) * 1000
    row: dict[str, object] = {"variant": label or variant, **figures(found)}
    row["cpu_ms_per_question"] = round(cpu, 1)
    retriever.close()
    return row


def main() -> int:
    """Measure every variant and print one JSON line each."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help='"base" or "field=value;field=value"')
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"))
    ap.add_argument("--work", default="/tmp/loc-base", help="folder of the built log and store")
    ap.add_argument("--fold", action="append", default=[], help="MemoryParameters field=value for a new store")
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    work = Path(args.work)
    embedder = work_embedder(work)
    params = dataclasses.replace(
        MEMORY_DEFAULT, **{k: type(getattr(MEMORY_DEFAULT, k))(v) for k, _, v in (f.partition("=") for f in args.fold)}
    )
    build(data, work, embedder, params)
    stores = {"": open_store(str(work / "store"), read_only=True)}
    if any(v.rpartition(":")[0] == "compression" for v in args.variants):
        report = compressed_copy(work, embedder, params)
        print(json.dumps({"compression": report}), flush=True)
        stores["compression"] = open_store(str(work / "compressed" / "store"), read_only=True)
    queries = CachedQueries(embedder, work / "questions.json")
    for variant in args.variants:
        ablation = variant.rpartition(":")[0]
        print(json.dumps(measure(stores.get(ablation, stores[""]), data, queries, variant)), flush=True)
    queries.save()
    for store in stores.values():
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
