"""Per-question CPU of the query path with two embedders, each on the store built with it, in one run.

    OMP_NUM_THREADS=1 python bench/query_embedders.py --store e5=/tmp/lco-e5/store \\
        --store e5-pair=/tmp/lco-pair/store --owner default:conv-43

Every question of the owner is asked once per embedder, cold (the answer cache off, the question not embedded before:
the embedder's time is in the figures), the embedders taking turns question by question, each first every other
question, so the load of a shared machine and what one question's first asking leaves warm fall on both alike. CPU
time counts every thread of the process. Then each embedder embeds the owner's turns as the Memory Agent does
(``embed``, 64 at a time, taking turns): the analysis CPU a message costs. Prints one JSON line per embedder and one
with the ratios of the later ones to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from typing import Any

from adamem.analysis.factory import build_embedder
from adamem.projections.store.factory import open_store
from adamem.retrieval import SEED_DEFAULT, Retriever
from adamem.settings import Settings
from bench.common import DEFAULT_LOCOMO
from bench.jar_embedders import texts
from bench.metrics import summary_ms


def main() -> None:
    """Ask every question of one owner with each embedder in turn and print the summaries."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", action="append", required=True, help="EMBEDDER=STORE, e.g. e5=/tmp/lco-e5/store")
    p.add_argument("--owner", required=True, help="owner key, e.g. default:conv-43")
    p.add_argument("--data", default=str(DEFAULT_LOCOMO))
    args = p.parse_args()
    with open(args.data, encoding="utf-8") as f:
        docs = json.load(f)
    doc = next(d for d in docs if f"default:{d['sample_id']}" == args.owner)
    questions = [str(q["question"]) for q in doc["qa"]]
    turns = [text for _, _, text in texts([doc])[0]]
    config = replace(SEED_DEFAULT, cache=replace(SEED_DEFAULT.cache, query_cache=False))
    runs: list[tuple[str, Any, Retriever, list[float], list[float], list[float]]] = []
    for spec in args.store:
        name, _, path = spec.partition("=")
        store = open_store(path, read_only=True)
        retriever = Retriever(store, build_embedder(Settings(embedder=name)), config)
        retriever.warm_up()
        retriever.query(args.owner, "warm up question")  # loads the owner's snapshot and both models
        runs.append((name, store, retriever, [], [], []))
    for n, q in enumerate(questions):
        for _, _, retriever, wall, cpu, _ in runs if n % 2 == 0 else runs[::-1]:  # either goes first as often
            t, c = time.perf_counter(), time.process_time()
            retriever.query(args.owner, q)
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
    for i in range(0, len(turns), 64):
        for _, _, retriever, _, _, analysis in runs:
            c = time.process_time()
            retriever.embedder.embed(turns[i : i + 64])
            analysis.append(time.process_time() - c)
    summaries = []
    for name, store, retriever, wall, cpu, analysis in runs:
        retriever.close()
        store.close()
        summaries.append({"embedder": name, "owner": args.owner, "questions": len(questions), "turns": len(turns)})
        summaries[-1] |= {"wall_ms": dict(summary_ms(wall)), "cpu_ms": dict(summary_ms(cpu))}
        summaries[-1]["embed_cpu_ms_per_turn"] = round(sum(analysis) / len(turns) * 1000, 2)
        print(json.dumps(summaries[-1]))
    first = summaries[0]
    for other in summaries[1:]:
        ratios = {
            f"{kind}_{stat}": round(other[kind][stat] / first[kind][stat], 3)
            for kind in ("cpu_ms", "wall_ms")
            for stat in ("mean", "p50", "p95")
        }
        ratios["embed_cpu_per_turn"] = round(other["embed_cpu_ms_per_turn"] / first["embed_cpu_ms_per_turn"], 3)
        print(json.dumps({"ratio": f"{other['embedder']}/{first['embedder']}", **ratios, "load1": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
