"""The embedded log: standard Avro container files that survive a torn last write."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import avro.schema
import fastavro
import pytest
from avro.datafile import DataFileReader, DataFileWriter
from avro.errors import AvroException
from avro.io import DatumReader, DatumWriter

from adamem.cli import main
from adamem.errors import LogError
from adamem.settings import Settings
from adamem.streams.embedded_log import (
    ENTRY_SCHEMA,
    ENTRY_SCHEMA_JSON,
    GAP_HEADER,
    RESUME_HEADER,
    EmbeddedLog,
    scan_file,
)
from adamem.streams.log import OutgoingRecord


def _log(settings: Settings, partitions: int = 1) -> EmbeddedLog:
    return EmbeddedLog(settings.log_url, replace(settings, embedded_partitions=partitions))


async def _values(log: EmbeddedLog, topic: str) -> list[bytes]:
    return [r.value async for r in log.read(topic)]


async def test_files_are_plain_avro_containers(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    await log.append(topic, [OutgoingRecord("alice", b"one"), OutgoingRecord("bob", b"two")])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    with path.open("rb") as fo:
        rows = list(fastavro.reader(fo))
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [(0, "alice", b"one"), (1, "bob", b"two")]


async def test_appends_from_threads_of_one_process_all_land(settings: Settings) -> None:
    """A process's appends may run side by side (``append`` runs on a thread; a parent appends for its
    reanalysis processes): they share the process's writer lock instead of racing to take it."""
    topic = settings.topic("messages")
    for attempt in range(5):
        log = _log(settings, partitions=4)
        await log.start()
        await asyncio.gather(
            *(log.append(topic, [OutgoingRecord(f"u{i}", f"{attempt}-{i}".encode())]) for i in range(32))
        )
        await log.stop()
    log = _log(settings, partitions=4)
    await log.start()
    values = sorted(await _values(log, topic))
    await log.stop()
    assert values == sorted(f"{a}-{i}".encode() for a in range(5) for i in range(32))


def _end_record(path: Path) -> Path:
    return path.with_name(path.name + ".end")


async def test_torn_last_write_is_set_aside_and_earlier_records_survive(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    await log.append(topic, [OutgoingRecord("alice", b"a" * 100)])
    path = Path(settings.log_url) / topic / "00000.avro"
    committed = _end_record(path).read_bytes()
    await log.append(topic, [OutgoingRecord("alice", b"b" * 100), OutgoingRecord("alice", b"c" * 100)])
    await log.stop()
    # A crash in the middle of the second append: part of its block is on disk, its end record is not.
    size = path.stat().st_size
    with path.open("r+b") as fo:
        fo.truncate(size - 60)
    _end_record(path).write_bytes(committed)

    reopened = _log(settings)
    await reopened.start()
    assert await _values(reopened, topic) == [b"a" * 100]  # readers stop before the torn tail
    placed = await reopened.append(topic, [OutgoingRecord("alice", b"d")])
    assert placed == [(0, 1)]  # nobody can have read the torn batch: offsets stay dense
    assert await _values(reopened, topic) == [b"a" * 100, b"d"]
    await reopened.stop()
    [torn] = (path.parent / "damaged").iterdir()  # its bytes are kept aside, not destroyed
    assert torn.name.endswith(".torn") and torn.stat().st_size == size - 60 - _first_block_end(path)


def _first_block_end(path: Path) -> int:
    return scan_file(path).blocks[0].end


async def test_a_committed_block_cut_off_is_refused_not_truncated(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    await log.append(topic, [OutgoingRecord("alice", b"a" * 100)])
    await log.append(topic, [OutgoingRecord("alice", b"b" * 100), OutgoingRecord("alice", b"c" * 100)])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    for size in (path.stat().st_size - 60, _first_block_end(path)):  # inside the last block, at its start
        with path.open("r+b") as fo:
            fo.truncate(size)
        before = path.read_bytes()
        with pytest.raises(LogError, match=r"00000\.avro: offsets 1-2 are missing.*adamem log repair"):
            await _log(settings).start()
        assert path.read_bytes() == before


async def test_torn_first_block_leaves_an_empty_partition(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    path = Path(settings.log_url) / topic / "00000.avro"
    header_only = path.stat().st_size  # created atomically at start
    committed = _end_record(path).read_bytes()
    await log.append(topic, [OutgoingRecord("alice", b"x" * 80)])
    await log.stop()
    with path.open("r+b") as fo:
        fo.truncate(header_only + 20)
    _end_record(path).write_bytes(committed)  # the crash came before the end record
    reopened = _log(settings)
    await reopened.start()
    assert await reopened.append(topic, [OutgoingRecord("alice", b"y")]) == [(0, 0)]
    assert await _values(reopened, topic) == [b"y"]
    await reopened.stop()


async def test_corruption_before_the_last_block_is_refused_not_truncated(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    for i in range(3):
        await log.append(topic, [OutgoingRecord("alice", bytes([65 + i]) * 50)])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    first = _first_block_end(path)
    data = bytearray(path.read_bytes())
    data[first - 16 : first] = b"\xee" * 16  # break the first block's sync marker
    path.write_bytes(bytes(data))
    before = path.stat().st_size
    with pytest.raises(LogError, match=r"bytes \d+-\d+ are damaged \(its sync marker .*offset 0"):
        await _log(settings).start()
    assert path.stat().st_size == before


async def test_damaged_header_is_refused(settings: Settings) -> None:
    log = _log(settings)
    await log.start()
    topic = settings.topic("messages")
    await log.append(topic, [OutgoingRecord("alice", b"a")])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    path.write_bytes(b"XXXX" + path.read_bytes()[4:])
    with pytest.raises(LogError, match="no readable Avro header"):
        await _log(settings).start()


async def test_one_writer_at_a_time(settings: Settings) -> None:
    topic = settings.topic("messages")
    first, second = _log(settings), _log(settings)
    await first.start()
    await second.start()
    await first.append(topic, [OutgoingRecord("alice", b"1")])
    with pytest.raises(LogError, match="another process is writing"):
        await second.append(topic, [OutgoingRecord("alice", b"2")])
    await first.stop()
    await second.append(topic, [OutgoingRecord("alice", b"2")])
    assert await _values(second, topic) == [b"1", b"2"]
    await second.stop()


async def test_partition_count_is_fixed_by_the_folder(settings: Settings) -> None:
    log = _log(settings, partitions=3)
    await log.start()
    await log.stop()
    later = _log(settings, partitions=1)  # a different setting must not reshuffle owners
    await later.start()
    assert later.partitions(settings.topic("messages")) == 3
    await later.stop()


def _old_log(
    settings: Settings, topic: str, batches: list[list[bytes]], headers: dict[str, bytes] | None = None
) -> Path:
    """A partition file as the log wrote it before checksums: codec null, one block per append, no end record."""
    path = Path(settings.log_url) / topic / "00000.avro"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fo:
        fastavro.writer(fo, ENTRY_SCHEMA, [])
    offset = 0
    for batch in batches:
        rows = [
            {"offset": offset + i, "key": "alice", "timestamp": 1, "value": v, "headers": headers or {}}
            for i, v in enumerate(batch)
        ]
        offset += len(batch)
        with path.open("a+b") as fo:
            fastavro.writer(fo, ENTRY_SCHEMA, rows, sync_interval=1 << 62)
    return path


async def test_logs_written_before_checksums_stay_readable_and_writable(settings: Settings) -> None:
    topic = settings.topic("messages")
    path = _old_log(settings, topic, [[b"a", b"b"], [b"c"]])
    log = _log(settings, partitions=1)
    await log.start()
    assert await _values(log, topic) == [b"a", b"b", b"c"]
    assert await log.append(topic, [OutgoingRecord("alice", b"d")]) == [(0, 3)]
    await log.stop()
    with path.open("rb") as fo:
        reader = fastavro.reader(fo)
        assert reader.codec == "null"  # appends keep the file's codec
        assert [r["value"] for r in reader] == [b"a", b"b", b"c", b"d"]
    assert path.with_name("00000.avro.end").exists()  # the first open recorded its end: truncation is seen now
    with path.open("r+b") as fo:
        fo.truncate(scan_file(path).blocks[1].end)
    with pytest.raises(LogError, match="offset 3 are missing"):
        await _log(settings, partitions=1).start()


async def test_an_old_log_cut_before_the_upgrade_is_refused_by_its_analyses(settings: Settings) -> None:
    """No end record yet: the resume headers of the analyses are what the file is compared with."""
    messages = _old_log(settings, settings.topic("messages"), [[b"a", b"b"], [b"c"]])
    resume = {RESUME_HEADER: json.dumps({settings.topic("messages"): 3}).encode()}
    _old_log(settings, settings.topic("analyses"), [[b"x", b"y", b"z"]], headers=resume)
    with messages.open("r+b") as fo:
        fo.truncate(scan_file(messages).blocks[0].end)
    with pytest.raises(
        LogError, match=r"offset 2 are missing: .* the analyses in this log account for offsets up to 2"
    ):
        await _log(settings, partitions=1).start()


def test_repair_upgrade_rewrites_old_files_with_checksums(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = settings.topic("control")
    path = _old_log(settings, topic, [[b"a", b"b"], [b"c"]])
    root = Path(settings.log_url)
    store = ["--store", str(tmp_path / "no-store")]
    assert main(["log", "check", "--log", str(root), *store]) == 0
    assert "written without checksums (codec null)" in capsys.readouterr().out
    assert main(["log", "repair", "--upgrade", "--log", str(root), *store]) == 0
    assert "rewrote it with checksums (codec snappy)" in capsys.readouterr().out
    with path.open("rb") as fo:
        reader = fastavro.reader(fo)
        assert reader.codec == "snappy"
        assert [(r["offset"], r["value"]) for r in reader] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert [(b.first, b.count) for b in scan_file(path, full=True).blocks] == [(0, 2), (2, 1)]  # the same blocks
    assert main(["log", "check", "--log", str(root), *store]) == 0
    assert f"ok       {topic}/00000.avro: 3 record(s), next offset 3 (checksummed)" in capsys.readouterr().out


async def test_any_avro_reader_reads_a_repaired_file_and_readers_skip_its_gap(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(settings, partitions=1)
    await log.start()
    topic = settings.topic("messages")
    for value in (b"a", b"b", b"c"):
        await log.append(topic, [OutgoingRecord("alice", value)])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    middle = scan_file(path).blocks[1]
    data = bytearray(path.read_bytes())
    data[middle.end - 18] ^= 0xFF  # its checksum
    path.write_bytes(bytes(data))
    args = ["--log", settings.log_url, "--store", str(tmp_path / "no-store")]
    assert await asyncio.to_thread(main, ["log", "repair", *args]) == 0
    assert "recorded offset 1 as a gap" in capsys.readouterr().out
    with path.open("rb") as fo:
        rows = [(r["offset"], r["value"], GAP_HEADER in r["headers"]) for r in fastavro.reader(fo)]
    assert rows == [(0, b"a", False), (1, b"", True), (2, b"c", False)]
    log = _log(settings, partitions=1)
    await log.start()
    assert [(r.offset, r.value) async for r in log.read(topic)] == [(0, b"a"), (2, b"c")]
    assert await log.append(topic, [OutgoingRecord("alice", b"d")]) == [(0, 3)]
    await log.stop()


async def test_apache_avro_reads_the_files_and_checks_their_checksums(settings: Settings) -> None:
    """The reference implementation (Apache Avro, with python-snappy) reads our blocks and refuses a changed one."""
    log = _log(settings, partitions=1)
    await log.start()
    topic = settings.topic("messages")
    await log.append(topic, [OutgoingRecord("alice", b"one", (("h", b"v"),)), OutgoingRecord("bob", b"two")])
    await log.append(topic, [OutgoingRecord("alice", b"three")])
    await log.stop()
    path = Path(settings.log_url) / topic / "00000.avro"
    with path.open("rb") as fo, DataFileReader(fo, DatumReader()) as reader:
        assert reader.codec == "snappy"
        rows = [(r["offset"], r["key"], r["value"], r["headers"]) for r in reader]
    assert rows == [(0, "alice", b"one", {"h": b"v"}), (1, "bob", b"two", {}), (2, "alice", b"three", {})]
    first = scan_file(path).blocks[0]
    data = bytearray(path.read_bytes())
    data[first.end - 18] ^= 0x01  # a byte of the first block's CRC-32
    path.write_bytes(bytes(data))
    with path.open("rb") as fo, pytest.raises(AvroException, match=r"(?i)checksum"):
        list(DataFileReader(fo, DatumReader()))


async def test_a_file_apache_avro_wrote_is_verified_and_read(settings: Settings) -> None:
    """Blocks another implementation wrote with the same schema verify by the same checksum."""
    topic = settings.topic("messages")
    path = Path(settings.log_url) / topic / "00000.avro"
    path.parent.mkdir(parents=True)
    schema = avro.schema.parse(json.dumps(ENTRY_SCHEMA_JSON))
    with DataFileWriter(path.open("wb"), DatumWriter(), schema, codec="snappy") as writer:
        for i, value in enumerate((b"a", b"b", b"c")):
            writer.append({"offset": i, "key": "alice", "timestamp": 1, "value": value, "headers": {}})
    scan = scan_file(path, full=True)
    assert scan.clean and scan.header is not None and scan.header.codec == "snappy" and scan.end_offset == 3
    log = _log(settings, partitions=1)
    await log.start()
    assert await _values(log, topic) == [b"a", b"b", b"c"]
    await log.stop()


async def test_repair_keeps_every_record_of_an_old_file_whose_sync_marker_changed(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = settings.topic("messages")
    path = _old_log(settings, topic, [[b"a", b"b"], [b"c", b"d"], [b"e"]])
    middle = scan_file(path).blocks[1]
    data = bytearray(path.read_bytes())
    data[middle.end - 3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(LogError, match=r"are damaged \(its sync marker"):
        await _log(settings, partitions=1).start()
    args = ["--log", settings.log_url, "--store", str(tmp_path / "no-store")]
    assert await asyncio.to_thread(main, ["log", "repair", *args]) == 0
    assert "kept 2 record(s) of bytes" in capsys.readouterr().out
    log = _log(settings, partitions=1)
    await log.start()
    assert [(r.offset, r.value) async for r in log.read(topic)] == [
        (0, b"a"),
        (1, b"b"),
        (2, b"c"),
        (3, b"d"),
        (4, b"e"),
    ]
    await log.stop()


async def test_repair_sets_a_torn_tail_aside_and_waits_for_no_writer(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(settings, partitions=1)
    await log.start()
    topic = settings.topic("control")
    await log.append(topic, [OutgoingRecord("alice", b"a")])
    path = Path(settings.log_url) / topic / "00000.avro"
    with path.open("ab") as fo:
        fo.write(b"\x02\x40torn")  # the start of a block whose append never finished
    args = ["--log", settings.log_url, "--store", str(tmp_path / "no-store")]
    assert (
        await asyncio.to_thread(main, ["log", "repair", *args]) == 5
    )  # the writer still holds the lock (a log error: exit 5)
    assert "another process is writing" in capsys.readouterr().err
    await log.stop()
    assert await asyncio.to_thread(main, ["log", "check", *args]) == 0
    assert "torn append past the committed end" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["log", "repair", *args]) == 0
    [torn] = (path.parent / "damaged").iterdir()
    assert torn.read_bytes() == b"\x02\x40torn"
    assert scan_file(path).tail is None
