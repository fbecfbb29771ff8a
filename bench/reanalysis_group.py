"""``adamem bench reanalysis_group``: reanalysis messages/s by members of a group on Kafka, beside one process.

A Kafka log is built from the LoCoMo turns (``--repeat`` copies with renamed owners) and
ingested into a store by the in-process pipeline. Then, round after round, every message is
analysed again with the same analyzer into a new generation: once by ``adamem reanalyze`` in this
process (the baseline: a reanalysis without a group), and once per ``--members`` value by that
many ``adamem worker --reanalyze VIEW`` processes while ``adamem reanalyze --group`` waits. The
runs alternate, so a change in the machine's load falls on all of them. Timed from the start of
the reanalysis to the view folded and compared (the members' start, model load included);
messages/s is the messages of the log over that time. Every new generation is checked to hold one
analysis per message.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import build_embedder, build_extractor
from adamem.events import MessageAnalyzed
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.kafka_log import KafkaLog
from adamem.streams.keys import keystore_for
from adamem.streams.reanalyze import reanalyze
from bench.build import build_memory
from bench.common import (
    DEFAULT_LOCOMO,
    CachingEmbedder,
    drop_run_topics,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    run_topics,
    spread,
    standalone_main,
)

__all__ = ["main", "run"]

SESSION_TIMEOUT_S = 6


async def _analyses(bootstrap: str, settings: Settings, topic: str) -> Counter[str]:
    log = KafkaLog(bootstrap, settings)
    keys = keystore_for(log, settings)
    counts: Counter[str] = Counter()
    async for rec in log.read(topic):
        event = decode_event(rec.value, keys)
        if isinstance(event, MessageAnalyzed):
            counts[event.message.event_id] += 1
    return counts


async def _in_process(settings: Settings, view: str) -> tuple[float, str]:
    t = time.perf_counter()
    report = await reanalyze(settings, settings.store_url, extractor=settings.extractor, view=view)
    return time.perf_counter() - t, report.analyzer["topic"]


async def _in_group(settings: Settings, view: str, members: int, bootstrap: str) -> tuple[float, str]:
    env = {
        **os.environ,
        "ADAMEM_TOPIC_PREFIX": settings.topic_prefix,
        "ADAMEM_PARTITIONS": str(settings.partitions),
        "ADAMEM_WORKER_SESSION_TIMEOUT": str(SESSION_TIMEOUT_S),
    }
    exe = str(Path(sys.executable).with_name("adamem"))
    procs: list[subprocess.Popen[bytes]] = []
    t = time.perf_counter()

    def announce(line: str) -> None:
        for n in range(members):
            argv = [exe, "worker", "--reanalyze", view, "--log", settings.log_url, "--store", settings.store_url,
                    "--worker-log", os.path.join(tempfile.gettempdir(), f"{view}-{n}.log")]  # fmt: skip
            procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    try:
        report = await reanalyze(
            settings, settings.store_url, extractor=settings.extractor, view=view, group=True, announce=announce
        )
        seconds = time.perf_counter() - t
    finally:
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
    if any(proc.returncode != 0 for proc in procs):
        raise SystemExit(f"a member of {view} failed: exit codes {[p.returncode for p in procs]}")
    return seconds, report.analyzer["topic"]


def run(
    data: str | Path,
    *,
    bootstrap: str,
    samples: Sequence[str] | None = None,
    repeat: int = 2,
    partitions: int = 4,
    members: Sequence[int] = (1, 2),
    rounds: int = 1,
    owners: int = 16,
) -> dict[str, Any]:
    """Build one Kafka log and store; reanalyse it ``rounds`` times in one process and with each ``members``."""
    docs = load_locomo(data)
    if samples:
        docs = [d for d in docs if d.get("sample_id") in set(samples)]
    root = Path(tempfile.mkdtemp(prefix="adamem-bench-reanalysis-group-"))
    settings = dataclasses.replace(run_topics(f"kafka://{bootstrap}", str(root / "store")), partitions=partitions)
    try:
        return _measure(docs, settings, bootstrap, repeat, members, rounds, owners, data, samples)
    finally:
        drop_run_topics(settings)  # the log's, every generation's and the members' group topics
        shutil.rmtree(root, ignore_errors=True)


def _measure(
    docs: list[dict[str, Any]],
    settings: Settings,
    bootstrap: str,
    repeat: int,
    members: Sequence[int],
    rounds: int,
    owners: int,
    data: str | Path,
    samples: Sequence[str] | None,
) -> dict[str, Any]:
    base = locomo_messages(docs, settings)
    messages = base + spread(base, len(base) * (repeat - 1), owners, "reanalysis-")
    print(f"ingesting {len(messages)} messages into {settings.partitions} partition(s) …", file=sys.stderr, flush=True)
    build_memory(messages, settings, MemoryAgent(build_extractor(settings), CachingEmbedder(build_embedder(settings))))
    variants = ["one process", *(f"{m} member(s)" for m in members)]
    times: dict[str, list[float]] = {v: [] for v in variants}
    once: dict[str, bool] = {}
    for r in range(rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for v in order:
            view = f"r{r}-{v.split()[0]}"
            if v == "one process":
                seconds, topic = asyncio.run(_in_process(settings, view))
            else:
                seconds, topic = asyncio.run(_in_group(settings, view, int(v.split()[0]), bootstrap))
            counts = asyncio.run(_analyses(bootstrap, settings, topic))
            once[v] = once.get(v, True) and len(counts) == len(messages) and set(counts.values()) == {1}
            times[v].append(seconds)
            shutil.rmtree(Path(settings.store_url) / "views" / view, ignore_errors=True)
            print(f"  {v}, round {r + 1}: {len(messages) / seconds:,.1f} messages/s", file=sys.stderr, flush=True)
    one = statistics.median(times["one process"])
    rows = []
    for v in variants:
        median = statistics.median(times[v])
        rows.append(
            {
                "variant": v,
                "messages": len(messages),
                "seconds": [round(t, 2) for t in times[v]],
                "median_s": round(median, 2),
                "messages_per_s": round(len(messages) / median, 1),
                "x_one_process": round(one / median, 2),
                "one_analysis_per_message": once[v],
            }
        )
    return {
        "data": str(data),
        "samples": list(samples or []),
        "repeat": repeat,
        "owners": owners,
        "partitions": settings.partitions,
        "rounds": rounds,
        "analyzer": {"extractor": settings.extractor, "embedder": settings.embedder},
        "runs": rows,
    }


def print_report(r: dict[str, Any]) -> None:
    """The table."""
    keys = ("variant", "messages", "median_s", "messages_per_s", "x_one_process", "one_analysis_per_message")
    print_table(
        ["variant", "messages", "median s", "messages/s", "× one process", "one analysis per message"],
        [[x[k] for k in keys] for x in r["runs"]],
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark's options."""
    p.add_argument("--bootstrap", default="127.0.0.1:9092", help="the Kafka broker (deploy/kafka.sh start runs one)")
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="a LoCoMo-format JSON file")
    p.add_argument("--samples", nargs="*", help="only these sample ids")
    p.add_argument("--repeat", type=int, default=2, help="copies of the turns (owners renamed) for a longer log")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the log")
    p.add_argument("--members", type=int, nargs="+", default=[1, 2], help="member processes of each group run")
    p.add_argument("--rounds", type=int, default=1, help="reanalyses per variant (alternating)")
    p.add_argument("--owners", type=int, default=16, help="renamed owners of the copies (spread over partitions)")
    p.add_argument("--json", dest="out", help="result file (default bench/results/reanalysis_group.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run and record."""
    return measure_and_record(
        "reanalysis_group",
        argv,
        args.out,
        lambda: run(
            args.data,
            bootstrap=args.bootstrap,
            samples=args.samples,
            repeat=args.repeat,
            partitions=args.partitions,
            members=args.members,
            rounds=args.rounds,
            owners=args.owners,
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.reanalysis_group``."""
    return standalone_main("reanalysis_group", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    raise SystemExit(main())
