"""Compression on LoCoMo: the upper layers' size before and after, and R@10 without and with it.

    PYTHONPATH=src:. python bench/locomo_compression.py --work /tmp/loc-base default compression_by_topic=true

The store under ``--work`` is the one ``bench/locomo_variants.py --work`` builds (built here the same
way when missing). Per compression setting (``default``, or ``;``-separated ``MemoryParameters``
changes) it is copied, log and all, to ``WORK/compressed-<i>``; the rules compressor proposes
the compressions of every conversation's records (``streams.compress``), they go on the copy's
control topic and the pipeline folds them, as ``ADAMEM_COMPRESSION=rules`` does after each batch.
Sizes are counted before and after: active episodic records (what retrieval reads) and their
characters, every stored episodic row (nothing is deleted, so this grows by the summaries), and the
active persona and graph rows. Then every question of categories 1–4 with evidence is asked of
the store as built and of each compressed copy (``bench/locomo_variants.py``'s measure).
The result (``bench/results/locomo_compression.json``) holds the command, the sizes, the cost of
compressing (wall time per message of the log, proposing and folding) and the R@10 rows.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.analysis import Embedder
from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.projections.folds.params import SEED_DEFAULT as MEMORY_DEFAULT
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import EpisodicRow, GraphNodeRow, MessageRow, PersonaRow
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.settings import Settings
from adamem.streams.compress import compress_owners
from adamem.streams.factory import open_log
from adamem.streams.pipeline import run_pipeline

__all__ = ["compressed_copy", "layer_sizes"]


def layer_sizes(store_url: str) -> dict[str, int]:
    """Row counts of the upper layers of a store, summed over its owners."""
    store = open_store(store_url, read_only=True)
    size: Counter[str] = Counter()
    try:
        for owner in store.owners():
            size["messages"] += sum(1 for r in store.rows("messages", owner) if isinstance(r, MessageRow))
            for r in store.rows("episodic", owner):
                if isinstance(r, EpisodicRow):
                    size["episodic_rows"] += 1
                    size[f"episodic_{r.status}"] += 1
                    if r.status == "active":
                        size["episodic_active_chars"] += len(r.content)
                        size["episodic_active_events"] += r.type == "event"
                        size["episodic_active_summaries"] += r.type == "summary"
            size["persona_active"] += sum(
                1 for t in store.rows("persona", owner) if isinstance(t, PersonaRow) and t.status == "active"
            )
            size["graph_nodes_active"] += sum(
                1 for n in store.rows("graph_nodes", owner) if isinstance(n, GraphNodeRow) and n.active
            )
    finally:
        store.close()
    return dict(sorted(size.items()))


def compressed_copy(
    work: Path, embedder: Embedder, params: MemoryParameters = MEMORY_DEFAULT, name: str = "compressed"
) -> dict[str, Any]:
    """Copy the built log and store to ``WORK/<name>``, compress every owner there; sizes and costs."""
    copy = work / name
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir()
    for part in ("log", "log.keys", "store"):
        if (work / part).exists():
            shutil.copytree(work / part, copy / part)
    settings = Settings(log_url=str(copy / "log"), store_url=str(copy / "store"), fsync=False)
    before = layer_sizes(settings.store_url)

    async def run() -> tuple[int, float, float]:
        log = open_log(settings.log_url, settings)
        await log.start()
        store = open_store(settings.store_url)
        try:
            started = time.perf_counter()
            proposed = await compress_owners(log, store, settings, params)
            proposing = time.perf_counter() - started
            started = time.perf_counter()
            await run_pipeline(log, Projector(store, params), MemoryAgent(RuleExtractor(), embedder), settings)
            return proposed, proposing, time.perf_counter() - started
        finally:
            store.close()
            await log.stop()

    proposed, proposing_s, folding_s = asyncio.run(run())
    after = layer_sizes(settings.store_url)
    active_before, active_after = before.get("episodic_active", 0), after.get("episodic_active", 0)
    messages = max(1, before.get("messages", 0))
    return {
        "compressions": proposed,
        "before": before,
        "after": after,
        "episodic_active_change_pct": round(100 * (active_after - active_before) / max(1, active_before), 1),
        "episodic_active_chars_change_pct": round(
            100
            * (after.get("episodic_active_chars", 0) - before.get("episodic_active_chars", 0))
            / max(1, before.get("episodic_active_chars", 0)),
            1,
        ),
        "propose_ms_per_message": round(1000 * proposing_s / messages, 3),
        "fold_ms_per_message": round(1000 * folding_s / messages, 3),
        "params": {k: v for k, v in dataclasses.asdict(params).items() if k.startswith("compression_")},
    }


def main() -> int:
    """Compress a copy of the built LoCoMo store, measure both, write the result file."""
    from bench.locomo_quick import CachedQueries, build, work_embedder
    from bench.locomo_variants import measure

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"))
    ap.add_argument("--work", default="/tmp/loc-base", help="folder of the built log and store")
    ap.add_argument("--json", dest="out", default=str(Path(__file__).parent / "results" / "locomo_compression.json"))
    ap.add_argument(
        "configs",
        nargs="*",
        default=["default"],
        help='compression settings to measure: "default" or "field=value;field=value" of MemoryParameters',
    )
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    work = Path(args.work)
    embedder = work_embedder(work)
    build(data, work, embedder, MEMORY_DEFAULT)
    queries = CachedQueries(embedder, work / "questions.json")
    baseline = open_store(str(work / "store"), read_only=True)
    try:
        rows = [measure(baseline, data, queries, "no-compression:base")]
    finally:
        baseline.close()
    print(json.dumps(rows[-1]), flush=True)
    reports: dict[str, Any] = {}
    for i, config in enumerate(args.configs):
        changes = [c.partition("=") for c in config.split(";") if c and config != "default"]
        params = dataclasses.replace(
            MEMORY_DEFAULT,
            **{
                k: (v.lower() == "true")
                if isinstance(getattr(MEMORY_DEFAULT, k), bool)
                else type(getattr(MEMORY_DEFAULT, k))(v)
                for k, _, v in changes
            },
        )
        reports[config] = compressed_copy(work, embedder, params, f"compressed-{i}")
        print(json.dumps({"compression": config, **reports[config]}), flush=True)
        store = open_store(str(work / f"compressed-{i}" / "store"), read_only=True)
        try:
            rows.append(measure(store, data, queries, "compression:base", f"compression[{config}]:base"))
        finally:
            store.close()
        print(json.dumps(rows[-1]), flush=True)
    queries.save()
    result = {
        "command": "PYTHONPATH=src:. .venv/bin/python bench/" + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "data": args.data,
        "compression": reports,
        "recall_at_10": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
