"""What every benchmark shares: machine facts, result files, tables, LoCoMo input, owners by cycling turns,
a memoising embedder, process memory and folder sizes."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import functools
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import threading
import time
import typing
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adamem.analysis import Embedder
from adamem.events import ChatMessage, message_event_id
from adamem.ingest import parse_locomo
from adamem.settings import Settings

__all__ = [
    "DEFAULT_LOCOMO",
    "REPO",
    "RESULTS",
    "CachingEmbedder",
    "LoadSampler",
    "dir_size",
    "drop_run_topics",
    "free_port",
    "git_commit",
    "kafka_bootstrap",
    "load_locomo",
    "locomo_messages",
    "machine_facts",
    "print_table",
    "proc_memory",
    "run_topics",
    "spread",
    "store_embedder",
    "synthetic_row",
    "write_result",
]

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
DEFAULT_LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
DAY_MS = 86_400_000


def store_embedder(store: Any) -> Embedder:
    """The embedder of ``store``'s generation as it records it (the default for a store with no record): questions
    are embedded as its messages were."""
    from adamem.analysis.factory import build_embedder
    from adamem.streams.generations import active

    return build_embedder(active(Settings(), store))


def git_commit() -> dict[str, Any]:
    """HEAD of the checkout and whether the work tree has changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": "", "dirty": None}


def _mem_total_mb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


_SIMD = frozenset(
    {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni"}
)


def _cpu() -> dict[str, Any]:
    """The processor's model and its vector extensions: the embedder's engine is compiled with fast
    floating-point math, so two processors can embed the same text into vectors that differ in their last bits."""
    model, flags = "", set[str]()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {"model": model or platform.processor(), "simd": sorted(f for f in flags if f in _SIMD)}


def machine_facts() -> dict[str, Any]:
    """Cores, processor, RAM, load average, Python, OS and the date: printed next to every figure."""
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu(),
        "ram_mb": _mem_total_mb(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


class LoadSampler:
    """Samples the 1-minute load average every few seconds while a benchmark runs (min / mean / max)."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float]:
        """Minimum, mean and maximum of the 1-minute load average seen."""
        s = self.samples or [os.getloadavg()[0]]
        return {"min": round(min(s), 2), "mean": round(sum(s) / len(s), 2), "max": round(max(s), 2)}


def write_result(
    name: str,
    payload: dict[str, Any],
    argv: Sequence[str],
    *,
    started: dict[str, Any],
    load: LoadSampler | None = None,
    out: str | None = None,
) -> Path:
    """Write ``bench/results/<name>.json`` (or ``out``) with the command, commit and machine facts."""
    doc = {
        "benchmark": name,
        "command": "adamem bench " + " ".join(shlex.quote(a) for a in argv),
        "git": git_commit(),
        "machine": started,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "load_during": load.summary() if load is not None else None,
        **payload,
    }
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    return path


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, file: Any = None) -> None:
    """A Markdown table on stdout."""
    out = file or sys.stdout
    print("| " + " | ".join(headers) + " |", file=out)
    print("|" + "---|" * len(headers), file=out)
    for row in rows:
        print("| " + " | ".join(_cell(v) for v in row) + " |", file=out)


def load_locomo(path: str | Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo-format file (a list of samples, or one sample)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    return doc if isinstance(doc, list) else [doc]


def locomo_messages(samples: Sequence[dict[str, Any]], settings: Settings) -> list[ChatMessage]:
    """Every turn as a ``ChatMessage`` (owner = sample_id, message_id = dia_id), via the CLI's own parser."""
    return parse_locomo(list(samples), settings, "locomo")


def spread(base: Sequence[ChatMessage], n: int, owners: int, prefix: str) -> list[ChatMessage]:
    """``n`` messages for ``owners`` owners, made by cycling ``base`` in order.

    Owner ``i`` gets a run of consecutive turns (so every owner holds coherent dialogue). Each pass
    over ``base`` is a new conversation id, and every conversation is shifted in event time to start
    a day after the previous one ended, so every owner's messages are in time order. Event ids are
    derived from the new owner, conversation and message id, so they are all distinct.
    """
    if not base or n <= 0 or owners <= 0:
        return []
    per = -(-n // owners)
    out: list[ChatMessage] = []
    shift = 0
    last = -1
    prev_conv = None
    for i in range(n):
        m = base[i % len(base)]
        rnd = i // len(base)
        conv = f"{m.conversation_id.split('/')[0]}#{rnd}"
        if conv != prev_conv:  # a new conversation block starts after the previous one
            start = m.occurred_at
            shift = max(0, last + DAY_MS - start) if last >= 0 else 0
            prev_conv = conv
        at = m.occurred_at + shift
        last = max(last, at)
        owner = f"{prefix}{i // per:04d}"
        conv_id = f"{conv}/{m.conversation_id.partition('/')[2]}"
        out.append(
            dataclasses.replace(
                m,
                user_id=owner,
                conversation_id=conv_id,
                occurred_at=at,
                event_id=message_event_id(m.tenant, owner, conv_id, m.message_id),
            )
        )
    return out


class CachingEmbedder:
    """An embedder that remembers the vector of every text it has embedded (texts repeat when turns are cycled).

    The vectors are the wrapped embedder's own; only repeated texts are served from memory. Hits
    and misses are counted so a result can say how much was cached.
    """

    def __init__(self, inner: Embedder, *, queries: bool = True, passages: bool = True) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._queries = queries
        self._passages = passages
        self._p: dict[str, list[float]] = {}
        self._q: dict[str, list[float]] = {}
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def _get(self, memo: dict[str, list[float]], texts: Sequence[str], fn: Any) -> list[list[float]]:
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in memo))
            self.hits += len(texts) - sum(1 for t in texts if t in todo)
            self.misses += sum(1 for t in texts if t in todo)
        if todo:
            vectors = fn(todo)
            with self._lock:
                memo.update(zip(todo, vectors, strict=True))
        return [memo[t] for t in texts]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Passage vectors, memoised."""
        if not self._passages:
            return self.inner.embed(texts)
        return self._get(self._p, texts, self.inner.embed)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Query vectors, memoised."""
        if not self._queries:
            return self.inner.embed_query(texts)
        return self._get(self._q, texts, self.inner.embed_query)

    def stats(self) -> dict[str, int]:
        """Texts served from memory and texts embedded."""
        return {"hits": self.hits, "misses": self.misses}


def proc_memory(pid: int) -> dict[str, int]:
    """Resident memory of a live process from /proc: VmRSS (now) and VmHWM (peak), in MB."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key.lower() + "_mb"] = int(rest.split()[0]) // 1024
    except OSError:
        pass
    return out


def tree_memory(pid: int) -> dict[str, int]:
    """VmRSS/VmHWM of a process plus its children (e.g. a console-script wrapper), summed, in MB."""
    total: dict[str, int] = {}
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    for p in pids:
        for k, v in proc_memory(p).items():
            total[k] = total.get(k, 0) + v
    return total


def dir_size(path: str | Path) -> int:
    """Bytes of all files under a folder (a file's own size for a file; 0 if missing)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    if not p.exists():
        return 0
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def run_topics(log_url: str, store_url: str) -> Settings:
    """Settings on a real broker (``kafka://host:port``) under a topic prefix of this run's own:
    ``bench`` + 8 hex digits, so a benchmark never reads or deletes anybody else's topics."""
    return Settings.from_env(log_url=log_url, topic_prefix=f"bench{uuid.uuid4().hex[:8]}", store_url=store_url)


def kafka_bootstrap(settings: Settings) -> str:
    """``host:port`` of a ``kafka://host:port`` log URL."""
    return settings.log_url.removeprefix("kafka://").rstrip("/")


def drop_run_topics(settings: Settings) -> None:
    """Delete every topic of the run's prefix: its log topics and those Faust made for its worker."""
    from aiokafka.admin import AIOKafkaAdminClient

    prefix = settings.topic_prefix

    async def drop() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap(settings))
        await admin.start()
        try:
            mine = [t for t in await admin.list_topics() if t.startswith((f"{prefix}.", f"{prefix}-"))]
            if mine:
                await admin.delete_topics(mine)
        finally:
            await admin.close()

    asyncio.run(drop())


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float = 60.0) -> bool:
    """Wait until something listens on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def wait_healthy(
    base: str, proc: subprocess.Popen[bytes], timeout_s: float = 180.0, log_file: Path | None = None
) -> None:
    """Until an ``adamem serve`` at ``base`` answers ``/health`` 200 (each query process has loaded its models).

    Raises ``RuntimeError`` when it exits first or never answers, with its output when ``log_file`` is given.
    """
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    what = "exited" if proc.poll() is not None else f"did not answer within {timeout_s:.0f} s"
    output = f": {log_file.read_text(errors='replace')}" if log_file is not None and log_file.exists() else ""
    raise RuntimeError(f"adamem serve at {base} {what}{output}")


def measure_and_record(
    name: str,
    argv: Sequence[str],
    out: Any,
    work: Callable[[], dict[str, Any]],
    report: Callable[[dict[str, Any]], None],
) -> int:
    """Run a benchmark under a load sampler, print its table, write its JSON and say the load."""
    started = machine_facts()
    with LoadSampler() as load:
        result = work()
    report(result)
    path = write_result(name, result, argv, started=started, load=load, out=out)
    print(f"load average at start {started['loadavg']}, during {load.summary()}; wrote {path}")
    return 0


def standalone_main(
    name: str,
    doc: str | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    execute: Callable[[argparse.Namespace, Sequence[str]], int],
    argv: Sequence[str] | None,
) -> int:
    """``python -m bench.<name>``: the same arguments and run as ``adamem bench <name>``."""
    args = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(
        prog=f"adamem bench {name}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(p)
    return execute(p.parse_args(args), [name, *args])


@functools.cache
def _row_defaults(cls: Any) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {
        f.name: f.default
        if f.default is not dataclasses.MISSING  # an optional field keeps its own default (None)
        else {str: "", int: 0, float: 0.0, bool: False}.get(
            hints[f.name], () if typing.get_origin(hints[f.name]) is tuple else []
        )
        for f in dataclasses.fields(cls)
    }


def synthetic_row(cls: Any, **values: Any) -> Any:
    """A store row of ``cls`` for synthetic benchmark stores: every field its own default or an empty
    value of its type, then ``values``."""
    return cls(**{**_row_defaults(cls), **values})
