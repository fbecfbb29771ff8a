"""``adamem bench concurrency``: cold and warm question latency over HTTP by concurrent clients, old beside new.

One owner with 10,000 messages (``adamem bench latency``'s ``one-10k`` store, built or reused under
``--work``); distinct LoCoMo questions of every route. For every number of clients and every
configuration — a source tree (this one, or ``--baseline-commit``'s, extracted with ``git archive``)
and a number of query processes (``adamem serve --workers``) — a fresh read-only ``adamem serve``:

- warm-up: a few questions not in the list, from several connections at once, until every query
  process has loaded the owner's snapshot (a round whose answers all come back under a second);
- **cold**: every question once (``wrk``, or httpx without it), no answer cached;
- **warm**: the same questions again (the answer cache answers).

Beside each phase's latency percentiles: the CPU seconds the service's processes used (from
``/proc``), per question, and the load generator's; per-core rate = questions per CPU-second.
Configurations are run in turn at each level, in alternating order (ABBA), so a shared machine's
load falls on all alike; the 1-minute load average is sampled during each phase.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_LOCOMO,
    LoadSampler,
    free_port,
    load_locomo,
    measure_and_record,
    print_table,
    standalone_main,
    tree_memory,
    wait_healthy,
    wait_port,
)
from bench.latency import ensure_store
from bench.loadgen import Request, run_load

__all__ = ["Config", "add_arguments", "execute", "main", "markdown", "parse_config", "run", "tree_cpu_seconds"]

TARGET = {"clients": 8, "phase": "cold", "p95_ms": 100.0}
OWNER = "one-0000"


@dataclass(frozen=True)
class Config:
    """One way to serve: the source tree's label (``new`` or ``old``) and the number of query processes."""

    tree: str
    workers: int

    @property
    def label(self) -> str:
        """``new×2``-style name."""
        return f"{self.tree}×{self.workers}"


def parse_config(text: str) -> Config:
    """``new:2`` → ``Config("new", 2)``."""
    tree, _, workers = text.partition(":")
    if tree not in ("new", "old") or not workers.isdigit() or int(workers) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not TREE:WORKERS with TREE new or old, e.g. new:2")
    return Config(tree, int(workers))


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process and all its descendants (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
    return total


def _questions(data: str | Path, n: int) -> list[str]:
    """The first ``n`` distinct LoCoMo questions (every route), in file order."""
    out: list[str] = []
    seen: set[str] = set()
    for doc in load_locomo(data):
        for qa in doc.get("qa") or []:
            q = str(qa.get("question", "")).strip()
            if q and q not in seen:
                seen.add(q)
                out.append(q)
    if len(out) < n:
        raise SystemExit(f"{data} has {len(out)} distinct questions, fewer than --questions {n}")
    return out[:n]


@contextmanager
def baseline_tree(commit: str | None) -> Iterator[Path | None]:
    """The source of ``commit`` (``git archive`` of this repository) in a temporary folder, or None."""
    if commit is None:
        yield None
        return
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="adamem-baseline-") as tmp:
        archive = subprocess.run(["git", "-C", str(repo), "archive", commit], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield Path(tmp)


@contextmanager
def serving(
    store_url: str, workers: int, tree: Path | None, log: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A fresh read-only ``adamem serve`` of ``tree``'s code (None: this one) on a free port, until the block ends."""
    port = free_port()
    env = {**os.environ, "ADAMEM_STORE": store_url, "ADAMEM_HOST": "127.0.0.1", "ADAMEM_PORT": str(port)}
    env["ADAMEM_API_KEYS"] = ""
    env.pop("ADAMEM_LOG", None)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    exe = Path(sys.executable).with_name("adamem")
    argv = [str(exe), "serve", "--read-only", "--no-access-log", "--store", store_url, "--port", str(port)]
    with log.open("ab") as fo:
        proc = subprocess.Popen(
            [*argv, "--workers", str(workers)], env=env, stdout=fo, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        if not wait_port(port, 180):
            raise RuntimeError(f"adamem serve did not listen on {port}; see {log}")
        wait_healthy(base, proc)
        yield proc, base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)


def _warm_up(base: str, workers: int) -> dict[str, Any]:
    """Until every query process holds the owner's snapshot: rounds of questions (not in the measured
    list) from ``2 × workers`` new connections at once, until a round answers each under a second."""
    import httpx

    rounds, slowest = 0, []
    for rounds in range(1, 11):
        body = [{"question": f"warm-up question {rounds}-{i}", "top_k": 10} for i in range(2 * workers)]

        def ask(payload: dict[str, Any]) -> float:
            with httpx.Client(timeout=300) as http:  # a new connection: the kernel hands it to any process
                t = time.perf_counter()
                r = http.post(f"{base}/v1/users/{OWNER}/query", json=payload)
                r.raise_for_status()
                return time.perf_counter() - t

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(body)) as pool:
            took = list(pool.map(ask, body))
        slowest.append(round(max(took) * 1000, 1))
        if max(took) < 1.0:
            break
    return {"rounds": rounds, "slowest_ms": slowest}


def _when_idle(pid: int, timeout_s: float = 120.0) -> float:
    """The service's CPU seconds once it has stopped computing (answers to requests still in flight)."""
    deadline = time.monotonic() + timeout_s
    before = tree_cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = tree_cpu_seconds(pid)
        if now - before < 0.02:  # less than 4 % of a core over half a second: idle
            return now
        before = now
    return before


def _phase(proc: subprocess.Popen[bytes], base: str, requests: Sequence[Request], clients: int) -> dict[str, Any]:
    """One pass of every request, ``clients`` at a time; latency, QPS and CPU per question."""
    with LoadSampler(every_s=1.0) as load:
        server0 = tree_cpu_seconds(proc.pid)
        own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = run_load(base, requests, connections=clients)
        wall = time.perf_counter() - t0
        own1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        server = _when_idle(proc.pid) - server0
    # wrk counts the answers it waited for; the few still in flight when it stopped were asked and
    # answered too (every request is sent exactly once), so the CPU is shared by every request
    n = len(requests)
    client = (own1.ru_utime + own1.ru_stime) - (own0.ru_utime + own0.ru_stime)
    if out.get("tool") == "httpx":  # the generator ran in this process: its CPU time is ours
        client = float("nan")
    return {
        **out,
        "server_cpu_s": round(server, 3),
        "server_cpu_ms_per_question": round(server * 1000 / n, 2),
        "questions_per_server_cpu_s": round(n / server, 1) if server > 0 else None,
        "client_cpu_ms_per_question": round(client * 1000 / n, 2) if client == client else None,
        "wall_s": round(wall, 2),
        "load": load.summary(),
    }


def run(
    data: str | Path,
    work: str | Path,
    *,
    clients: Sequence[int],
    configs: Sequence[Config],
    questions: int,
    baseline_commit: str | None,
) -> dict[str, Any]:
    """Every level of clients × every configuration; returns the result document."""
    if any(c.tree == "old" for c in configs) and baseline_commit is None:
        raise SystemExit("a configuration names the old tree: give --baseline-commit")
    work = Path(work)
    facts = ensure_store(work, "one-10k", data)
    asked = _questions(data, questions)
    requests: list[Request] = [(f"/v1/users/{OWNER}/query", json.dumps({"question": q, "top_k": 10})) for q in asked]
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "store": facts["store"],
        "questions": len(asked),
        "baseline_commit": baseline_commit,
        "load_generator": "wrk" if shutil.which("wrk") else "httpx",
        "target": TARGET,
        "runs": [],
    }
    with baseline_tree(baseline_commit) as old:
        for level, n in enumerate(clients):
            order = list(configs) if level % 2 == 0 else list(configs)[::-1]
            for cfg in order:
                print(f"{cfg.label}: {n} client(s) …", file=sys.stderr, flush=True)
                tree = old if cfg.tree == "old" else None
                with serving(facts["store"], cfg.workers, tree, logs / f"serve-{cfg.tree}-{cfg.workers}.log") as (
                    proc,
                    base,
                ):
                    entry: dict[str, Any] = {"config": cfg.label, "tree": cfg.tree, "workers": cfg.workers}
                    entry["clients"] = n
                    entry["warm_up"] = _warm_up(base, cfg.workers)
                    entry["cold"] = _phase(proc, base, requests, n)
                    entry["warm"] = _phase(proc, base, requests, n)
                    entry["rss_mb"] = tree_memory(proc.pid)
                result["runs"].append(entry)
    return result


HEADERS = [
    "config",
    "clients",
    "phase",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "QPS",
    "server CPU ms/q",
    "q per CPU-s",
    "errors",
    "load",
]


def rows(result: dict[str, Any]) -> list[list[Any]]:
    """One row per configuration, level and phase, grouped by configuration."""
    out = []
    runs = sorted(result["runs"], key=lambda r: (r["tree"] != "old", r["workers"], r["clients"]))
    for r in runs:
        for phase in ("cold", "warm"):
            s = r[phase]
            out.append(
                [
                    r["config"],
                    r["clients"],
                    phase,
                    s.get("p50"),
                    s.get("p95"),
                    s.get("p99"),
                    s.get("qps"),
                    s.get("server_cpu_ms_per_question"),
                    s.get("questions_per_server_cpu_s"),
                    s.get("errors"),
                    s["load"]["mean"],
                ]
            )
    return out


def print_report(result: dict[str, Any]) -> None:
    """The table, and the target's row per configuration."""
    print(f"\n{result['questions']} distinct questions per pass, load generator {result['load_generator']}")
    print_table(HEADERS, rows(result))
    for r in result["runs"]:
        if r["clients"] == TARGET["clients"]:
            p95 = r["cold"].get("p95")
            met = p95 is not None and p95 <= TARGET["p95_ms"]
            verdict = "met" if met else "missed"
            print(f"{r['config']}: cold p95 at 8 clients {p95} ms (target ≤ {TARGET['p95_ms']} ms: {verdict})")


def markdown(doc: dict[str, Any]) -> str:
    """The table of a result file (``write_result``'s document) as Markdown, with its command and load."""
    result = doc.get("result", doc)
    lines = [
        "# Cold and warm question latency over HTTP by concurrent clients, old code beside new",
        "",
        f"Command: `{doc.get('command', '')}`; git {str((doc.get('git') or {}).get('commit', ''))[:12]}; "
        f"baseline (old) = {result.get('baseline_commit')}; load generator {result.get('load_generator')}.",
        f"Load average at start {(doc.get('machine') or {}).get('loadavg')}, during {doc.get('load_during')} "
        "(the load column: mean 1-minute load during that phase). The machine has 2 cores shared with other "
        "engineers' work: wall-clock figures are upper bounds; CPU ms per question is the service's own.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows(result)]
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench concurrency``."""
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="LoCoMo-format file (turns and questions)")
    p.add_argument("--work", default="/tmp/adamem-bench-latency", help="where adamem bench latency keeps its stores")
    p.add_argument(
        "--clients", nargs="+", type=int, default=[1, 2, 4, 8, 16], metavar="N", help="concurrent clients per level"
    )
    p.add_argument(
        "--configs",
        nargs="+",
        type=parse_config,
        default=None,
        metavar="TREE:WORKERS",
        help="what to serve: new:1 (this tree, one process), new:2 (--workers 2), old:1 (--baseline-commit's); "
        "default new:1 new:2, and old:1 too with --baseline-commit",
    )
    p.add_argument("--questions", type=int, default=120, help="distinct questions per pass (default 120)")
    p.add_argument("--baseline-commit", help="the old path: serve this commit's code (git archive), e.g. 1b50de1")
    p.add_argument("--json", dest="out", help="result file (default bench/results/concurrency.json)")
    p.add_argument("--markdown", metavar="JSON", help="only print the Markdown table of a result file written before")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())), end="")
        return 0
    configs = args.configs or [Config("new", 1), Config("new", 2)]
    if args.configs is None and args.baseline_commit:
        configs = [Config("old", 1), *configs]
    return measure_and_record(
        "concurrency",
        argv,
        args.out,
        lambda: run(
            args.data,
            args.work,
            clients=args.clients,
            configs=configs,
            questions=args.questions,
            baseline_commit=args.baseline_commit,
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.concurrency``."""
    return standalone_main("concurrency", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
