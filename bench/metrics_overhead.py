"""What the Prometheus metrics cost a query: p50/p95/p99 of ``adamem serve`` with and without them.

Four ``adamem serve`` processes run side by side on one store (the bundled sample, projected by
the in-process pipeline): ``no_metrics`` (``ADAMEM_METRICS=false``); ``metrics`` (the request
middleware, stage histograms, precision proxy and cache counters; memory health off,
``ADAMEM_HEALTH_INTERVAL=0``); ``metrics_health`` (the same, with the memory-health computation
every ``--health-interval`` seconds, short enough to run several times during the measurement);
and ``no_metrics_again``, a second service identical to the first: the control, whose difference
from ``no_metrics`` is the noise of the run. One client sends the same questions to all four,
rotating request by request, so all see the same machine load; both metrics processes are
scraped once a second while they answer, as Prometheus would. Each question is asked
``--rounds`` times, so after the first round the answers come from the query cache; the
figures are given for the first round (every stage runs) and for all rounds.

    adamem bench metrics_overhead --rounds 40
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from bench.common import free_port, measure_and_record, print_table, standalone_main, wait_port

__all__ = ["add_arguments", "execute", "main"]

QUESTIONS = (
    ("alice", "What food does Alice like?"),
    ("alice", "Where does Alice live?"),
    ("alice", "Why did I start working out?"),
    ("alice", "What did I do last weekend?"),
    ("alice", "What is my job?"),
    ("alice", "Who is my sister?"),
    ("alice", "What am I allergic to?"),
    ("alice", "What kind of music do I enjoy?"),
    ("alice", "When did I move?"),
    ("alice", "What are my hobbies?"),
    ("xiaoming", "我为什么开始健身？"),
    ("xiaoming", "我住在哪里？"),
    ("xiaoming", "我喜欢吃什么？"),
    ("xiaoming", "我上周做了什么？"),
    ("xiaoming", "我的工作是什么？"),
)


def _build(root: Path) -> str:
    from adamem.analysis.agent import MemoryAgent
    from adamem.analysis.e5 import E5Embedder
    from adamem.analysis.rules import RuleExtractor
    from adamem.ingest import load_messages
    from adamem.projections.projector import Projector
    from adamem.projections.store.factory import open_store
    from adamem.samples import __name__ as samples
    from adamem.settings import Settings
    from adamem.streams.factory import open_log
    from adamem.streams.pipeline import run_pipeline
    from adamem.streams.publish import publish_messages

    settings = Settings(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False)
    data = resources.files(samples).joinpath("sample_conversation.jsonl").read_bytes()

    async def build() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        await publish_messages(log, load_messages(data, settings), settings)
        agent = MemoryAgent(RuleExtractor(), E5Embedder())
        await run_pipeline(log, Projector(open_store(settings.store)), agent, settings)
        await log.stop()

    asyncio.run(build())
    return settings.store_url


SIDES = ("no_metrics", "metrics", "metrics_health", "no_metrics_again")


def _serve(store: str, metrics: bool, health_s: float, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "ADAMEM_METRICS": "true" if metrics else "false", "ADAMEM_HEALTH_INTERVAL": str(health_s)}
    env.pop("ADAMEM_LOG", None)
    env.pop("ADAMEM_API_KEYS", None)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("adamem")), "serve", "--store", store, "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if not wait_port(port, 120):
        raise RuntimeError(f"adamem serve did not listen on {port}; see {log}")
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    mean = round(sum(ordered) / len(ordered), 2)
    return {"n": len(ordered), "p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "mean": mean}


def run(rounds: int, health_s: float) -> dict[str, Any]:
    """Build the store, start the four services, rotate the questions between them; latency in ms per side."""
    with tempfile.TemporaryDirectory(prefix="adamem-metrics-overhead-") as tmp:
        root = Path(tmp)
        store = _build(root)
        procs: list[subprocess.Popen[bytes]] = []
        urls: dict[str, str] = {}
        scraping = threading.Event()
        try:
            setups = (
                ("no_metrics", False, 0.0),
                ("metrics", True, 0.0),
                ("metrics_health", True, health_s),
                ("no_metrics_again", False, 0.0),  # the control: what two identical services differ by
            )
            for side, on, health in setups:
                proc, urls[side] = _serve(store, on, health, root / f"serve-{side}.log")
                procs.append(proc)
            times: dict[str, dict[str, list[float]]] = {s: {"first": [], "all": []} for s in SIDES}
            scrapes: dict[str, list[float]] = {"metrics": [], "metrics_health": []}

            def scrape() -> None:  # Prometheus' part: one scrape a second of each metrics side
                with httpx.Client(timeout=30) as c:
                    while not scraping.wait(1.0):
                        for side, kept in scrapes.items():
                            t = time.perf_counter()
                            c.get(f"{urls[side]}/metrics")
                            kept.append((time.perf_counter() - t) * 1000)

            scraper = threading.Thread(target=scrape, daemon=True)
            with httpx.Client(timeout=60) as client:
                for url in urls.values():  # warm up: jieba, e5, the owners' snapshots
                    for user, question in (("alice", "hello"), ("xiaoming", "你好")):
                        client.post(f"{url}/v1/users/{user}/query", json={"question": question})
                scraper.start()
                n = 0
                for r in range(rounds):
                    for user, question in QUESTIONS:
                        n += 1
                        order = SIDES[n % len(SIDES) :] + SIDES[: n % len(SIDES)]  # no side always goes first
                        for side in order:
                            t = time.perf_counter()
                            resp = client.post(f"{urls[side]}/v1/users/{user}/query", json={"question": question})
                            ms = (time.perf_counter() - t) * 1000
                            resp.raise_for_status()
                            times[side]["all"].append(ms)
                            if r == 0:
                                times[side]["first"].append(ms)
            scraping.set()
            scraper.join(30)
            exposition = httpx.get(f"{urls['metrics_health']}/metrics", timeout=30).text
        finally:
            scraping.set()
            for proc in procs:
                _stop(proc)
        cpu = cpu_cost(store)
    out: dict[str, Any] = {"rounds": rounds, "questions": len(QUESTIONS), "health_interval_s": health_s}
    for side, phases in times.items():
        out[side] = {phase: _percentiles(values) for phase, values in phases.items()}
    out["delta_p95_ms"] = {
        side: {p: round(out[side][p]["p95"] - out["no_metrics"][p]["p95"], 2) for p in ("first", "all")}
        for side in ("metrics", "metrics_health", "no_metrics_again")
    }
    out["scrape_ms"] = {side: _percentiles(kept) for side, kept in scrapes.items() if kept}
    out["exposition_bytes"] = len(exposition.encode())
    out["cpu_per_request_us"] = cpu
    return out


def cpu_cost(store: str, n: int = 20_000) -> dict[str, float]:
    """The CPU the metrics add per query, in-process: ``observe_answer`` and the request middleware, in µs."""
    from adamem.analysis.e5 import E5Embedder
    from adamem.api.metrics import _RequestMetrics, observe_answer
    from adamem.projections.store.factory import open_store
    from adamem.retrieval.service import Retriever

    retriever = Retriever(open_store(store, read_only=True), E5Embedder())
    answer = retriever.query("default:alice", "What did I do last weekend?")
    retriever.close()
    t = time.perf_counter()
    for _ in range(n):
        observe_answer(answer, 0)
    observe_us = (time.perf_counter() - t) / n * 1e6

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def noop(message: Any) -> None:
        return None

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def calls(target: Any) -> float:
        scope = {"type": "http", "method": "POST", "path": "/v1/users/alice/query", "headers": []}
        t = time.perf_counter()
        for _ in range(n):
            await target(dict(scope), receive, noop)
        return (time.perf_counter() - t) / n * 1e6

    plain = asyncio.run(calls(app))
    wrapped = asyncio.run(calls(_RequestMetrics(app)))
    return {"observe_answer": round(observe_us, 2), "middleware": round(wrapped - plain, 2), "calls": n}


def report(result: dict[str, Any]) -> None:
    """Print the table of both sides."""
    rows = [
        [side, phase, *(result[side][phase][k] for k in ("n", "p50", "p95", "p99", "mean"))]
        for side in SIDES
        for phase in ("first", "all")
    ]
    print_table(["service", "questions", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms"], rows)
    print(f"p95 with minus without metrics: {result['delta_p95_ms']} ms; /metrics scrape {result['scrape_ms']}")
    print(f"CPU per query, in-process (µs): {result['cpu_per_request_us']}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark's options."""
    p.add_argument("--rounds", type=int, default=40, help="times each question is asked of each service")
    p.add_argument("--health-interval", type=float, default=5.0, help="memory-health interval of metrics_health")
    p.add_argument("--json", dest="out", help="result file (default bench/results/metrics_overhead.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run and record."""
    work = lambda: run(args.rounds, args.health_interval)  # noqa: E731
    return measure_and_record("metrics_overhead", argv, args.out, work, report)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.metrics_overhead``."""
    return standalone_main("metrics_overhead", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
