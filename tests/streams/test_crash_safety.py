"""Crash safety of the real worker process on a real broker.

* The worker is SIGKILLed at seeded pseudo-random points while it ingests two LoCoMo
  conversations (and control events published mid-ingest), and restarted each time.
* A private broker (its own home and ports, never the shared one) is stopped and started again
  while one worker process keeps running; the worker must recover by itself.

Either way the projections must equal an uninterrupted fold of the recorded analyses, and every
published message must be archived exactly once. Outcomes are deterministic; only timing varies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import lancedb
import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.events import ChatMessage, MemoryCorrected, MemoryForgotten, MessageAnalyzed
from adamem.ingest import load_messages, parse_locomo
from adamem.projections.folds.rows import TABLES, EpisodicRow, MessageRow, Row
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.projections.store.lance import LanceStore
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams.kafka_log import KafkaLog
from adamem.streams.log import OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.resume import SOURCE_HEADER
from tests.conftest import LOCOMO, REPO

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
# With 8 partitions the four owners live on four different partitions (conv-26: 6, conv-30: 2,
# alice: 5, xiaoming: 1), so kills interrupt several shards' commits.
PARTITIONS = 8
# Small micro-batches: more commit points to land a kill between, and less work lost per kill.
WORKER_BATCH = 32
SESSION_TIMEOUT_S = 10
SEED = 20_240_611
CORRECTED = "crash-safety: corrected content"


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


def _agent() -> MemoryAgent:
    return MemoryAgent(RuleExtractor(), _embedder())


def _snapshot(store: Any) -> dict[str, list[Row]]:
    return {o: sorted(store.load_owner(o), key=lambda r: (r.TABLE, r.id)) for o in store.owners()}


def _locomo(settings: Settings, sample: int, first: int) -> list[ChatMessage]:
    """The first messages of one LoCoMo conversation (several sessions: session ends consolidate)."""
    return parse_locomo(json.loads(LOCOMO.read_text())[sample], settings)[:first]


# ---- worker processes ---------------------------------------------------------------------------


class Workers:
    """Worker processes of one test, each in a session of its own (killed by its own pid only)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, bootstrap: str, settings: Settings, store: Path, log_file: Path) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "ADAMEM_LOG": f"kafka://{bootstrap}",
            "ADAMEM_TOPIC_PREFIX": settings.topic_prefix,
            "ADAMEM_PARTITIONS": str(settings.partitions),
            "ADAMEM_WORKER_BATCH": str(WORKER_BATCH),
            # Faust's default (60 s) keeps a SIGKILLed member in the group, holding every partition,
            # for a minute: each restart would wait that long to join.
            "ADAMEM_WORKER_SESSION_TIMEOUT": str(SESSION_TIMEOUT_S),
            # e5, as this module's own agent (``_agent``): the replay it is compared with folds the recorded
            # analyses, and e5 alone keeps a worker's analysis as fast as the group's deadlines were set for.
            "ADAMEM_EMBEDDER": "e5",
        }
        exe = Path(sys.executable).with_name("adamem")
        with log_file.open("ab") as out:
            proc = subprocess.Popen(
                # --verbose: Faust's log into log_file, which the tests read (else it goes to worker-<pid>.log)
                [str(exe), "worker", "--store", str(store), "--loglevel", "info", "--verbose"],
                env=env,
                cwd=self.tmp_path,  # Faust's app directory (<app id>-data) goes here, not into the repo
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker's own process group (its session, led by its pid)."""
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    @staticmethod
    def stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                Workers.kill(proc)

    def stop_all(self) -> None:
        for proc in self.procs:
            self.stop(proc)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    w = Workers(tmp_path)
    yield w
    w.stop_all()


# ---- progress of the worker, read from the log and the store ------------------------------------


@dataclasses.dataclass(frozen=True)
class Progress:
    analyses: int  # records on the analyses topic (duplicates from re-analysis included)
    projected: int  # sum over shards of the checkpointed analyses offsets
    done: bool  # every input analyzed and every analysis projected


async def _analyzed_upto(
    log: KafkaLog, settings: Settings, until: dict[int, int] | None = None
) -> dict[tuple[str, int], int]:
    """Next input offset per (input topic, partition) that the source headers of the analyses below
    ``until`` (default: the end now) account for."""
    upto: dict[tuple[str, int], int] = {}
    async for rec in log.read(settings.topic("analyses"), until=until):
        for name, value in rec.headers:
            if name == SOURCE_HEADER:
                topic, partition, offset = value.decode().rsplit(":", 2)
                key = (topic, int(partition))
                upto[key] = max(upto.get(key, 0), int(offset) + 1)
    return upto


async def _progress(log: KafkaLog, settings: Settings, store: Path) -> Progress:
    analyses_topic = settings.topic("analyses")
    ends = await log.end_offsets(analyses_topic)
    last: Exception | None = None
    for _ in range(150):
        try:
            reader = LanceStore(str(store), read_only=True)
            projected = {p: reader.checkpoint(p).get(analyses_topic, 0) for p in ends}
            break
        except ValueError as exc:  # "Table ... was not found": the worker is creating it (no manifest yet)
            last = exc
            await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the store {store} stayed unreadable: {last}")
    inputs = {
        (settings.topic(t), p): end
        for t in ("messages", "control")
        for p, end in (await log.end_offsets(settings.topic(t))).items()
    }
    # Every input gives at least one analysis: only then is it worth reading all the source headers.
    done = projected == ends and sum(ends.values()) >= sum(inputs.values())
    if done:
        # Only the analyses the checkpoints were compared with: a transaction committed since adds
        # analyses beyond them, which its inputs would count as done before they are projected (the
        # check said "done" with the last 8 messages of conv-30 still to fold, and the test failed).
        upto = await _analyzed_upto(log, settings, until=ends)
        done = all(upto.get(key, 0) == end for key, end in inputs.items())
    return Progress(sum(ends.values()), sum(projected.values()), done)


async def _wait_for(log: KafkaLog, settings: Settings, store: Path, until: Any, timeout: float, what: str) -> Progress:
    deadline = time.monotonic() + timeout
    while True:
        progress = await _progress(log, settings, store)
        if until(progress):
            return progress
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout}s ({progress})")
        await asyncio.sleep(0.5)


def _ahead_of_checkpoint(store: Path) -> list[str]:
    """Tables whose version is past what their shard's checkpoint recorded (diagnostics only).

    After a kill this means the kill landed inside a commit (or after a compaction that the
    checkpoint does not record); the next writer restores them to the checkpoint.
    """
    ahead = []
    for shard in sorted(LanceStore(str(store), read_only=True).dir.glob("p*")):
        db = lancedb.connect(str(shard))
        names = set(db.list_tables(limit=1000).tables)
        try:
            if "checkpoints" not in names:
                ahead += [f"{shard.name}/{n}" for n in sorted(names)]
                continue
            rows = db.open_table("checkpoints").to_arrow().to_pylist()
            versions = json.loads(rows[0]["versions"]) if rows else {}
            for name in sorted(names & set(TABLES)):
                version = db.open_table(name).version
                if version != versions.get(name):
                    ahead.append(f"{shard.name}/{name}@{versions.get(name)}->{version}")
        except ValueError:  # a table being created (no manifest yet): that is mid-commit too
            ahead.append(f"{shard.name}: a table is being created")
    return ahead


async def _run_for(
    log: KafkaLog, settings: Settings, store: Path, seconds: float, max_analyses: int, *, torn: bool
) -> None:
    """Let the worker run for ``seconds``, or until the analyses topic holds ``max_analyses`` records.

    With ``torn``, then wait (at most 30 s more) until some shard is seen in the middle of a
    commit, its tables written and its checkpoint not yet: a kill now tears that commit.
    """
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if (await _progress(log, settings, store)).analyses >= max_analyses:
            break
        await asyncio.sleep(min(0.25, left))
    deadline = time.monotonic() + 30
    while torn and not _ahead_of_checkpoint(store) and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


async def _published_analyses(log: KafkaLog, settings: Settings) -> Counter[str]:
    """How many analyses each message (by event id) has on the analyses topic."""
    counts: Counter[str] = Counter()
    async for rec in log.read(settings.topic("analyses")):
        event = decode_event(rec.value)
        if isinstance(event, MessageAnalyzed):
            counts[event.message.event_id] += 1
    return counts


async def _replay(log: KafkaLog, settings: Settings, path: Path) -> dict[str, list[Row]]:
    """The uninterrupted fold of the recorded analyses into a fresh store; nothing is left to analyze."""
    store = open_store(str(path))
    stats = await run_pipeline(log, Projector(store), _agent(), settings)
    assert (stats.analyzed, stats.forwarded, stats.dead_lettered) == (0, 0, 0), stats
    return _snapshot(store)


def _archive(snapshot: dict[str, list[Row]]) -> list[str]:
    return sorted(r.id for rows in snapshot.values() for r in rows if r.TABLE == "messages")


def _missing(live: dict[str, list[Row]], messages: list[ChatMessage], expected: list[str], tmp_path: Path) -> str:
    """Which messages the live archive lacks or holds extra, by owner, and what the workers logged of their shards."""
    archived = _archive(live)
    owner_of = {m.event_id: m.owner_id for m in messages}
    lacking = Counter(owner_of.get(i, "?") for i in sorted(set(expected) - set(archived)))
    extra = Counter(owner_of.get(i, "?") for i in sorted(set(archived) - set(expected)))
    dupes = sum(c - 1 for c in Counter(archived).values())
    lines = [f"archive lacks {dict(lacking)}, holds extra {dict(extra)}, {dupes} duplicate(s)"]
    for log_file in sorted(tmp_path.glob("worker-*.log")):
        for line in log_file.read_text(errors="replace").splitlines():
            if any(w in line for w in ("WARNING", "ERROR", "rebuil", "gap", "removing", "rolling back")):
                lines.append(f"{log_file.name}: {line[:300]}")
    return "\n".join(lines[:200])


# ---- 1. SIGKILL at random points, restart, finish ------------------------------------------------


def _control_events(live: LanceStore, messages: list[ChatMessage]) -> list[MemoryForgotten | MemoryCorrected] | None:
    """Forget one archived message of alice and of conv-26, correct one of alice's active records.

    Only once every alice message and some conv-26 messages are projected: then the control
    events land on the analyses topic after the analyses they act on, whatever the timing.
    """
    alice = [m for m in messages if m.user_id == "alice"]
    try:
        archived = {r.id for r in live.rows("messages", "default:alice")}
        conv26 = [r for r in live.rows("messages", "default:conv-26") if isinstance(r, MessageRow)]
        records = [
            r for r in live.rows("episodic", "default:alice") if isinstance(r, EpisodicRow) and r.status == "active"
        ]
    except ValueError:  # a table the worker is creating right now: ask again later
        return None
    conv26.sort(key=lambda r: r.seq)
    if len(archived) < len(alice) or len(conv26) < 10 or not records:
        return None
    record = records[0]
    forget_alice = next(m for m in alice if m.event_id not in record.source_message_ids)
    now = max(m.occurred_at for m in messages) + 1000
    return [
        MemoryForgotten(str(uuid.uuid4()), "alice", "message", now, target_id=forget_alice.event_id),
        MemoryCorrected(str(uuid.uuid4()), "alice", record.id, CORRECTED, now + 1),
        MemoryForgotten(str(uuid.uuid4()), "conv-26", "message", now, target_id=conv26[3].id),
    ]


@pytest.mark.kafka
async def test_sigkilled_worker_restarts_to_the_uninterrupted_fold(
    settings: Settings, kafka_bootstrap: str, workers: Workers, tmp_path: Path
) -> None:
    settings = dataclasses.replace(settings, partitions=PARTITIONS)
    # Two LoCoMo conversations (conv-26, conv-30; 340 of their ~400 turns each) and the sample.
    messages = _locomo(settings, 0, 340) + _locomo(settings, 1, 340) + load_messages(SAMPLE, settings)
    assert len(messages) > 700
    log = KafkaLog(kafka_bootstrap, settings)
    await log.start()
    try:
        await publish_messages(log, messages, settings)
        store = tmp_path / "live"
        t0 = time.monotonic()
        rng = random.Random(SEED)
        delays = [rng.uniform(2.0, 8.0) for _ in range(rng.randint(3, 4))]
        controls: list[MemoryForgotten | MemoryCorrected] | None = None
        at_kill: list[Progress] = []
        torn: list[list[str]] = []  # per kill, the tables a kill left ahead of their shard's checkpoint
        for n, delay in enumerate(delays):
            before = await _progress(log, settings, store)
            proc = workers.start(kafka_bootstrap, settings, store, tmp_path / f"worker-{n}.log")
            # This incarnation is at work (model loaded, partitions assigned) once the log or store moves.
            progress = await _wait_for(
                log,
                settings,
                store,
                lambda p, b=before: p.done or p.analyses > b.analyses or p.projected > b.projected,
                240,
                f"worker incarnation {n} made no progress",
            )
            if progress.done:
                break
            print(f"{time.monotonic() - t0:6.1f}s incarnation {n} at work: {progress}")
            # Kill after the drawn delay, or earlier on a fast machine, so work is left for the next.
            # Every other kill aims at the middle of a store commit.
            await _run_for(log, settings, store, delay, progress.analyses + len(messages) // 6, torn=n % 2 == 1)
            Workers.kill(proc)
            at_kill.append(await _progress(log, settings, store))
            print(f"{time.monotonic() - t0:6.1f}s killed incarnation {n}: {at_kill[-1]}")
            torn.append(_ahead_of_checkpoint(store))
            print(f"        tables ahead of their checkpoint: {torn[-1] or 'none'}")
            if controls is None:
                controls = _control_events(LanceStore(str(store), read_only=True), messages)
                if controls is not None:  # mid-ingest, between two incarnations
                    await log.append(
                        settings.topic("control"), [OutgoingRecord(c.user_id, encode_event(c)) for c in controls]
                    )

        workers.start(kafka_bootstrap, settings, store, tmp_path / "worker-final.log")
        if controls is None:
            await _wait_for(
                log,
                settings,
                store,
                lambda p: _control_events(LanceStore(str(store), read_only=True), messages) is not None,
                240,
                "alice and conv-26 were not projected",
            )
            controls = _control_events(LanceStore(str(store), read_only=True), messages)
            assert controls is not None
            await log.append(settings.topic("control"), [OutgoingRecord(c.user_id, encode_event(c)) for c in controls])
        final = await _wait_for(log, settings, store, lambda p: p.done, 300, "the worker did not catch up")
        print(f"{time.monotonic() - t0:6.1f}s caught up")
        workers.stop_all()

        live = _snapshot(LanceStore(str(store), read_only=True))
        replay = await _replay(log, settings, tmp_path / "replay")
        print(f"{time.monotonic() - t0:6.1f}s replayed")
        analysed = await _published_analyses(log, settings)
    finally:
        await log.stop()

    print(f"kills at (analyses, projected): {[(p.analyses, p.projected) for p in at_kill]}; final {final}")
    print(f"duplicated analyses (re-analysed after a kill): {sum(c - 1 for c in analysed.values())}")
    print(f"kills that tore a commit: {sum(1 for t in torn if t)} of {len(torn)}")
    # Kills landed mid-way: with analyses recorded and projected, but not all of them.
    assert len(at_kill) >= 3
    assert 0 < at_kill[-1].projected < final.analyses  # the store the final incarnation started from
    assert any(0 < p.analyses < len(messages) for p in at_kill)
    # Nothing lost: every message was analysed (at least once) and is archived exactly once,
    # except the two forgotten ones.
    assert set(analysed) == {m.event_id for m in messages}
    forgotten = {c.target_id for c in controls if isinstance(c, MemoryForgotten)}
    assert len(forgotten) == 2
    expected = sorted(m.event_id for m in messages if m.event_id not in forgotten)
    assert _archive(live) == expected, _missing(live, messages, expected, tmp_path)
    corrected = [r for r in live["default:alice"] if isinstance(r, EpisodicRow) and r.content == CORRECTED]
    assert len(corrected) == 1 and corrected[0].status == "active"
    # The projections equal the uninterrupted fold of the same recorded analyses.
    assert live == replay
    assert sum(len(rows) for rows in live.values()) > 2000


# ---- 2. the broker goes away and comes back under a running worker ------------------------------


def _free_port_pair() -> tuple[int, int]:
    """Two free adjacent ports below the ephemeral range, so that no client connection takes one
    of them as its local port while the broker is down (it must come back on the same port)."""

    def free(port: int) -> bool:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True

    first = 19_092 + 2 * random.randrange(500)  # parallel runs seldom try the same pair
    for port in [*range(first, 20_092, 2), *range(19_092, first, 2)]:
        if free(port) and free(port + 1):
            return port, port + 1
    raise AssertionError("no two free adjacent ports in 19092-20093 for a private broker")


class PrivateBroker:
    """A broker of this test only, run by deploy/kafka.sh in its own home on free ports."""

    def __init__(self, home: Path) -> None:
        port, controller = _free_port_pair()
        self.bootstrap = f"127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "ADAMEM_KAFKA_HOME": str(home),
            "ADAMEM_KAFKA_PORT": str(port),
            "ADAMEM_KAFKA_CONTROLLER_PORT": str(controller),
        }

    def _run(self, command: str) -> None:
        subprocess.run(["bash", str(REPO / "deploy" / "kafka.sh"), command], env=self.env, check=True, timeout=300)

    def start(self) -> None:
        self._run("start")

    def stop(self) -> None:
        self._run("stop")


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[PrivateBroker]:
    broker = PrivateBroker(tmp_path / "kafka")
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.mark.kafka
async def test_worker_recovers_by_itself_when_the_broker_restarts(
    settings: Settings, private_broker: PrivateBroker, workers: Workers, tmp_path: Path
) -> None:
    bootstrap = private_broker.bootstrap
    settings = dataclasses.replace(settings, partitions=PARTITIONS)
    messages = _locomo(settings, 1, 400) + load_messages(SAMPLE, settings)  # conv-30, alice, xiaoming
    half = len(messages) // 2
    store = tmp_path / "live"
    log = KafkaLog(bootstrap, settings)
    await log.start()
    try:
        await publish_messages(log, messages[:half], settings)
        proc = workers.start(bootstrap, settings, store, tmp_path / "worker.log")
        await _wait_for(log, settings, store, lambda p: p.projected > 0, 240, "the worker made no progress")
    finally:
        await log.stop()

    private_broker.stop()
    reader = LanceStore(str(store), read_only=True)
    stopped_at = sum(reader.checkpoint(p).get(settings.topic("analyses"), 0) for p in range(PARTITIONS))
    assert stopped_at < half, "the broker went away in the middle of the first half"
    await asyncio.sleep(5)  # the worker runs on without a broker (longer than its session timeout, all told)
    assert proc.poll() is None, "the worker died while the broker was down"
    private_broker.start()

    log = KafkaLog(bootstrap, settings)
    await log.start()
    try:
        await publish_messages(log, messages[half:], settings)
        final = await _wait_for(log, settings, store, lambda p: p.done, 300, "the worker did not recover")
        assert proc.poll() is None and workers.procs == [proc], "the same worker process did all the work"
        workers.stop_all()
        live = _snapshot(LanceStore(str(store), read_only=True))
        replay = await _replay(log, settings, tmp_path / "replay")
        analysed = await _published_analyses(log, settings)
    finally:
        await log.stop()

    print(
        f"broker stopped with {stopped_at} analyses projected; final {final}; "
        f"duplicated analyses: {sum(c - 1 for c in analysed.values())}"
    )
    assert set(analysed) == {m.event_id for m in messages}
    assert _archive(live) == sorted(m.event_id for m in messages)
    assert live == replay
