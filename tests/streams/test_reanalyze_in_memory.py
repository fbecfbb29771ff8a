"""Reanalysis against the in-memory store, through its view catalog: a new generation beside the active one."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.errors import StoreError
from adamem.ingest import load_messages
from adamem.projections.folds.rows import MessageRow
from adamem.projections.projector import Projector
from adamem.projections.store import ViewCatalog
from adamem.projections.store.memory import InMemoryStore
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.generations import resolve
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.reanalyze import reanalyze, switch_to, view_generations
from adamem.streams.replay import store_rows

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
VIOLIN = {
    "user_id": "alice",
    "speaker": "Alice",
    "text": "I started learning the violin last month and I love it.",
    "occurred_at": "2024-05-01T10:00:00Z",
    "conversation_id": "c9",
}


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


async def _built(settings: Settings) -> ViewCatalog:
    """The sample ingested by the in-process pipeline (generation g1, rules) into an in-memory store."""
    log = open_log(settings.log_url, settings)
    await log.start()
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    views: ViewCatalog = InMemoryStore()
    store = views.open_view()
    resolved = resolve(settings, store, record_if_missing=True)
    await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), _embedder()), resolved)
    await log.stop()  # reanalyze opens the embedded log itself (one writer at a time)
    return views


async def test_a_reanalysis_is_projected_into_a_view_beside_the_active_one_then_switched_to(
    settings: Settings, tmp_path: Path
) -> None:
    views = await _built(settings)
    live = views.open_view(read_only=True)
    episodic = len(store_rows(live, {"episodic"}))

    report = await reanalyze(settings, views, extractor="none")
    assert (report.generation, report.view, report.switched, report.previous_view) == ("g2", "g2", False, "main")
    assert views.active_view() == "main" and views.views() == ["g2", "main"]
    assert report.stats.analyzed == 29
    assert report.layers["episodic"].removed == episodic > 0 and report.layers["episodic"].added == 0
    assert {name: g["name"] for name, g in view_generations(views).items()} == {"g2": "g2", "main": "g1"}

    log = open_log(settings.log_url, settings)
    await log.start()
    await publish_messages(log, load_messages(json.dumps(VIOLIN).encode(), settings), settings)
    await log.stop()
    stats = await switch_to(settings, views, "g2")  # caught up first, then switched
    assert stats.analyzed == 1 and views.active_view() == "g2"
    assert any("violin" in r.text for r in live.rows("messages", "default:alice"))  # type: ignore[attr-defined]
    resolved = resolve(settings, views.open_view())  # the write path follows the active view's generation
    assert (resolved.generation, resolved.extractor) == ("g2", "none")

    with pytest.raises(StoreError):
        await switch_to(settings, views, "nope")
    with pytest.raises(StoreError):
        await reanalyze(settings, views, extractor="none", view="g2")


async def test_other_domain_packs_are_a_reanalysis_into_a_generation_that_records_them(settings: Settings) -> None:
    views = await _built(settings)
    assert "packs" not in (views.open_view(read_only=True).generation() or {})
    report = await reanalyze(settings, views, packs="*:medical+customer-service")
    record = view_generations(views)[report.view]
    assert (record["name"], record["packs"]) == ("g2", "*:medical+customer-service")
    assert len(record["packs_digest"]) == 64 and '"name":"medical"' in record["packs_content"]
    resolved = resolve(settings, views.open_view(report.view, read_only=True))
    assert resolved.packs == "*:medical+customer-service" and resolved.packs_record == record["packs_content"]
    # the new generation's analyses carry the packs' version; the active one's do not
    new_rows = store_rows(views.open_view(report.view, read_only=True), {"messages"})
    old_rows = store_rows(views.open_view("main", read_only=True), {"messages"})
    version = f"{RuleExtractor.version}+packs.{record['packs_digest'][:12]}"
    assert {r.analyzer for r in new_rows if isinstance(r, MessageRow)} == {f"rules/{version}"}
    assert {r.analyzer for r in old_rows if isinstance(r, MessageRow)} == {f"rules/{RuleExtractor.version}"}
