"""Replay against the in-memory store, reached through its view catalog only: verify, switch, travel in time."""

from __future__ import annotations

import dataclasses
import functools
from importlib import resources
from pathlib import Path

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.ingest import load_messages
from adamem.partitioning import partition_for
from adamem.projections.folds.changes import Upsert
from adamem.projections.projector import Projector
from adamem.projections.store import ViewCatalog
from adamem.projections.store.memory import InMemoryStore
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import EventLog
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.replay import rebuild_view, rows_checksum, store_rows

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
ALL = {"owners", "messages", "episodic", "persona", "graph_nodes", "graph_edges"}


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


async def _built(settings: Settings, tmp_path: Path) -> tuple[EventLog, ViewCatalog]:
    """The sample projected by the in-process pipeline into an in-memory store; the store as a view catalog."""
    log = open_log(str(tmp_path / "log"), settings)
    await log.start()
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    views: ViewCatalog = InMemoryStore()
    await run_pipeline(log, Projector(views.open_view()), MemoryAgent(RuleExtractor(), _embedder()), settings)
    return log, views


async def test_a_full_replay_into_memory_verifies_equal_and_switches(settings: Settings, tmp_path: Path) -> None:
    log, views = await _built(settings, tmp_path)
    follower = views.open_view(read_only=True)
    before = rows_checksum(store_rows(follower, ALL))
    token = follower.change_token(partition_for("alice", 2))
    report = await rebuild_view(log, views, settings, verify=True)
    assert report.verified is True and report.diffs == [] and report.checksum == report.live_checksum == before
    assert report.switched and views.active_view() == report.view == "r1" and views.views() == ["main", "r1"]
    assert rows_checksum(store_rows(follower, ALL)) == before  # the follower reads r1 now: the same rows
    assert follower.change_token(partition_for("alice", 2)) != token
    assert report.removed_views == []  # nothing was forgotten: the old view stays
    await log.stop()


async def test_a_replay_that_finds_a_tampered_row_never_switches(settings: Settings, tmp_path: Path) -> None:
    log, views = await _built(settings, tmp_path)
    live = views.open_view()
    trait = live.rows("persona", "default:alice")[0]
    live.commit(partition_for("alice", 2), [Upsert("persona", dataclasses.replace(trait, value="tampered"))], {})  # type: ignore[type-var]
    report = await rebuild_view(log, views, settings, verify=True, layers=["persona"])
    assert report.verified is False and not report.switched
    assert [(d.table, d.id, d.kind, d.fields) for d in report.diffs] == [("persona", trait.id, "changed", ("value",))]
    assert views.active_view() == "main" and report.view in views.views()  # kept for inspection
    await log.stop()


async def test_a_view_as_of_an_offset_is_written_beside_the_active_one(settings: Settings, tmp_path: Path) -> None:
    log, views = await _built(settings, tmp_path)
    report = await rebuild_view(log, views, settings, until_offset=3, view="early")
    assert not report.switched and views.active_view() == "main" and views.views() == ["early", "main"]
    early, live = views.open_view("early", read_only=True), views.open_view(read_only=True)
    assert 0 < len(store_rows(early, {"messages"})) < len(store_rows(live, {"messages"}))
    assert all(offset <= 3 for offset in report.offsets.values())
    await log.stop()
