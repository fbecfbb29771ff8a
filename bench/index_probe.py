"""What LanceDB's own indexes give on the archive table: flat, IVF_PQ, IVF_HNSW_SQ, full text.

A probe, not a product path: it asks LanceDB directly, on the ``messages`` table of synthetic
stores built by ``bench.scale.build`` (one owner of N messages, and K owners of 10), what an
index-backed first query would cost, against what loading the owner costs on the current read path.

Every measurement runs in its own fresh child process (``--child``), so its peak RSS is that of a
query process doing only that: open the table, ask 1 + n queries filtered by owner (prefilter
``owner_id = …``, as ``LanceStore.vector_search``/``text_search`` do). ``first`` is the first
query of the process (index files read), ``p50``/``p95`` the rest. Each vector index is built on
its own copy of the store (a table has one vector index), timed, and its files measured.

Recall@10 against the exact (flat) search is tie-aware: the pool of ``bench.scale`` repeats
vectors (2,000 distinct by default, ``--pool``), so a result counts when its true cosine distance
is within the exact 10th distance. Vector queries: 50 "near" ones (a pool vector plus noise: a true
neighbour exists) and the 33 questions of ``bench.scale`` through its hashed embedder (random
directions: the hard case for an ANN). Full text: the 33 questions, LanceDB's FTS index on the
pre-tokenised ``tokens`` column against our in-process BM25 (``TextIndex``) over the same rows.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import LoadSampler, machine_facts, print_table, write_result

__all__ = ["main", "run"]

K = 10
KINDS = ("flat", "ivf_pq", "ivf_pq_refine", "ivf_hnsw_sq")
"""Vector searches measured; ``ivf_pq_refine`` is the IVF_PQ index re-ranked on full vectors (refine 10)."""
NEAR_QUERIES = 50


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _peak_mb() -> float:
    """This process's peak RSS: VmHWM, not ``ru_maxrss``, which a child spawned by a large parent inherits."""
    return _status_mb("VmHWM:")


def _rss_mb() -> float:
    return _status_mb("VmRSS:")


def _pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else 0.0


def _lat(xs: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(xs) * 1000, 2), "p95_ms": round(_pct(xs, 0.95) * 1000, 2)}


def _dir_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 2) if path.exists() else 0.0


def _shard(folder: str) -> Path:
    found = sorted(Path(folder).glob("views/*/p0"))
    if not found:
        raise SystemExit(f"no shard p0 under {folder}")
    return found[0]


def _owners(owners: int, seed: int) -> list[str]:
    """The owners asked about: the one owner, or 50 chosen at random."""
    rng = random.Random(seed)
    return [f"default:o{o}" for o in sorted(rng.sample(range(owners), min(50, owners)))]


def _vector_queries(seed: int, pool: int) -> list[list[float]]:
    """50 near queries (a pool vector plus noise) and the 33 hashed questions of ``bench.scale``."""
    from bench.scale import DIM, QUESTIONS, HashEmbedder

    vectors = np.random.default_rng(seed).standard_normal((pool, DIM))  # the pool ``build`` draws first
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rng = np.random.default_rng(seed + 1)
    near = vectors[rng.integers(0, pool, NEAR_QUERIES)] + rng.standard_normal((NEAR_QUERIES, DIM)) * 0.7 / DIM**0.5
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    return [list(map(float, v)) for v in near] + HashEmbedder().embed(QUESTIONS)


def _table(folder: str) -> Any:
    import lancedb

    return lancedb.connect(str(_shard(folder))).open_table("messages")


def child_build(folder: str, owners: int, per_owner: int, seed: int, pool: int) -> dict[str, Any]:
    """``bench.scale.build`` with its pool of distinct messages set to ``pool``."""
    import bench.scale

    bench.scale.POOL = pool
    return bench.scale.build(folder, owners, per_owner, seed)


def child_index(folder: str, kind: str) -> dict[str, Any]:
    """Build one vector index on the table (cosine, LanceDB's defaults); time, files, memory."""
    from lancedb.index import IvfHnswSq, IvfPq

    table = _table(folder)
    indices = _shard(folder) / "messages.lance" / "_indices"
    before = _dir_mb(indices)
    config = IvfPq(distance_type="cosine") if kind == "ivf_pq" else IvfHnswSq(distance_type="cosine")
    t = time.perf_counter()
    table.create_index("vector", config=config)
    build_s = time.perf_counter() - t
    return {
        "build_s": round(build_s, 2),
        "index_mb": round(_dir_mb(indices) - before, 2),
        "build_peak_rss_mb": _peak_mb(),
    }


def child_fts_index(folder: str) -> dict[str, Any]:
    """Build the store's full-text index again (``FTS_INDEX`` on ``tokens``, as ``optimize`` makes it): time, files."""
    from adamem.projections.store.lance_tables import FTS_INDEX

    table = _table(folder)
    indices = _shard(folder) / "messages.lance" / "_indices"
    before = {p.name for p in indices.iterdir()} if indices.exists() else set()
    t = time.perf_counter()
    table.create_index("tokens", config=FTS_INDEX, replace=True)
    build_s = time.perf_counter() - t
    new = sum(_dir_mb(p) for p in indices.iterdir() if p.name not in before)
    return {"build_s": round(build_s, 2), "index_mb": round(new, 2), "build_peak_rss_mb": _peak_mb()}


def child_upkeep(folder: str) -> dict[str, Any]:
    """Append 1,000 rows (copies of existing ones, new ids, same owner) and ``optimize``: index upkeep per append."""
    import pyarrow as pa

    table = _table(folder)
    rows = table.search().limit(1000).to_arrow()
    rows = rows.set_column(
        rows.schema.get_field_index("id"), rows.schema.field("id"), pa.array([f"x{i}" for i in range(len(rows))])
    )
    t = time.perf_counter()
    table.add(rows)
    add_s = time.perf_counter() - t
    t = time.perf_counter()
    table.optimize()
    return {"append_1k_s": round(add_s, 2), "optimize_after_append_s": round(time.perf_counter() - t, 2)}


def child_search(folder: str, kind: str, owners: int, seed: int, vectors: str) -> dict[str, Any]:
    """Vector or full-text top-10 filtered by owner; latencies, results with their true distances, memory."""
    from adamem.projections.store.lance_tables import quote
    from adamem.text import search_text
    from bench.scale import QUESTIONS

    base_rss = _rss_mb()
    t = time.perf_counter()
    table = _table(folder)
    open_s = time.perf_counter() - t
    chosen = _owners(owners, seed)
    if kind == "fts":
        queries: list[Any] = [search_text(q) for q in QUESTIONS]
    else:
        queries = json.loads(Path(vectors).read_text())  # made by the parent: no pool in this process's memory
    times: list[float] = []
    results: list[list[tuple[str, float]]] = []
    counts: list[int] = []
    for i, q in enumerate(queries):
        owner = chosen[i % len(chosen)]
        t = time.perf_counter()
        if kind == "fts":
            query = table.search(q, query_type="fts", fts_columns="tokens")
        else:
            query = table.search(q, vector_column_name="vector").distance_type("cosine")
            if kind == "flat":
                query = query.bypass_vector_index()
            elif kind == "ivf_pq_refine":
                query = query.refine_factor(10)
            elif kind.startswith("ivf_pq@"):  # a sweep point: ivf_pq@NPROBES@REFINE (0: no refine)
                _, nprobes, refine = kind.split("@")
                query = query.nprobes(int(nprobes))
                if int(refine):
                    query = query.refine_factor(int(refine))
        found = query.where(f"owner_id = {quote(owner)}", prefilter=True).limit(K).to_arrow()
        times.append(time.perf_counter() - t)
        counts.append(found.num_rows)
        ids = found.column("id").to_pylist()
        if kind == "fts":
            results.append(list(zip(ids, map(float, found.column("_score").to_pylist()), strict=True)))
        else:  # the true cosine distance of each result (an index reports its approximate one)
            vecs = np.asarray(found.column("vector").to_pylist(), dtype=np.float64).reshape(len(ids), -1)
            qv = np.asarray(q, dtype=np.float64)
            true = 1.0 - vecs @ qv / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(qv) + 1e-12)
            results.append(list(zip(ids, map(float, true), strict=True)))
    return {
        "open_ms": round(open_s * 1000, 2),
        "first_ms": round(times[0] * 1000, 2),
        **_lat(times[1:]),
        "mean_results": round(sum(counts) / len(counts), 2),
        "rss_after_import_mb": base_rss,
        "peak_rss_mb": _peak_mb(),
        "results": results,
    }


def child_load(folder: str, owners: int, seed: int, compare: str | None) -> dict[str, Any]:
    """The current read path: ``load_owner`` (every table of the owner), then our BM25 over its messages."""
    from adamem.projections.folds.rows import MessageRow
    from adamem.projections.store.base import TEXT_FIELDS
    from adamem.projections.store.lance import LanceStore
    from adamem.retrieval.index import TextIndex, extracted_text
    from adamem.text import tokenize
    from bench.scale import QUESTIONS

    base_rss = _rss_mb()
    store = LanceStore(folder, read_only=True)
    chosen = _owners(owners, seed)
    loads, per_owner_rows = [], {}
    for owner in chosen:
        t = time.perf_counter()
        per_owner_rows[owner] = [r for r in store.load_owner(owner) if isinstance(r, MessageRow)]
        loads.append(time.perf_counter() - t)
    load_rss = _rss_mb()
    theirs: list[list[list[Any]]] = json.loads(Path(compare).read_text()) if compare else []
    overlap, tie_overlap, bm25_times = [], [], []
    for i, question in enumerate(QUESTIONS):
        rows = per_owner_rows[chosen[i % len(chosen)]]
        t = time.perf_counter()
        index = TextIndex(rows, TEXT_FIELDS["messages"], extra=extracted_text)
        scores = index.scores(tokenize(question))
        bm25_times.append(time.perf_counter() - t)
        order = np.lexsort((np.arange(len(scores)), -scores))[:K]
        ours = {index.ids[j] for j in order if scores[j] > 0}
        if not theirs or not ours:
            continue
        tenth = min(float(scores[j]) for j in order if scores[j] > 0)
        score_of = {index.ids[j]: float(scores[j]) for j in range(len(scores))}
        got = [row_id for row_id, _ in theirs[i]]
        overlap.append(len(ours & set(got)) / len(ours))
        tie_overlap.append(sum(score_of.get(r, 0.0) >= tenth - 1e-9 for r in got) / len(ours))
    return {
        "load_owner": _lat(loads),
        "load_first_ms": round(loads[0] * 1000, 2),
        "rss_after_import_mb": base_rss,
        "rss_after_load_mb": load_rss,
        "peak_rss_mb": _peak_mb(),
        "bm25_index_and_score": _lat(bm25_times),
        "fts_overlap_at_10": round(statistics.mean(overlap), 3) if overlap else None,
        "fts_overlap_at_10_ties": round(statistics.mean(tie_overlap), 3) if tie_overlap else None,
    }


def child_retriever(folder: str, owners: int, seed: int) -> dict[str, Any]:
    """The current first answer: a fresh ``Retriever``, one cold query per owner (as ``bench.scale`` measures)."""
    from adamem.projections.store.lance import LanceStore
    from adamem.retrieval.service import Retriever
    from bench.scale import QUESTIONS, HashEmbedder

    retriever = Retriever(LanceStore(folder, read_only=True), HashEmbedder())
    times = []
    for i, owner in enumerate(_owners(owners, seed)[: 1 if owners == 1 else 20]):
        t = time.perf_counter()
        retriever.query(owner, QUESTIONS[i % len(QUESTIONS)], K)
        times.append(time.perf_counter() - t)
    return {"cold": _lat(times), "peak_rss_mb": _peak_mb()}


def _child(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args], capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"child {args[:2]} failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _recall(exact: list[list[Any]], got: list[list[Any]]) -> float:
    """Tie-aware recall@10: results within the exact 10th true distance, over the exact result count."""
    found: list[float] = []
    for ex, ann in zip(exact, got, strict=True):
        if not ex:
            continue
        tenth = max(float(d) for _, d in ex)
        found.append(sum(float(d) <= tenth + 1e-5 for _, d in ann) / len(ex))
    return round(statistics.mean(found), 3)


def _top1(exact: list[list[Any]], got: list[list[Any]]) -> float:
    """Share of queries whose exact nearest row (by true distance) is among the index's 10."""
    hits = [
        any(float(d) <= min(float(e) for _, e in ex) + 1e-5 for _, d in ann)
        for ex, ann in zip(exact, got, strict=True)
        if ex
    ]
    return round(sum(hits) / len(hits), 3)


def probe(
    work: Path,
    owners: int,
    per_owner: int,
    seed: int,
    pool: int,
    skip: set[str],
    indexes: Sequence[str],
    sweep: Sequence[str] = (),
) -> dict[str, Any]:
    """Build one store, measure every path on it; the stores are deleted at the end."""
    label = f"{owners}x{per_owner}"
    base = work / label
    if base.exists():
        shutil.rmtree(base)
    s = str(seed)
    print(f"index_probe: {label}: build …", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"owners": owners, "per_owner": per_owner, "rows": owners * per_owner}
    out["build"] = _child(["build", str(base), str(owners), str(per_owner), s, str(pool)])
    out["store_mb"] = _dir_mb(base)
    out["scalar_indices_mb"] = _dir_mb(_shard(str(base)) / "messages.lance" / "_indices")  # FTS + owner B-tree
    vectors = work / f"{label}-queries.json"
    vectors.write_text(json.dumps(_vector_queries(seed, pool)))
    searches: dict[str, Any] = {}
    searches["flat"] = _child(["search", str(base), "flat", str(owners), s, str(vectors)])
    out["index"] = {}
    for kind in indexes:
        copy = work / f"{label}-{kind}"
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(base, copy)
        print(f"index_probe: {label}: {kind} …", file=sys.stderr, flush=True)
        out["index"][kind] = _child(["index", str(copy), kind])
        sweeps = [f"ivf_pq@{point.replace(':', '@')}" for point in sweep]
        for q in ("ivf_pq", "ivf_pq_refine", *sweeps) if kind == "ivf_pq" else (kind,):
            searches[q] = _child(["search", str(copy), q, str(owners), s, str(vectors)])
        out["index"][kind]["upkeep"] = _child(["upkeep", str(copy)])
        shutil.rmtree(copy)
    print(f"index_probe: {label}: full text and load_owner …", file=sys.stderr, flush=True)
    out["index"]["fts"] = _child(["fts_index", str(base)])
    searches["fts"] = _child(["search", str(base), "fts", str(owners), s, str(vectors)])
    compare = work / f"{label}-fts.json"
    compare.write_text(json.dumps(searches["fts"]["results"]))
    if "load" not in skip:
        out["load"] = _child(["load", str(base), str(owners), s, str(compare)])
    if not skip & {"load", "retriever"}:
        print(f"index_probe: {label}: retriever cold …", file=sys.stderr, flush=True)
        out["retriever"] = _child(["retriever", str(base), str(owners), s])
    exact = searches["flat"]["results"]
    for kind, found in searches.items():
        if kind not in ("flat", "fts"):
            found["recall_near"] = _recall(exact[:NEAR_QUERIES], found["results"][:NEAR_QUERIES])
            found["recall_random"] = _recall(exact[NEAR_QUERIES:], found["results"][NEAR_QUERIES:])
            found["top1_near"] = _top1(exact[:NEAR_QUERIES], found["results"][:NEAR_QUERIES])
        found.pop("results")
    out["search"] = searches
    shutil.rmtree(base)
    compare.unlink()
    vectors.unlink()
    return out


def run(
    sizes: Sequence[int],
    owners: Sequence[int],
    work: Path,
    seed: int,
    pool: int,
    skip: set[str],
    indexes: Sequence[str] = ("ivf_pq", "ivf_hnsw_sq"),
    sweep: Sequence[str] = (),
) -> dict[str, Any]:
    """One owner of each size, then stores of ``owners`` owners × 10 messages."""
    work.mkdir(parents=True, exist_ok=True)
    configs = [(1, n) for n in sizes] + [(k, 10) for k in owners]
    stores = [probe(work, k, n, seed, pool, skip, indexes, sweep) for k, n in configs]
    return {"seed": seed, "pool": pool, "indexes": list(indexes), "sweep": list(sweep), "stores": stores}


def print_report(result: dict[str, Any]) -> None:
    """One line per store and search: latency, recall, memory, and the index's build time and size."""
    rows = []
    for st in result["stores"]:
        label = f"{st['owners']}×{st['per_owner']}"
        for kind, s in st["search"].items():
            ix = st["index"].get("ivf_pq" if kind.startswith("ivf_pq") else kind, {})
            rows.append(
                [
                    label,
                    kind,
                    s["open_ms"],
                    s["first_ms"],
                    s["p50_ms"],
                    s["p95_ms"],
                    s.get("recall_near", "exact" if kind == "flat" else "–"),
                    s.get("recall_random", "–"),
                    s.get("top1_near", "–"),
                    s["mean_results"],
                    s["peak_rss_mb"],
                    ix.get("build_s", "–"),
                    ix.get("index_mb", "–"),
                    ix.get("upkeep", {}).get("optimize_after_append_s", "–"),
                ]
            )
        ld = st.get("load")
        if ld is None:
            continue
        rows.append(
            [
                label,
                "load_owner (current path)",
                "–",
                ld["load_first_ms"],
                ld["load_owner"]["p50_ms"],
                ld["load_owner"]["p95_ms"],
                *"––––",
                ld["peak_rss_mb"],
                *"–––",
            ]
        )
        if "retriever" in st:
            rv = st["retriever"]
            rows.append(
                [
                    label,
                    "Retriever cold (current path)",
                    "–",
                    "–",
                    rv["cold"]["p50_ms"],
                    rv["cold"]["p95_ms"],
                    *"––––",
                    rv["peak_rss_mb"],
                    *"–––",
                ]
            )
    headers = ["store", "search", "open ms", "first ms", "p50 ms", "p95 ms", "recall near", "recall rand", "top-1 near"]
    headers += ["results", "peak RSS MB", "build s", "index MB", "optimize +1k s"]
    print_table(headers, rows)
    fts = [
        [
            f"{st['owners']}×{st['per_owner']}",
            st["load"]["fts_overlap_at_10"],
            st["load"]["fts_overlap_at_10_ties"],
            st["load"]["bm25_index_and_score"]["p50_ms"],
            st["search"]["fts"]["p50_ms"],
        ]
        for st in result["stores"]
        if "load" in st
    ]
    print()
    print_table(["store", "FTS∩BM25 @10", "… tie-aware", "our BM25 build+score p50 ms", "Lance FTS p50 ms"], fts)


def main(argv: Sequence[str] | None = None) -> int:
    """``python bench/index_probe.py --sizes 10000 100000 --out bench/results/index_probe.json``."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000], help="messages of the one-owner stores")
    p.add_argument("--owners", nargs="*", type=int, default=[10_000], help="owners (10 messages each) of shared stores")
    p.add_argument("--pool", type=int, default=2000, help="distinct messages of the pool (bench.scale: 2,000)")
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--work", default="/tmp/probe-index", help="folder of the stores (deleted as each is done)")
    p.add_argument("--no-retriever", action="store_true", help="skip the cold Retriever query (slow at 100k+)")
    p.add_argument(
        "--no-load", action="store_true", help="skip load_owner and the Retriever (1M: more memory than the box)"
    )
    p.add_argument("--indexes", nargs="+", default=["ivf_pq", "ivf_hnsw_sq"], choices=["ivf_pq", "ivf_hnsw_sq"])
    p.add_argument(
        "--sweep",
        nargs="*",
        default=[],
        metavar="NPROBES:REFINE",
        help="more IVF_PQ query settings to measure, e.g. 60:0 60:10 (refine 0: none)",
    )
    p.add_argument("--out", default=None, help="result file (default bench/results/index_probe.json)")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        mode, rest = args.child[0], args.child[1:]
        if mode == "build":
            res = child_build(rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[4]))
        elif mode == "index":
            res = child_index(rest[0], rest[1])
        elif mode == "fts_index":
            res = child_fts_index(rest[0])
        elif mode == "upkeep":
            res = child_upkeep(rest[0])
        elif mode == "search":
            res = child_search(rest[0], rest[1], int(rest[2]), int(rest[3]), rest[4])
        elif mode == "load":
            res = child_load(rest[0], int(rest[1]), int(rest[2]), rest[3] if len(rest) > 3 else None)
        else:
            res = child_retriever(rest[0], int(rest[1]), int(rest[2]))
        print(json.dumps(res))
        return 0
    started = machine_facts()
    with LoadSampler() as load:
        skip = {name for name, off in (("retriever", args.no_retriever), ("load", args.no_load)) if off}
        result = run(args.sizes, args.owners, Path(args.work), args.seed, args.pool, skip, args.indexes, args.sweep)
    argv_used = list(argv if argv is not None else sys.argv[1:])
    path = write_result("index_probe", result, argv_used, started=started, load=load, out=args.out)
    print_report(result)
    print(f"\nwritten: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
