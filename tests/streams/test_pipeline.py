"""The in-process write path: analyze, forward control events, project, dead-letter, resume."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.events import MemoryForgotten
from adamem.ingest import load_messages
from adamem.partitioning import partition_for
from adamem.projections.folds.rows import Row
from adamem.projections.projector import Projector
from adamem.projections.store import MemoryStore
from adamem.projections.store.factory import open_store
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import EventLog, OutgoingRecord
from adamem.streams.pipeline import ERROR_HEADER, PROGRESS_BATCH, project_pending, run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.resume import SOURCE_HEADER
from tests.conftest import FlatEmbedder

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


def agent() -> MemoryAgent:
    return MemoryAgent(RuleExtractor(), _embedder())


def snapshot(store: MemoryStore) -> dict[str, list[Row]]:
    return {owner: sorted(store.load_owner(owner), key=lambda r: (r.TABLE, r.id)) for owner in store.owners()}


async def _log(settings: Settings, name: str = "log") -> EventLog:
    log = open_log(str(Path(settings.log_url).parent / name), settings)
    await log.start()
    return log


async def test_sample_builds_all_four_layers(settings: Settings, tmp_path: Path) -> None:
    log = await _log(settings)
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    store = open_store(str(tmp_path / "store"))
    stats = await run_pipeline(log, Projector(store), agent(), settings)
    assert (stats.analyzed, stats.applied, stats.dead_lettered) == (29, 29, 0)
    tables = {r.TABLE for r in store.load_owner("default:alice")}
    assert tables == {"owners", "messages", "episodic", "persona", "graph_nodes", "graph_edges"}
    facts = [r.content for r in store.rows("episodic", "default:xiaoming") if r.type == "fact"]  # type: ignore[union-attr]
    assert any("北京" in f for f in facts)
    await log.stop()


async def test_running_again_or_republishing_changes_nothing(settings: Settings, tmp_path: Path) -> None:
    log = await _log(settings)
    messages = load_messages(SAMPLE, settings)
    await publish_messages(log, messages, settings)
    store = open_store(str(tmp_path / "store"))
    await run_pipeline(log, Projector(store), agent(), settings)
    before = snapshot(store)
    again = await run_pipeline(log, Projector(store), agent(), settings)
    assert (again.analyzed, again.applied) == (0, 0)
    await publish_messages(log, messages, settings)  # the same file published twice
    dup = await run_pipeline(log, Projector(store), agent(), settings)
    assert dup.analyzed == 29 and dup.applied == 29  # delivered again, recognised by event id
    assert snapshot(store) == before
    await log.stop()


async def test_garbage_goes_to_the_dead_letter_topic_and_the_stream_goes_on(settings: Settings, tmp_path: Path) -> None:
    log = await _log(settings)
    messages = load_messages(SAMPLE, settings)[:6]
    topic = settings.topic("messages")
    await publish_messages(log, messages[:3], settings)
    await log.append(
        topic, [OutgoingRecord("alice", b"\xc3\x01garbage"), OutgoingRecord("alice", b"not avro at all, just text")]
    )
    await publish_messages(log, messages[3:], settings)
    store = open_store(str(tmp_path / "store"))
    stats = await run_pipeline(log, Projector(store), agent(), settings)
    assert (stats.analyzed, stats.dead_lettered) == (6, 2)
    assert len(store.rows("messages", "default:alice")) == 6
    dead = [r async for r in log.read(settings.topic("deadletter"))]
    assert [r.value for r in dead] == [b"\xc3\x01garbage", b"not avro at all, just text"]
    headers = [dict(r.headers) for r in dead]
    assert headers[0][SOURCE_HEADER] == f"{topic}:{partition_for('alice', 2)}:3".encode()
    assert b"DecodeError" in headers[0][ERROR_HEADER] and b"marker" in headers[1][ERROR_HEADER]
    await log.stop()


async def test_replay_equals_live(settings: Settings, tmp_path: Path) -> None:
    """Live: publish in chunks and project after each. Replay: fold the recorded log once."""
    log = await _log(settings)
    messages = load_messages(SAMPLE, settings)
    live = open_store(str(tmp_path / "live"))
    for chunk in (messages[:7], messages[7:20], messages[20:]):
        await publish_messages(log, chunk, settings)
        await run_pipeline(log, Projector(live), agent(), settings)
    forget = MemoryForgotten(
        "6f1c9a10-0000-4000-8000-000000000001", "alice", "message", 1_713_300_000_000, messages[3].event_id
    )
    await log.append(settings.topic("control"), [OutgoingRecord("alice", encode_event(forget))])
    stats = await run_pipeline(log, Projector(live), agent(), settings)
    assert stats.forwarded == 1
    replayed = open_store(str(tmp_path / "replay"))
    await run_pipeline(log, Projector(replayed), agent(), settings)  # analyses are recorded: nothing new
    assert snapshot(replayed) == snapshot(live)
    assert all(messages[3].event_id not in r.id for r in live.rows("messages", "default:alice"))
    await log.stop()


async def test_a_view_switched_to_between_batches_is_followed_at_the_next_batch_and_misses_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    """A rebuild switches to its view (behind the live fold) while a pass folds a partition batch by batch: the
    batch under way commits in the view it began in, and the next batch folds the new view on from its own
    checkpoint, so the pass ends with the new view caught up and the old one where the switch left it."""
    from adamem.projections.store.lance import LanceStore
    from adamem.streams.keys import keystore_for
    from adamem.streams.step import decode_analysis

    log = await _log(settings)
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    reference = open_store(str(tmp_path / "ref"))
    await run_pipeline(log, Projector(reference), agent(), settings)  # analyses every message once, on the log
    analyses = settings.topic("analyses")
    partitions = log.partitions(analyses)
    ends = await log.end_offsets(analyses)
    p = max(range(partitions), key=lambda n: ends.get(n, 0))
    root = str(tmp_path / "live")
    rebuilt = LanceStore(root).open_view("rebuilt")
    rebuilt.bind(partitions)
    keys = keystore_for(log, settings)
    first = [decode_analysis(r, keys) async for r in log.read(analyses, from_offsets={p: 0}, until={p: 2})]
    Projector(rebuilt).apply_batch(p, analyses, [r for r in first if not isinstance(r, str)])  # caught up to 2
    rebuilt.close()
    live = open_store(root)
    live.bind(partitions)
    projector = Projector(live)
    switched: list[int] = []

    def switch_once(done: int) -> None:
        if not switched:
            switched.append(done)
            LanceStore(root).switch_view("rebuilt")

    stats = await project_pending(log, projector, settings, p, batch=3, progress=switch_once)
    assert switched == [3] and ends[p] > 3
    assert live.view == "rebuilt" and live.checkpoint(p) == {analyses: ends[p]}
    assert stats.applied + stats.skipped == ends[p] - 2 + 3  # offsets 0-2 in the old view, then 2 on in the new one
    owners = {r.event.owner_id for r in first if not isinstance(r, str)}
    assert owners and all(partition_for(o.partition(":")[2], partitions) == p for o in owners)
    view = LanceStore(root, read_only=True)
    expected = {o: rows for o, rows in snapshot(reference).items() if o in set(view.owners())}
    assert set(expected) >= owners and snapshot(view) == expected
    old = LanceStore(root, view="main", read_only=True)  # left by the pass at the switch
    assert old.checkpoint(p) == {analyses: 3}
    assert (await project_pending(log, projector, settings, p)).applied == 0  # nothing left for the next pass
    await log.stop()


async def test_a_crash_mid_batch_loses_and_duplicates_nothing(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = await _log(settings)
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    reference = open_store(str(tmp_path / "ref"))
    await run_pipeline(log, Projector(reference), agent(), settings)

    crashing = open_store(str(tmp_path / "crash"))
    real_commit = crashing.commit
    calls = {"n": 0}

    def commit_then_crash(partition: int, changes: list[object], offsets: dict[str, int]) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("simulated crash during a commit")
        real_commit(partition, changes, offsets)  # type: ignore[arg-type]

    monkeypatch.setattr(crashing, "commit", commit_then_crash)
    projector = Projector(crashing)
    crashing.bind(log.partitions(settings.topic("analyses")))
    with pytest.raises(OSError, match="simulated crash"):
        for p in range(log.partitions(settings.topic("analyses"))):
            await project_pending(log, projector, settings, p, batch=7)
    monkeypatch.undo()
    crashing.close()
    restarted = open_store(str(tmp_path / "crash"))
    await run_pipeline(log, Projector(restarted), agent(), settings)
    assert snapshot(restarted) == snapshot(reference)
    await log.stop()


async def test_a_progress_bar_moves_every_few_dozen_messages(settings: Settings, tmp_path: Path) -> None:
    """Not once per 256 (half a minute of e5 on a busy machine): every ``PROGRESS_BATCH`` analysed, then as folded."""
    log = await _log(settings)
    rows = "\n".join(
        json.dumps({"user_id": "u", "speaker": "U", "text": f"I like hiking number {i}", "occurred_at": 1000 + i})
        for i in range(100)
    )
    await publish_messages(log, load_messages(rows.encode(), settings), settings)
    steps: list[int] = []
    agent = MemoryAgent(RuleExtractor(), FlatEmbedder())
    stats = await run_pipeline(
        log, Projector(open_store(str(tmp_path / "store"))), agent, settings, progress=steps.append
    )
    assert stats.analyzed == 100 and sum(steps) == 200
    assert steps[:4] == [PROGRESS_BATCH] * 3 + [100 - 3 * PROGRESS_BATCH], steps  # the analyses, batch by batch
    await log.stop()
