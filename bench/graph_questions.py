"""Where graph expansion gains and loses on LoCoMo, question by question.

    .venv/bin/python -m bench.graph_questions --work /tmp/lco-pair [--json OUT]

Every question of categories 1–4 with evidence is asked twice on the store ``adamem bench locomo --work`` builds, with
the shipped configuration and with no expansion (``graph_seeds`` 0, the ``no-graph`` ablation), the answer cache off.
Questions are grouped by category and by whether the router reads them as asking for a set (``RoutePlan.broad``);
each group gets how many questions the graph makes better and worse at R@10, and the difference of its R@10.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.projections.store.factory import open_store
from adamem.retrieval import Retriever
from bench.common import DEFAULT_LOCOMO
from bench.locomo_quick import CATEGORIES, CachedQueries, conversations, parse_set, recall, work_embedder


@dataclasses.dataclass(frozen=True)
class Asked:
    """One question's R@10 with and without expansion."""

    category: str
    broad: bool
    full: float
    no_graph: float


def tally(asked: Iterable[Asked]) -> list[dict[str, object]]:
    """Per (category, one thing or a set): questions asked, better and worse with the graph, R@10 difference."""
    groups: dict[tuple[str, str], list[Asked]] = {}
    for a in asked:
        groups.setdefault((a.category, "a set" if a.broad else "one thing"), []).append(a)
    return [
        {
            "category": category,
            "question": kind,
            "asked": len(group),
            "better": sum(a.full > a.no_graph for a in group),
            "worse": sum(a.full < a.no_graph for a in group),
            "r10_diff": round(100 * sum(a.full - a.no_graph for a in group) / len(group), 1),
        }
        for (category, kind), group in sorted(groups.items())
    ]


def main() -> int:
    """Ask every question both ways and print the table (one JSON line a group)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DEFAULT_LOCOMO))
    ap.add_argument("--work", default="/tmp/loc-base", help="folder of the built log and store")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    work = Path(args.work)
    store = open_store(str(work / "store"), read_only=True)
    queries = CachedQueries(work_embedder(work), work / "questions.json")
    config = parse_set([])
    full = Retriever(store, queries, config)
    bare = Retriever(store, queries, dataclasses.replace(config, graph_seeds=0))
    asked: list[Asked] = []
    for _, owner, _, questions in conversations(data, store, full):
        bare.query(owner, "warm up")
        for category, gold, question in questions:
            answer = full.query(owner, question, top_k=10)
            without = bare.query(owner, question, top_k=10)
            asked.append(
                Asked(
                    CATEGORIES[category],
                    answer.route.broad,
                    recall(answer.message_ids(), gold),
                    recall(without.message_ids(), gold),
                )
            )
    rows = tally(asked)
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries.save()
    full.close()
    bare.close()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
