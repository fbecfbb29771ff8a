"""Cold questions from several threads of one process, the question embedding included: CPU per question and QPS.

    PYTHONPATH=<tree> OMP_NUM_THREADS=1 python bench/query_threads.py --store STORE --owner default:one-0000 \\
        --start 120 --threads 8

Asks ``--count`` distinct LoCoMo questions (from ``--start`` in file order) of one owner, ``--threads``
at a time, as ``adamem serve``'s worker threads do, in a fresh process (nothing memoised). Run it
alternately with the old tree and the new one (ABAB) on the same questions. Prints one JSON line,
with the e5 embedder's forward passes and texts when it counts them (shared passes).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

from adamem.projections.store.factory import open_store
from adamem.retrieval import Retriever
from bench.common import DEFAULT_LOCOMO, store_embedder


def main() -> None:
    """Ask, time and print."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True)
    p.add_argument("--owner", default="default:one-0000")
    p.add_argument("--data", default=str(DEFAULT_LOCOMO))
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=120)
    p.add_argument("--threads", type=int, default=8)
    args = p.parse_args()
    with open(args.data, encoding="utf-8") as f:
        docs = json.load(f)
    qs = list(dict.fromkeys(str(q["question"]) for d in docs for q in d["qa"]))[args.start : args.start + args.count]
    store = open_store(args.store, read_only=True)
    retriever = Retriever(store, store_embedder(store))  # as its messages were embedded
    retriever.warm_up()
    retriever.query(args.owner, "warm up question")  # loads the owner's snapshot
    c, w = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(lambda q: retriever.query(args.owner, q), qs))
    cpu, wall = time.process_time() - c, time.perf_counter() - w
    embedder = retriever.embedder
    out = {
        "tree": os.environ.get("PYTHONPATH", ""),
        "threads": args.threads,
        "questions": len(qs),
        "cpu_ms_per_question": round(cpu * 1000 / len(qs), 2),
        "qps": round(len(qs) / wall, 1),
        "e5_passes": getattr(embedder, "passes", None),
        "e5_texts": getattr(embedder, "texts", None),
        "load1": round(os.getloadavg()[0], 2),
    }
    retriever.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
