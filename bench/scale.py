"""``adamem bench scale``: how query latency and service memory grow with an owner's size and with owners.

Synthetic stores, deterministic seed, written straight into a LanceDB store (no model: rows of the
archive layer — messages with 384-dimension vectors and text — plus owner rows; the other layers
are not generated, so this measures the store and retrieval path of the archive, the layer that
grows without bound). Two series, each configuration measured in a fresh process (its memory is
the service's): messages per owner (one owner: 1k → 10k → 100k) and owners (10 messages each:
1k → 10k → ``--max-owners``). Per configuration: the first query of an owner (snapshot load from
the store), then distinct questions on the loaded owner, p50/p95; for the owners series, one cold
query for each of 50 random owners. The question embedder is a deterministic stand-in (a hashed
random vector): e5's ≈ 19 ms per question is not included (see ``adamem bench latency``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
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

import numpy as np

from adamem.bench.common import RESULTS, measure_and_record, print_table, standalone_main

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
        "n": len(xs),
    }


def _rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def build(folder: str, owners: int, per_owner: int, seed: int) -> dict[str, Any]:
    """Write the synthetic store: owners, and ``per_owner`` messages each, in commits of 5,000 rows."""
    import dataclasses
    import typing

    from adamem.projections.folds.changes import Upsert
    from adamem.projections.folds.rows import MessageRow, OwnerRow
    from adamem.projections.store.lance import LanceStore

    defaults: dict[Any, dict[str, Any]] = {}

    def make(cls: Any, **values: Any) -> Any:
        if cls not in defaults:
            hints = typing.get_type_hints(cls)
            defaults[cls] = {
                f.name: {str: "", int: 0, float: 0.0, bool: False}.get(
                    hints[f.name], () if typing.get_origin(hints[f.name]) is tuple else []
                )
                for f in dataclasses.fields(cls)
            }
        return cls(**{**defaults[cls], **values})

    rng = np.random.default_rng(seed)
    words = random.Random(seed)
    store = LanceStore(folder, optimize_every=0)
    store.bind(1)
    t0 = time.perf_counter()
    pending: list[Upsert] = [
        Upsert("owners", make(OwnerRow, id=f"default:o{o}", owner_id=f"default:o{o}", next_seq=per_owner))
        for o in range(owners)
    ]
    commits = 0
    total = owners * per_owner
    for start in range(0, total, 5000):
        n = min(5000, total - start)
        vectors = rng.standard_normal((n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for i in range(n):
            m = start + i
            text = " ".join(words.choice(WORDS) for _ in range(12))
            row = make(
                MessageRow,
                id=f"m{m}",
                owner_id=f"default:o{m % owners}",
                speaker="Ann",
                text=text,
                occurred_at=1_700_000_000_000 + m * 1000,
                vector=tuple(float(x) for x in vectors[i]),
                seq=m // owners,
            )
            pending.append(Upsert("messages", row))
        commits += 1
        store.commit(0, pending, {"analyses": commits})
        pending = []
    store.optimize()
    store.commit(0, [], {"analyses": commits + 1})  # the checkpoint names the optimised versions
    return {"rows": total, "build_s": round(time.perf_counter() - t0, 1)}


def one(owners: int, per_owner: int, seed: int) -> dict[str, Any]:
    """Build and measure one configuration in this process."""
    from adamem.projections.store.lance import LanceStore
    from adamem.retrieval.service import Retriever

    with tempfile.TemporaryDirectory(prefix="adamem-bench-scale-") as folder:
        built = build(folder, owners, per_owner, seed)
        rss_before = _rss_mb()
        retriever = Retriever(LanceStore(folder, read_only=True), HashEmbedder())
        rng = random.Random(seed)
        chosen = [f"default:o{o}" for o in rng.sample(range(owners), min(50, owners))]
        cold = []
        for owner in chosen:
            t = time.perf_counter()
            retriever.query(owner, rng.choice(QUESTIONS), 10)
            cold.append(time.perf_counter() - t)
        warm = []
        for q in QUESTIONS[:30]:
            t = time.perf_counter()
            retriever.query(chosen[0], q + " again", 10)
            warm.append(time.perf_counter() - t)
        du = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
        retriever.close()
    return {
        "owners": owners,
        "messages_per_owner": per_owner,
        **built,
        "first_query_per_owner": _ms(cold),
        "loaded_owner_queries": _ms(warm),
        "peak_rss_mb": _rss_mb(),
        "rss_before_queries_mb": rss_before,
        "store_mb": round(du / 2**20, 1),
    }


def run(per_owner: Sequence[int], owners: Sequence[int], seed: int) -> dict[str, Any]:
    """Each configuration in a fresh process (``--one``), both series."""
    configs = [("messages_per_owner", 1, n) for n in per_owner] + [("owners", k, 10) for k in owners]
    out: dict[str, Any] = {"seed": seed, "series": {"messages_per_owner": [], "owners": []}}
    for series, k, n in configs:
        print(f"scale: {k} owner(s) × {n} messages …", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "adamem.bench.scale", "--one", str(k), str(n), "--seed", str(seed)],
            capture_output=True,
            text=True,
            check=True,
        )
        out["series"][series].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, series, key in zip(axes, ("messages_per_owner", "owners"), ("messages_per_owner", "owners"), strict=True):
        rows = result["series"][series]
        xs = [r[key] for r in rows]
        ax.plot(xs, [r["first_query_per_owner"]["p95_ms"] for r in rows], "o-", label="first query p95 (ms)")
        ax.plot(xs, [r["loaded_owner_queries"]["p95_ms"] for r in rows], "s-", label="loaded owner p95 (ms)")
        ax.plot(xs, [r["peak_rss_mb"] for r in rows], "^--", label="peak RSS (MB)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(key.replace("_", " "))
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("adamem bench scale (synthetic archive rows; shared, loaded 2-core machine)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def print_report(result: dict[str, Any]) -> None:
    rows = []
    for series in ("messages_per_owner", "owners"):
        for r in result["series"][series]:
            rows.append(
                [
                    r["owners"],
                    r["messages_per_owner"],
                    r["first_query_per_owner"]["p50_ms"],
                    r["first_query_per_owner"]["p95_ms"],
                    r["loaded_owner_queries"]["p95_ms"],
                    r["peak_rss_mb"],
                    r["store_mb"],
                    r["build_s"],
                ]
            )
    headers = ["owners", "msgs/owner", "first p50", "first p95", "loaded p95", "peak RSS MB", "store MB", "build s"]
    print_table(headers, rows)
    plot(result, RESULTS / "scale.png")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench scale``."""
    p.add_argument("--per-owner", nargs="+", type=int, default=[1000, 10_000, 100_000])
    p.add_argument("--owners", nargs="+", type=int, default=[1000, 10_000, 30_000])
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--one", nargs=2, type=int, metavar=("OWNERS", "PER_OWNER"), help=argparse.SUPPRESS)
    p.add_argument("--json", dest="out", help="result file (default bench/results/scale.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.seed)))
        return 0
    return measure_and_record(
        "scale", argv, args.out, lambda: run(args.per_owner, args.owners, args.seed), print_report
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m adamem.bench.scale``."""
    return standalone_main("scale", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
