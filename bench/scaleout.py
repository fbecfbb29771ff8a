"""``adamem bench scaleout``: ingest and replay events/s as partitions and workers grow, per CPU-second.

On a real broker, for every partition count P (``--partitions``, default 1 4 12) and worker count W
(``--workers``, default 1 2 3): fresh topics (a new topic prefix) with P partitions, W ``adamem
worker`` processes in one consumer group over a fresh store, warmed up with one message per
partition once the group is stable; then N messages (LoCoMo turns cycled over ``--owners``
renamed owners) are published and the clock runs until every analyses partition is folded.
Figures: the wall rate (messages/s; capped by the machine's 2 cores) and the **per-core rate**:
messages per CPU-second of all worker processes (utime + stime from ``/proc/<pid>/stat``, read
just before the messages are published and after the last is folded).

Embedding dominates a worker's CPU (e5 ≈ 17 messages per CPU-second), so the grid's workers
embed through an **embeddings service that holds e5's vectors precomputed**: the turns repeat
when cycled, each distinct text is embedded once by e5 before the grid, and this process serves
the vectors on an OpenAI-compatible ``/embeddings`` endpoint on the loopback; the workers are
plain ``adamem worker`` processes with ``ADAMEM_EMBEDDER=openai`` pointed at it (so their CPU
includes the HTTP client's, as with a real embeddings service, and not the model's). ``--e5-runs``
adds runs with e5 inside the workers (the default embedder), and e5's cost per CPU-second is
measured beside them, so the rate with the embedder included is stated too.

Replay, per P: ``streams.replay.rebuild_view`` of the Kafka topics (after the grid's last run of
that P) and of an embedded log with P partitions (built with the in-process pipeline, whose
per-core rate is recorded too) into a new view, wall and CPU time of this process. Replay is one
process that folds the partitions one after another, so it has no worker dimension.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adamem.events import ChatMessage
from adamem.settings import Settings
from bench.common import (
    DEFAULT_LOCOMO,
    RESULTS,
    drop_run_topics,
    kafka_bootstrap,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    run_topics,
    spread,
    standalone_main,
)
from bench.vectors import PrecomputedEmbedder, VectorService, precompute, proc_cpu_s

__all__ = ["add_arguments", "execute", "main", "run"]


def _owners_per_partition(partitions: int) -> list[str]:
    """One user id for every partition (for the warm-up: every partition sees a message)."""
    from adamem.partitioning import partition_for

    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        found.setdefault(partition_for(f"warmup-{i}", partitions), f"warmup-{i}")
        i += 1
    return [found[p] for p in range(partitions)]


def _renamed(m: ChatMessage, user: str) -> ChatMessage:
    """The message as said to another owner (its own event id)."""
    import dataclasses

    from adamem.events import message_event_id

    return dataclasses.replace(
        m, user_id=user, event_id=message_event_id(m.tenant, user, m.conversation_id, m.message_id)
    )


async def _group(bootstrap: str, group: str) -> tuple[str, int]:
    """(state, members) of a consumer group."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        resp = await admin.describe_consumer_groups([group])
        g = resp[0].groups[0]  # (error_code, group_id, state, protocol_type, protocol, members[, ops])
        return str(g[2]), len(g[5])
    except KafkaError:  # no coordinator yet: the group does not exist so far
        return "", 0
    finally:
        await admin.close()


class Workers:
    """W worker processes of one group on fresh topics, and where they stand."""

    def __init__(self, settings: Settings, work: Path, count: int, service: VectorService | None) -> None:
        self.settings, self.work, self.count, self.service = settings, work, count, service
        self.store = work / "store"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "ADAMEM_LOG": self.settings.log_url,
            "ADAMEM_TOPIC_PREFIX": self.settings.topic_prefix,
            "ADAMEM_PARTITIONS": str(self.settings.partitions),
            "ADAMEM_STORE": str(self.store),
            "ADAMEM_PROGRESS": "false",
            **(self.service.env() if self.service is not None else {"ADAMEM_EMBEDDER": "e5"}),
        }
        cmd = [str(Path(sys.executable).with_name("adamem")), "worker"]
        for i in range(self.count):
            with (self.work / f"worker{i}.out").open("ab") as fo:
                self.procs.append(
                    subprocess.Popen(
                        [*cmd, "--store", str(self.store), "--loglevel", "warning"],
                        env=env,
                        cwd=self.work,
                        stdout=fo,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )

    def cpu_s(self) -> float:
        return sum(proc_cpu_s(p.pid) for p in self.procs)

    def check_alive(self) -> None:
        for i, p in enumerate(self.procs):
            if p.poll() is not None:
                tail = (self.work / f"worker{i}.out").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"worker {i} exited with {p.returncode}; its output ends:\n{tail}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)


async def _folded(settings: Settings, store: Path) -> tuple[int, bool]:
    """(analyses written, all folded) — analyses end offsets against the store's checkpoints."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from adamem.projections.store.lance import LanceStore

    topic = settings.topic("analyses")
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap(settings), group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
        ends = {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()
    try:
        reader = LanceStore(str(store), read_only=True)
        done = {p: reader.checkpoint(p).get(topic, 0) for p in ends}
    except Exception:  # the store is being made by the workers
        return sum(ends.values()), False
    return sum(ends.values()), all(done[p] == ends[p] for p in ends)


async def _wait_folded(workers: Workers, analysed: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        written, caught_up = await _folded(workers.settings, workers.store)
        if written >= analysed and caught_up:
            return
        workers.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"not folded within {timeout_s}s: {written} analysed of {analysed}")
        await asyncio.sleep(0.5)


async def _wait_stable(workers: Workers, timeout_s: float) -> float:
    """Seconds until the group is Stable with (at least) W members."""
    group = f"{workers.settings.topic_prefix}-worker"
    t = time.monotonic()
    while True:
        state, members = await _group(kafka_bootstrap(workers.settings), group)
        if state == "Stable" and members >= workers.count:
            return time.monotonic() - t
        workers.check_alive()
        if time.monotonic() - t > timeout_s:
            raise RuntimeError(f"group {group} not stable with {workers.count} members in {timeout_s}s: {state}")
        await asyncio.sleep(0.5)


async def _ingest(
    settings: Settings,
    work: Path,
    count: int,
    service: VectorService | None,
    messages: Sequence[ChatMessage],
    timeout_s: float,
) -> dict[str, Any]:
    from adamem.streams.kafka_log import KafkaLog
    from adamem.streams.publish import publish_messages
    from bench.common import tree_memory

    log = KafkaLog(kafka_bootstrap(settings), settings)
    await log.start()  # creates the topics with P partitions
    workers = Workers(settings, work, count, service)
    out: dict[str, Any] = {"partitions": settings.partitions, "workers": count, "messages": len(messages)}
    try:
        t = time.perf_counter()
        workers.start()
        out["group_stable_s"] = round(await _wait_stable(workers, timeout_s), 1)
        warm = [_renamed(messages[0], u) for u in _owners_per_partition(settings.partitions)]
        await publish_messages(log, warm, settings)
        await _wait_folded(workers, len(warm), timeout_s)
        await _wait_stable(workers, timeout_s)
        out["startup_s"] = round(time.perf_counter() - t, 1)
        cpu0, t0 = workers.cpu_s(), time.perf_counter()
        await publish_messages(log, messages, settings)
        await _wait_folded(workers, len(warm) + len(messages), timeout_s)
        wall, cpu = time.perf_counter() - t0, workers.cpu_s() - cpu0
        out.update(
            wall_s=round(wall, 2),
            worker_cpu_s=round(cpu, 2),
            msg_per_s=round(len(messages) / wall, 1),
            msg_per_cpu_s=round(len(messages) / cpu, 1),
            cores_busy=round(cpu / wall, 2),
            worker_rss_mb=[tree_memory(p.pid).get("vmrss_mb") for p in workers.procs],
            loadavg=[round(x, 2) for x in os.getloadavg()],
        )
    finally:
        await log.stop()
        workers.stop()
    return out


async def _replay(settings: Settings, store: str) -> dict[str, Any]:
    from adamem.streams.factory import open_log
    from adamem.streams.replay import rebuild_view

    log = open_log(settings.log_url, settings)
    await log.start()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        report = await rebuild_view(log, store, settings, view="scale-r", switch=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        await log.stop()
    return {
        "events": report.events,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "events_per_s": round(report.events / wall, 1),
        "events_per_cpu_s": round(report.events / cpu, 1),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


async def _embedded(settings: Settings, messages: Sequence[ChatMessage], vectors: Path) -> dict[str, Any]:
    """The in-process pipeline (analyse + fold) on an embedded log with P partitions, CPU-timed."""
    from adamem.analysis.agent import MemoryAgent
    from adamem.analysis.factory import build_extractor
    from adamem.projections.projector import Projector
    from adamem.projections.store.factory import open_store
    from adamem.streams.factory import open_log
    from adamem.streams.pipeline import run_pipeline
    from adamem.streams.publish import publish_messages

    log = open_log(settings.log_url, settings)
    await log.start()
    store = open_store(settings.store)
    try:
        await publish_messages(log, messages, settings)
        store.bind(log.partitions(settings.topic("analyses")))
        agent = MemoryAgent(build_extractor(settings), PrecomputedEmbedder(vectors))
        wall, cpu = time.perf_counter(), time.process_time()
        stats = await run_pipeline(log, Projector(store), agent, settings)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        store.close()
        await log.stop()
    return {
        "messages": stats.analyzed,
        "applied": stats.applied,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "msg_per_s": round(stats.analyzed / wall, 1),
        "msg_per_cpu_s": round(stats.analyzed / cpu, 1),
    }


def run(
    log_url: str,
    *,
    partitions: Sequence[int],
    workers: Sequence[int],
    n: int,
    owners: int,
    distinct: int,
    e5_runs: Sequence[str],
    e5_messages: int,
    data: str | Path = DEFAULT_LOCOMO,
    timeout_s: float = 900,
) -> dict[str, Any]:
    """The grid, the e5 runs and the replays."""
    if not log_url.startswith("kafka://"):
        raise SystemExit(f"--log must be kafka://host:port (the workers need a real broker), not {log_url!r}")
    root = Path(tempfile.mkdtemp(prefix="adamem-bench-scaleout-"))
    base = locomo_messages(load_locomo(data), Settings.from_env())[:distinct]
    messages = spread(base, n, owners, "so-")
    vectors = root / "vectors.npz"
    result: dict[str, Any] = {"messages": n, "owners": owners, "distinct_texts_cycled": len(base)}
    try:
        print(f"e5 on {len(base)} distinct texts …", file=sys.stderr, flush=True)
        result["e5"] = precompute(messages, vectors)
        service = VectorService(PrecomputedEmbedder(vectors))
        result["kafka"], result["replay_kafka"], result["embedded"], result["replay_embedded"] = [], [], [], []
        for p in partitions:
            settings = None
            for w in workers:
                settings = run_topics(log_url, "")
                settings = Settings.from_env(
                    log_url=log_url, topic_prefix=settings.topic_prefix, partitions=p, store_url=""
                )
                work = root / f"k{p}x{w}"
                work.mkdir()
                print(f"kafka: {p} partition(s), {w} worker(s), {n} messages …", file=sys.stderr, flush=True)
                try:
                    r = asyncio.run(_ingest(settings, work, w, service, messages, timeout_s))
                    result["kafka"].append(r)
                    if w == workers[-1]:
                        print(f"replay from kafka, {p} partition(s) …", file=sys.stderr, flush=True)
                        s = Settings.from_env(
                            log_url=log_url,
                            topic_prefix=settings.topic_prefix,
                            partitions=p,
                            store_url=str(work / "store"),
                        )
                        result["replay_kafka"].append({"partitions": p, **asyncio.run(_replay(s, str(work / "store")))})
                finally:
                    drop_run_topics(settings)
                    shutil.rmtree(work, ignore_errors=True)
            folder = root / f"e{p}"
            es = Settings.from_env(
                log_url=str(folder / "log"), store_url=str(folder / "store"), embedded_partitions=p, progress=False
            )
            print(f"embedded log, {p} partition(s): in-process pipeline, then replay …", file=sys.stderr, flush=True)
            result["embedded"].append({"partitions": p, **asyncio.run(_embedded(es, messages, vectors))})
            result["replay_embedded"].append({"partitions": p, **asyncio.run(_replay(es, str(folder / "store")))})
            shutil.rmtree(folder, ignore_errors=True)
        service.close()
        result["kafka_e5"] = []
        for spec in e5_runs:
            p, w = (int(x) for x in spec.split("x"))
            settings = Settings.from_env(
                log_url=log_url, topic_prefix=run_topics(log_url, "").topic_prefix, partitions=p
            )
            work = root / f"e5-{spec}"
            work.mkdir()
            print(
                f"kafka with e5: {p} partition(s), {w} worker(s), {e5_messages} messages …", file=sys.stderr, flush=True
            )
            try:
                result["kafka_e5"].append(
                    asyncio.run(_ingest(settings, work, w, None, messages[:e5_messages], timeout_s))
                )
            finally:
                drop_run_topics(settings)
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    e5_per_cpu = result["e5"]["texts_per_cpu_s"]
    for r in result["kafka"]:  # the same work with e5 on the same cores: CPU seconds add up per message
        r["with_e5_msg_per_cpu_s"] = round(1 / (1 / r["msg_per_cpu_s"] + 1 / e5_per_cpu), 1)
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    """Per-core and wall rates against partitions, one line per worker count; replay beside them."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for w in sorted({r["workers"] for r in result["kafka"]}):
        rows = [r for r in result["kafka"] if r["workers"] == w]
        xs = [r["partitions"] for r in rows]
        a.plot(xs, [r["msg_per_cpu_s"] for r in rows], "o-", label=f"{w} worker(s): per CPU-second")
        a.plot(xs, [r["msg_per_s"] for r in rows], "x--", label=f"{w} worker(s): wall")
    for key, label in (("embedded", "embedded, in-process pipeline"),):
        rows = result[key]
        a.plot([r["partitions"] for r in rows], [r["msg_per_cpu_s"] for r in rows], "s:", label=label + " (per CPU-s)")
    a.set_xlabel("partitions")
    a.set_ylabel("messages/s (analyse + fold; e5 precomputed)")
    a.set_title("ingest through adamem worker")
    a.legend(fontsize=7)
    a.grid(True, alpha=0.3)
    for key, label in (("replay_kafka", "from Kafka"), ("replay_embedded", "from the embedded log")):
        rows = result[key]
        xs = [r["partitions"] for r in rows]
        b.plot(xs, [r["events_per_cpu_s"] for r in rows], "o-", label=f"{label}: per CPU-second")
        b.plot(xs, [r["events_per_s"] for r in rows], "x--", label=f"{label}: wall")
    b.set_xlabel("partitions")
    b.set_ylabel("events/s")
    b.set_title("replay (rebuild_view, one process)")
    b.legend(fontsize=7)
    b.grid(True, alpha=0.3)
    fig.suptitle("adamem bench scaleout (shared 2-core machine; wall rates capped by 2 cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def print_report(r: dict[str, Any], png: Path = RESULTS / "scaleout.png") -> None:
    """The tables and the plot (``png``: beside the result file)."""
    print(f"e5 alone: {r['e5']['texts_per_cpu_s']} texts per CPU-second ({r['e5']['texts_per_s']}/s wall)")
    rows = [
        [
            k["partitions"],
            k["workers"],
            k["messages"],
            k["wall_s"],
            k["msg_per_s"],
            k["worker_cpu_s"],
            k["msg_per_cpu_s"],
            k.get("with_e5_msg_per_cpu_s"),
            k["loadavg"][0],
        ]
        for k in [*r["kafka"], *r.get("kafka_e5", [])]
    ]
    headers = ["P", "W", "msgs", "wall s", "msg/s", "CPU s", "msg/CPU-s", "+e5 msg/CPU-s", "load"]
    print_table(headers, rows)
    rows = [
        [
            kind,
            x["partitions"],
            x.get("events", x.get("messages")),
            x["wall_s"],
            x.get("events_per_s", x.get("msg_per_s")),
            x["cpu_s"],
            x.get("events_per_cpu_s", x.get("msg_per_cpu_s")),
            x.get("loadavg", [None])[0],
        ]
        for kind, key in (
            ("embedded pipeline", "embedded"),
            ("replay, embedded", "replay_embedded"),
            ("replay, kafka", "replay_kafka"),
        )
        for x in r[key]
    ]
    print_table(["run", "P", "events", "wall s", "ev/s", "CPU s", "ev/CPU-s", "load"], rows)
    plot(r, png)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench scaleout``."""
    p.add_argument("--log", default="kafka://127.0.0.1:9092", help="kafka://host:port of a real broker")
    p.add_argument("--partitions", nargs="+", type=int, default=[1, 4, 12], help="partition counts to run")
    p.add_argument("--workers", nargs="+", type=int, default=[1, 2, 3], help="worker counts to run at each")
    p.add_argument("--messages", type=int, default=4000, help="messages per run (LoCoMo turns, cycled)")
    p.add_argument("--owners", type=int, default=120, help="memory owners the messages are spread over")
    p.add_argument("--distinct", type=int, default=600, help="distinct LoCoMo turns cycled (each embedded once by e5)")
    p.add_argument("--e5-runs", nargs="*", default=["4x1", "4x2"], help="PxW runs with the real e5 in the workers")
    p.add_argument("--e5-messages", type=int, default=400, help="messages per e5 run")
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="LoCoMo-format file the turns come from")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for any one step")
    p.add_argument("--json", dest="out", help="result file (default bench/results/scaleout.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    return measure_and_record(
        "scaleout",
        argv,
        args.out,
        lambda: run(
            args.log,
            partitions=args.partitions,
            workers=args.workers,
            n=args.messages,
            owners=args.owners,
            distinct=args.distinct,
            e5_runs=args.e5_runs,
            e5_messages=args.e5_messages,
            data=args.data,
            timeout_s=args.timeout,
        ),
        lambda r: print_report(r, Path(args.out).with_suffix(".png") if args.out else RESULTS / "scaleout.png"),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.scaleout``."""
    return standalone_main("scaleout", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
