"""Erasure against the in-memory store, through its view catalog: a forget leaves no view holding the text."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.events import MemoryForgotten
from adamem.ingest import load_messages
from adamem.projections.projector import Projector
from adamem.projections.store import ViewCatalog
from adamem.projections.store.memory import InMemoryStore
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import EventLog, OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.replay import rebuild_view, rows_checksum, store_rows

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
MARKER = "Zanzibarquokka"
SECRET = {
    "user_id": "alice",
    "conversation_id": "s9",
    "message_id": "s9-1",
    "speaker": "Alice",
    "text": f"My secret nickname is {MARKER} and I love hiking with it.",
    "occurred_at": "2024-04-20T09:00:00Z",
}
ALL = {"owners", "messages", "episodic", "persona", "graph_nodes", "graph_edges"}


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


def _agent() -> MemoryAgent:
    return MemoryAgent(RuleExtractor(), _embedder())


async def _built(settings: Settings, tmp_path: Path) -> tuple[EventLog, ViewCatalog]:
    log = open_log(str(tmp_path / "log"), settings)
    await log.start()
    await publish_messages(log, load_messages(SAMPLE + json.dumps(SECRET).encode() + b"\n", settings), settings)
    views: ViewCatalog = InMemoryStore()
    await run_pipeline(log, Projector(views.open_view()), _agent(), settings)
    return log, views


def _views_holding(views: ViewCatalog, text: str) -> list[str]:
    """The views with a row of alice's that holds ``text`` in any field."""
    found = []
    for name in views.views():
        rows = views.open_view(name, read_only=True).load_owner("default:alice")
        if any(text in repr(row) for row in rows):
            found.append(name)
    return found


async def test_a_forget_removes_the_views_that_held_it_and_a_replay_keeps_it_forgotten(
    settings: Settings, tmp_path: Path
) -> None:
    log, views = await _built(settings, tmp_path)
    travel = await rebuild_view(log, views, settings, until_time=1_713_600_000_000 + 10**9, view="then")
    assert not travel.switched and views.views() == ["main", "then"]
    assert _views_holding(views, MARKER) == ["main", "then"]
    live = views.open_view()
    others = rows_checksum(store_rows(live, ALL, ["default:xiaoming"]))

    [secret] = [m for m in live.rows("messages", "default:alice") if MARKER in m.text]  # type: ignore[attr-defined]
    forget = MemoryForgotten("0d5e0d11-1111-4111-8111-0000000000e1", "alice", "message", 1_713_700_000_000, secret.id)
    await log.append(settings.topic("control"), [OutgoingRecord("alice", encode_event(forget))])
    await run_pipeline(log, Projector(live), _agent(), settings)
    assert views.views() == ["main"]  # the time-travel view held the secret: the erasure removed it
    assert _views_holding(views, MARKER) == []

    report = await rebuild_view(log, views, settings, verify=True)
    assert report.verified and report.switched and views.views() == [report.view] == [views.active_view()]
    before = 1_713_614_400_000  # after the secret was said, before it was forgotten: a forget reaches back
    assert (await rebuild_view(log, views, settings, until_time=before, view="as-of-time")).events
    assert _views_holding(views, MARKER) == []
    reader = views.open_view(read_only=True)
    assert rows_checksum(store_rows(reader, ALL, ["default:xiaoming"])) == others
    assert reader.rows("messages", "default:alice")  # the rest of alice's memory stays
    await log.stop()
