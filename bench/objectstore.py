"""``adamem bench objectstore``: what a store on an object store (``s3://``) adds to commits and reads.

The same synthetic rows (deterministic seed: owners, messages with 384-dimension vectors and text)
are committed to a store in a local folder and to one on an S3-compatible endpoint, in the same
run, one batch per commit as the projection writes them; then a fresh reader of each loads every
owner (the query service's cold path), and runs a vector and a full-text search per owner. Printed:
p50/p95 of each step per backend and the difference. The endpoint of the test setup is moto's
server on loopback (deploy/s3.sh), an emulator: it shows the cost of the object-store protocol
(requests instead of file calls), not the network latency of a real S3 region (add that: one to a
few tens of ms per request).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from typing import Any

from adamem.projections.folds.changes import Upsert
from adamem.projections.folds.rows import MessageRow, OwnerRow
from adamem.projections.store.lance import LanceStore
from bench.common import measure_and_record, print_table, standalone_main, synthetic_row

__all__ = ["add_arguments", "execute", "main", "run"]

DIM = 384
WORDS = ("hiking", "berlin", "doctor", "sister", "pastry", "concert", "guitar", "peanuts", "lisbon", "tea", "chess")


def _pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else 0.0


def _stats(xs: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(xs) * 1000, 2), "p95_ms": round(_pct(xs, 0.95) * 1000, 2), "n": len(xs)}


def _vector(rng: random.Random) -> tuple[float, ...]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(x * x for x in v) ** 0.5
    return tuple(x / norm for x in v)


def _batches(owners: int, messages: int, batch: int, seed: int) -> list[list[Upsert]]:
    rng = random.Random(seed)
    rows: list[Upsert] = [
        Upsert("owners", synthetic_row(OwnerRow, id=f"default:o{o}", owner_id=f"default:o{o}", next_seq=1))
        for o in range(owners)
    ]
    for n in range(messages):
        o = n % owners
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        rows.append(
            Upsert(
                "messages",
                synthetic_row(MessageRow, id=f"m{n}", owner_id=f"default:o{o}", text=text, vector=_vector(rng), seq=n),
            )
        )
    return [rows[i : i + batch] for i in range(0, len(rows), batch)]


def _one(url: str, options: dict[str, str] | None, batches: list[list[Upsert]], owners: int) -> dict[str, Any]:
    store = LanceStore(url, storage_options=options)
    store.bind(1)
    commits = []
    for n, changes in enumerate(batches):
        t = time.perf_counter()
        store.commit(0, changes, {"analyses": n + 1})
        commits.append(time.perf_counter() - t)
    t = time.perf_counter()
    reader = LanceStore(url, read_only=True, storage_options=options)
    reader.checkpoint(0)
    open_s = time.perf_counter() - t
    rng = random.Random(7)
    loads, vectors, texts = [], [], []
    for o in range(owners):
        owner = f"default:o{o}"
        t = time.perf_counter()
        reader.load_owner(owner)
        loads.append(time.perf_counter() - t)
        t = time.perf_counter()
        reader.vector_search("messages", owner, _vector(rng), 10)
        vectors.append(time.perf_counter() - t)
        t = time.perf_counter()
        reader.text_search("messages", owner, "hiking doctor", 10)
        texts.append(time.perf_counter() - t)
    return {
        "commit": _stats(commits),
        "reader_open_ms": round(open_s * 1000, 2),
        "load_owner": _stats(loads),
        "vector_search": _stats(vectors),
        "text_search": _stats(texts),
    }


def run(endpoint: str, owners: int, messages: int, batch: int, seed: int) -> dict[str, Any]:
    """Both backends, same rows, same run."""
    batches = _batches(owners, messages, batch, seed)
    options = {
        "endpoint": f"http://{endpoint}",
        "allow_http": "true",
        "region": "us-east-1",
        "access_key_id": "testing",
        "secret_access_key": "testing",
    }
    with tempfile.TemporaryDirectory(prefix="adamem-bench-objectstore-") as folder:
        local = _one(folder, None, batches, owners)
    s3 = _one(f"s3://adamem/bench-{uuid.uuid4().hex}", options, batches, owners)
    return {
        "setup": {"owners": owners, "messages": messages, "rows_per_commit": batch, "seed": seed, "dim": DIM},
        "endpoint": f"moto server (S3 emulator) at {endpoint}",
        "local": local,
        "s3": s3,
    }


def print_report(result: dict[str, Any]) -> None:
    rows = []
    for step in ("commit", "load_owner", "vector_search", "text_search"):
        a, b = result["local"][step], result["s3"][step]
        rows.append(
            [step, a["p50_ms"], b["p50_ms"], round(b["p50_ms"] - a["p50_ms"], 2), a["p95_ms"], b["p95_ms"], a["n"]]
        )
    print_table(["step", "local p50 ms", "s3 p50 ms", "added p50", "local p95 ms", "s3 p95 ms", "n"], rows)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench objectstore``."""
    p.add_argument("--s3", default="127.0.0.1:9000", help="host:port of the S3-compatible server (deploy/s3.sh)")
    p.add_argument("--owners", type=int, default=20, help="memory owners the messages are spread over (default 20)")
    p.add_argument("--messages", type=int, default=2000, help="synthetic messages written (default 2000)")
    p.add_argument("--batch", type=int, default=100, help="rows per commit")
    p.add_argument("--seed", type=int, default=19, help="seed of the synthetic messages (default 19)")
    p.add_argument("--json", dest="out", help="result file (default bench/results/objectstore.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    return measure_and_record(
        "objectstore",
        argv,
        args.out,
        lambda: run(args.s3, args.owners, args.messages, args.batch, args.seed),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.objectstore``."""
    return standalone_main("objectstore", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
