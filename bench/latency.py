"""``adamem bench latency``: query latency per route, in-process and over HTTP with 8 concurrent clients.

Two stores are built once under ``--work`` (reused when present) by cycling the LoCoMo turns:
one owner with 10,000 messages, and 1,000 owners with 100 messages each. They are built by the
real write path — publish to an embedded log, Memory Agent (rule extractor + e5), projections
into LanceDB — except that the e5 vector of a text that repeats is memoised (the extractor runs
on every message). Questions are LoCoMo questions, grouped by the route ``route_query`` gives them
(semantic / persona / graph).

- **cold**: every (owner, question) is asked for the first time in that process, so the semantic
  answer cache misses (the owner's snapshot may be hot: see ``snapshot``);
- **warm**: the same list again: the semantic answer cache answers.

In-process: ``Retriever.query`` one at a time (the question is embedded each time). HTTP: the
``adamem serve`` process on the same store, loaded by ``wrk`` (8 connections; httpx if wrk is
missing), each request sent once. QPS is requests / wall time of the pass.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import build_embedder, build_extractor
from adamem.owners import split_owner
from adamem.projections.store.factory import open_store
from adamem.retrieval import Retriever, Route, route_query
from adamem.settings import Settings
from bench.build import build_memory
from bench.common import (
    DEFAULT_LOCOMO,
    CachingEmbedder,
    free_port,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    spread,
    standalone_main,
    tree_memory,
    wait_healthy,
    wait_port,
)
from bench.loadgen import Request, run_load
from bench.metrics import summary_ms

__all__ = ["STORES", "ensure_store", "latency_table", "main", "questions_by_route", "run", "sweep_table"]

STORES: dict[str, tuple[int, int]] = {"one-10k": (10_000, 1), "many-1000x100": (100_000, 1000)}
"""Store name → (messages, owners)."""
ROUTES = (Route.SEMANTIC.value, Route.PERSONA.value, Route.GRAPH.value)
TARGETS = {"inproc_p95_semantic_ms": 50.0, "inproc_p95_graph_ms": 150.0, "http_p95_ms": 100.0}


def ensure_store(
    work: Path, name: str, data: str | Path, *, messages: int | None = None, owners: int | None = None
) -> dict[str, Any]:
    """Build (or reuse) a store of ``name``'s shape under ``work/name``; returns its build facts."""
    n, k = STORES.get(name, (messages or 0, owners or 1))
    n, k = messages or n, owners or k
    folder = work / name
    marker = folder / "built.json"
    if marker.exists():
        facts: dict[str, Any] = json.loads(marker.read_text())
        if facts.get("messages") == n and facts.get("owners") == k:
            return {**facts, "reused": True}
        raise SystemExit(f"{folder} holds another store ({facts}); pick another --work")
    settings = Settings.from_env(log_url=str(folder / "log"), store_url=str(folder / "store"), fsync=False)
    base = locomo_messages(load_locomo(data), settings)
    msgs = spread(base, n, k, f"{name.split('-')[0]}-")
    embedder = CachingEmbedder(build_embedder(settings))
    print(f"building {name}: {n} messages for {k} owner(s) …", file=sys.stderr, flush=True)
    built = build_memory(msgs, settings, MemoryAgent(build_extractor(settings), embedder))
    facts = {
        "messages": n,
        "owners": k,
        "store": settings.store_url,
        "log": settings.log_url,
        "owner_names": sorted({m.user_id for m in msgs})[:3],
        "pipeline_s": round(built.pipeline_s, 1),
        "applied": built.stats.applied,
        "embedder_cache": embedder.stats(),
        "note": "every message analysed by the Memory Agent; e5 vectors of repeated texts memoised",
    }
    marker.write_text(json.dumps(facts, indent=1))
    return {**facts, "reused": False}


def questions_by_route(data: str | Path) -> dict[str, list[str]]:
    """Distinct LoCoMo questions grouped by the route the router gives them."""
    out: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for doc in load_locomo(data):
        for qa in doc.get("qa") or []:
            q = str(qa.get("question", "")).strip()
            if q and q not in seen:
                seen.add(q)
                out[route_query(q).route.value].append(q)
    return dict(out)


def plan(
    qs: dict[str, list[str]], owners: Sequence[str], per_route: int, seed: int = 6
) -> dict[str, list[tuple[str, str]]]:
    """Per route, ``per_route`` distinct (owner, question) pairs (owners drawn at random when there are many)."""
    rng = random.Random(seed)
    out: dict[str, list[tuple[str, str]]] = {}
    for route in ROUTES:
        pool = list(qs.get(route, []))
        rng.shuffle(pool)
        pairs: list[tuple[str, str]] = []
        seen: set[tuple[str, str]] = set()
        i = 0
        while len(pairs) < per_route and pool and i < per_route * 20:
            pair = (owners[rng.randrange(len(owners))], pool[i % len(pool)])
            i += 1
            if pair not in seen:
                seen.add(pair)
                pairs.append(pair)
        out[route] = pairs
    return out


def in_process(store_url: str, pairs: dict[str, list[tuple[str, str]]], warmup_owner: str | None) -> dict[str, Any]:
    """Latency of ``Retriever.query`` per route, cold then warm, one query at a time."""
    settings = Settings.from_env(store_url=store_url)
    retriever = Retriever(open_store(store_url, read_only=True), build_embedder(settings))
    out: dict[str, Any] = {}
    try:
        if warmup_owner is not None:
            t = time.perf_counter()
            retriever.query(warmup_owner, "hello")
            out["first_query_ms"] = round((time.perf_counter() - t) * 1000, 1)
        for route in ROUTES:
            per: dict[str, Any] = {}
            for phase in ("cold", "warm"):
                times: list[float] = []
                cached = 0
                routed: dict[str, int] = defaultdict(int)
                stages: dict[str, list[float]] = defaultdict(list)
                t0 = time.perf_counter()
                for owner, question in pairs[route]:
                    t = time.perf_counter()
                    answer = retriever.query(owner, question, top_k=10)
                    times.append((time.perf_counter() - t) * 1000)
                    cached += int(answer.cached)
                    routed[answer.route.route.value] += 1
                    for stage, ms in answer.timing.to_dict().items():
                        stages[stage].append(ms)
                wall = time.perf_counter() - t0
                per[phase] = {
                    **summary_ms(times),
                    "qps": round(len(times) / wall, 2) if wall else None,
                    "answer_cache_hits": cached,
                    "routes": dict(routed),
                    "stage_mean_ms": {s: round(sum(v) / len(v), 2) for s, v in stages.items() if v},
                }
            out[route] = per
        embed: list[float] = []  # of the time above, how much is the question's embedding alone
        for route in ROUTES:
            for _owner, question in pairs[route]:
                t = time.perf_counter()
                retriever.embedder.embed_query([question])
                embed.append((time.perf_counter() - t) * 1000)
        out["embed_query_alone_ms"] = dict(summary_ms(embed))
    finally:
        retriever.close()
    return out


def over_http(
    store_url: str,
    pairs: dict[str, list[tuple[str, str]]],
    warmup_owner: str | None,
    connections: int,
    log_dir: Path,
    routes: Sequence[str] = ROUTES,
    workers: int = 1,
) -> dict[str, Any]:
    """Latency over HTTP of a fresh ``adamem serve`` (``--workers``: its query processes), per route, cold then warm."""
    port = free_port()
    exe = Path(sys.executable).with_name("adamem")
    env = {
        **os.environ,
        "ADAMEM_STORE": store_url,
        "ADAMEM_HOST": "127.0.0.1",
        "ADAMEM_PORT": str(port),
        "ADAMEM_API_KEYS": "",
    }
    env.pop("ADAMEM_LOG", None)
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / "serve.log").open("ab") as fo:
        proc = subprocess.Popen(
            [
                str(exe),
                "serve",
                "--read-only",
                "--no-access-log",
                "--store",
                store_url,
                "--port",
                str(port),
                "--workers",
                str(workers),
            ],
            env=env,
            stdout=fo,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    out: dict[str, Any] = {"pid": proc.pid}
    base = f"http://127.0.0.1:{port}"
    try:
        if not wait_port(port, 120):
            raise RuntimeError(f"adamem serve did not listen on {port}; see {log_dir / 'serve.log'}")
        wait_healthy(f"http://127.0.0.1:{port}", proc)  # with --workers, the port listens before they are ready
        out["rss_idle"] = tree_memory(proc.pid)
        if warmup_owner is not None:
            import httpx

            t = time.perf_counter()
            httpx.post(
                f"{base}/v1/users/{split_owner(warmup_owner)[1]}/query",
                json={"question": "hello", "top_k": 10},
                timeout=300,
            )
            out["first_query_ms"] = round((time.perf_counter() - t) * 1000, 1)
        for route in routes:
            reqs: list[Request] = [
                (f"/v1/users/{split_owner(o)[1]}/query", json.dumps({"question": q, "top_k": 10}))
                for o, q in pairs[route]
            ]
            out[route] = {}
            for phase in ("cold", "warm"):
                out[route][phase] = run_load(base, reqs, connections=connections)
                time.sleep(2.0)  # requests still in flight when the load generator stopped finish first
        out["rss_after"] = tree_memory(proc.pid)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    return out


def run(
    data: str | Path,
    work: str | Path,
    *,
    stores: Sequence[str] = tuple(STORES),
    per_route: int = 100,
    connections: int = 8,
    http: bool = True,
    sweep: Sequence[int] = (),
    serve_workers: Sequence[int] = (1,),
) -> dict[str, Any]:
    """Build or reuse the stores, then measure each in-process and over HTTP.

    ``sweep``: also the semantic route over HTTP with each of these numbers of clients, a fresh
    service each time (so every level's first pass is cold): how latency grows with concurrency;
    once per ``serve_workers`` count of query processes (``adamem serve --workers``).
    """
    work = Path(work)
    qs = questions_by_route(data)
    result: dict[str, Any] = {
        "questions_per_route_available": {r: len(v) for r, v in qs.items()},
        "per_route": per_route,
        "connections": connections,
        "stores": {},
    }
    for name in stores:
        facts = ensure_store(work, name, data)
        store = open_store(facts["store"], read_only=True)
        owners = store.owners()
        store.close()
        pairs = plan(qs, owners, per_route)
        warm = owners[0] if len(owners) == 1 else None
        print(f"{name}: in-process …", file=sys.stderr, flush=True)
        entry: dict[str, Any] = {
            "build": facts,
            "owners": len(owners),
            "asked": {r: len(p) for r, p in pairs.items()},
            "in_process": in_process(facts["store"], pairs, warm),
        }
        if http:
            print(f"{name}: over HTTP …", file=sys.stderr, flush=True)
            entry["http"] = over_http(facts["store"], pairs, warm, connections, work / "logs")
            for w in serve_workers:
                for n in sweep:
                    print(f"{name}: semantic over HTTP, {n} client(s), {w} process(es) …", file=sys.stderr, flush=True)
                    one = over_http(
                        facts["store"], pairs, warm, n, work / "logs", routes=(Route.SEMANTIC.value,), workers=w
                    )
                    key = "http_sweep" if w == 1 else f"http_sweep_workers_{w}"
                    entry.setdefault(key, {})[str(n)] = one[Route.SEMANTIC.value]
        result["stores"][name] = entry
    result["targets"] = TARGETS
    result["met"] = _met(result)
    return result


def _met(result: dict[str, Any]) -> dict[str, Any]:
    one = result["stores"].get("one-10k")
    if one is None:
        return {}
    ip = one["in_process"]
    met: dict[str, Any] = {
        "inproc_p95_semantic_ms": {p: ip["semantic"][p].get("p95") for p in ("cold", "warm")},
        "inproc_p95_graph_ms": {p: ip["graph"][p].get("p95") for p in ("cold", "warm")},
    }
    if "http" in one:
        met["http_p95_ms"] = {r: {p: one["http"][r][p].get("p95") for p in ("cold", "warm")} for r in ROUTES}
    return met


def latency_table(entry: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of one store's latency table: p50/p95/p99 and QPS per place, route and phase."""
    rows = []
    for where in ("in_process", "http"):
        if where not in entry:
            continue
        for route in ROUTES:
            for phase in ("cold", "warm"):
                s = entry[where][route][phase]
                rows.append(
                    [
                        where,
                        route,
                        phase,
                        s.get("n"),
                        s.get("p50"),
                        s.get("p95"),
                        s.get("p99"),
                        s.get("qps"),
                        s.get("answer_cache_hits", s.get("errors")),
                    ]
                )
    return ["where", "route", "phase", "n", "p50 ms", "p95 ms", "p99 ms", "QPS", "cache hits / errors"], rows


def sweep_table(entry: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the concurrency sweeps (semantic route over HTTP), or no rows without one."""
    rows = []
    keys = sorted((k for k in entry if k == "http_sweep" or k.startswith("http_sweep_workers_")), key=len)
    for key in keys:
        procs = key.rsplit("_", 1)[1] if key != "http_sweep" else "1"
        for n, phases in sorted(entry[key].items(), key=lambda kv: int(kv[0])):
            for phase in ("cold", "warm"):
                s = phases[phase]
                rows.append([n, phase, s.get("p50"), s.get("p95"), s.get("p99"), s.get("qps"), s.get("errors"), procs])
    return ["clients", "phase", "p50 ms", "p95 ms", "p99 ms", "QPS", "errors", "processes"], rows


def print_report(result: dict[str, Any]) -> None:
    """One table per store: p50/p95/p99 and QPS per route and phase, in-process and HTTP."""
    for name, entry in result["stores"].items():
        print(
            f"\n{name}: {entry['owners']} owner(s); first query (snapshot load) in-process "
            f"{entry['in_process'].get('first_query_ms', '–')} ms"
        )
        print_table(*latency_table(entry))
        print(f"question embedding alone (e5, in-process): {entry['in_process'].get('embed_query_alone_ms')}")
        if "http" in entry:
            print(f"service RSS idle {entry['http'].get('rss_idle')} after {entry['http'].get('rss_after')}")
        headers, rows = sweep_table(entry)
        if rows:
            print("semantic route over HTTP by concurrent clients (a fresh service per level):")
            print_table(headers, rows)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench latency``."""
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="LoCoMo-format file (turns and questions)")
    p.add_argument("--work", default="/tmp/adamem-bench-latency", help="where the stores are built and kept")
    p.add_argument(
        "--stores", nargs="+", default=list(STORES), choices=list(STORES), help="which stores to measure (default all)"
    )
    p.add_argument("--per-route", type=int, default=100, help="distinct questions per route and phase")
    p.add_argument("--connections", type=int, default=8, help="concurrent HTTP clients")
    p.add_argument("--no-http", action="store_true", help="in-process only")
    p.add_argument(
        "--sweep",
        nargs="*",
        type=int,
        default=[],
        metavar="N",
        help="also the semantic route over HTTP with N clients each (a fresh service per N), e.g. --sweep 1 2 4",
    )
    p.add_argument(
        "--serve-workers",
        nargs="+",
        type=int,
        default=[1],
        metavar="W",
        help="run the sweep once per W query processes (adamem serve --workers W), e.g. --serve-workers 1 2",
    )
    p.add_argument("--json", dest="out", help="result file (default bench/results/latency.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    return measure_and_record(
        "latency",
        argv,
        args.out,
        lambda: run(
            args.data,
            args.work,
            stores=args.stores,
            per_route=args.per_route,
            connections=args.connections,
            http=not args.no_http,
            sweep=args.sweep,
            serve_workers=args.serve_workers,
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.latency``."""
    return standalone_main("latency", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
