"""Workers as one consumer group on the real broker: members die, pause and join; shards stay fenced.

* Three ``adamem worker`` processes share 12 partitions of messages from many owners; one is
  SIGKILLed mid-batch, a fourth joins later. The final projections equal one uninterrupted fold
  of the recorded analyses (checksums per shard), every message is analysed exactly once (one
  committed analysis on the analyses topic) and archived exactly once, and the test prints how
  long the group took to recover from the kill.
* Fencing: a worker paused (SIGSTOP) in the middle of a commit loses its partitions to another;
  woken (SIGCONT), it cannot commit to the shards it lost — the store refuses its checkpoint
  (``StoreFenced``) and the new owner rolls back what it wrote — nor publish analyses for the
  partitions it lost (its transactional producers are fenced: ``LogFenced``), so the analyses
  topic holds one committed analysis per message, and the result is still exactly the
  uninterrupted fold.

Outcomes are deterministic; only timing varies (recovery times are printed, never asserted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adamem.events import MessageAnalyzed
from adamem.ingest import load_messages
from adamem.partitioning import owner_partition
from adamem.projections.folds.rows import Row
from adamem.projections.store.lance import LanceStore
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.kafka_log import KafkaLog
from adamem.streams.publish import publish_messages
from adamem.streams.replay import rows_checksum
from tests.streams.test_crash_safety import (
    Progress,
    Workers,
    _ahead_of_checkpoint,
    _archive,
    _progress,
    _published_analyses,
    _replay,
    _snapshot,
    _wait_for,
)

PARTITIONS = 12
OWNERS = 48
PER_OWNER = 14
_SAYINGS = (
    "I love hiking in the mountains",
    "I started working out because my doctor told me to",
    "My sister lives in Berlin",
    "I moved to Lisbon last year",
    "I'm allergic to peanuts",
    "I work at a bakery as a pastry chef",
    "Last Sunday I went to a concert",
    "I really enjoy reading science fiction",
    "My dog is called Biscuit",
    "I hate waking up early",
    "我喜欢喝茶",
    "I'm learning to play the guitar",
    "We adopted a cat two weeks ago",
    "I prefer the beach to the city",
)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    w = Workers(tmp_path)
    yield w
    w.stop_all()


def _messages(settings: Settings) -> list[Any]:
    """Many owners, a few conversations each (a new conversation consolidates), deterministic."""
    lines = []
    for n in range(PER_OWNER):
        for o in range(OWNERS):
            text = _SAYINGS[(o * 5 + n) % len(_SAYINGS)]
            lines.append(
                {
                    "user_id": f"owner-{o:03d}",
                    "speaker": f"Person {o}",
                    "text": f"{text} ({o}.{n})",
                    "occurred_at": 1_700_000_000_000 + (n * OWNERS + o) * 60_000,
                    "conversation_id": f"s{n // 5}",
                    "message_id": f"m{n}",
                }
            )
    data = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines).encode()
    return load_messages(data, settings, "group.jsonl")


def _flat(rounds: list[list[Any]]) -> list[Any]:
    return [m for r in rounds for m in r]


def _writers(store: Path) -> dict[int, tuple[int, str]]:
    """Per shard: (owner epoch, writer host:pid) of its last checkpoint."""
    out: dict[int, tuple[int, str]] = {}
    reader = LanceStore(str(store), read_only=True)
    for path in sorted(reader.dir.glob("p*")):
        try:
            shard = reader._shard(int(path.name[1:]), create=False)
            row = shard.checkpoint_row() if shard else None
        except ValueError:  # being created
            continue
        if row:
            out[int(path.name[1:])] = (int(row.get("epoch") or 0), str(row.get("writer") or ""))
    return out


def _pid_of(writer: str) -> int:
    return int(writer.rsplit(":", 1)[1]) if ":" in writer else -1


def _shard_checksums(snapshot: dict[str, list[Row]]) -> dict[int, str]:
    by_shard: dict[int, list[Row]] = {}
    for owner, rows in snapshot.items():
        by_shard.setdefault(owner_partition(owner, PARTITIONS), []).extend(rows)
    return {p: rows_checksum(rows) for p, rows in sorted(by_shard.items())}


async def _until(predicate: Any, timeout: float, what: str, step: float = 0.25) -> float:
    """Wait for ``predicate()``; the seconds it took."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what}: not within {timeout}s")
        await asyncio.sleep(step)
    return time.monotonic() - t0


def _difference(live: dict[str, list[Row]], replay: dict[str, list[Row]], shards: set[int]) -> str:
    """The rows of ``shards`` that live and replay hold differently: (owner, table, id) and the fields that differ."""
    lines = [f"shards whose live rows differ from the replay's: {sorted(shards)}"]
    for owner in sorted(set(live) | set(replay)):
        if owner_partition(owner, PARTITIONS) not in shards:
            continue
        mine = {(r.TABLE, r.id): dataclasses.asdict(r) for r in live.get(owner, [])}
        theirs = {(r.TABLE, r.id): dataclasses.asdict(r) for r in replay.get(owner, [])}
        for key in sorted(set(mine) | set(theirs)):
            a, b = mine.get(key), theirs.get(key)
            if a == b:
                continue
            if a is None or b is None:
                lines.append(f"  {owner} {key}: only in {'replay' if a is None else 'live'}: {str(a or b)[:300]}")
                continue
            fields = {f: (str(a[f])[:120], str(b[f])[:120]) for f in a if a[f] != b.get(f)}
            lines.append(f"  {owner} {key}: live/replay {fields}")
    return "\n".join(lines[:80])


async def _duplicates_explained(log: KafkaLog, settings: Settings, duplicated: set[str], tmp_path: Path) -> str:
    """Where each copy of a twice-analysed message lies on the analyses topic, and what the workers logged of it."""
    lines = [f"messages analysed more than once: {sorted(duplicated)[:10]}"]
    partitions = set()
    async for rec in log.read(settings.topic("analyses")):
        event = decode_event(rec.value)
        if isinstance(event, MessageAnalyzed) and event.message.event_id in duplicated:
            partitions.add(rec.partition)
            lines.append(f"  {event.message.event_id} at p{rec.partition}:{rec.offset} headers {rec.headers}")
    for log_file in sorted(tmp_path.glob("worker-*.log")):
        text = log_file.read_text(errors="replace").splitlines()
        mine = [t for t in text if any(f"p{p}:" in t or f"p{p} " in t for p in partitions)]
        lines.append(f"  {log_file.name}: " + "\n    ".join(mine[-60:]))
    return "\n".join(lines)


async def _check_final(
    log: KafkaLog, settings: Settings, store: Path, tmp_path: Path, messages: list[Any]
) -> tuple[dict[int, str], int]:
    """Live equals the uninterrupted fold, shard by shard; every message analysed once and archived once."""
    live = _snapshot(LanceStore(str(store), read_only=True))
    replay = await _replay(log, settings, tmp_path / "replay")
    analysed = await _published_analyses(log, settings)
    assert set(analysed) == {m.event_id for m in messages}  # nothing lost
    assert _archive(live) == sorted(m.event_id for m in messages)  # archived exactly once
    live_sums, replay_sums = _shard_checksums(live), _shard_checksums(replay)
    assert len(live_sums) >= PARTITIONS - 1  # (48 owners fill all 12 shards but by chance one)
    assert live_sums == replay_sums, _difference(
        live, replay, {p for p in set(live_sums) | set(replay_sums) if live_sums.get(p) != replay_sums.get(p)}
    )
    assert live == replay
    duplicated = {event_id: count for event_id, count in analysed.items() if count > 1}
    print(f"duplicate analyses among the committed records: {sum(c - 1 for c in duplicated.values())}")
    assert duplicated == {}, await _duplicates_explained(log, settings, set(duplicated), tmp_path)
    return live_sums, sum(c - 1 for c in analysed.values())


@pytest.mark.kafka
async def test_a_group_of_workers_survives_a_killed_member_and_a_new_one(
    settings: Settings, kafka_bootstrap: str, workers: Workers, tmp_path: Path
) -> None:
    settings = dataclasses.replace(settings, partitions=PARTITIONS)
    messages = _messages(settings)
    rounds = [messages[n * OWNERS : (n + 1) * OWNERS] for n in range(PER_OWNER)]  # one message per owner each
    first, second, later = _flat(rounds[:7]), _flat(rounds[7:10]), rounds[10:]
    store = tmp_path / "live"
    log = KafkaLog(kafka_bootstrap, settings)
    await log.start()
    try:
        await publish_messages(log, first, settings)
        procs = [workers.start(kafka_bootstrap, settings, store, tmp_path / f"worker-{n}.log") for n in range(3)]
        pids = {p.pid for p in procs}
        t0 = time.monotonic()
        # The group is formed once all three write shards (each claimed some of the 12 partitions).
        await _until(lambda: {_pid_of(w) for _, w in _writers(store).values()} >= pids, 180, "three shard owners")
        print(f"{time.monotonic() - t0:6.1f}s three workers own shards: {sorted(_writers(store).items())}")
        victim = procs[1]
        # Kill it mid-batch: wait (a while at most) until one of its shards is inside a commit.
        deadline = time.monotonic() + 20
        mine = {p for p, (_, w) in _writers(store).items() if _pid_of(w) == victim.pid}
        while time.monotonic() < deadline and not any(
            t.startswith(f"p{p}/") for t in _ahead_of_checkpoint(store) for p in mine
        ):
            await asyncio.sleep(0.005)
        Workers.kill(victim)
        killed_at = time.monotonic()
        before: Progress = await _progress(log, settings, store)
        held = {p: ew for p, ew in _writers(store).items() if _pid_of(ew[1]) == victim.pid}
        print(f"killed worker {victim.pid} holding shards {sorted(held)}; progress {before}")
        assert held, "the killed worker owned shards"
        await publish_messages(log, second, settings)  # work for every partition after the kill

        def taken_over() -> bool:
            now = _writers(store)
            return all(
                now[p][0] > epoch and _pid_of(now[p][1]) in pids - {victim.pid} for p, (epoch, _) in held.items()
            )

        recovered = await _until(taken_over, 120, "the killed worker's shards were not taken over")
        print(f"recovery: the killed worker's {len(held)} shards claimed by the others {recovered:.1f}s after SIGKILL")
        joined = workers.start(kafka_bootstrap, settings, store, tmp_path / "worker-3.log")
        joined_at = time.monotonic()
        # The rest arrives in rounds while the new member joins, until it owns shards (or all is sent).
        for n, wave in enumerate(later):
            await publish_messages(log, wave, settings)
            try:
                await _until(lambda: any(_pid_of(w) == joined.pid for _, w in _writers(store).values()), 20, "")
                await publish_messages(log, _flat(later[n + 1 :]), settings)
                break
            except AssertionError:
                continue
        final = await _wait_for(log, settings, store, lambda p: p.done, 240, "the group did not catch up")
        print(f"{time.monotonic() - killed_at:6.1f}s after the kill: caught up {final}")
        owners_now = _writers(store)
        print(f"shard writers at the end: {sorted(owners_now.items())}")
        joined_owns = sum(1 for _, w in owners_now.values() if _pid_of(w) == joined.pid)
        assert joined_owns >= 1, "the worker that joined later took over no shard"
        workers.stop_all()
        sums, duplicated = await _check_final(log, settings, store, tmp_path, messages)
    finally:
        await log.stop()
    print(f"joined worker {joined.pid} started {joined_at - killed_at:.1f}s after the kill, owns {joined_owns} shards")
    print(f"per-shard checksums equal the uninterrupted fold: {len(sums)} shards; duplicated analyses: {duplicated}")


@pytest.mark.kafka
async def test_a_paused_worker_that_lost_its_shards_cannot_commit_to_them(
    settings: Settings, kafka_bootstrap: str, workers: Workers, tmp_path: Path
) -> None:
    settings = dataclasses.replace(settings, partitions=PARTITIONS)
    messages = _messages(settings)
    first, second = messages[: len(messages) // 2], messages[len(messages) // 2 :]
    store = tmp_path / "live"
    log = KafkaLog(kafka_bootstrap, settings)
    await log.start()
    try:
        await publish_messages(log, first, settings)
        paused = workers.start(kafka_bootstrap, settings, store, tmp_path / "worker-paused.log")
        await _until(lambda: len(_writers(store)) >= PARTITIONS // 2, 180, "the first worker wrote too little")
        # Pause it inside a commit (tables written, checkpoint not yet) if we can catch one.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _ahead_of_checkpoint(store):
            await asyncio.sleep(0.005)
        os.killpg(paused.pid, signal.SIGSTOP)
        torn = _ahead_of_checkpoint(store)
        held = dict(_writers(store))
        print(f"paused worker {paused.pid}; shards {sorted(held)}; inside a commit: {torn or 'none'}")
        await publish_messages(log, second, settings)
        other = workers.start(kafka_bootstrap, settings, store, tmp_path / "worker-other.log")
        try:

            def moved() -> bool:
                now = _writers(store)
                return all(now[p][0] > e and _pid_of(now[p][1]) == other.pid for p, (e, _) in held.items())

            t_moved = await _until(moved, 120, "the paused worker's shards did not move")
            print(f"the paused worker's shards were claimed by {other.pid} after {t_moved:.1f}s")
        finally:
            os.killpg(paused.pid, signal.SIGCONT)
        final = await _wait_for(log, settings, store, lambda p: p.done, 240, "the workers did not catch up")
        print(f"caught up: {final}; shard writers {sorted(_writers(store).items())}")
        workers.stop_all()
        sums, duplicated = await _check_final(log, settings, store, tmp_path, messages)
    finally:
        await log.stop()
    woke = (tmp_path / "worker-paused.log").read_text(errors="replace")
    # Its commit is refused either way: it gives the batch up, or (when the rebalance that followed its wake-up
    # handed the partition back to it) it claims the shard anew and folds the batch again.
    refused = woke.count("gave up a batch") + woke.count("commit refused while this worker holds the partition")
    rolled = (tmp_path / "worker-other.log").read_text(errors="replace").count("rolling back")
    fenced = woke.count("transaction refused") + woke.count("was revoked: its new owner analyses")
    print(f"woken worker: {refused} commit(s) refused as fenced; new owner rolled back {rolled} late table write(s)")
    print(f"woken worker: {fenced} analyses transaction(s) refused or given up for a partition it lost")
    print(f"per-shard checksums equal the uninterrupted fold: {len(sums)} shards; duplicated analyses: {duplicated}")
    if torn:  # it was paused between its table writes and its checkpoint: that checkpoint had to be refused
        assert refused >= 1, "the woken worker's commit was not refused"
