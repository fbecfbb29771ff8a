"""The change feed on the log: published after each commit, recovered after a crash, recomputed by a replay."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from adamem.events import MemoryForgotten
from adamem.feed import MemoryChanged
from adamem.ingest import load_messages
from adamem.partitioning import partition_for
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.schemas.serde import decode_as, encode_event
from adamem.settings import Settings
from adamem.streams import feed as feed_module
from adamem.streams.feed import compute_feed, published_upto
from adamem.streams.log import EventLog, OutgoingRecord
from adamem.streams.memory_log import InMemoryLog
from adamem.streams.pipeline import project_pending, run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.replay import rebuild_view
from adamem.streams.worker import create_app
from tests.streams.test_pipeline import SAMPLE, _log, agent
from tests.streams.test_worker import _capture, assign_analyses, faust_apps  # noqa: F401  (a fixture)


async def published(log: EventLog, settings: Settings) -> list[tuple[int, str, MemoryChanged]]:
    """Every record of the changes topic: (partition, key, decoded event), in log order per partition."""
    topic = settings.topic("changes")
    return [
        (rec.partition, rec.key, decode_as(rec.value, MemoryChanged))
        async for rec in log.read(topic, from_offsets=dict.fromkeys(range(log.partitions(topic)), 0))
    ]


async def recomputed(log: EventLog, settings: Settings, view: str = "") -> list[MemoryChanged]:
    return [
        e
        for p in range(log.partitions(settings.topic("analyses")))
        for e in await compute_feed(log, settings, p, view=view)
    ]


async def test_the_pipeline_publishes_every_committed_change_keyed_and_co_partitioned(
    settings: Settings, tmp_path: Path
) -> None:
    log = await _log(settings)
    messages = load_messages(SAMPLE, settings)
    store = open_store(str(tmp_path / "store"))
    for chunk in (messages[:10], messages[10:]):  # two passes: the feed continues, nothing twice
        await publish_messages(log, chunk, settings)
        await run_pipeline(log, Projector(store), agent(), settings)
    records = await published(log, settings)
    assert records, "nothing was published"
    for partition, key, event in records:
        assert key == event.user_id and partition == partition_for(key, log.partitions(settings.topic("changes")))
        assert event.source_partition == partition and event.source_topic == settings.topic("analyses")
    ids = [e.event_id for _, _, e in records]
    assert len(ids) == len(set(ids))
    # every archived message was reported added exactly once, under its owner
    added = Counter(
        (e.owner_id, c.item_id) for _, _, e in records for c in e.changes if (c.layer, c.kind) == ("messages", "added")
    )
    archived = {(o, r.id) for o in store.owners() for r in store.rows("messages", o)}
    assert set(added) == archived and set(added.values()) == {1}
    # the feed says how far it is published: the store's checkpoint
    for p in range(log.partitions(settings.topic("analyses"))):
        done = store.checkpoint(p).get(settings.topic("analyses"))
        assert await published_upto(log, settings, p) == done  # None: a partition without owners
    await log.stop()


async def test_replay_computes_the_live_feed_apart_from_the_view(settings: Settings, tmp_path: Path) -> None:
    log = await _log(settings)
    messages = load_messages(SAMPLE, settings)
    root = str(tmp_path / "store")
    for chunk in (messages[:7], messages[7:20], messages[20:]):
        await publish_messages(log, chunk, settings)
        await run_pipeline(log, Projector(open_store(root)), agent(), settings)
    forget = MemoryForgotten("6f1c9a10-0000-4000-8000-000000000002", "alice", "item", 1_713_300_000_000, "no-such")
    await log.append(settings.topic("control"), [OutgoingRecord("alice", encode_event(forget))])
    await run_pipeline(log, Projector(open_store(root)), agent(), settings)
    live = [e for _, _, e in await published(log, settings)]
    live_view = {e.view for e in live}
    assert len(live_view) == 1
    report = await rebuild_view(log, root, settings, verify=True)  # a replay into a new view
    assert report.verified and report.view not in live_view
    replayed = await recomputed(log, settings, view=report.view)
    key = sorted  # per partition the order is the log's; across partitions compare as sets of bytes
    assert key(encode_event(e) for e in replayed) != key(encode_event(e) for e in live)  # the view differs ...
    same_view = [MemoryChanged(**{**_fields(e), "view": live[0].view}) for e in replayed]
    assert key(encode_event(e) for e in same_view) == key(encode_event(e) for e in live)  # ... and only the view
    await log.stop()


def _fields(event: MemoryChanged) -> dict[str, object]:
    return {name: getattr(event, name) for name in MemoryChanged.__slots__}


async def test_a_crash_between_commit_and_publish_is_published_by_the_next_run(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = await _log(settings)
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    store = open_store(str(tmp_path / "store"))
    real = feed_module.publish_feed
    calls = {"n": 0}

    async def crash_on_the_third(*args: object, **kwargs: object) -> int:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("simulated crash after the commit, before the publish")
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("adamem.streams.pipeline.publish_feed", crash_on_the_third)
    projector = Projector(store)
    store.bind(log.partitions(settings.topic("analyses")))
    from adamem.streams.pipeline import analyze_pending

    for p in range(log.partitions(settings.topic("analyses"))):
        await analyze_pending(log, agent(), settings, p)
    with pytest.raises(OSError, match="simulated crash"):
        for p in range(log.partitions(settings.topic("analyses"))):
            await project_pending(log, projector, settings, p, batch=5)
    monkeypatch.undo()
    before = await published(log, settings)
    committed = sum(store.checkpoint(p).get(settings.topic("analyses"), 0) for p in range(2))
    assert committed > sum(1 for _ in {e.source_offset for _, _, e in before})  # a batch was committed, not published
    await run_pipeline(log, Projector(store), agent(), settings)  # the next run
    after = [e for _, _, e in await published(log, settings)]
    want = await recomputed(log, settings, view=after[0].view)
    assert {e.event_id: e for e in after} == {e.event_id: e for e in want}  # nothing missing, nothing else
    assert len(after) == len({e.event_id for e in after})  # and in this crash nothing twice
    await log.stop()


async def test_the_faust_worker_sends_the_feed_of_each_committed_batch(
    settings: Settings,
    tmp_path: Path,
    faust_apps: list[Any],  # noqa: F811  (the fixture of tests.streams.test_worker)
) -> None:
    """The project agent sends, to the partition it folded, exactly the events a replay of the log computes."""
    settings = dataclasses.replace(settings, partitions=1, embedded_partitions=1)
    on_log = InMemoryLog(settings)
    await on_log.start()
    analyses = agent().analyze(load_messages(SAMPLE, settings)[:6])
    values = [encode_event(a, on_log.keyring) for a in analyses if a.message.user_id == "alice"]
    await on_log.append(settings.topic("analyses"), [OutgoingRecord("alice", v) for v in values])
    store = open_store(str(tmp_path / "store"))
    app = create_app(settings, "127.0.0.1:1", agent, lambda: Projector(store), within_s=0.1, log_reader=lambda: on_log)
    app.finalize()
    faust_apps.append(app)
    sent: list[dict[str, Any]] = []
    _capture(app.adamem_topics["changes"], sent)  # type: ignore[attr-defined]
    await assign_analyses(app, settings, 0)
    async with app.adamem_agents["project"].test_context() as p:  # type: ignore[attr-defined]
        for value in values:
            await p.put(value, key=b"alice", partition=0)
        for _ in range(100):
            if store.checkpoint(0).get(settings.topic("analyses")) == len(values):
                break
            await asyncio.sleep(0.1)
    assert store.checkpoint(0).get(settings.topic("analyses")) == len(values)
    want = await compute_feed(on_log, settings, 0, view=store.view)
    assert want and [decode_as(s["value"], MemoryChanged) for s in sent] == want
    assert {(s["key"], s["partition"]) for s in sent} == {(b"alice", 0)}
    await on_log.stop()


async def test_with_the_change_feed_off_nothing_is_published(settings: Settings, tmp_path: Path) -> None:
    settings = dataclasses.replace(settings, change_feed=False)
    log = await _log(settings)
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    stats = await run_pipeline(log, Projector(open_store(str(tmp_path / "store"))), agent(), settings)
    assert stats.applied == 29
    assert await published(log, settings) == []
    await log.stop()
