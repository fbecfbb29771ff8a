"""Damage to the embedded log, in each kind of partition file, is refused; repaired, nothing readable is lost.

One real log (and its store) is built once: the sample conversation published in three batches,
garbage among the messages (so there are dead letters), forget events on the control topic, and
the pipeline run after each step (so the analyses topic has several blocks, all projected). Each
test copies it into its own folder, cuts a file short or flips a byte at one place, and checks:

* every command refuses the log (the API, ``log dump``, ``project``, ``publish``), naming the
  file and what to do, and changes nothing;
* ``adamem log check`` reports it (exit 1) and ``adamem log repair`` repairs it (exit 0), after
  which ``check`` passes;
* every record of a block the damage did not reach is still there, at its offset, byte for byte;
  nothing is invented; the partition ends where it did, so no offset is given out again;
* downstream loses nothing: ``project`` afterwards leaves the store as it was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.cli import main
from adamem.errors import LogError
from adamem.events import MemoryForgotten
from adamem.ingest import load_messages
from adamem.projections.folds.rows import Row
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams import embedded_log
from adamem.streams.embedded_log import Block, EmbeddedLog, scan_file
from adamem.streams.log import OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.resume import RESUME_HEADER

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
PREFIX = "dmg"
KINDS = ("messages", "analyses", "control", "deadletter")
Entry = tuple[int, str, bytes, tuple[tuple[str, bytes], ...]]


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


def _agent() -> MemoryAgent:
    return MemoryAgent(RuleExtractor(), _embedder())


def _settings(root: Path) -> Settings:
    return Settings(
        log_url=str(root / "log"),
        store_url=str(root / "store"),
        topic_prefix=PREFIX,
        partitions=1,
        embedded_partitions=1,
        fsync=False,
    )


def _snapshot(store: Any) -> dict[str, list[Row]]:
    return {o: sorted(store.load_owner(o), key=lambda r: (r.TABLE, r.id)) for o in store.owners()}


async def _entries(log: EmbeddedLog, topic: str) -> dict[int, Entry]:
    return {r.offset: (r.offset, r.key, r.value, r.headers) async for r in log.read(topic)}


@dataclass(frozen=True)
class Built:
    root: Path
    entries: dict[str, dict[int, Entry]]  # kind -> offset -> entry
    blocks: dict[str, tuple[Block, ...]]
    ends: dict[str, int]
    store: dict[str, list[Row]]


async def _build(settings: Settings) -> Built:
    messages = load_messages(SAMPLE, settings)
    log = EmbeddedLog(settings.log_url, settings)
    await log.start()
    store = open_store(settings.store)
    projector = Projector(store)
    topic = settings.topic

    def forget(n: int) -> OutgoingRecord:
        m = messages[n]
        event = MemoryForgotten(f"forget-{n}", m.user_id, "message", m.occurred_at + 10**9, target_id=m.event_id)
        return OutgoingRecord(m.user_id, encode_event(event))

    for step, (lo, hi) in enumerate(((0, 10), (10, 20), (20, len(messages)), (0, 0))):
        if hi > lo:
            await publish_messages(log, messages[lo:hi], settings)
        await log.append(topic("messages"), [OutgoingRecord("alice", f"not an event {step}".encode())])
        if step:
            await log.append(topic("control"), [forget(3 * step)])
        await run_pipeline(log, projector, _agent(), settings)
    kinds = {kind: topic(kind) for kind in KINDS}
    built = Built(
        Path(settings.log_url).parent,
        {kind: await _entries(log, t) for kind, t in kinds.items()},
        {kind: scan_file(Path(settings.log_url) / t / "00000.avro").blocks for kind, t in kinds.items()},
        {kind: (await log.end_offsets(t))[0] for kind, t in kinds.items()},
        _snapshot(store),
    )
    await log.stop()
    store.close()
    for kind in KINDS:
        assert len(built.blocks[kind]) >= 3, (kind, built.blocks[kind])  # a first, a middle and a last block
    return built


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return asyncio.run(_build(_settings(tmp_path_factory.mktemp("damage-base"))))


# ---- the damage: each returns the indexes of the blocks whose records it may take ---------------


def _cut(at: Callable[[Path, tuple[Block, ...]], int], lost: Callable[[int, tuple[Block, ...]], set[int]]) -> Any:
    def damage(path: Path, blocks: tuple[Block, ...]) -> set[int]:
        size = at(path, blocks)
        with path.open("r+b") as fo:
            fo.truncate(size)
        return lost(size, blocks)

    return damage


def _past(size: int, blocks: tuple[Block, ...]) -> set[int]:
    return {i for i, b in enumerate(blocks) if b.end > size}


def _flip(at: Callable[[Path, tuple[Block, ...]], int], lost: Callable[[int, tuple[Block, ...]], set[int]]) -> Any:
    def damage(path: Path, blocks: tuple[Block, ...]) -> set[int]:
        pos = at(path, blocks)
        data = bytearray(path.read_bytes())
        data[pos] ^= 0x24
        path.write_bytes(bytes(data))
        return lost(pos, blocks)

    return damage


def _none(_: int, __: tuple[Block, ...]) -> set[int]:
    return set()


def _holding(pos: int, blocks: tuple[Block, ...]) -> set[int]:
    return {i for i, b in enumerate(blocks) if b.start <= pos < b.end}


def _middle(blocks: tuple[Block, ...]) -> Block:
    return blocks[len(blocks) // 2]


def _data_start(path: Path, block: Block) -> int:
    """Where a block's data starts (after its count and size)."""
    head = path.read_bytes()[block.start : block.start + 20]
    _, i = embedded_log._varint(head, 0)
    _, i = embedded_log._varint(head, i)
    return block.start + i


def _delete(path: Path, _: tuple[Block, ...]) -> set[int]:
    path.unlink()
    return set(range(10**6))


def _flip_end_record(path: Path, _: tuple[Block, ...]) -> set[int]:
    end = path.with_name(path.name + ".end")
    data = bytearray(end.read_bytes())
    data[len(data) // 2] ^= 0x01
    end.write_bytes(bytes(data))
    return set()


DAMAGES: dict[str, Any] = {
    # cut short
    "cut inside the header": _cut(lambda p, b: 10, _past),
    "cut to nothing": _cut(lambda p, b: 0, _past),
    "cut inside the first block": _cut(lambda p, b: (b[0].start + b[0].end) // 2, _past),
    "cut between blocks": _cut(lambda p, b: _middle(b).start, _past),
    "cut inside the last block": _cut(lambda p, b: b[-1].end - 5, _past),
    "file deleted": _delete,
    # one byte changed
    "flip in the magic": _flip(lambda p, b: 2, _none),
    "flip in the header's schema": _flip(lambda p, b: p.read_bytes().index(b"LogEntry") + 3, _none),
    "flip in the header's sync marker": _flip(lambda p, b: b[0].start - 5, _none),
    "flip in a block's count": _flip(lambda p, b: _middle(b).start, _none),
    "flip in a block's size": _flip(lambda p, b: _middle(b).start + 1, _none),
    "flip in the first block's data": _flip(lambda p, b: (_data_start(p, b[0]) + b[0].end - 16) // 2, _holding),
    "flip in the last block's data": _flip(lambda p, b: _data_start(p, b[-1]) + 2, _holding),
    "flip in a block's checksum": _flip(lambda p, b: _middle(b).end - 16 - 2, _holding),
    "flip in a block's sync marker": _flip(lambda p, b: _middle(b).end - 7, _none),
    "flip in the last sync marker": _flip(lambda p, b: b[-1].end - 1, _none),
    "flip in the end record": _flip_end_record,
}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


async def _cli(argv: list[str]) -> int:
    """The command line, on a thread of its own (it runs its own event loop)."""
    return await asyncio.to_thread(main, argv)


def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "ADAMEM_TOPIC_PREFIX": PREFIX,
        "ADAMEM_EMBEDDED_PARTITIONS": "1",
        "ADAMEM_FSYNC": "false",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ADAMEM_EXTRACTOR", "none")


@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("kind", KINDS)
async def test_damage_is_refused_and_repair_loses_nothing_readable(
    built: Built,
    kind: str,
    damage: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _env(monkeypatch)
    shutil.copytree(built.root / "log", tmp_path / "log")
    shutil.copytree(built.root / "store", tmp_path / "store")
    settings = _settings(tmp_path)
    topic = settings.topic(kind)
    path = tmp_path / "log" / topic / "00000.avro"
    lost = DAMAGES[damage](path, built.blocks[kind])
    damaged = _files(tmp_path / "log")
    where = ["--log", str(tmp_path / "log"), "--store", str(tmp_path / "store")]
    sample = tmp_path / "sample.jsonl"
    sample.write_bytes(SAMPLE)

    # Refused everywhere, with the file named and what to do; nothing changed.
    with pytest.raises(LogError, match="adamem log repair") as refused:
        await EmbeddedLog(settings.log_url, settings).start()
    assert str(path) in str(refused.value)
    capsys.readouterr()
    for argv in (["log", "dump", "--topic", kind, *where], ["project", *where], ["publish", str(sample), *where[:2]]):
        assert await _cli(argv) == 5, argv  # the log failed (exit codes: adamem.cli.errors)
        err = capsys.readouterr().err
        assert str(path) in err and "adamem log repair" in err, (argv, err)
    assert _files(tmp_path / "log") == damaged

    # Reported by check, repaired by repair.
    assert await _cli(["log", "check", *where]) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED  {topic}/00000.avro" in out, out
    assert _files(tmp_path / "log") == damaged
    assert await _cli(["log", "repair", *where]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert f"repaired {topic}/00000.avro" in out, out
    assert await _cli(["log", "check", *where]) == 0, capsys.readouterr()
    if damage not in ("file deleted", "flip in the end record", "cut to nothing", "cut between blocks"):
        assert any((path.parent / "damaged").iterdir()), "the damaged bytes are kept aside"

    log = EmbeddedLog(settings.log_url, settings)
    await log.start()
    try:
        # Every record of a block the damage did not reach is kept; nothing is invented.
        truth = built.entries[kind]
        got = await _entries(log, topic)
        for i, block in enumerate(built.blocks[kind]):
            if i not in lost:
                for offset in range(block.first, block.next):
                    assert got.get(offset) == truth[offset], (i, offset)
        assert all(truth[offset] == entry for offset, entry in got.items())
        assert (await log.end_offsets(topic))[0] == built.ends[kind]  # lost offsets stay given out

        # Downstream loses nothing: the store is as it was after projecting again.
        store = open_store(settings.store)
        try:
            await run_pipeline(log, Projector(store), _agent(), settings)
            assert _snapshot(store) == built.store
        finally:
            store.close()

        # A new record gets a new offset.
        [(_, offset)] = await log.append(topic, [OutgoingRecord("alice", b"after the repair")])
        assert offset >= built.ends[kind] and offset not in truth
    finally:
        await log.stop()


@pytest.mark.parametrize("kind", ["messages", "control"])
async def test_a_deleted_input_partition_and_its_end_record_are_refused(
    built: Built, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without its end record only the analyses know the partition existed: the log asks them."""
    _env(monkeypatch)
    shutil.copytree(built.root / "log", tmp_path / "log")
    settings = _settings(tmp_path)
    path = tmp_path / "log" / settings.topic(kind) / "00000.avro"
    path.unlink()
    path.with_name(path.name + ".end").unlink()
    with pytest.raises(LogError, match="is missing, but the analyses in this log account for offsets 0-"):
        await EmbeddedLog(settings.log_url, settings).start()
    assert not path.exists()
    where = ["--log", str(tmp_path / "log"), "--store", str(tmp_path / "store")]
    assert await _cli(["log", "check", *where]) == 1
    assert await _cli(["log", "repair", *where]) == 0
    log = EmbeddedLog(settings.log_url, settings)
    await log.start()
    assert (await log.end_offsets(settings.topic(kind)))[0] == built.ends[kind]
    await log.stop()


async def test_a_deleted_analyses_partition_is_refused_by_project(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the store knows how far the analyses went: ``project`` compares, and refuses."""
    _env(monkeypatch)
    shutil.copytree(built.root / "log", tmp_path / "log")
    shutil.copytree(built.root / "store", tmp_path / "store")
    settings = _settings(tmp_path)
    folder = tmp_path / "log" / settings.topic("analyses")
    shutil.rmtree(folder)
    where = ["--log", str(tmp_path / "log"), "--store", str(tmp_path / "store")]
    capsys.readouterr()
    assert await _cli(["project", *where]) == 5
    err = capsys.readouterr().err
    assert f"has seen offsets of {settings.topic('analyses')} partition 0 up to {built.ends['analyses'] - 1}" in err
    assert await _cli(["log", "check", *where]) == 1
    assert f"the store's view main (applied up to offset {built.ends['analyses'] - 1})" in capsys.readouterr().out
    assert await _cli(["log", "repair", *where]) == 0
    assert await _cli(["log", "check", *where]) == 0
    assert await _cli(["project", *where]) == 0  # the messages are analysed again, at new offsets
    store = open_store(settings.store)
    assert _snapshot(store) == built.store
    store.close()


def test_the_resume_header_names_agree() -> None:
    assert embedded_log.RESUME_HEADER == RESUME_HEADER


async def test_damage_found_while_reading_is_refused(built: Built, tmp_path: Path) -> None:
    """A block that changes after it was verified is refused when it is read, not returned."""
    shutil.copytree(built.root / "log", tmp_path / "log")
    settings = _settings(tmp_path)
    log = EmbeddedLog(settings.log_url, settings)
    await log.start()
    path = tmp_path / "log" / settings.topic("messages") / "00000.avro"
    first = built.blocks["messages"][0]
    data = bytearray(path.read_bytes())
    data[(first.start + first.end) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(LogError, match=rf"bytes {first.start}-{first.end - 1} \(offsets 0-{first.next - 1}\) changed"):
        [r async for r in log.read(settings.topic("messages"))]
    await log.stop()


def test_check_lists_every_partition_and_what_downstream_saw(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _env(monkeypatch)
    shutil.copytree(built.root / "log", tmp_path / "log")
    capsys.readouterr()
    assert main(["log", "check", "--log", str(tmp_path / "log"), "--store", str(built.root / "store")]) == 0
    out = capsys.readouterr().out
    for kind in KINDS:
        records = sum(b.count for b in built.blocks[kind])
        line = f"ok       {PREFIX}.{kind}/00000.avro: {records} record(s), next offset {built.ends[kind]} (checksummed)"
        assert line in out, out
    assert "the checkpoints of the store at" in out
    # messages, analyses, control, dead letters, the change feed, the audit trail of reads under grants
    assert "6 partition(s), all verified" in out
    assert main(["log", "check", "--log", "kafka://127.0.0.1:9092"]) == 2
    assert "for the embedded log" in capsys.readouterr().err


async def test_repair_of_a_healthy_log_changes_nothing(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _env(monkeypatch)
    shutil.copytree(built.root / "log", tmp_path / "log")
    before = _files(tmp_path / "log")
    assert await _cli(["log", "repair", "--log", str(tmp_path / "log"), "--store", str(built.root / "store")]) == 0
    assert "0 partition(s) repaired" in capsys.readouterr().out
    assert _files(tmp_path / "log") == before


def test_resume_headers_are_what_the_pipeline_writes(built: Built) -> None:
    [(_, value)] = [h for h in built.entries["analyses"][0][3] if h[0] == RESUME_HEADER]
    assert isinstance(json.loads(value), dict)


async def test_the_pipeline_refuses_a_log_that_lost_messages_its_analyses_saw(settings: Settings) -> None:
    """On any log (here the in-memory one): analyses that account for more messages than there are stop the run."""
    from adamem.projections.store.memory import InMemoryStore
    from adamem.streams.memory_log import InMemoryLog

    settings = dataclasses.replace(settings, embedded_partitions=1, partitions=1)
    first = InMemoryLog(settings)
    await first.start()
    messages = load_messages(SAMPLE, settings)
    await publish_messages(first, messages, settings)
    await run_pipeline(first, Projector(InMemoryStore()), _agent(), settings)
    cut = InMemoryLog(settings)  # the same log with the last ten messages lost
    await cut.start()
    kept = [r async for r in first.read(settings.topic("messages"))][:-10]
    await cut.append(settings.topic("messages"), [OutgoingRecord(r.key, r.value, r.headers) for r in kept])
    analyses = [r async for r in first.read(settings.topic("analyses"))]
    await cut.append(settings.topic("analyses"), [OutgoingRecord(r.key, r.value, r.headers) for r in analyses])
    end = len(kept)
    with pytest.raises(LogError, match=rf"offsets {end}-{len(messages) - 1} are missing"):
        await run_pipeline(cut, Projector(InMemoryStore()), _agent(), settings)
    assert (await cut.end_offsets(settings.topic("messages")))[0] == end  # nothing was published or analysed
    assert (await cut.end_offsets(settings.topic("analyses")))[0] == len(analyses)
