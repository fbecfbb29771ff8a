"""Erasure: after a forget is projected and replayed, the store holds the forgotten text nowhere."""

from __future__ import annotations

import asyncio
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
from adamem.projections.projector import Projector
from adamem.projections.store.lance import LanceStore, current_view, list_views
from adamem.projections.store.lance_scan import lance_datasets
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.erasure import find_text, text_forms
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


async def _built(settings: Settings, tmp_path: Path) -> tuple[EventLog, Path, Path]:
    log = open_log(str(tmp_path / "log"), settings)
    await log.start()
    data = SAMPLE + json.dumps(SECRET).encode() + b"\n"
    await publish_messages(log, load_messages(data, settings), settings)
    store = tmp_path / "store"
    await run_pipeline(log, Projector(LanceStore(str(store))), _agent(), settings)
    return log, tmp_path / "log", store


async def _forget_secret(log: EventLog, settings: Settings, store: Path) -> None:
    live = LanceStore(str(store))
    [secret] = [m for m in live.rows("messages", "default:alice") if MARKER in m.text]  # type: ignore[attr-defined]
    forget = MemoryForgotten("0d5e0d11-1111-4111-8111-0000000000e1", "alice", "message", 1_713_700_000_000, secret.id)
    await log.append(settings.topic("control"), [OutgoingRecord("alice", encode_event(forget))])
    await run_pipeline(log, Projector(live), _agent(), settings)


async def test_forgetting_an_owner_leaves_none_of_its_text_in_the_store(settings: Settings, tmp_path: Path) -> None:
    log, _, store = await _built(settings, tmp_path)
    live = LanceStore(str(store))
    others = rows_checksum(store_rows(live, ALL, ["default:xiaoming"]))
    texts = [m.text for m in live.rows("messages", "default:alice")]  # type: ignore[attr-defined]
    forget = MemoryForgotten("0d5e0d11-1111-4111-8111-0000000000e2", "alice", "user", 1_713_700_000_000)
    await log.append(settings.topic("control"), [OutgoingRecord("alice", encode_event(forget))])
    await run_pipeline(log, Projector(live), _agent(), settings)
    report = await rebuild_view(log, str(store), settings, verify=True)
    assert report.verified and report.switched
    reader = LanceStore(str(store), read_only=True)
    assert reader.load_owner("default:alice") == []
    assert rows_checksum(store_rows(reader, ALL, ["default:xiaoming"])) == others
    for text in [MARKER, *texts]:
        assert find_text(text, log_root=None, store_root=store) == [], text
    await log.stop()


def test_text_forms_cover_the_ways_a_text_is_stored() -> None:
    assert text_forms("Café X") == [b"Caf\xc3\xa9 X", b"caf\xc3\xa9 x", b"Caf\\u00e9 X"]


async def test_the_scan_finds_the_text_in_every_copy_before_a_forget(settings: Settings, tmp_path: Path) -> None:
    log, log_root, store = await _built(settings, tmp_path)
    traces = find_text(MARKER, log_root=log_root, store_root=store)
    # the message and its analysis on the log, read through the log's reader (the blocks are snappy)
    decoded = {(t.path.parent.name, t.where.split(": ")[-1]) for t in traces if t.where.startswith("offset")}
    assert (settings.topic("messages"), "value") in decoded and (settings.topic("analyses"), "value") in decoded
    assert any("column text" in t.where for t in traces if t.path.name == "messages.lance")
    await log.stop()


async def test_a_forget_leaves_no_copy_in_the_store(settings: Settings, tmp_path: Path) -> None:
    log, _, store = await _built(settings, tmp_path)
    travel = await rebuild_view(log, str(store), settings, until_time=1_713_600_000_000 + 10**9, view="then")
    assert not travel.switched and "then" in list_views(str(store))
    others = rows_checksum(store_rows(LanceStore(str(store), read_only=True), ALL, ["default:xiaoming"]))

    await _forget_secret(log, settings, store)
    assert list_views(str(store)) == ["main"]  # the time-travel view held the secret: it is gone
    shard = store / "views" / "main" / f"p{partition_for('alice', 2)}"
    for dataset in lance_datasets(shard):  # each table keeps one version: the one its checkpoint names
        assert len(list((dataset / "_versions").glob("*.manifest"))) == 1, dataset
    report = await rebuild_view(log, str(store), settings, verify=True)
    assert report.verified and report.switched and list_views(str(store)) == [report.view]
    assert current_view(str(store)) == report.view

    # views of the past built after the forget hold it neither: a forget reaches back in time
    before = 1_713_614_400_000  # 2024-04-20T12:00Z: after the secret was said, before it was forgotten
    assert (await rebuild_view(log, str(store), settings, until_time=before, view="as-of-time")).events
    p = partition_for("alice", 2)
    end = (await log.end_offsets(settings.topic("analyses")))[p]  # the forget is the partition's last record
    by_offset = await rebuild_view(log, str(store), settings, until_offset=end - 1, view="as-of-offset")
    assert by_offset.offsets[p] == end - 1  # the view is still as of that offset

    traces = find_text(MARKER, log_root=None, store_root=store)
    assert traces == [], "\n".join(map(str, traces))
    reader = LanceStore(str(store), read_only=True)
    assert rows_checksum(store_rows(reader, ALL, ["default:xiaoming"])) == others
    assert reader.rows("messages", "default:alice")  # the rest of alice's memory stays
    await log.stop()


async def test_forget_verify_names_every_place_the_text_remains(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from adamem.cli.main import main

    log, log_root, store = await _built(settings, tmp_path)
    await log.stop()
    argv = ["forget", "alice", "--verify", "--text", MARKER, "--log", str(log_root), "--store", str(store)]
    assert await asyncio.to_thread(main, argv) == 1
    before = capsys.readouterr().out
    assert "messages.lance" in before and f"{settings.topic('messages')}/" in before

    log = open_log(str(log_root), settings)
    await log.start()
    await _forget_secret(log, settings, store)
    await log.stop()
    assert await asyncio.to_thread(main, argv) == 1  # the log keeps the message: the store no longer does
    after = capsys.readouterr().out
    found = [line for line in after.splitlines() if line.strip().startswith("FOUND")]
    assert found and all(str(log_root) in line for line in found), after
    assert await asyncio.to_thread(main, [*argv[:4], "nothing-like-this-anywhere", *argv[5:]]) == 0
    assert "found nowhere" in capsys.readouterr().out
