"""``adamem bench footprint``: bytes on disk per message per layer, resident memory of the worker and the
service, and what vector index compression (LanceDB IVF_PQ, 8-bit IVF_SQ) does to size and recall.

- **Disk**: every table folder of every shard of a store built by the real pipeline (the latency
  benchmark's stores under ``--work``), divided by the number of messages, as written (LanceDB keeps
  old versions, which the checkpoints may roll back to) and after a copy is compacted with old
  versions removed; plus the embedded log's bytes per message (messages and analyses topics).
- **Memory**: VmHWM (peak resident set, /proc) of real processes: ``adamem project`` (embedded-mode
  worker) ingesting LoCoMo turns, ``adamem worker`` on Kafka (when a broker answers; the ingest
  benchmark records it too), and ``adamem serve`` after answering queries.
- **Compression**: the messages table is copied; per index type the index is built, its size taken,
  and recall@10 of the indexed vector search measured against exact (flat) search for LoCoMo questions
  (over all rows of the table, no owner filter). Turns are cycled, so texts repeat: a returned row
  counts as a hit when it is as near as the exact 10th neighbour (ties are interchangeable).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
from lancedb.index import IvfFlat, IvfPq, IvfSq

from adamem.analysis.factory import build_embedder
from adamem.owners import split_owner
from adamem.projections.store.lance import current_view
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.publish import publish_messages
from bench.common import (
    DEFAULT_LOCOMO,
    dir_size,
    free_port,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    spread,
    standalone_main,
    tree_memory,
    wait_port,
)
from bench.latency import STORES, ensure_store, questions_by_route
from bench.metrics import mean, summary_ms

__all__ = ["disk_table", "disk_usage", "index_compression", "index_table", "main", "run"]

LAYERS: dict[str, tuple[str, ...]] = {
    "working+archive (messages, owners)": ("messages", "owners"),
    "episodic": ("episodic",),
    "persona": ("persona",),
    "graph (nodes, edges)": ("graph_nodes", "graph_edges"),
    "checkpoints": ("checkpoints",),
}


def _tables(view_dir: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for shard in sorted(view_dir.glob("p*")):
        for table in shard.glob("*.lance"):
            sizes[table.stem] = sizes.get(table.stem, 0) + dir_size(table)
    return sizes


def _compact(view_dir: Path) -> None:
    for shard in sorted(view_dir.glob("p*")):
        db = lancedb.connect(str(shard))
        for name in db.list_tables(limit=1000).tables:
            db.open_table(name).optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


def disk_usage(store: str | Path, log: str | Path, messages: int) -> dict[str, Any]:
    """Bytes per message per layer, as written and compacted (on a copy), and of the log's topics."""
    root = Path(store)
    view_dir = root / "views" / current_view(root)
    written = _tables(view_dir)
    with tempfile.TemporaryDirectory(prefix="adamem-bench-footprint-") as tmp:
        copy = Path(tmp) / "view"
        shutil.copytree(view_dir, copy)
        _compact(copy)
        compacted = _tables(copy)
    layers = {}
    for layer, tables in LAYERS.items():
        w = sum(written.get(t, 0) for t in tables)
        c = sum(compacted.get(t, 0) for t in tables)
        layers[layer] = {
            "bytes_written": w,
            "bytes_compacted": c,
            "per_message_written": round(w / messages, 1),
            "per_message_compacted": round(c / messages, 1),
        }
    topics = {}
    for topic_dir in sorted(Path(log).glob("*")):
        if topic_dir.is_dir():
            size = dir_size(topic_dir)
            if size:
                topics[topic_dir.name] = {"bytes": size, "per_message": round(size / messages, 1)}
    total_w, total_c = sum(written.values()), sum(compacted.values())
    return {
        "messages": messages,
        "layers": layers,
        "tables_written": written,
        "tables_compacted": compacted,
        "total_per_message_written": round(total_w / messages, 1),
        "total_per_message_compacted": round(total_c / messages, 1),
        "log_topics": topics,
    }


def project_rss(data: str | Path, n: int, work: Path) -> dict[str, Any]:
    """Peak RSS of an ``adamem project`` process ingesting ``n`` LoCoMo turns from an embedded log."""
    settings = Settings.from_env(log_url=str(work / "log"), store_url=str(work / "store"), fsync=False)
    messages = spread(locomo_messages(load_locomo(data), settings), n, max(1, n // 100), "rss-")

    async def publish() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        try:
            await publish_messages(log, messages, settings)
        finally:
            await log.stop()

    asyncio.run(publish())
    exe = Path(sys.executable).with_name("adamem")
    t = time.perf_counter()
    proc = subprocess.Popen(
        [str(exe), "project", "--log", settings.log_url, "--store", settings.store_url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # VmHWM from /proc, sampled until exit (ru_maxrss of a forked child also counts the parent's pages
    # before exec, i.e. this benchmark's own size).
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_memory(proc.pid).get("vmhwm_mb", 0))
        time.sleep(0.2)
    return {"messages": n, "exit": proc.returncode, "seconds": round(time.perf_counter() - t, 1), "peak_rss_mb": peak}


def kafka_worker_rss(bootstrap: str, data: str | Path, n: int) -> dict[str, Any]:
    """Peak RSS of a real ``adamem worker`` ingesting ``n`` messages (via the ingest benchmark's harness)."""
    host, _, port = bootstrap.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            pass
    except OSError as exc:
        return {"skipped": f"no broker at {bootstrap}: {exc}"}
    from bench.ingest import run as ingest_run

    r = ingest_run(f"kafka://{bootstrap}", n, owners=max(1, n // 50), data=data)
    e = r["end_to_end"]
    return {"messages": n, "peak_rss_mb": e.get("worker_rss_peak_mb"), "end_rss_mb": e.get("worker_rss_end_mb")}


def service_rss(store: str, owner_questions: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """RSS of an ``adamem serve`` process idle and after answering the questions."""
    import httpx

    port = free_port()
    exe = Path(sys.executable).with_name("adamem")
    env = {**os.environ, "ADAMEM_STORE": store, "ADAMEM_API_KEYS": ""}
    env.pop("ADAMEM_LOG", None)
    proc = subprocess.Popen(
        [str(exe), "serve", "--read-only", "--no-access-log", "--store", store, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        if not wait_port(port, 120):
            raise RuntimeError("adamem serve did not start")
        idle = tree_memory(proc.pid)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as http:
            for owner, q in owner_questions:
                http.post(
                    f"/v1/users/{split_owner(owner)[1]}/query", json={"question": q, "top_k": 10}
                ).raise_for_status()
        return {"store": store, "queries": len(owner_questions), "idle": idle, "after": tree_memory(proc.pid)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


INDEXES: dict[str, Any] = {
    "IVF_PQ (48×8 bit, 48 B/vector)": IvfPq(distance_type="cosine", num_sub_vectors=48, num_bits=8),
    "IVF_PQ (96×8 bit, 96 B/vector)": IvfPq(distance_type="cosine", num_sub_vectors=96, num_bits=8),
    "IVF_SQ (8-bit scalar, 384 B/vector)": IvfSq(distance_type="cosine"),
    "IVF_FLAT (float32, 1536 B/vector)": IvfFlat(distance_type="cosine"),
}


def index_compression(
    store: str | Path, queries: Sequence[str], k: int = 10, nprobes: int = 20, refine: int = 5
) -> dict[str, Any]:
    """Index size and recall@k against exact search, per index type, on a copy of the messages table."""
    root = Path(store)
    shard = sorted((root / "views" / current_view(root)).glob("p*"))[0]
    src = lancedb.connect(str(shard)).open_table("messages")
    data = src.to_arrow().select(["id", "owner_id", "vector"])
    settings = Settings.from_env()
    qv = np.asarray(build_embedder(settings).embed_query(list(queries)), dtype=np.float32)
    width = len(data.column("vector")[0]) if data.num_rows else qv.shape[1]
    if qv.shape[1] != width:
        raise SystemExit(
            f"{root}: its vectors have {width} values, ADAMEM_EMBEDDER={settings.embedder} gives {qv.shape[1]}: "
            "set ADAMEM_EMBEDDER to the embedder the store was built with (e5 for bench.scale's stores)"
        )
    out: dict[str, Any] = {
        "rows": data.num_rows,
        "dim": int(qv.shape[1]),
        "queries": len(queries),
        "k": k,
        "nprobes": nprobes,
        "raw_vector_bytes": data.num_rows * int(qv.shape[1]) * 4,
        "indexes": {},
    }
    with tempfile.TemporaryDirectory(prefix="adamem-bench-index-") as tmp:
        db = lancedb.connect(tmp)
        exact_t: Any = db.create_table("exact", data=data)
        ids = data.column("id").to_pylist()
        row_of = {i: n for n, i in enumerate(ids)}
        mat = np.asarray(data.column("vector").to_pylist(), dtype=np.float32)
        mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
        qn = qv / np.maximum(np.linalg.norm(qv, axis=1, keepdims=True), 1e-12)
        kth = [float(np.sort(1.0 - mat @ q)[k - 1]) for q in qn]  # exact k-th cosine distance per question
        exact: list[list[str]] = []
        times: list[float] = []
        for q in qv:
            t = time.perf_counter()
            res = exact_t.search(q.tolist()).metric("cosine").limit(k).select(["id", "_distance"]).to_arrow()
            times.append((time.perf_counter() - t) * 1000)
            exact.append(res.column("id").to_pylist())
        out["exact"] = {"latency_ms": dict(summary_ms(times)), "table_bytes": dir_size(Path(tmp) / "exact.lance")}
        for name, config in INDEXES.items():
            table: Any = db.create_table(f"t{len(out['indexes'])}", data=data)
            before = dir_size(Path(tmp) / f"{table.name}.lance")
            t = time.perf_counter()
            table.create_index("vector", config=config)
            build_s = time.perf_counter() - t
            index_bytes = dir_size(Path(tmp) / f"{table.name}.lance") - before
            entry: dict[str, Any] = {
                "build_s": round(build_s, 2),
                "index_bytes": index_bytes,
                "index_bytes_per_vector": round(index_bytes / data.num_rows, 1),
            }
            for label, rf in (("no_refine", None), (f"refine_{refine}", refine)):
                recalls: list[float] = []
                times = []
                for q, qq, bound in zip(qv, qn, kth, strict=True):
                    query: Any = table.search(q.tolist()).metric("cosine").nprobes(nprobes).limit(k)
                    query = query.select(["id", "_distance"])
                    if rf:
                        query = query.refine_factor(rf)
                    t = time.perf_counter()
                    got = query.to_arrow().column("id").to_pylist()
                    times.append((time.perf_counter() - t) * 1000)
                    # A hit is any row as near as the exact k-th neighbour: texts repeat (turns are cycled), so
                    # equally near duplicates are interchangeable and comparing ids would undercount.
                    dist = 1.0 - mat[[row_of[i] for i in got]] @ qq
                    recalls.append(float(np.sum(dist <= bound + 1e-5)) / k)
                entry[label] = {
                    "recall_at_k": round(100 * (mean(recalls) or 0.0), 2),
                    "latency_ms": dict(summary_ms(times)),
                }
            out["indexes"][name] = entry
    return out


def run(
    data: str | Path,
    work: str | Path,
    *,
    stores: Sequence[str] = tuple(STORES),
    kafka: str | None = None,
    rss_messages: int = 500,
    queries: int = 200,
) -> dict[str, Any]:
    """Disk per layer for each store, memory of the processes, and index compression."""
    work = Path(work)
    qs = [q for v in questions_by_route(data).values() for q in v]
    qs = qs[:: max(1, len(qs) // queries)][:queries]
    result: dict[str, Any] = {"stores": {}, "rss": {}}
    for name in stores:
        facts = ensure_store(work, name, data)
        print(f"{name}: disk …", file=sys.stderr, flush=True)
        entry: dict[str, Any] = {"disk": disk_usage(facts["store"], facts["log"], facts["messages"])}
        print(f"{name}: vector index compression …", file=sys.stderr, flush=True)
        entry["compression"] = index_compression(facts["store"], qs)
        owners = facts.get("owner_names") or []
        from adamem.projections.store.factory import open_store

        st = open_store(facts["store"], read_only=True)
        all_owners = st.owners()
        st.close()
        pairs = [(all_owners[i % len(all_owners)], q) for i, q in enumerate(qs[:50])]
        print(f"{name}: service memory …", file=sys.stderr, flush=True)
        entry["service_rss"] = service_rss(facts["store"], pairs)
        entry["owners"] = len(all_owners) or len(owners)
        result["stores"][name] = entry
    with tempfile.TemporaryDirectory(prefix="adamem-bench-rss-") as tmp:
        print("adamem project memory …", file=sys.stderr, flush=True)
        result["rss"]["project_embedded"] = project_rss(data, rss_messages, Path(tmp))
    if kafka:
        print("adamem worker memory …", file=sys.stderr, flush=True)
        try:
            result["rss"]["worker_kafka"] = kafka_worker_rss(kafka.removeprefix("kafka://"), data, rss_messages)
        except Exception as exc:  # the other figures stand without it
            result["rss"]["worker_kafka"] = {"error": f"{type(exc).__name__}: {str(exc)[-1500:]}"}
    return result


def disk_table(d: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of bytes on disk per message: per layer, all tables, per log topic."""
    rows = [[layer, v["per_message_written"], v["per_message_compacted"]] for layer, v in d["layers"].items()]
    rows.append(["all tables", d["total_per_message_written"], d["total_per_message_compacted"]])
    rows += [[f"log: {t}", v["per_message"], None] for t, v in d["log_topics"].items()]
    return ["layer", "as written", "compacted (old versions removed)"], rows


def index_table(c: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the vector-index comparison: size, build time, recall and latency per index."""
    rows = [["exact (no index)", None, None, 100.0, c["exact"]["latency_ms"].get("p50"), None, None]]
    for iname, e in c["indexes"].items():
        refine = next(k for k in e if k.startswith("refine_"))
        rows.append(
            [
                iname,
                e["index_bytes_per_vector"],
                e["build_s"],
                e["no_refine"]["recall_at_k"],
                e["no_refine"]["latency_ms"].get("p50"),
                e[refine]["recall_at_k"],
                e[refine]["latency_ms"].get("p50"),
            ]
        )
    heads = ["index", "index B/vector", "build s", "recall@10", "p50 ms", "recall@10 refined", "p50 ms refined"]
    return heads, rows


def print_report(r: dict[str, Any]) -> None:
    """Tables: disk per layer, memory, compression."""
    for name, entry in r["stores"].items():
        d = entry["disk"]
        print(f"\n{name}: {d['messages']} messages; bytes per message")
        print_table(*disk_table(d))
        c = entry["compression"]
        print(
            f"\nvector index on {c['rows']} message vectors (raw float32 {c['raw_vector_bytes'] / c['rows']:.0f} "
            f"B/vector), recall@{c['k']} vs exact over {c['queries']} questions, nprobes {c['nprobes']}"
        )
        print_table(*index_table(c))
        s = entry["service_rss"]
        print(f"adamem serve on {name}: RSS idle {s['idle']}, after {s['queries']} queries {s['after']}")
    for what, v in r["rss"].items():
        print(f"{what}: {v}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench footprint``."""
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="LoCoMo-format file (turns and questions)")
    p.add_argument("--work", default="/tmp/adamem-bench-latency", help="where the stores are (built if missing)")
    p.add_argument(
        "--stores", nargs="+", default=list(STORES), choices=list(STORES), help="which stores to measure (default all)"
    )
    p.add_argument("--kafka", help="kafka://host:port: also measure a real worker's memory")
    p.add_argument("--rss-messages", type=int, default=500, help="messages ingested while memory is measured")
    p.add_argument("--queries", type=int, default=200, help="questions for the index recall")
    p.add_argument("--json", dest="out", help="result file (default bench/results/footprint.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    return measure_and_record(
        "footprint",
        argv,
        args.out,
        lambda: run(
            args.data,
            args.work,
            stores=args.stores,
            kafka=args.kafka,
            rss_messages=args.rss_messages,
            queries=args.queries,
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.footprint``."""
    return standalone_main("footprint", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
