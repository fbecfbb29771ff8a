"""``adamem bench scale``: how query latency and a query process's memory grow with an owner's size and with owners.

Synthetic stores, deterministic seed (no model: rows of the archive layer — messages with
384-dimension vectors, text and full-text tokens — plus owner rows; the other layers are not
generated, so this measures the store and retrieval path of the archive, the layer that grows
without bound). Messages are drawn from a pool of 2,000 distinct texts, each with one vector
(turns repeat), and appended in bulk to the shard's table (see ``build``: the fold is skipped).
Two series: messages per owner (one owner: 1k → 10k → 100k) and owners (10 messages each: 1k →
10k → 100k). Each size is built in one child process and measured in another, fresh one, so the
memory figures are a query process's: cold = an owner's first query (its snapshot loaded from the
store), warm = new questions on a loaded owner, p50/p95/max and CPU ms per query (the first warm question
of a tiered owner waits for its cold part's read into the process, ``retrieval.cold``, when that has not
ended: the max shows it). The question
embedder is a deterministic stand-in (a hashed random vector): e5's ≈ 19 ms per question is not
included (see ``adamem bench latency``). The query process runs NumPy's BLAS and OpenMP one thread
each, as ``adamem serve`` and ``adamem query`` run them (``SERVICE_THREADS``; a value in the
environment wins): with OpenBLAS's own worker, its spinning took about 50 ms of CPU a warm question
from the store's searches on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adamem.cli import SERVICE_THREADS
from adamem.retrieval.config import SEED_DEFAULT
from bench.common import RESULTS, measure_and_record, print_table, standalone_main, synthetic_row

__all__ = ["add_arguments", "execute", "main", "run"]

DIM = 384
WORDS = ("hiking", "berlin", "doctor", "sister", "pastry", "concert", "guitar", "peanuts", "lisbon", "tea", "chess")
QUESTIONS = [f"Why did I go {w} with my {v}?" for w in WORDS for v in ("sister", "dog", "friend")]


class HashEmbedder:
    """A deterministic unit vector per text (no model): the question path without e5's cost."""

    name, dim = "hash", DIM

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for t in texts:
            rng = np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
            v = rng.standard_normal(DIM)
            out.append((v / np.linalg.norm(v)).tolist())
        return out

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


def _pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else 0.0


def _ms(xs: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(xs) * 1000, 2),
        "p95_ms": round(_pct(xs, 0.95) * 1000, 2),
        "max_ms": round(max(xs) * 1000, 2),
        "n": len(xs),
    }


def _rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


POOL = 2000
HOT = SEED_DEFAULT.cache.hot_messages
VECTOR_INDEX_MIN_ROWS = 10_000
"""Distinct message texts (each with one vector); every message is one of them, as turns repeat."""


def build(folder: str, owners: int, per_owner: int, seed: int) -> dict[str, Any]:
    """Write the synthetic store: owner rows through the store's commit, messages appended in bulk.

    The shortcut (it is what makes 100k-message owners and 100k owners buildable here): a pool of
    ``POOL`` distinct messages (each with another's words as its ``context``) is turned into Arrow rows
    once by the store's own conversion (``rows_to_arrow``: the same columns, full-text tokens and
    vectors a commit writes); every
    message is a row of the pool with its own id, owner, time and sequence number, appended to the
    shard's ``messages`` table in chunks of 50,000 rows. No fold runs and no analysis is made; then
    one ``optimize`` (full-text and owner indexes, compaction) and a checkpoint naming the versions.
    """
    import dataclasses

    import pyarrow as pa

    from adamem.projections.folds.changes import Upsert
    from adamem.projections.folds.rows import MessageRow, OwnerRow
    from adamem.projections.store.lance import LanceStore
    from adamem.projections.store.lance_arrow import rows_to_arrow
    from adamem.text import search_text

    rng = np.random.default_rng(seed)
    words = random.Random(seed)
    store = LanceStore(  # as a rebuild writes: appends, indexes at the end
        folder, optimize_every=0, bulk=True, bulk_vector_index_min_rows=VECTOR_INDEX_MIN_ROWS
    )
    store.bind(1)
    t0 = time.perf_counter()
    owner_rows: list[Any] = [
        Upsert("owners", synthetic_row(OwnerRow, id=f"default:o{o}", owner_id=f"default:o{o}", next_seq=per_owner))
        for o in range(owners)
    ]
    vectors = rng.standard_normal((POOL, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pool = [
        synthetic_row(
            MessageRow,
            id=f"pool{i}",
            owner_id="default:o0",
            speaker="Ann",
            role="user",
            text=" ".join(words.choice(WORDS) for _ in range(12)),
            vector=tuple(float(x) for x in vectors[i]),
        )
        for i in range(POOL)
    ]
    # each with the words of a message before it (its ``context``), as the folds write them
    pool = [dataclasses.replace(r, context=search_text(pool[i - 1].text)) for i, r in enumerate(pool)]
    # the first message goes through the store's own commit: it makes the table with its schema
    store.commit(0, [*owner_rows, Upsert("messages", dataclasses.replace(pool[0], id="m0"))], {"analyses": 1})
    shard = store._shard(0, create=True)  # the shortcut: the rest is appended to the shard's table
    assert shard is not None
    table = shard.table("messages")
    pool_arrow = rows_to_arrow("messages", pool, table.schema)
    total, chunk, commits = owners * per_owner, 50_000, 1
    for start in range(1, total, chunk):
        m = np.arange(start, min(total, start + chunk))
        rows = pool_arrow.take(pa.array(rng.integers(0, POOL, len(m))))
        for name, values in (
            ("id", pa.array([f"m{i}" for i in m.tolist()])),
            ("owner_id", pa.array([f"default:o{i}" for i in (m % owners).tolist()])),
            ("occurred_at", pa.array(1_700_000_000_000 + m * 1000, pa.int64())),
            ("seq", pa.array(m // owners, pa.int64())),
        ):
            i = rows.schema.get_field_index(name)
            rows = rows.set_column(i, rows.schema.field(i), values.cast(rows.schema.field(i).type))
        table.add(rows)
        commits += 1
    t1 = time.perf_counter()
    shard.own["messages"] = table.version  # the appends are this writer's own
    store.commit(0, [], {"analyses": commits + 1})  # the checkpoint names the appended versions
    store.optimize()  # indexes (the vector index past a live writer's threshold) and a checkpoint naming them
    store.close()
    done = time.perf_counter()
    return {"rows": total, "build_s": round(done - t0, 1), "optimize_s": round(done - t1, 1)}


def _store_mb(folder: str) -> float:
    return round(sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) / 2**20, 1)


def _vmrss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def measure(folder: str, owners: int, seed: int, hot: int) -> dict[str, Any]:
    """In a fresh process: open the store read-only, query; latencies and this process's memory.

    cold = the first query of an owner (its snapshot is loaded from the store): one each for 50
    random owners (the one owner in the messages-per-owner series, three times in three fresh
    ``Retriever`` objects); warm = 30 distinct new questions on an owner already loaded. ``hot``:
    the retriever's ``hot_messages`` (0: every message of an owner held, the exact baseline).
    """
    import dataclasses

    from adamem.projections.store.lance import LanceStore
    from adamem.retrieval.config import SEED_DEFAULT
    from adamem.retrieval.service import Retriever

    config = dataclasses.replace(SEED_DEFAULT, cache=dataclasses.replace(SEED_DEFAULT.cache, hot_messages=hot))

    rss_start = _vmrss_mb()
    rng = random.Random(seed)
    chosen = [f"default:o{o}" for o in rng.sample(range(owners), min(50, owners))]
    cold, cpu_cold = [], 0.0
    rounds = 3 if owners == 1 else 1
    for r in range(rounds):
        retriever = Retriever(LanceStore(folder, read_only=True), HashEmbedder(), config)
        for owner in chosen:
            t, c = time.perf_counter(), time.process_time()
            retriever.query(owner, rng.choice(QUESTIONS), 10)
            cold.append(time.perf_counter() - t)
            cpu_cold += time.process_time() - c
        if r < rounds - 1:
            retriever.close()
    rss_cold = _vmrss_mb()
    warm, cpu_warm = [], 0.0
    for q in QUESTIONS[:30]:
        t, c = time.perf_counter(), time.process_time()
        retriever.query(chosen[0], q + " again", 10)
        warm.append(time.perf_counter() - t)
        cpu_warm += time.process_time() - c
    retriever.close()
    return {
        "hot_messages": hot,
        "cold": {**_ms(cold), "cpu_ms_mean": round(1000 * cpu_cold / len(cold), 2)},
        "warm": {**_ms(warm), "cpu_ms_mean": round(1000 * cpu_warm / len(warm), 2)},
        "query_rss_start_mb": rss_start,
        "query_rss_after_cold_mb": rss_cold,
        "query_rss_end_mb": _vmrss_mb(),
        "query_peak_rss_mb": _rss_mb(),
        "owners_loaded": len(chosen),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def one(
    owners: int, per_owner: int, seed: int, hots: Sequence[int], whole_max: int, work: str | None = None
) -> list[dict[str, Any]]:
    """Build one configuration in a child process, then measure it in another per hot window (a query process's
    memory); the whole-owner baseline (hot 0) only up to ``whole_max`` messages per owner. ``work``: keep the
    store in ``work/<owners>x<per_owner>-seed<seed>`` and measure the one found there instead of building it."""
    out = []
    served = {**os.environ, **{name: os.environ.get(name, "1") for name in SERVICE_THREADS}}
    with contextlib.ExitStack() as stack:
        if work is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="adamem-bench-scale-"))
        else:
            folder = str(Path(work) / f"{owners}x{per_owner}-seed{seed}")
        me = [sys.executable, "-m", "bench.scale", "--seed", str(seed)]
        record = Path(folder) / "built.json"
        if record.exists():
            built = json.loads(record.read_text())
        else:
            if work is not None:  # a build cut short leaves no record: build it again
                shutil.rmtree(folder, ignore_errors=True)
                Path(folder).mkdir(parents=True)
            cmd = [*me, "--build", folder, str(owners), str(per_owner)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"build failed: {done.stderr[-3000:]}")
            built = json.loads(done.stdout.strip().splitlines()[-1])
            if work is not None:
                record.write_text(json.dumps(built))
        for hot in hots:
            if hot == 0 and per_owner > whole_max:
                continue
            done = subprocess.run(  # a query process as `adamem serve` runs one: one thread per numeric library
                [*me, "--measure", folder, str(owners), "--hot", str(hot)], capture_output=True, text=True, env=served
            )
            if done.returncode:
                raise RuntimeError(f"measure failed: {done.stderr[-3000:]}")
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            out.append(
                {"owners": owners, "messages_per_owner": per_owner, **built, **measured, "store_mb": _store_mb(folder)}
            )
    return out


def run(
    per_owner: Sequence[int],
    owners: Sequence[int],
    seed: int,
    hots: Sequence[int] = (HOT,),
    whole_max: int = 100_000,
    work: str | None = None,
) -> dict[str, Any]:
    """Each configuration in a fresh process (``--one``), both series, each hot window."""
    configs = [("messages_per_owner", 1, n) for n in per_owner] + [("owners", k, 10) for k in owners]
    out: dict[str, Any] = {"seed": seed, "series": {"messages_per_owner": [], "owners": []}}
    for series, k, n in configs:
        print(f"scale: {k} owner(s) × {n} messages …", file=sys.stderr, flush=True)
        out["series"][series] += one(k, n, seed, hots, whole_max, work)
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    """Cold and warm p95 and the query process's memory and the store on disk, per series."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key in zip(axes, ("messages_per_owner", "owners"), strict=True):
        every = result["series"][key]
        for hot in sorted({r.get("hot_messages", 0) for r in every}, reverse=True):
            rows = [r for r in every if r.get("hot_messages", 0) == hot]
            xs = [r[key] for r in rows]
            held = f"newest {hot} held" if hot else "held whole"
            ax.plot(xs, [r["cold"]["p95_ms"] for r in rows], "o-", label=f"cold p95 ms, {held}")
            ax.plot(xs, [r["warm"]["p95_ms"] for r in rows], "s-", label=f"warm p95 ms, {held}")
            ax.plot(xs, [r["query_peak_rss_mb"] for r in rows], "^--", label=f"peak RSS MB, {held}")
        rows = [r for r in every if r.get("hot_messages", 0) == every[0].get("hot_messages", 0)]
        ax.plot([r[key] for r in rows], [r["store_mb"] for r in rows], "v:", label="store on disk (MB)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(
            key.replace("_", " ") + (" (one owner)" if key == "messages_per_owner" else " (10 messages each)")
        )
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("adamem bench scale (synthetic archive rows; in-process queries; shared, loaded 2-core machine)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def print_report(result: dict[str, Any], png: Path = RESULTS / "scale.png") -> None:
    """The table and the plot (``png``: beside the result file)."""
    rows = [
        [
            r["owners"],
            r["messages_per_owner"],
            r.get("hot_messages", 0) or "whole",
            r["cold"]["p50_ms"],
            r["cold"]["p95_ms"],
            r["cold"]["cpu_ms_mean"],
            r["warm"]["p50_ms"],
            r["warm"]["p95_ms"],
            r["warm"].get("max_ms", ""),
            r["query_rss_start_mb"],
            r["query_peak_rss_mb"],
            r["store_mb"],
            r["build_s"],
            r["loadavg"][0],
        ]
        for series in ("messages_per_owner", "owners")
        for r in result["series"][series]
    ]
    headers = ["owners", "msgs/owner", "held", "cold p50", "cold p95", "cold CPU ms", "warm p50", "warm p95"]
    headers += ["warm max", "RSS start MB", "RSS peak MB", "store MB", "build s", "load"]
    print_table(headers, rows)
    plot(result, png)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench scale``."""
    p.add_argument(
        "--per-owner", nargs="+", type=int, default=[1000, 10_000, 100_000], help="messages of the one-owner stores"
    )
    p.add_argument(
        "--owners", nargs="+", type=int, default=[1000, 10_000, 100_000], help="owners of the many-owner stores"
    )
    p.add_argument("--seed", type=int, default=19, help="seed of the synthetic messages (default 19)")
    p.add_argument(
        "--hot",
        nargs="+",
        type=int,
        default=[HOT, 0],
        help=f"hot windows (hot_messages) to measure each store with; 0: owners held whole (default {HOT} 0)",
    )
    p.add_argument(
        "--whole-max",
        type=int,
        default=100_000,
        help="largest owner measured held whole (hot 0): a 1M-message owner does not fit in memory (default 100000)",
    )
    p.add_argument(
        "--work",
        help="keep the built stores in this folder and measure the ones already there (default: build each in a "
        "temporary folder and remove it)",
    )
    p.add_argument("--build", nargs=3, metavar=("FOLDER", "OWNERS", "PER_OWNER"), help=argparse.SUPPRESS)
    p.add_argument("--measure", nargs=2, metavar=("FOLDER", "OWNERS"), help=argparse.SUPPRESS)
    p.add_argument("--json", dest="out", help="result file (default bench/results/scale.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    if args.build:
        print(json.dumps(build(args.build[0], int(args.build[1]), int(args.build[2]), args.seed)))
        return 0
    if args.measure:
        print(json.dumps(measure(args.measure[0], int(args.measure[1]), args.seed, args.hot[0])))
        return 0
    return measure_and_record(
        "scale",
        argv,
        args.out,
        lambda: run(args.per_owner, args.owners, args.seed, args.hot, args.whole_max, args.work),
        lambda r: print_report(r, Path(args.out).with_suffix(".png") if args.out else RESULTS / "scale.png"),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.scale``."""
    return standalone_main("scale", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
