"""Erasure: after a forget is projected and replayed, neither the store nor the log holds the forgotten text.

The store by deleting it (and every older table version and view); the log by crypto-shredding:
the message and its analysis are sealed under the message's key, which the forget destroys.
"""

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
from adamem.streams.keys import Keystore
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
CONTROL = "我喜欢吃辣的"  # xiaoming's, never forgotten: it must still be found (opened with the keystore)


def _every_byte(*roots: Path) -> list[tuple[Path, bytes]]:
    """Every file under the roots, whole: what a grep of the disk would read."""
    return [(p, p.read_bytes()) for root in roots for p in sorted(root.rglob("*")) if p.is_file()]


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
    keys = Keystore(tmp_path / "log.keys")
    traces = find_text(MARKER, log_root=log_root, store_root=store, keys_root=keys.root, keys=keys)
    # the message and its analysis on the log, read through the log's reader (the blocks are snappy)
    # and opened with the keystore: on the log they are sealed, so only their key makes them text
    decoded = {(t.path.parent.name, t.where.split(": ")[-1]) for t in traces if t.where.startswith("offset")}
    opened = "value opened with the keystore"
    assert (settings.topic("messages"), opened) in decoded and (settings.topic("analyses"), opened) in decoded
    assert not any(where == "value" for _, where in decoded), decoded  # the sealed bytes do not hold it
    assert not [t for t in traces if t.path.is_relative_to(log_root) and "raw bytes" in t.where]
    assert any("column text" in t.where for t in traces if t.path.name == "messages.lance")
    # without the keystore the log's copies are opaque bytes
    assert not [t for t in find_text(MARKER, log_root=log_root, store_root=None) if t.path.is_relative_to(log_root)]
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
    # ... and the log: every copy of the message on it (messages, analyses) is sealed under a key
    # the forget destroyed; with every key that is left nothing opens to it, and no byte of any
    # file of the log, the keystore or the store holds it in any form
    log_root, keys = tmp_path / "log", Keystore(tmp_path / "log.keys")
    traces = find_text(MARKER, log_root=log_root, store_root=store, keys_root=keys.root, keys=keys)
    assert traces == [], "\n".join(map(str, traces))
    files = _every_byte(log_root, keys.root, store)
    assert len(files) > 50 and any(p.suffix == ".keys" for p, _ in files)
    for form in text_forms(MARKER):
        assert not [p for p, data in files if form in data], form
    control = find_text(CONTROL, log_root=log_root, store_root=store, keys_root=keys.root, keys=keys)
    assert {t.path.parent.name for t in control if "opened with the keystore" in t.where} >= {
        settings.topic("messages"),
        settings.topic("analyses"),
    }  # another owner's text is still there, readable with its key
    reader = LanceStore(str(store), read_only=True)
    assert rows_checksum(store_rows(reader, ALL, ["default:xiaoming"])) == others
    assert reader.rows("messages", "default:alice")  # the rest of alice's memory stays
    await log.stop()


async def test_a_forget_leaves_no_token_in_the_full_text_index(settings: Settings, tmp_path: Path) -> None:
    """The full-text index keeps its rows' words as an FST, which no byte search finds: verify reads its
    tokens, finds the forgotten word there while the message is indexed, and nowhere after the forget."""
    log, _, store = await _built(settings, tmp_path)
    writer = LanceStore(str(store))
    for p in range(writer.partition_count()):
        writer.checkpoint(p)  # opens every shard, so that optimize indexes them all
    writer.optimize()  # the FTS index covers every message, the secret too
    writer.close()
    shard = store / "views" / "main" / f"p{partition_for('alice', 2)}" / "messages.lance"
    index_files = [p for p in (shard / "_indices").rglob("*") if p.is_file()]
    assert index_files and not [p for p in index_files if MARKER.lower().encode() in p.read_bytes()]  # no byte shows it
    before = find_text(MARKER, log_root=None, store_root=store)
    indexed = [t for t in before if "full-text index token 'zanzibarquokka'" in t.where]
    assert any(t.path.is_relative_to(shard / "_indices") for t in indexed), before  # (graph nodes' labels too)

    await _forget_secret(log, settings, store)
    traces = find_text(MARKER, log_root=None, store_root=store)
    assert traces == [], "\n".join(map(str, traces))
    kept = find_text("hotpot", log_root=None, store_root=store)  # another message's word stays indexed
    assert any(t.where == "full-text index token 'hotpot'" for t in kept), kept
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

    assert "value opened with the keystore" in before  # the log's copies, opened with their key

    log = open_log(str(log_root), settings)
    await log.start()
    await _forget_secret(log, settings, store)
    await log.stop()
    assert await asyncio.to_thread(main, argv) == 0  # the store deleted it, the log's copies are shredded
    after = capsys.readouterr().out
    assert "found nowhere" in after and "log.keys" in after, after
    assert await asyncio.to_thread(main, [*argv[:4], CONTROL, *argv[5:]]) == 1  # not forgotten: still found
    control = capsys.readouterr().out
    assert "opened with the keystore" in control and "messages.lance" in control, control
    assert await asyncio.to_thread(main, [*argv[:4], "nothing-like-this-anywhere", *argv[5:]]) == 0
    assert "found nowhere" in capsys.readouterr().out
