"""Per-query wall and CPU time of one source tree's ``Retriever`` on one owner of a built LoCoMo store.

    PYTHONPATH=<tree> OMP_NUM_THREADS=1 python bench/query_ab.py --store /tmp/retr-locomo-base/store \\
        --owner default:conv-43

Run it alternately with the old tree and the new one on the same store (``ABBA``): the load of a
shared machine then falls on both alike. Every question of the owner is asked once, cold (the
answer cache off; question vectors embedded beforehand, so the embedder's time is not in the
figures: it is the same in both trees). CPU time counts every thread of the process (graph
expansion runs on threads), which a loaded machine disturbs less than wall time. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace

from adamem.projections.store.factory import open_store
from adamem.retrieval import SEED_DEFAULT, Retriever
from bench.common import DEFAULT_LOCOMO, store_embedder
from bench.metrics import summary_ms


def main() -> None:
    """Time every question of one owner and print the summary."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True)
    p.add_argument("--owner", required=True, help="owner key, e.g. default:conv-43")
    p.add_argument("--data", default=str(DEFAULT_LOCOMO))
    p.add_argument(
        "--questions-of", help="ask the questions of this owner key (default --owner; e.g. for the 10k-message owner)"
    )
    p.add_argument(
        "--hub-fanout", type=int, help="the tree's default config with this hub fan-out (default: as shipped)"
    )
    p.add_argument(
        "--parallel-seeds", type=int, help="the default config with this max_parallel_seeds (default: as shipped)"
    )
    p.add_argument(
        "--dialogue-context", type=float, help="the default config with this dialogue_context (default: as shipped)"
    )
    p.add_argument("--rrf-k", type=int, help="the default config with this rrf_k (default: as shipped)")
    p.add_argument("--broad-rrf-k", type=int, help="the default config with this broad_rrf_k (0: off)")
    args = p.parse_args()
    asked = args.questions_of or args.owner
    with open(args.data, encoding="utf-8") as f:
        docs = json.load(f)
    questions = [str(q["question"]) for d in docs if f"default:{d['sample_id']}" == asked for q in d["qa"]]
    store = open_store(args.store, read_only=True)
    config = replace(SEED_DEFAULT, cache=replace(SEED_DEFAULT.cache, query_cache=False))
    if args.hub_fanout is not None:
        config = replace(config, hub_fanout=args.hub_fanout)
    if args.parallel_seeds is not None:
        config = replace(config, max_parallel_seeds=args.parallel_seeds)
    if args.dialogue_context is not None:
        config = replace(config, dialogue_context=args.dialogue_context)
    if args.rrf_k is not None:
        config = replace(config, rrf_k=args.rrf_k)
    if args.broad_rrf_k is not None:
        config = replace(config, broad_rrf_k=args.broad_rrf_k)
    retriever = Retriever(store, store_embedder(store), config)  # as its messages were
    retriever.warm_up()
    retriever.query(args.owner, "warm up question")  # loads the owner's snapshot
    for q in questions:
        retriever.embed(q)
    wall: list[float] = []
    cpu: list[float] = []
    for q in questions:
        t, c = time.perf_counter(), time.process_time()
        retriever.query(args.owner, q)
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    retriever.close()
    store.close()
    out = {
        "tree": os.environ.get("PYTHONPATH", ""),
        "owner": args.owner,
        "hub_fanout": config.hub_fanout,
        "parallel_seeds": config.max_parallel_seeds,
        "dialogue_context": getattr(config, "dialogue_context", None),  # None: a tree from before it
        "rrf_k": config.rrf_k,
        "broad_rrf_k": getattr(config, "broad_rrf_k", None),
        "wall_ms": dict(summary_ms(wall)),
        "cpu_ms": dict(summary_ms(cpu)),
        "load1": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
