"""Replay: rebuilt views equal live ones, switch atomically, travel in time, and keep forgetting."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import threading
from importlib import resources
from pathlib import Path

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.events import MemoryForgotten
from adamem.ingest import load_messages, parse_time
from adamem.partitioning import partition_for
from adamem.projections.projector import Projector
from adamem.projections.store.lance import LanceStore, current_view
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import EventLog, OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.replay import diff_stores, rebuild_owner, rebuild_view, rows_checksum, store_rows

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


def agent() -> MemoryAgent:
    return MemoryAgent(RuleExtractor(), _embedder())


async def _built(settings: Settings, tmp_path: Path, data: bytes = SAMPLE) -> tuple[EventLog, str]:
    log = open_log(str(tmp_path / "log"), settings)
    await log.start()
    await publish_messages(log, load_messages(data, settings), settings)
    root = str(tmp_path / "store")
    await run_pipeline(log, Projector(LanceStore(root)), agent(), settings)
    return log, root


async def test_full_replay_verifies_equal_and_switches(settings: Settings, tmp_path: Path) -> None:
    log, root = await _built(settings, tmp_path)
    live = LanceStore(root, read_only=True)
    before = rows_checksum(
        store_rows(live, {"owners", "messages", "episodic", "persona", "graph_nodes", "graph_edges"})
    )
    report = await rebuild_view(log, root, settings, verify=True)
    assert report.verified is True and report.diffs == []
    assert report.checksum == report.live_checksum == before
    assert gc.isenabled()  # the rebuild paused the collector only while it ran
    assert report.switched and current_view(root) == report.view == "r1"
    assert live.view == "main"
    live.owners()  # any call follows the switch
    assert live.view == "r1"
    await log.stop()


async def test_verify_reports_a_tampered_row(settings: Settings, tmp_path: Path) -> None:
    log, root = await _built(settings, tmp_path)
    store = LanceStore(root)
    trait = store.rows("persona", "default:alice")[0]
    from dataclasses import replace

    from adamem.projections.folds.changes import Upsert

    store.commit(partition_for("alice", 2), [Upsert("persona", replace(trait, value="tampered"))], {})  # type: ignore[type-var]
    report = await rebuild_view(log, root, settings, verify=True, layers=["persona"])
    assert report.verified is False and not report.switched  # a failed verification never switches
    assert [(d.table, d.id, d.kind, d.fields) for d in report.diffs] == [("persona", trait.id, "changed", ("value",))]
    assert current_view(root) == "main"
    await log.stop()


async def test_as_of_answers_the_old_value_before_an_update(settings: Settings, tmp_path: Path) -> None:
    lines = [
        {
            "user_id": "ann",
            "speaker": "Ann",
            "text": "I live in Shanghai.",
            "occurred_at": "2024-01-01T10:00:00Z",
            "conversation_id": "c1",
        },
        # A new conversation consolidates the previous one's working memory (the session-end trigger).
        {
            "user_id": "ann",
            "speaker": "Ann",
            "text": "Work was busy this week.",
            "occurred_at": "2024-01-15T10:00:00Z",
            "conversation_id": "c1b",
        },
        {
            "user_id": "ann",
            "speaker": "Ann",
            "text": "I moved from Shanghai to Beijing.",
            "occurred_at": "2024-03-01T10:00:00Z",
            "conversation_id": "c2",
        },
        {
            "user_id": "ann",
            "speaker": "Ann",
            "text": "The weather is nice today.",
            "occurred_at": "2024-03-05T10:00:00Z",
            "conversation_id": "c3",
        },
    ]
    data = "\n".join(json.dumps(r) for r in lines).encode()
    log, root = await _built(settings, tmp_path, data)

    def lives_in(store: LanceStore) -> list[str]:
        return [
            r.content for r in store.rows("episodic", "default:ann") if r.key == "lives_in" and r.status == "active"
        ]  # type: ignore[union-attr]

    assert ["Beijing" in c for c in lives_in(LanceStore(root, read_only=True))] == [True]
    before = await rebuild_view(log, root, settings, until_time=parse_time("2024-02-01T00:00:00Z"), view="feb")
    after = await rebuild_view(log, root, settings, until_time=parse_time("2024-03-10T00:00:00Z"), view="mar")
    assert not before.switched and current_view(root) == "main"
    assert ["Shanghai" in c for c in lives_in(LanceStore(root, read_only=True, view="feb"))] == [True]
    assert ["Beijing" in c for c in lives_in(LanceStore(root, read_only=True, view="mar"))] == [True]
    assert (before.events, after.events) == (2, 4)
    await log.stop()


async def test_forgetting_survives_replay(settings: Settings, tmp_path: Path) -> None:
    log, root = await _built(settings, tmp_path)
    store = LanceStore(root)
    msg = next(m for m in store.rows("messages", "default:alice") if "allergic to peanuts" in m.text)  # type: ignore[union-attr]
    forget = MemoryForgotten("0d5e0d11-1111-4111-8111-000000000001", "alice", "message", 1_713_400_000_000, msg.id)
    await log.append(settings.topic("control"), [OutgoingRecord("alice", encode_event(forget))])
    await run_pipeline(log, Projector(store), agent(), settings)

    def mentions_peanuts(s: LanceStore) -> bool:
        return any("peanut" in json.dumps(r.__repr__()) for r in s.load_owner("default:alice"))

    assert not mentions_peanuts(LanceStore(root, read_only=True))
    report = await rebuild_view(log, root, settings, verify=True)
    assert report.verified
    assert not mentions_peanuts(LanceStore(root, read_only=True))
    await log.stop()


async def test_rebuild_one_owner_in_place(settings: Settings, tmp_path: Path) -> None:
    log, root = await _built(settings, tmp_path)
    store = LanceStore(root)
    report = await rebuild_owner(log, store, settings, "default:xiaoming", verify_only=True)
    assert report.verified and report.events == 10
    from adamem.projections.folds.changes import Delete

    victim = store.rows("episodic", "default:xiaoming")[0]
    store.commit(partition_for("xiaoming", 2), [Delete("episodic", victim.id)], {})
    broken = await rebuild_owner(log, store, settings, "default:xiaoming")
    assert [(d.table, d.kind) for d in broken.diffs] == [("episodic", "only_rebuilt")] and broken.switched
    assert victim in store.rows("episodic", "default:xiaoming")
    await log.stop()


async def test_queries_during_a_rebuild_see_a_whole_view(settings: Settings, tmp_path: Path) -> None:
    log, root = await _built(settings, tmp_path)
    reader = LanceStore(root, read_only=True)
    expected = rows_checksum(store_rows(reader, {"messages", "episodic", "persona"}, ["default:alice"]))
    seen: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def query_loop() -> None:
        while not stop.is_set():
            try:
                seen.append(rows_checksum(store_rows(reader, {"messages", "episodic", "persona"}, ["default:alice"])))
            except BaseException as exc:  # the test fails below with whatever went wrong
                errors.append(exc)

    thread = threading.Thread(target=query_loop)
    thread.start()
    try:
        report = await rebuild_view(log, root, settings)
        await asyncio.sleep(0.3)
    finally:
        stop.set()
        thread.join()
    assert report.switched and not errors
    assert len(seen) > 3 and set(seen) == {expected}  # the old view, then the equal new one: never partial
    assert diff_stores(LanceStore(root, read_only=True, view="main"), LanceStore(root, read_only=True)) == []
    await log.stop()


async def test_a_full_replay_reproduces_grants_and_a_revoked_one_stays_revoked(
    settings: Settings, tmp_path: Path
) -> None:
    from adamem.events import GrantChanged, grant_event_id
    from adamem.projections.folds.rows import GrantRow

    def change(grant_id: str, action: str, at: int, **scope: object) -> OutgoingRecord:
        event = GrantChanged(
            grant_event_id("default", "alice", action, grant_id),
            "alice",
            grant_id,
            action,  # type: ignore[arg-type]
            at,
            **scope,  # type: ignore[arg-type]
        )
        return OutgoingRecord("alice", encode_event(event))

    log = open_log(str(tmp_path / "log"), settings)
    await log.start()
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    await log.append(
        settings.topic("control"),
        [
            change(
                "kept", "granted", 1_709_000_000_000, grantee_tenant="clinic", layers=("episodic",), topics=("健康",)
            ),
            change("kept", "confirmed", 1_709_000_001_000),
            change("gone", "granted", 1_709_000_002_000, grantee_tenant="shop", layers=("persona",)),
            change("gone", "confirmed", 1_709_000_003_000),
            change("gone", "revoked", 1_709_000_004_000),
            change("gone", "confirmed", 1_709_000_005_000),  # a confirmation after the revocation changes nothing
        ],
    )
    root = str(tmp_path / "store")
    await run_pipeline(log, Projector(LanceStore(root)), agent(), settings)

    def grants() -> dict[str, tuple[str, list[str]]]:
        store = LanceStore(root, read_only=True)
        rows = [r for r in store.rows("grants", "default:alice") if isinstance(r, GrantRow)]
        return {r.grant_id: (r.status, r.topics) for r in rows}

    live = grants()
    assert live == {"kept": ("active", ["健康"]), "gone": ("revoked", [])}
    report = await rebuild_view(log, root, settings, verify=True)
    assert report.verified is True and report.diffs == [] and report.switched
    assert grants() == live
    await log.stop()
