"""``adamem bench research``: the Research Agent's rounds on LoCoMo — recall by depth, per conversation, and cost.

Memory is built as ``adamem bench locomo`` builds it (the same ``--work`` folder is reused). Every
question of categories 1–4 (multi-hop, temporal, open-domain, single-hop) with evidence is asked
through ``research()`` at each depth of ``--depths``; recall@k is measured over the distinct source
messages of the merged, graded items, as ``adamem bench locomo`` measures the query service. Depth
has no tuned parameter, so each conversation is its own held-out fold: the table gives every
conversation's R@10 at each depth, and how many of them a depth helps. Latency is wall time per
request in-process (p50/p95), the question vectors memoised after their first embedding.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import build_embedder, build_extractor
from adamem.owners import owner_key
from adamem.projections.folds.rows import MessageRow
from adamem.projections.store.factory import open_store
from adamem.retrieval import SEED_DEFAULT, CacheSettings, Retriever
from adamem.retrieval.research import ResearchRequest, research
from adamem.settings import Settings
from bench.build import build_memory
from bench.common import (
    DEFAULT_LOCOMO,
    CachingEmbedder,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    standalone_main,
)
from bench.metrics import mean, parse_evidence, recall_at, summary_ms

__all__ = ["add_arguments", "execute", "main", "run"]

OVERALL = "1-4"
ASKED = (1, 2, 3, 4)
"""LoCoMo's categories asked: multi-hop, temporal, open-domain, single-hop (adversarial questions have no evidence
to find in the sense the others do)."""


def run(
    data: str | Path,
    depths: Sequence[int],
    *,
    work: str | None = None,
    samples: Sequence[str] | None = None,
    limit: int | None = None,
    k: int = 10,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """R@k per conversation and category at every depth, and the latency of each depth."""
    import tempfile

    say = progress or (lambda s: None)
    docs = load_locomo(data)
    if samples:
        docs = [d for d in docs if d.get("sample_id") in set(samples)]
    root = Path(work) if work else Path(tempfile.mkdtemp(prefix="adamem-bench-research-"))
    settings = Settings.from_env(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False)
    embedder = CachingEmbedder(build_embedder(settings), passages=False)
    if not (root / "store").exists():
        messages = locomo_messages(docs, settings)
        say(f"ingesting {len(messages)} turns of {len(docs)} conversation(s) through the pipeline …")
        build_memory(messages, settings, MemoryAgent(build_extractor(settings), embedder))
    store = open_store(settings.store, read_only=True)
    # no answer cache: every depth computes its round 1 itself, so latencies compare
    retriever = Retriever(store, embedder, replace(SEED_DEFAULT, cache=CacheSettings(query_cache=False)))
    recall: dict[int, dict[str, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    latency: dict[int, list[float]] = defaultdict(list)
    rounds_run: dict[int, list[int]] = defaultdict(list)
    try:
        for doc in docs:
            user = str(doc.get("sample_id"))
            owner = owner_key(settings.default_tenant, user)
            turns = {r.message_id for r in store.rows("messages", owner) if isinstance(r, MessageRow)}
            qas = (doc.get("qa") or [])[:limit] if limit is not None else doc.get("qa") or []
            asked = [
                (int(qa["category"]), str(qa.get("question", "")), gold)
                for qa in qas
                if qa.get("category") in ASKED and (gold := parse_evidence(qa.get("evidence"), turns))
            ]
            retriever.query(owner, "warm up")
            for cat, question, gold in asked:
                retriever.embed(question)  # memoised: every depth pays the same (nothing) for it
                for depth in depths:
                    t = time.perf_counter()
                    found = research(retriever, owner, ResearchRequest(question, depth=depth, top_k=k))
                    latency[depth].append((time.perf_counter() - t) * 1000.0)
                    rounds_run[depth].append(len(found.rounds))
                    recall[depth][user][cat].append(recall_at(found.message_ids(), gold, k))
            say(f"{user}: {len(asked)} question(s) at depths {list(depths)}")
    finally:
        retriever.close()
        store.close()
    users = [str(d.get("sample_id")) for d in docs]
    table: dict[str, Any] = {}
    for depth in depths:
        per = {
            user: {
                **{str(c): _pct(recall[depth][user][c]) for c in ASKED},
                OVERALL: _pct([x for c in ASKED for x in recall[depth][user][c]]),
            }
            for user in users
        }
        pooled = {str(c): _pct([x for u in users for x in recall[depth][u][c]]) for c in ASKED} | {
            OVERALL: _pct([x for u in users for c in ASKED for x in recall[depth][u][c]])
        }
        table[str(depth)] = {
            "pooled": pooled,
            "per_conversation": per,
            "latency_ms": summary_ms(latency[depth]),
            "mean_rounds": round(mean([float(n) for n in rounds_run[depth]]) or 0.0, 2),
        }
    first = str(depths[0])
    for depth in depths[1:]:
        d = table[str(depth)]
        d["folds_helped_over_depth_" + first] = {
            key: sum(
                1
                for u in users
                if (d["per_conversation"][u][key] or 0.0) > (table[first]["per_conversation"][u][key] or 0.0)
            )
            for key in ("1", "2", OVERALL)
        }
    return {"k": k, "depths": list(depths), "conversations": users, "by_depth": table}


def _pct(values: Sequence[float]) -> float | None:
    m = mean(values)
    return round(100.0 * m, 1) if m is not None else None


def print_report(result: dict[str, Any], file: Any = None) -> None:
    """Per depth: pooled R@k by category, each conversation's R@k 1–4, latency."""
    users = result["conversations"]
    rows = []
    for depth, d in result["by_depth"].items():
        p = d["pooled"]
        rows.append(
            [
                depth,
                p["1"],
                p["2"],
                p["3"],
                p["4"],
                p[OVERALL],
                *[d["per_conversation"][u][OVERALL] for u in users],
                d["mean_rounds"],
                d["latency_ms"]["p50"],
                d["latency_ms"]["p95"],
            ]
        )
    k = result["k"]
    print_table(
        [
            "depth",
            f"multi-hop R@{k}",
            "temporal",
            "open-domain",
            "single-hop",
            "1-4",
            *users,
            "rounds",
            "p50 ms",
            "p95 ms",
        ],
        rows,
        file=file,
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench research``."""
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="a LoCoMo-format JSON file")
    p.add_argument("--depths", type=int, nargs="+", default=[1, 2, 3], help="research depths to measure")
    p.add_argument("--samples", nargs="*", help="only these sample ids")
    p.add_argument("--limit", type=int, help="at most this many questions per conversation (development)")
    p.add_argument("--work", help="keep the log and store here and reuse them (the same folder as bench locomo's)")
    p.add_argument("--json", dest="out", help="result file (default bench/results/research.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments, print the table, write the JSON."""
    return measure_and_record(
        "research",
        argv,
        args.out,
        lambda: run(
            args.data,
            args.depths,
            work=args.work,
            samples=args.samples,
            limit=args.limit,
            progress=lambda s: print(s, file=sys.stderr, flush=True),
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.research``."""
    return standalone_main("research", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
