"""The embedded log: append-only Avro object container files, one per topic partition.

Layout: ``ROOT/<topic>/<partition>.avro``, each a standard Avro object container (any Avro tool
reads it) of ``LogEntry`` records: offset, owner key, append time, the framed event bytes Kafka
would carry, and headers. Beside each file, ``<partition>.avro.end`` records how far the
partition was committed (its next offset and size); it is written after every append.

Every block can be verified. New files use Avro's standard ``snappy`` codec, whose blocks carry a
CRC-32 of their data (avro-tools and Java check it; fastavro does not, so this module does), and
their header carries a CRC-32 of its schema, codec and sync marker. Files written before (codec
``null``, no checksum) stay readable; in them everything but the bytes inside a value is checked.

One append is one block, so a batch is all-or-nothing. What is checked, and when:

* every block, when a process first opens the partition: its framing, sync marker and checksum,
  and that its offsets continue the block before; each new block as it appears; and each block
  again, every entry decoded, when it is read;
* the end of the file against the ``.end`` record: a file that ends before an offset that was
  committed has been truncated (or replaced by an older copy).

Damage is refused with a ``LogError`` that names the file, the bytes, the offsets and what to
do, and nothing is changed: ``adamem log check`` reports, ``adamem log repair`` sets damaged bytes
aside (``ROOT/<topic>/damaged/``), keeps every readable record, and records the offsets it could
not keep as a gap, so that no offset is ever given out twice. The one thing a writer removes by
itself is a torn block past the committed end — a crash in the middle of an append, which no
reader can have read; those bytes are set aside too. Offsets may therefore have gaps, as in
Kafka: a gap is a block of one entry whose ``adamem-log-gap`` header names the next offset, and
readers skip it.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import fcntl
import functools
import json
import os
import secrets
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from io import BytesIO
from pathlib import Path
from typing import IO, Any, cast

import cramjam
import fastavro
from fastavro.schema import to_parsing_canonical_form

from adamem.errors import LogError
from adamem.settings import Settings
from adamem.streams.log import TOPICS, LogRecord, OutgoingRecord, partition_for
from adamem.streams.resume import RESUME_HEADER

__all__ = [
    "CODEC",
    "ENTRY_SCHEMA",
    "ENTRY_SCHEMA_JSON",
    "GAP_HEADER",
    "Block",
    "Damage",
    "EmbeddedLog",
    "EndMark",
    "Header",
    "Scan",
    "create_file",
    "damage_error",
    "describe",
    "encode_block",
    "encode_header",
    "gap_entry",
    "gap_next",
    "parse_block",
    "read_entries",
    "read_mark",
    "scan_file",
    "set_aside",
    "write_mark",
    "writer_lock",
]

ENTRY_SCHEMA_JSON: dict[str, Any] = {
    "type": "record",
    "name": "LogEntry",
    "namespace": "adamem.log",
    "doc": "One record of the embedded log: where it is and the framed event it holds.",
    "fields": [
        {"name": "offset", "type": "long", "doc": "Offset within the partition, from 0."},
        {"name": "key", "type": "string", "doc": "Memory owner (the partition key)."},
        {"name": "timestamp", "type": "long", "doc": "Append time, ms since the epoch (UTC)."},
        {"name": "value", "type": "bytes", "doc": "Avro single-object-encoded event."},
        {
            "name": "headers",
            "type": {"type": "map", "values": "bytes"},
            "default": {},
            "doc": "Record headers.",
        },
    ],
}
ENTRY_SCHEMA = fastavro.parse_schema(ENTRY_SCHEMA_JSON)
_SCHEMA_TEXT = json.dumps(ENTRY_SCHEMA_JSON, separators=(",", ":")).encode()
_CANONICAL = {to_parsing_canonical_form(ENTRY_SCHEMA)}
"""Parsing canonical forms of every LogEntry schema a file may have been written with."""

CODEC = "snappy"
"""Codec of new files: Avro's standard one that carries a CRC-32 of each block's data."""
CODECS = ("snappy", "null", "deflate")
GAP_HEADER = "adamem-log-gap"
"""Header of a gap entry: JSON ``{"next": N, ...}``; offsets from the entry's own up to N hold nothing."""
HEADER_CHECK = "adamem.header.crc32"
"""Header metadata of new files: CRC-32 (hex) of the schema, the codec and the sync marker."""
MAGIC = b"Obj\x01"
SYNC_SIZE = 16
END_SUFFIX = ".end"
DAMAGED = "damaged"
"""Folder, inside a topic's folder, that damaged and torn bytes are set aside in."""
_MAX_HEADER = 1 << 16


class _Bad(Exception):
    """Bytes that are not what this module wrote; ``declared_end``: where their block says it ends."""

    def __init__(self, reason: str, *, declared_end: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.declared_end = declared_end


# ---- the format: header, blocks, entries ----------------------------------------------------------


def _zigzag(n: int) -> bytes:
    """An Avro ``long`` (zig-zag varint)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    shift = result = 0
    for _ in range(10):
        if pos >= len(buf):
            raise _Bad("the file ends inside a block header")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise _Bad("a malformed block header")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The Avro ``long`` (zig-zag varint) at ``pos`` and the position after it."""
    raw, pos = _uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def _header_check(codec: bytes, sync: bytes, schema: bytes) -> bytes:
    return b"%08x" % zlib.crc32(b"\0".join((schema, codec, sync)))


def encode_header(codec: str, sync: bytes) -> bytes:
    """The container header of a new file: the LogEntry schema, the codec, a check and the sync marker."""
    meta = {
        "avro.schema": _SCHEMA_TEXT,
        "avro.codec": codec.encode(),
        HEADER_CHECK: _header_check(codec.encode(), sync, _SCHEMA_TEXT),
    }
    out = bytearray(MAGIC)
    out += _zigzag(len(meta))
    for key, value in meta.items():
        out += _zigzag(len(key)) + key.encode() + _zigzag(len(value)) + value
    out += _zigzag(0) + sync
    return bytes(out)


@functools.lru_cache(maxsize=16)
def _parse_schema_text(text: bytes) -> Any:
    return fastavro.parse_schema(json.loads(text))


@dataclass(frozen=True)
class Header:
    """A container header: where the first block starts, the codec, the sync marker and the schema."""

    length: int
    codec: str
    sync: bytes
    schema: Any
    checked: bool  # it carries our CRC-32 (a file of this version), not only Avro's fields


def _read_meta(buf: bytes) -> tuple[dict[str, bytes], int]:
    """The metadata map after the magic, and the position of the sync marker after it."""
    meta: dict[str, bytes] = {}
    pos = len(MAGIC)
    while True:
        count, pos = _varint(buf, pos)
        if count == 0:
            return meta, pos
        if count < 0:
            count = -count
            _, pos = _varint(buf, pos)  # the block's size in bytes
        if count > 64:
            raise _Bad(f"{count} metadata entries")
        for _ in range(count):
            parts = []
            for _ in range(2):
                n, pos = _varint(buf, pos)
                if n < 0 or pos + n > len(buf):
                    raise _Bad("a metadata entry runs past the header")
                parts.append(buf[pos : pos + n])
                pos += n
            meta[parts[0].decode("utf-8", "replace")] = parts[1]


def _read_header(fd: int, size: int) -> Header:
    buf = os.pread(fd, min(size, _MAX_HEADER), 0)
    if buf[: len(MAGIC)] != MAGIC:
        raise _Bad("no Avro container magic 'Obj\\x01'")
    try:
        meta, pos = _read_meta(buf)
    except _Bad as bad:
        raise _Bad(f"its metadata is malformed ({bad.reason})") from None
    sync = buf[pos : pos + SYNC_SIZE]
    if len(sync) < SYNC_SIZE:
        raise _Bad("it ends inside the header")
    codec = meta.get("avro.codec", b"null")
    schema_text = meta.get("avro.schema", b"")
    check = meta.get(HEADER_CHECK)
    if check is not None and check != _header_check(codec, sync, schema_text):
        raise _Bad("its checksum does not match its schema, codec and sync marker")
    if codec.decode("ascii", "replace") not in CODECS:
        raise _Bad(f"unknown codec {codec!r}")
    try:
        schema = _parse_schema_text(schema_text)
        canonical = to_parsing_canonical_form(schema)
    except Exception as exc:
        raise _Bad(f"its schema does not parse ({type(exc).__name__})") from None
    if canonical not in _CANONICAL:
        raise _Bad("its schema is not the LogEntry schema")
    return Header(pos + SYNC_SIZE, codec.decode(), sync, schema, check is not None)


def _payload(data: bytes, codec: str) -> bytes:
    """A block's entries' bytes; for snappy, checked against the block's CRC-32."""
    if codec == "null":
        return data
    if codec == "deflate":
        try:
            return zlib.decompress(data, -15)
        except zlib.error:
            raise _Bad("its deflate data does not decompress") from None
    if len(data) < 4:
        raise _Bad("its snappy data is shorter than a checksum")
    try:
        declared, _ = _uvarint(data, 0)  # snappy's own preamble: the uncompressed length
    except _Bad:
        raise _Bad("its snappy data is malformed") from None
    if declared > 24 * len(data) + 64:  # snappy expands at most 64 bytes out of 3
        raise _Bad("its snappy data declares an impossible length")
    try:
        payload = bytes(cramjam.snappy.decompress_raw(data[:-4]))
    except Exception:
        raise _Bad("its snappy data does not decompress") from None
    if zlib.crc32(payload) != int.from_bytes(data[-4:], "big"):
        raise _Bad("its checksum does not match its data")
    return payload


def _compress(payload: bytes, codec: str) -> bytes:
    if codec == "null":
        return payload
    if codec == "deflate":
        c = zlib.compressobj(wbits=-15)
        return c.compress(payload) + c.flush()
    return bytes(cramjam.snappy.compress_raw(payload)) + zlib.crc32(payload).to_bytes(4, "big")


def gap_next(entry: dict[str, Any]) -> int | None:
    """The next offset a gap entry names; None for an ordinary entry."""
    value = entry["headers"].get(GAP_HEADER)
    if value is None:
        return None
    try:
        nxt = json.loads(value)["next"]
    except (ValueError, KeyError, TypeError):
        raise _Bad("a gap entry without a readable next offset") from None
    if type(nxt) is not int or nxt <= entry["offset"]:
        raise _Bad(f"a gap entry at offset {entry['offset']} names next offset {nxt!r}")
    return nxt


def _decode(payload: bytes, schema: Any, count: int, expected: int | None, full: bool) -> list[dict[str, Any]]:
    """A block's entries (only the first unless ``full``), checked to continue at ``expected``."""
    bio = BytesIO(payload)
    entries: list[dict[str, Any]] = []
    try:
        for _ in range(count if full else 1):
            entries.append(cast(dict[str, Any], fastavro.schemaless_reader(bio, schema, None)))
    except Exception as exc:
        raise _Bad(f"its entries do not decode ({type(exc).__name__})") from None
    if full and bio.tell() != len(payload):
        raise _Bad(f"its data is longer than its {count} entries")
    first = entries[0]["offset"]
    if expected is not None and first != expected:
        raise _Bad(f"it starts at offset {first} where offset {expected} was due")
    for i, entry in enumerate(entries):
        if entry["offset"] != first + i:
            raise _Bad(f"its entry {i} has offset {entry['offset']}, not {first + i}")
    if gap_next(entries[0]) is not None and count != 1:
        raise _Bad("a gap entry that does not stand alone in its block")
    return entries


def encode_block(entries: Sequence[dict[str, Any]], header: Header) -> bytes:
    """One container block holding ``entries``, in the file's schema and codec."""
    bio = BytesIO()
    for entry in entries:
        fastavro.schemaless_writer(bio, header.schema, entry)
    data = _compress(bio.getvalue(), header.codec)
    return _zigzag(len(entries)) + _zigzag(len(data)) + data + header.sync


def gap_entry(first: int, nxt: int, reason: str) -> dict[str, Any]:
    """The entry that records offsets ``first`` .. ``nxt - 1`` as given out and holding nothing."""
    note = {"next": nxt, "lost": [first, nxt - 1], "reason": reason, "at": _utc()}
    return {
        "offset": first,
        "key": "",
        "timestamp": int(time.time() * 1000),
        "value": b"",
        "headers": {GAP_HEADER: json.dumps(note).encode()},
    }


@dataclass(frozen=True)
class Block:
    """A verified block: its bytes ``start`` .. ``end`` (after the sync marker) and its offsets."""

    start: int
    end: int
    first: int
    count: int
    next: int  # the offset after it: first + count, or what a gap entry names
    gap: bool = False  # a gap block: one entry that stands for offsets first .. next - 1, holding nothing


def parse_block(
    fd: int, size: int, pos: int, header: Header, expected: int | None, *, full: bool
) -> tuple[Block, list[dict[str, Any]]]:
    """The block at ``pos``, verified (and its entries: all if ``full`` or it is the last, else the first)."""
    head = os.pread(fd, 20, pos)
    count, i = _varint(head, 0)
    length, i = _varint(head, i)
    if count < 1 or length < 0:
        raise _Bad(f"a block header of {count} entries in {length} bytes")
    data_start = pos + i
    end = data_start + length + SYNC_SIZE
    if end > size:
        raise _Bad(f"a block of {length} bytes runs past the end of the file")
    data = os.pread(fd, length + SYNC_SIZE, data_start)
    if len(data) < length + SYNC_SIZE:
        raise _Bad("the file ends inside a block")
    if data[length:] != header.sync:
        raise _Bad("its sync marker does not match the header's", declared_end=end)
    try:
        payload = _payload(data[:length], header.codec)
        entries = _decode(payload, header.schema, count, expected, full or end == size)
    except _Bad as bad:
        raise _Bad(bad.reason, declared_end=end) from None
    first = int(entries[0]["offset"])
    gap = gap_next(entries[0])
    return Block(pos, end, first, count, gap or first + count, gap is not None), entries


@dataclass(frozen=True)
class Damage:
    """Bytes ``start`` .. ``end`` that are not a verified block, and the offsets they stood for."""

    start: int
    end: int
    first: int  # the first offset due there
    next: int | None  # the first offset of the next verified block (None: none follows)
    reason: str


@dataclass(frozen=True)
class Scan:
    """What a partition file holds: verified blocks, damage, and bytes of a torn append at the end."""

    path: Path
    missing: bool = False
    size: int = 0
    ident: tuple[int, int] = (0, 0)
    header: Header | None = None
    header_error: str | None = None
    blocks: tuple[Block, ...] = ()
    damage: tuple[Damage, ...] = ()
    tail: Damage | None = None  # bytes after the last block that hold no sync marker (a torn append)

    @functools.cached_property
    def firsts(self) -> list[int]:
        """The first offset of each block, for bisecting."""
        return [b.first for b in self.blocks]

    @property
    def clean(self) -> bool:
        """Its header and every block verified (a torn tail may remain)."""
        return not self.missing and self.header is not None and not self.damage

    @property
    def end_offset(self) -> int:
        """The offset after the last verified block."""
        return self.blocks[-1].next if self.blocks else 0

    @property
    def good_end(self) -> int:
        """The byte after the last verified block (the header's end when there is none)."""
        if self.blocks:
            return self.blocks[-1].end
        return self.header.length if self.header is not None else 0


def _sync_positions(fd: int, size: int, sync: bytes, start: int) -> Iterator[int]:
    """Positions of the sync marker in the file from ``start`` on, in order."""
    chunk = 1 << 20
    pos = start
    carry = b""
    while pos < size:
        buf = carry + os.pread(fd, chunk, pos)
        base = pos - len(carry)
        i = buf.find(sync)
        while i >= 0:
            yield base + i
            i = buf.find(sync, i + 1)
        pos += chunk
        carry = buf[-(SYNC_SIZE - 1) :]


def _resync(fd: int, size: int, pos: int, header: Header, expected: int, bad: _Bad) -> tuple[Block | None, bool]:
    """After bad bytes at ``pos``: the next verified block (if any), and whether a sync marker follows them."""
    tried: set[int] = set()
    candidates: list[int] = [bad.declared_end] if bad.declared_end is not None else []
    seen_sync = False

    def attempt(c: int) -> Block | None:
        if c <= pos or c >= size or c in tried:
            return None
        tried.add(c)
        try:
            block, _ = parse_block(fd, size, c, header, None, full=False)
        except _Bad:
            return None
        return block if block.first >= expected else None

    for c in candidates:
        if (block := attempt(c)) is not None:
            return block, True
    for q in _sync_positions(fd, size, header.sync, pos):
        seen_sync = True
        if (block := attempt(q + SYNC_SIZE)) is not None:
            return block, True
    return None, seen_sync


def scan_file(path: Path, previous: Scan | None = None, *, full: bool = False, header: Header | None = None) -> Scan:
    """Verify a partition file (from where ``previous`` left off, when it is the same file, grown).

    ``full`` decodes every entry of every block (``adamem log check``); otherwise the first entry
    of each block and every entry of the last. ``header`` replaces a damaged one (repair).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return Scan(path, missing=True)
    try:
        st = os.fstat(fd)
        size, ident = st.st_size, (st.st_dev, st.st_ino)
        blocks: list[Block] = []
        if previous is not None and previous.ident == ident and previous.clean and previous.good_end <= size:
            if previous.size == size and not full:
                return previous
            hdr = previous.header
            assert hdr is not None
            blocks = list(previous.blocks)
            pos = previous.good_end
        else:
            try:
                hdr = header or _read_header(fd, size)
            except _Bad as bad:
                return Scan(path, size=size, ident=ident, header_error=bad.reason)
            pos = hdr.length
        damage: list[Damage] = []
        tail = None
        expected = blocks[-1].next if blocks else 0
        whole_at = -1  # a block to decode whole: the count of the block before bad bytes is suspect
        while pos < size:
            try:
                block, _ = parse_block(fd, size, pos, hdr, expected, full=full or pos == whole_at)
            except _Bad as bad:
                if blocks and not full and whole_at != blocks[-1].start:
                    # A count (outside the checksum) that is off shows only where the next block does not
                    # continue the offsets: decode the block before whole, and start from it if it fails.
                    whole_at = blocks[-1].start
                    try:
                        parse_block(fd, size, whole_at, hdr, blocks[-1].first, full=True)
                    except _Bad:
                        prev = blocks.pop()
                        pos, expected = prev.start, prev.first
                        continue
                found, seen_sync = _resync(fd, size, pos, hdr, expected, bad)
                if found is None and not seen_sync:
                    tail = Damage(pos, size, expected, None, bad.reason)
                    break
                if found is None:
                    damage.append(Damage(pos, size, expected, None, bad.reason))
                    break
                damage.append(Damage(pos, found.start, expected, found.first, bad.reason))
                block = found
            blocks.append(block)
            expected = block.next
            pos = block.end
        return Scan(path, False, size, ident, hdr, None, tuple(blocks), tuple(damage), tail)
    finally:
        os.close(fd)


def read_entries(scan: Scan, start: int, end: int) -> Iterator[dict[str, Any]]:
    """Entries (gap entries too) of the verified blocks holding offsets ``start`` <= offset < ``end``.

    Each block is read and verified again, every entry decoded; a block that changed since it
    was verified raises ``LogError``.
    """
    assert scan.header is not None
    blocks = scan.blocks
    i = max(0, bisect.bisect_right(scan.firsts, start) - 1)
    fd = os.open(scan.path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for block in blocks[i:]:
            if block.first >= end:
                return
            if block.next <= start:
                continue
            try:
                again, entries = parse_block(fd, size, block.start, scan.header, block.first, full=True)
                if again != block:
                    raise _Bad("its framing changed")
            except _Bad as bad:
                raise LogError(
                    f"{scan.path}: bytes {block.start}-{block.end - 1} ({_offsets(block.first, block.next)}) "
                    f"changed after they were verified: {bad.reason}. Nothing was changed. {_todo(scan.path)}"
                ) from None
            for entry in entries:
                if entry["offset"] >= end:
                    return
                if entry["offset"] >= start:
                    yield entry
    finally:
        os.close(fd)


# ---- the .end record, damage reports, setting bytes aside ----------------------------------------


@dataclass(frozen=True)
class EndMark:
    """How far a partition was committed: its next offset and its size in bytes then."""

    next: int
    size: int


def _mark_path(path: Path) -> Path:
    return path.with_name(path.name + END_SUFFIX)


def read_mark(path: Path) -> EndMark | None:
    """The ``.end`` record of a partition file; None when there is none (a log written before it)."""
    try:
        text = _mark_path(path).read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        mark = EndMark(int(data["next_offset"]), int(data["bytes"]))
        ok = data["crc32"] == zlib.crc32(f"{mark.next} {mark.size}".encode())
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise _Bad(f"{_mark_path(path).name} is unreadable")
    return mark


def write_mark(path: Path, mark: EndMark, *, fsync: bool) -> None:
    """Replace a partition's ``.end`` record atomically (a temp file of this writer's own, renamed)."""
    target = _mark_path(path)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    body = {"next_offset": mark.next, "bytes": mark.size, "crc32": zlib.crc32(f"{mark.next} {mark.size}".encode())}
    with tmp.open("w") as fo:
        fo.write(json.dumps(body) + "\n")
        fo.flush()
        if fsync:
            os.fsync(fo.fileno())
    os.replace(tmp, target)


def _offsets(first: int, nxt: int | None) -> str:
    if nxt is None:
        return f"offsets from {first}"
    return f"offset {first}" if nxt == first + 1 else f"offsets {first}-{nxt - 1}"


def _todo(path: Path) -> str:
    root = path.parent.parent
    return (
        f"See it with `adamem log check --log {root}`; `adamem log repair --log {root}` sets the damaged "
        "bytes aside, keeps every readable record and never gives an offset out twice "
        "(or restore the file from a copy)."
    )


def describe(scan: Scan, mark: EndMark | None, mark_error: str | None = None) -> list[str]:
    """What is wrong with a partition, in words (empty: nothing; a torn tail past the committed end is not)."""
    problems: list[str] = []
    if scan.missing:
        if mark is not None and mark.next > 0:
            problems.append(f"the file is missing, but {_offsets(0, mark.next)} were committed")
        return problems
    if scan.header_error is not None:
        problems.append(f"no readable Avro header ({scan.header_error})")
        return problems
    for d in scan.damage:
        problems.append(f"bytes {d.start}-{d.end - 1} are damaged ({d.reason}); they held {_offsets(d.first, d.next)}")
    if mark_error is not None:
        problems.append(f"its end record {mark_error}; run `adamem log repair` to write it again")
    elif mark is not None and scan.end_offset < mark.next:
        where = (
            f"a torn block at bytes {scan.tail.start}-{scan.tail.end - 1}"
            if scan.tail is not None
            else f"byte {scan.good_end}"
        )
        problems.append(
            f"{_offsets(scan.end_offset, mark.next)} are missing: the file ends at offset {scan.end_offset} "
            f"({where}) but offsets up to {mark.next - 1} were committed; it was truncated or replaced by an older copy"
        )
    return problems


def damage_error(scan: Scan, problems: list[str]) -> LogError:
    """The error refusing a damaged partition."""
    return LogError(f"{scan.path}: {'; '.join(problems)}. Nothing was changed. {_todo(scan.path)}")


def _utc() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def set_aside(path: Path, start: int, data: bytes, what: str) -> Path:
    """Keep bytes ``start`` .. of a partition file in ``<topic>/damaged/`` (fsynced); returns the file."""
    folder = path.parent / DAMAGED
    folder.mkdir(exist_ok=True)
    target = folder / f"{path.stem}.{_utc()}.{secrets.token_hex(2)}.bytes-{start}-{start + len(data) - 1}.{what}"
    with target.open("xb") as fo:
        fo.write(data)
        fo.flush()
        os.fsync(fo.fileno())
    return target


def writer_lock(root: Path) -> IO[bytes]:
    """Take the log's writer lock (one writing process at a time); release by closing the file."""
    lock = (root / ".writer.lock").open("ab")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise LogError(f"another process is writing to the log in {root}; stop it first") from None
    return lock


def create_file(path: Path, *, fsync: bool = True) -> Header:
    """A new partition file holding only its header, created atomically, and its ``.end`` record."""
    sync = secrets.token_bytes(SYNC_SIZE)
    data = encode_header(CODEC, sync)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    with tmp.open("wb") as fo:
        fo.write(data)
        fo.flush()
        os.fsync(fo.fileno())
    os.replace(tmp, path)
    write_mark(path, EndMark(0, len(data)), fsync=fsync)
    return Header(len(data), CODEC, sync, ENTRY_SCHEMA, True)


def _nothing_committed(path: Path) -> bool:
    """No offset of this partition was ever committed (by its end record)."""
    try:
        mark = read_mark(path)
    except _Bad:
        return False
    return mark is None or mark.next == 0


# ---- the adapter ---------------------------------------------------------------------------------


@dataclass
class _Partition:
    """One container file and what was verified of it."""

    path: Path
    scan: Scan | None = None
    initialised: bool = field(default=False)


class EmbeddedLog:
    """A partitioned log in local Avro container files; one writer process at a time."""

    def __init__(self, root: str | os.PathLike[str], settings: Settings) -> None:
        self.root = Path(root)
        self.url = str(self.root)
        self._settings = settings
        self._parts: dict[str, list[_Partition]] = {}
        self._lock: IO[bytes] | None = None
        self._appending = threading.Lock()  # appends run on threads: one at a time, as one writer

    async def start(self) -> None:
        """Open the folder, create missing topics, and verify every partition (damage is refused)."""
        self.root.mkdir(parents=True, exist_ok=True)
        for name in TOPICS:
            self._open_topic(self._settings.topic(name))

    async def stop(self) -> None:
        """Release the writer lock."""
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _writer_lock(self) -> None:
        if self._lock is None:
            self._lock = writer_lock(self.root)

    def hold_writer_lock(self) -> None:
        """Be the log's one writer from now on (a long-running writer fails at start, not at its first append)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._writer_lock()

    def _open_topic(self, topic: str) -> list[_Partition]:
        if topic in self._parts:
            return self._parts[topic]
        folder = self.root / topic
        folder.mkdir(parents=True, exist_ok=True)
        found = {
            int(p.name[:5]) for p in folder.iterdir() if p.name[:5].isdigit() and p.name[5:] in (".avro", ".avro.end")
        }
        n = max(found) + 1 if found else self._settings.embedded_partitions
        parts = [_Partition(folder / f"{p:05d}.avro") for p in range(n)]
        for p, part in enumerate(parts):
            if not part.path.exists() and _nothing_committed(part.path):
                if (seen := self._claimed(topic, p)) > 0:
                    raise LogError(
                        f"{part.path} is missing, but the analyses in this log account for {_offsets(0, seen)} of it. "
                        f"Nothing was changed. {_todo(part.path)}"
                    )
                create_file(part.path, fsync=self._settings.fsync)  # the partition count is fixed from now on
            self._refresh(part)
        self._parts[topic] = parts
        return parts

    def _refresh(self, part: _Partition) -> Scan:
        """The partition as on disk now, verified as far as it grew; damage raises ``LogError``.

        The end record is read before the file, so a concurrent append (file first, record after)
        never looks like a truncation. A damaged verdict is checked once more from scratch, in case
        a repair replaced the file meanwhile.
        """
        for attempt in range(2):
            mark_error = None
            try:
                mark = read_mark(part.path)
            except _Bad as bad:
                mark, mark_error = None, bad.reason
            scan = scan_file(part.path, part.scan if attempt == 0 else None)
            problems = describe(scan, mark, mark_error)
            if not problems:
                break
            part.scan = None
            if attempt == 1:
                raise damage_error(scan, problems)
        if mark is None and not part.initialised and not scan.missing:
            # A file written before end records: downstream is all there is to compare it with.
            topic, p = part.path.parent.name, int(part.path.name[:5])
            if (seen := self._claimed(topic, p)) > scan.end_offset:
                raise damage_error(
                    scan,
                    [
                        f"{_offsets(scan.end_offset, seen)} are missing: the file ends at offset {scan.end_offset} "
                        f"but the analyses in this log account for offsets up to {seen - 1}"
                    ],
                )
            part.initialised = True
            with contextlib.suppress(OSError):  # a read-only log stays as protected as it was
                write_mark(part.path, EndMark(scan.end_offset, scan.good_end), fsync=self._settings.fsync)
        part.scan = scan
        return scan

    def _claimed(self, topic: str, partition: int) -> int:
        """The next offset of ``topic`` that the last record of each other topic's partition accounts for.

        The pipeline's ``adamem-resume`` header (on every analyses record) names how far each input
        topic of its partition is handled; a partition with no end record is compared with it.
        """
        seen = 0
        for folder in self.root.iterdir() if self.root.is_dir() else ():
            path = folder / f"{partition:05d}.avro"
            if folder.name == topic or not path.is_file():
                continue
            scan = scan_file(path)
            if not scan.clean or not scan.blocks:
                continue
            last = scan.blocks[-1]
            with contextlib.suppress(LogError):
                for entry in read_entries(scan, last.first, last.next):
                    try:
                        points = json.loads(entry["headers"].get(RESUME_HEADER, b"{}"))
                    except ValueError:
                        continue
                    offset = points.get(topic) if isinstance(points, dict) else None
                    if type(offset) is int:
                        seen = max(seen, offset)
        return seen

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic`` (fixed when the topic's folder is first made)."""
        return len(self._open_topic(topic))

    async def append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        """Append records; each partition gets one block, fsynced when ``fsync`` is set."""
        return await asyncio.to_thread(self._append, topic, records)

    def _append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        if any(name == GAP_HEADER for rec in records for name, _ in rec.headers):
            raise LogError(f"the header {GAP_HEADER!r} is the embedded log's own; records may not carry it")
        with self._appending:  # appends of one process side by side (threads) would race for the files
            return self._append_one(topic, records)

    def _append_one(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        self._writer_lock()
        parts = self._open_topic(topic)
        scans: dict[int, Scan] = {}
        # A record names its partition (a dead letter stays on its arrival partition), or goes to its key's.
        where = [partition_for(r.key, len(parts)) if r.partition is None else r.partition for r in records]
        for p in sorted(set(where)):
            scan = self._refresh(parts[p])  # every partition is verified before anything is written
            if scan.tail is not None:
                scan = self._set_aside_tail(parts[p], scan)
            scans[p] = scan
        by_part: dict[int, list[dict[str, Any]]] = {}
        placed = []
        now = int(time.time() * 1000)
        for rec, p in zip(records, where, strict=True):
            batch = by_part.setdefault(p, [])
            offset = scans[p].end_offset + len(batch)
            batch.append(
                {"offset": offset, "key": rec.key, "timestamp": now, "value": rec.value, "headers": dict(rec.headers)}
            )
            placed.append((p, offset))
        for p, batch in by_part.items():
            part, scan = parts[p], scans[p]
            assert scan.header is not None
            data = encode_block(batch, scan.header)
            with part.path.open("r+b") as fo:
                if fo.seek(0, os.SEEK_END) != scan.good_end:
                    raise LogError(
                        f"{part.path} changed while this process held the writer lock; stop the other writer"
                    )
                fo.write(data)
                fo.flush()
                if self._settings.fsync:
                    os.fsync(fo.fileno())
            first = batch[0]["offset"]
            block = Block(scan.good_end, scan.good_end + len(data), first, len(batch), first + len(batch))
            part.scan = replace(scan, size=block.end, blocks=(*scan.blocks, block))
            write_mark(part.path, EndMark(block.next, block.end), fsync=self._settings.fsync)
        return placed

    def _set_aside_tail(self, part: _Partition, scan: Scan) -> Scan:
        """Move the bytes of a torn append (past the committed end) aside and cut them off the file."""
        assert scan.tail is not None
        with part.path.open("r+b") as fo:
            fo.seek(scan.tail.start)
            set_aside(part.path, scan.tail.start, fo.read(), "torn")
            fo.truncate(scan.tail.start)
            fo.flush()
            os.fsync(fo.fileno())
        part.scan = None
        return self._refresh(part)

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """Next offset per partition, as on disk now (another process may have appended)."""
        parts = self._open_topic(topic)
        return {p: self._refresh(part).end_offset for p, part in enumerate(parts)}

    async def read(
        self,
        topic: str,
        *,
        from_offsets: dict[int, int] | None = None,
        key: str | None = None,
        until: dict[int, int] | None = None,
    ) -> AsyncIterator[LogRecord]:
        """Records from ``from_offsets`` up to ``until`` (default: the end now), partition by partition."""
        parts = self._open_topic(topic)
        stop = until if until is not None else await self.end_offsets(topic)
        for p, part in enumerate(parts):
            start = (from_offsets or {}).get(p, 0)
            end = stop.get(p, 0)
            if start >= end:
                continue
            scan = self._refresh(part) if until is not None else part.scan
            assert scan is not None
            batch: list[LogRecord] = []
            for entry in read_entries(scan, start, min(end, scan.end_offset)):
                if GAP_HEADER in entry["headers"]:
                    continue
                if key is None or entry["key"] == key:
                    batch.append(
                        LogRecord(
                            topic,
                            p,
                            entry["offset"],
                            entry["key"],
                            entry["value"],
                            entry["timestamp"],
                            tuple(sorted(entry["headers"].items())),
                        )
                    )
                if len(batch) >= 1000:
                    for rec in batch:
                        yield rec
                    batch = []
                    await asyncio.sleep(0)
            for rec in batch:
                yield rec
