"""Cold and warm questions of one long-lived owner of a kept store, two source trees side by side.

``python -m bench.long_owner --store DIR --owner KEY --trees OLD NEW --rounds 2 --json OUT``: ``DIR`` is
a store whose owner ``KEY`` holds a long history with every layer (messages, records, traits, graph),
such as the one ``adamem bench replay_jobs --samples conv-26 --repeat 240 --owners 1 --partitions 1
--jobs 1 --rounds 1 --work W`` keeps in ``W/p1/store`` (owner ``default:replay-0000``: the LoCoMo
conv-26 turns told 240 times over, 100,560 messages). The questions are the sample's own
(categories 1–4), embedded once with e5 here so the query processes time retrieval only.

Each round starts a fresh process per tree (``PYTHONPATH=TREE/src``; the order turns every round):
*cold* = the owner's first question in each of three fresh ``Retriever`` objects (its snapshot
loaded from the store); *warm* = the next ``--warm`` questions on the loaded owner; the process's
peak RSS. One thread per numeric library, as ``adamem serve`` runs. Every tree is asked the same
questions in the same order, and every run's answers are compared item by item with the first run's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def _pct(xs: Sequence[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _child(store: str, owner: str, hot: int, questions_file: str, warm: int) -> dict[str, Any]:
    """In a fresh process: three cold first questions, ``warm`` warm ones; latencies, RSS, answers."""
    from adamem.projections.store.lance import LanceStore
    from adamem.retrieval.config import SEED_DEFAULT
    from adamem.retrieval.service import Retriever

    vectors: dict[str, list[float]] = json.loads(Path(questions_file).read_text())
    order = sorted(vectors)
    random.Random(7).shuffle(order)

    class Embedded:
        """The questions' vectors, made by the parent with the store's embedder."""

        name, dim = "precomputed", len(next(iter(vectors.values())))

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [vectors[t] for t in texts]

        embed_query = embed

    config = dataclasses.replace(
        SEED_DEFAULT, cache=dataclasses.replace(SEED_DEFAULT.cache, hot_messages=hot, query_cache=False)
    )
    cold, answers = [], []
    retriever = None
    for i in range(3):
        if retriever is not None:
            retriever.close()
        retriever = Retriever(LanceStore(store, read_only=True), Embedded(), config)
        t = time.perf_counter()
        retriever.query(owner, order[i], 10)
        cold.append(1000 * (time.perf_counter() - t))
    assert retriever is not None
    times = []
    for q in order[3 : 3 + warm]:
        t = time.perf_counter()
        answer = retriever.query(owner, q, 10)
        times.append(1000 * (time.perf_counter() - t))
        answers.append([q, [[item.id, round(item.score, 9)] for item in answer.items]])
    snap = retriever.snapshot(owner)
    held = {"messages": len(snap.messages), "records": len(snap.records), "traits": len(snap.traits)}
    held |= {"graph_nodes": len(snap.nodes), "graph_edges": len(snap.edge_rows)}
    retriever.close()
    return {
        "cold_ms": [round(c, 1) for c in cold],
        "warm_ms": {
            "p50": round(statistics.median(times), 1),
            "p95": round(_pct(times, 0.95), 1),
            "max": round(max(times), 1),
            "n": len(times),
        },
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "held": held,
        "answers": answers,
    }


def _embed_questions(sample: str, out: Path, store_url: str) -> int:
    """The sample's questions embedded as the store's messages were (its generation's embedder), into ``out``."""
    from adamem.projections.store.factory import open_store
    from bench.common import store_embedder

    data = json.loads((ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json").read_text())
    doc = next(d for d in data if d.get("sample_id") == sample)
    questions = sorted({q["question"] for q in doc["qa"] if q.get("category") in (1, 2, 3, 4)})
    store = open_store(store_url, read_only=True)
    try:
        embedder = store_embedder(store)
    finally:
        store.close()
    vectors = embedder.embed_query(questions)
    out.write_text(json.dumps(dict(zip(questions, vectors, strict=True))))
    return len(questions)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.long_owner", description=__doc__)
    p.add_argument("--store", required=True, help="a kept store folder")
    p.add_argument("--owner", default="default:replay-0000", help="the owner key (tenant:user_id)")
    p.add_argument("--trees", nargs="+", default=[str(ROOT)], help="source trees to run side by side")
    p.add_argument("--sample", default="conv-26", help="the LoCoMo sample whose questions are asked")
    p.add_argument("--hot", type=int, default=2000, help="the retriever's hot_messages (0: the owner held whole)")
    p.add_argument("--warm", type=int, default=40, help="warm questions per process")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", dest="out", help="result file")
    p.add_argument("--child", nargs=2, metavar=("QUESTIONS", "TREE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.store, args.owner, args.hot, args.child[0], args.warm)))
        return 0
    with tempfile.TemporaryDirectory(prefix="adamem-long-owner-") as tmp:
        questions = Path(tmp) / "questions.json"
        asked = _embed_questions(args.sample, questions, args.store)
        runs: dict[str, list[dict[str, Any]]] = {tree: [] for tree in args.trees}
        for r in range(args.rounds):
            for tree in args.trees if r % 2 == 0 else list(reversed(args.trees)):
                env = {**os.environ, "PYTHONPATH": f"{tree}/src:{ROOT}", **{name: "1" for name in THREADS}}
                cmd = [sys.executable, "-m", "bench.long_owner", "--store", args.store, "--owner", args.owner]
                cmd += ["--hot", str(args.hot), "--warm", str(args.warm), "--child", str(questions), tree]
                load = os.getloadavg()[0]
                done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
                if done.returncode:
                    raise SystemExit(f"{tree}: {done.stderr[-3000:]}")
                run = json.loads(done.stdout.strip().splitlines()[-1]) | {"load_1m": round(load, 2)}
                runs[tree].append(run)
                print(
                    f"{tree}: cold {run['cold_ms']} ms, warm p50 {run['warm_ms']['p50']} p95 "
                    f"{run['warm_ms']['p95']} ms, peak RSS {run['peak_rss_mb']} MB",
                    file=sys.stderr,
                    flush=True,
                )
    first = runs[args.trees[0]][0]["answers"]
    same = {  # per tree, per run: questions answered exactly as in the first tree's first run
        tree: [sum(a == b for a, b in zip(first, r["answers"], strict=True)) for r in rs] for tree, rs in runs.items()
    }
    own = {  # per tree, per run: questions answered exactly as in that tree's first run
        tree: [sum(a == b for a, b in zip(rs[0]["answers"], r["answers"], strict=True)) for r in rs]
        for tree, rs in runs.items()
    }
    result = {
        "benchmark": "long_owner",
        "command": "python -m bench.long_owner " + " ".join(argv if argv is not None else sys.argv[1:]),
        "store": args.store,
        "owner": args.owner,
        "hot_messages": args.hot,
        "questions": asked,
        "trees": {
            tree: {
                "held": rs[0]["held"],
                "cold_ms_median": round(statistics.median(c for r in rs for c in r["cold_ms"]), 1),
                "warm_p50_ms_median": round(statistics.median(r["warm_ms"]["p50"] for r in rs), 1),
                "warm_p95_ms_median": round(statistics.median(r["warm_ms"]["p95"] for r in rs), 1),
                "peak_rss_mb_max": max(r["peak_rss_mb"] for r in rs),
                "runs": [{k: v for k, v in r.items() if k != "answers"} for r in rs],
            }
            for tree, rs in runs.items()
        },
        "answers_identical_to_first_run": same,
        "answers_identical_to_the_trees_first_run": own,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(
        json.dumps(
            {k: v for k, v in result.items() if k != "trees"}
            | {"trees": {t: {k: v for k, v in d.items() if k != "runs"} for t, d in result["trees"].items()}},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
