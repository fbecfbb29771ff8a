"""``adamem bench ingest``: end-to-end throughput through a real Kafka broker and a real ``adamem worker``.

One run, on fresh topics (a new topic prefix), measures three rates on the same N messages
(LoCoMo turns cycled over ``--owners`` renamed owners):

1. raw aiokafka: produce the N framed ``ChatMessage`` events (the very bytes the worker reads) and
   consume them back — the broker's ceiling for these bytes on this machine;
2. the embedder alone: ``E5Embedder.embed`` on the N texts the Memory Agent embeds;
3. end to end: an ``adamem worker`` subprocess (Faust) is started and warmed up with one message;
   then the N messages are published and the clock runs until every analyses partition's end
   offset is reached by the store's checkpoint of that partition and all N are analysed.

It prints the rates and the ratios (target: end to end ≥ 50 % of the embedder alone) and the
worker's resident memory. Topics of the run are deleted at the end unless ``--keep-topics``.

``--transactions both`` runs the end-to-end step twice, on fresh topics each, with the worker's
Kafka transactions off and then on (``ADAMEM_WORKER_TRANSACTIONS``), and prints what they cost:
messages per second and the worker's CPU seconds (from ``/proc/<pid>/stat``) of the timed phase.
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

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from adamem.analysis.agent import embedding_text
from adamem.analysis.factory import build_embedder
from adamem.events import ChatMessage
from adamem.projections.store.lance import LanceStore
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.kafka_log import KafkaLog
from adamem.streams.publish import publish_messages
from bench.common import (
    DEFAULT_LOCOMO,
    drop_run_topics,
    kafka_bootstrap,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    run_topics,
    spread,
    standalone_main,
    tree_memory,
)

__all__ = ["main", "run"]

TARGET_SHARE = 0.5


async def raw_kafka(
    bootstrap: str, topic: str, partitions: int, payloads: Sequence[tuple[bytes, bytes]]
) -> dict[str, Any]:
    """Produce the payloads (acks=all, idempotent, like the project's producer) and consume them back."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        t0 = time.perf_counter()
        futures = [await producer.send(topic, value=v, key=k) for k, v in payloads]
        await asyncio.gather(*futures)
        produced = time.perf_counter() - t0
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        t1 = time.perf_counter()
        got = 0
        while got < len(payloads):
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            got += sum(len(v) for v in batch.values())
        consumed = time.perf_counter() - t1
    finally:
        await consumer.stop()
    total = produced + consumed
    n = len(payloads)
    return {
        "produce_s": round(produced, 3),
        "consume_s": round(consumed, 3),
        "msg_per_s": round(n / total, 1),
        "produce_msg_per_s": round(n / produced, 1),
        "consume_msg_per_s": round(n / consumed, 1),
    }


def embedder_alone(settings: Settings, texts: Sequence[str]) -> dict[str, Any]:
    """``embed`` on the texts, in the worker's micro-batch size, after a warm-up."""
    embedder = build_embedder(settings)
    embedder.embed(texts[:8])
    t = time.perf_counter()
    step = max(1, settings.worker_batch)
    for i in range(0, len(texts), step):
        embedder.embed(texts[i : i + step])
    seconds = time.perf_counter() - t
    return {
        "texts": len(texts),
        "seconds": round(seconds, 2),
        "msg_per_s": round(len(texts) / seconds, 2),
        "name": embedder.name,
    }


class Progress:
    """Where the worker stands: analyses end offsets and the store's checkpoints, read without side effects."""

    def __init__(self, bootstrap: str, settings: Settings, store: Path) -> None:
        self.settings = settings
        self.store = store
        self.consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        self.analyses = settings.topic("analyses")

    async def __aenter__(self) -> Progress:
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def ends(self, topic: str) -> dict[int, int]:
        tps = [TopicPartition(topic, p) for p in range(self.settings.partitions)]
        return {tp.partition: off for tp, off in (await self.consumer.end_offsets(tps)).items()}

    async def state(self) -> tuple[int, int, bool]:
        """(analyses written, analyses projected, every partition caught up)."""
        ends = await self.ends(self.analyses)
        reader = LanceStore(str(self.store), read_only=True)
        done = {p: reader.checkpoint(p).get(self.analyses, 0) for p in ends}
        return sum(ends.values()), sum(done.values()), all(done[p] == ends[p] for p in ends)

    async def wait(self, analysed: int, timeout_s: float, proc: subprocess.Popen[bytes], peak: dict[str, int]) -> float:
        """Seconds until ``analysed`` analyses exist and all are projected; samples the worker's memory."""
        t = time.perf_counter()
        while True:
            written, _projected, caught_up = await self.state()
            for k, v in tree_memory(proc.pid).items():
                peak[k] = max(peak.get(k, 0), v)
            if written >= analysed and caught_up:
                return time.perf_counter() - t
            if proc.poll() is not None:
                tail = (self.store.parent / "worker.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the worker exited with {proc.returncode}; its log ends:\n{tail}")
            if time.perf_counter() - t > timeout_s:
                raise RuntimeError(f"not caught up within {timeout_s}s: {written} analysed of {analysed}")
            await asyncio.sleep(0.25)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) a live process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def end_to_end(
    bootstrap: str,
    settings: Settings,
    messages: Sequence[ChatMessage],
    warmup: ChatMessage,
    work: Path,
    timeout_s: float,
    transactions: bool | None = None,
) -> dict[str, Any]:
    """Start a worker, warm it up, publish the messages, time until everything is analysed and projected.

    ``transactions``: the worker's ``ADAMEM_WORKER_TRANSACTIONS`` (None: as in this environment).
    """
    store = work / "store"
    env = {
        **os.environ,
        "ADAMEM_LOG": f"kafka://{bootstrap}",
        "ADAMEM_TOPIC_PREFIX": settings.topic_prefix,
        "ADAMEM_PARTITIONS": str(settings.partitions),
        "ADAMEM_STORE": str(store),
    }
    if transactions is not None:
        env["ADAMEM_WORKER_TRANSACTIONS"] = "true" if transactions else "false"
    log = KafkaLog(bootstrap, settings)
    await log.start()  # creates the topics with the project's settings
    # The worker puts Faust's data folder in the store folder and does not create its parents (reported).
    store.mkdir(parents=True, exist_ok=True)
    exe = Path(sys.executable).with_name("adamem")
    with (work / "worker.log").open("ab") as fo:
        proc = subprocess.Popen(
            [str(exe), "worker", "--store", str(store), "--loglevel", "warning"],
            env=env,
            cwd=work,
            stdout=fo,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    peak: dict[str, int] = {}
    out: dict[str, Any] = {"worker_pid": proc.pid}
    try:
        async with Progress(bootstrap, settings, store) as progress:
            t = time.perf_counter()
            await publish_messages(log, [warmup], settings)
            await progress.wait(1, timeout_s, proc, peak)
            out["startup_s"] = round(time.perf_counter() - t, 2)
            t0, cpu0 = time.perf_counter(), _cpu_s(proc.pid)
            await publish_messages(log, messages, settings)
            out["publish_s"] = round(time.perf_counter() - t0, 2)
            await progress.wait(1 + len(messages), timeout_s, proc, peak)
            seconds, cpu = time.perf_counter() - t0, _cpu_s(proc.pid) - cpu0
            dead = sum((await progress.ends(settings.topic("deadletter"))).values())
        out.update(
            transactions=transactions,
            seconds=round(seconds, 2),
            msg_per_s=round(len(messages) / seconds, 2),
            worker_cpu_s=round(cpu, 2),
            msg_per_worker_cpu_s=round(len(messages) / cpu, 2) if cpu > 0 else None,
            loadavg_after=list(os.getloadavg()),
            dead_lettered=dead,
            worker_rss_peak_mb=peak.get("vmhwm_mb"),
            worker_rss_end_mb=tree_memory(proc.pid).get("vmrss_mb"),
        )
    finally:
        await log.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    return out


def run(
    log_url: str,
    n: int = 2000,
    *,
    owners: int = 50,
    data: str | Path = DEFAULT_LOCOMO,
    keep_topics: bool = False,
    timeout_s: float = 1800,
    transactions: str = "env",
) -> dict[str, Any]:
    """The three rates and their ratios; ``transactions`` ``both`` adds the end to end without them."""
    if not log_url.startswith("kafka://"):
        raise SystemExit(f"--log must be kafka://host:port (the worker needs a real broker), not {log_url!r}")
    work = Path(tempfile.mkdtemp(prefix="adamem-bench-ingest-"))
    settings = run_topics(log_url, str(work / "store"))
    bootstrap = kafka_bootstrap(settings)
    base = locomo_messages(load_locomo(data), settings)
    messages = spread(base, n, owners, "ingest-")
    warmup = spread(base[-1:], 1, 1, "warmup-")[0]
    payloads = [(m.user_id.encode(), encode_event(m)) for m in messages]
    result: dict[str, Any] = {
        "messages": n,
        "owners": owners,
        "bytes": sum(len(v) for _, v in payloads),
        "topic_prefix": settings.topic_prefix,
        "partitions": settings.partitions,
        "worker_batch": settings.worker_batch,
    }
    try:
        print("raw aiokafka produce + consume …", file=sys.stderr, flush=True)
        result["raw_kafka"] = asyncio.run(raw_kafka(bootstrap, settings.topic("raw"), settings.partitions, payloads))
        print("embedder alone …", file=sys.stderr, flush=True)
        result["embedder"] = embedder_alone(settings, [embedding_text(m) for m in messages])
        if transactions == "both":
            # Without first, on topics of its own (the same messages, a fresh prefix and store).
            plain = run_topics(log_url, str(work / "plain" / "store"))
            (work / "plain").mkdir()
            print("end to end through the worker, without transactions …", file=sys.stderr, flush=True)
            try:
                result["end_to_end_without_transactions"] = asyncio.run(
                    end_to_end(bootstrap, plain, messages, warmup, work / "plain", timeout_s, transactions=False)
                )
            finally:
                if not keep_topics:
                    drop_run_topics(plain)
        on = {"both": True, "on": True, "off": False}.get(transactions)
        print("end to end through the worker …", file=sys.stderr, flush=True)
        result["end_to_end"] = asyncio.run(
            end_to_end(bootstrap, settings, messages, warmup, work, timeout_s, transactions=on)
        )
        print("embedder alone, again …", file=sys.stderr, flush=True)
        # The machine is shared: the embedder is timed before and after the end-to-end run, and the
        # ratio uses the faster of the two (the conservative choice).
        result["embedder_after"] = embedder_alone(settings, [embedding_text(m) for m in messages])
    finally:
        if not keep_topics:
            drop_run_topics(settings)
        shutil.rmtree(work, ignore_errors=True)
    e2e = result["end_to_end"]["msg_per_s"]
    best = max(result["embedder"]["msg_per_s"], result["embedder_after"]["msg_per_s"])
    result["embedder_best_msg_per_s"] = best
    result["ratio_to_embedder"] = round(e2e / best, 3)
    result["ratio_to_raw_kafka"] = round(e2e / result["raw_kafka"]["msg_per_s"], 4)
    result["target_share_of_embedder"] = TARGET_SHARE
    result["met"] = result["ratio_to_embedder"] >= TARGET_SHARE
    if "end_to_end_without_transactions" in result:
        without = result["end_to_end_without_transactions"]
        result["transactions_cost"] = {
            "msg_per_s_ratio": round(e2e / without["msg_per_s"], 3),
            "cpu_per_msg_ms_with": round(1000 * result["end_to_end"]["worker_cpu_s"] / n, 2),
            "cpu_per_msg_ms_without": round(1000 * without["worker_cpu_s"] / n, 2),
        }
    return result


def print_report(r: dict[str, Any]) -> None:
    """The table."""
    print_table(
        ["path", "messages", "seconds", "msg/s", "share"],
        [
            [
                "raw aiokafka produce+consume",
                r["messages"],
                r["raw_kafka"]["produce_s"] + r["raw_kafka"]["consume_s"],
                r["raw_kafka"]["msg_per_s"],
                None,
            ],
            [
                "e5 embedder alone (before)",
                r["embedder"]["texts"],
                r["embedder"]["seconds"],
                r["embedder"]["msg_per_s"],
                None,
            ],
            [
                "e5 embedder alone (after)",
                r["embedder_after"]["texts"],
                r["embedder_after"]["seconds"],
                r["embedder_after"]["msg_per_s"],
                None,
            ],
            [
                "end to end (publish → worker → LanceDB)",
                r["messages"],
                r["end_to_end"]["seconds"],
                r["end_to_end"]["msg_per_s"],
                r["ratio_to_embedder"],
            ],
            *(
                [
                    [
                        "end to end, worker transactions off",
                        r["messages"],
                        r["end_to_end_without_transactions"]["seconds"],
                        r["end_to_end_without_transactions"]["msg_per_s"],
                        None,
                    ]
                ]
                if "end_to_end_without_transactions" in r
                else []
            ),
        ],
    )
    if "transactions_cost" in r:
        cost, on, off = r["transactions_cost"], r["end_to_end"], r["end_to_end_without_transactions"]
        print(
            f"worker transactions: {on['msg_per_s']} msg/s with, {off['msg_per_s']} without "
            f"(×{cost['msg_per_s_ratio']}); worker CPU {on['worker_cpu_s']} s with, {off['worker_cpu_s']} s "
            f"without ({cost['cpu_per_msg_ms_with']} vs {cost['cpu_per_msg_ms_without']} ms per message; "
            f"{on['msg_per_worker_cpu_s']} vs {off['msg_per_worker_cpu_s']} msg per worker CPU-second)"
        )
    print(
        f"end to end = {100 * r['ratio_to_embedder']:.0f} % of the faster embedder-alone run (target ≥ 50 %: "
        f"{'met' if r['met'] else 'MISSED'}), {100 * r['ratio_to_raw_kafka']:.2f} % of raw Kafka; "
        f"worker RSS peak {r['end_to_end'].get('worker_rss_peak_mb')} MB; "
        f"dead-lettered {r['end_to_end'].get('dead_lettered')}"
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench ingest``."""
    p.add_argument("--log", default="kafka://127.0.0.1:9092", help="kafka://host:port of a real broker")
    p.add_argument("--messages", type=int, default=2000, help="messages to publish (LoCoMo turns, cycled)")
    p.add_argument("--owners", type=int, default=50, help="memory owners the messages are spread over")
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="LoCoMo-format file the turns come from")
    p.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the worker")
    p.add_argument("--keep-topics", action="store_true", help="do not delete the run's topics")
    p.add_argument(
        "--transactions",
        choices=("env", "on", "off", "both"),
        default="env",
        help="the worker's Kafka transactions: as ADAMEM_WORKER_TRANSACTIONS says, on, off, or both (off, then on)",
    )
    p.add_argument("--json", dest="out", help="result file (default bench/results/ingest.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    return measure_and_record(
        "ingest",
        argv,
        args.out,
        lambda: run(
            args.log,
            args.messages,
            owners=args.owners,
            data=args.data,
            keep_topics=args.keep_topics,
            timeout_s=args.timeout,
            transactions=args.transactions,
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.ingest``."""
    return standalone_main("ingest", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
