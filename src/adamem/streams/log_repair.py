"""Check and repair the embedded log: what ``adamem log check`` and ``adamem log repair`` do.

``check`` verifies every partition file of every topic under the log's folder, each entry of each
block decoded, reads its end record, and compares the end of each partition with the highest
offset anything downstream has seen of it:

* a messages or control partition: the ``adamem-source`` and ``adamem-resume`` headers of every
  analyses record (of every generation) and the ``adamem-source`` headers of the dead letters;
* an analyses partition: the checkpoints of the store (every view), and the dead letters' sources.

``repair`` does what ``check`` found needs doing, under the log's writer lock, one partition at a
time: it writes the partition anew into a temp file — the verified blocks copied byte for byte,
the entries of a damaged block kept whenever its checksum (or, in a file without checksums, its
decoding) still vouches for them, a gap entry for offsets it could not keep, so that no offset
is given out again — verifies that file, sets the damaged bytes aside in ``<topic>/damaged/``
(fsynced) and only then renames it over the old one and writes its end record. A damaged header
is rebuilt (the sync marker and codec are recovered from the blocks). ``--upgrade`` also rewrites
files written without checksums (codec ``null``) with them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any, cast

import fastavro

from adamem.streams.embedded_log import (
    CODEC,
    CODECS,
    DAMAGED,
    ENTRY_SCHEMA,
    GAP_HEADER,
    SYNC_SIZE,
    Block,
    Damage,
    EndMark,
    Header,
    Scan,
    _Bad,
    _offsets,
    _payload,
    _read_meta,
    _varint,
    describe,
    encode_block,
    encode_header,
    gap_entry,
    parse_block,
    read_mark,
    scan_file,
    set_aside,
    write_mark,
    writer_lock,
)
from adamem.streams.resume import RESUME_HEADER, SOURCE_HEADER

__all__ = ["LogReport", "PartitionReport", "check_log", "repair_log"]


@dataclass
class PartitionReport:
    """One partition file: what it holds, what is wrong with it, and what repair did or would do."""

    topic: str
    partition: int
    path: Path
    codec: str = ""
    checked: bool = False  # its blocks carry checksums
    records: int = 0  # readable records (gap entries not counted)
    end_offset: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # damage: the log refuses the partition
    notes: list[str] = field(default_factory=list)  # worth knowing, nothing refused
    downstream: int = 0  # the offset after the highest one downstream has seen
    seen_by: str = ""
    actions: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """``<topic>/<partition file>``."""
        return f"{self.topic}/{self.path.name}"


@dataclass
class LogReport:
    """Every partition of a log folder, and what downstream was compared with."""

    root: Path
    partitions: list[PartitionReport]
    compared: list[str]

    @property
    def damaged(self) -> list[PartitionReport]:
        """The partitions the log refuses."""
        return [p for p in self.partitions if p.problems]


# ---- reading what is there ----------------------------------------------------------------------


def _partition_files(folder: Path) -> list[Path]:
    found = {int(p.name[:5]) for p in folder.iterdir() if p.name[:5].isdigit() and p.name[5:] in (".avro", ".avro.end")}
    return [folder / f"{i:05d}.avro" for i in range(max(found) + 1)] if found else []


def _topics(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and _partition_files(p))


def _header_candidates(fd: int, size: int) -> Iterator[Header]:
    """Headers a file with a damaged one may have had (our own layouts first, then what it says)."""
    buf = os.pread(fd, min(size, 1 << 16), 0)
    tail = os.pread(fd, SYNC_SIZE, max(0, size - SYNC_SIZE))
    try:
        meta, pos = _read_meta(buf)
        codec = meta.get("avro.codec", b"null").decode("ascii", "replace")
        for c in [codec] if codec in CODECS else list(CODECS):
            yield Header(pos + SYNC_SIZE, c, buf[pos : pos + SYNC_SIZE], ENTRY_SCHEMA, False)
            yield Header(pos + SYNC_SIZE, c, tail, ENTRY_SCHEMA, False)
    except _Bad:
        pass
    first = buf.find(tail) if len(tail) == SYNC_SIZE else -1  # an intact header ends with the sync marker
    for c in CODECS:
        length = len(encode_header(c, bytes(SYNC_SIZE)))
        syncs = [buf[length - SYNC_SIZE : length], tail]
        try:  # the sync marker at the end of the first block
            count, i = _varint(buf, length)
            n, i = _varint(buf, i)
            if count > 0 and n >= 0:
                syncs.append(os.pread(fd, SYNC_SIZE, i + n))
        except _Bad:
            pass
        for sync in syncs:
            yield Header(length, c, sync, ENTRY_SCHEMA, False)
        if first >= 0:
            yield Header(first + SYNC_SIZE, c, tail, ENTRY_SCHEMA, False)


def recover_header(path: Path) -> Header | None:
    """The header a file with a damaged one had, found by the blocks that verify after it; None if none do."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        best: tuple[int, Header] | None = None
        for header in _header_candidates(fd, size):
            if len(header.sync) != SYNC_SIZE or header.length > size:
                continue
            good, pos, expected = 0, header.length, 0
            while pos < size and good < 8:
                try:
                    block, _ = parse_block(fd, size, pos, header, expected, full=False)
                except _Bad:
                    break
                good, pos, expected = good + 1, block.end, block.next
            if (good > 0 or header.length == size) and (best is None or good > best[0]):
                best = (good, header)
        return best[1] if best else None
    finally:
        os.close(fd)


def _entries(scan: Scan) -> Iterator[dict[str, Any]]:
    """Every entry of the verified blocks (gap entries too)."""
    if scan.missing or scan.header is None:
        return
    fd = os.open(scan.path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for block in scan.blocks:
            try:
                _, entries = parse_block(fd, size, block.start, scan.header, block.first, full=True)
            except _Bad:
                continue  # changed since the scan: the next check sees it
            yield from entries
    finally:
        os.close(fd)


def _salvage(fd: int, size: int, damage: Damage, header: Header) -> tuple[list[list[dict[str, Any]]], int]:
    """The entries of the blocks in damaged bytes that still verify, block by block, and the offset after them.

    A block's count, size and sync marker are outside its checksum, so each is tried without:
    the data may start a few bytes off (a count or size of another length), end where its
    header says or just before the next sync marker; what verifies (the snappy CRC, or in a file
    without checksums an exact decoding) and continues the offsets is kept.
    """
    out: list[list[dict[str, Any]]] = []
    expected, pos, limit = damage.first, damage.start, damage.end
    sync_at_end = limit - SYNC_SIZE >= pos and os.pread(fd, SYNC_SIZE, limit - SYNC_SIZE) == header.sync
    while pos < limit:
        head = os.pread(fd, 20, pos)
        starts: list[int] = []
        ends: list[int] = []
        try:
            _, i = _varint(head, 0)
            n, i = _varint(head, i)
            starts.append(pos + i)
            if n >= 0 and pos + i + n <= limit:
                ends.append(pos + i + n)
        except _Bad:
            pass
        starts += [pos + k for k in range(2, 12) if pos + k not in starts]
        if sync_at_end:
            ends.append(limit - SYNC_SIZE)
        ends.append(limit)
        found = None
        for start in starts:
            for end in dict.fromkeys(ends):
                if end - start < 1:
                    continue
                entries = _verified_entries(os.pread(fd, end - start, start), header, expected, damage.next)
                if entries:
                    found = entries, end + (SYNC_SIZE if os.pread(fd, SYNC_SIZE, end) == header.sync else 0)
                    break
            if found:
                break
        if found is None:
            break
        entries, pos = found
        out.append(entries)
        expected = entries[-1]["offset"] + 1
    return out, expected


def _verified_entries(data: bytes, header: Header, expected: int, limit: int | None) -> list[dict[str, Any]] | None:
    """The entries ``data`` holds if it is a verified block's data continuing at ``expected``, else None."""
    try:
        payload = _payload(data, header.codec)
    except _Bad:
        return None
    bio = BytesIO(payload)
    entries: list[dict[str, Any]] = []
    try:
        while bio.tell() < len(payload):
            entries.append(cast(dict[str, Any], fastavro.schemaless_reader(bio, header.schema, None)))
    except Exception:
        return None
    if not entries or any(GAP_HEADER in e["headers"] for e in entries):
        return None
    first = entries[0]["offset"]
    if first != expected or any(e["offset"] != first + i for i, e in enumerate(entries)):
        return None
    if limit is not None and first + len(entries) > limit:
        return None
    return entries


def _claims(scans: dict[tuple[str, int], Scan]) -> dict[tuple[str, int], tuple[int, str]]:
    """Per (topic, partition): the offset after the highest one that a record of the log names, and who."""
    claims: dict[tuple[str, int], tuple[int, str]] = {}

    def claim(topic: str, partition: int, nxt: int, who: str) -> None:
        if nxt > claims.get((topic, partition), (0, ""))[0]:
            claims[(topic, partition)] = (nxt, who)

    for (topic, partition), scan in scans.items():
        for entry in _entries(scan):
            headers = entry["headers"]
            if SOURCE_HEADER in headers:
                src, _, off = headers[SOURCE_HEADER].decode("utf-8", "replace").rpartition(":")
                t, _, p = src.rpartition(":")
                if p.isdigit() and off.isdigit():
                    claim(t, int(p), int(off) + 1, f"a record of {topic} (offset {entry['offset']})")
            if RESUME_HEADER in headers:
                try:
                    points = json.loads(headers[RESUME_HEADER])
                except ValueError:
                    continue
                for t, nxt in points.items() if isinstance(points, dict) else ():
                    if type(nxt) is int:
                        claim(t, partition, nxt, f"the analyses in {topic} (offset {entry['offset']})")
    return claims


def _store_claims(store: str, claims: dict[tuple[str, int], tuple[int, str]]) -> str | None:
    """Add the checkpoints of every view of the store; returns what was compared, None if no store is there."""
    from adamem.projections.store.base import store_folder
    from adamem.projections.store.factory import open_views

    root = Path(store_folder(store))
    if not (root / "views").is_dir():
        return None
    views = open_views(str(root))
    for view in views.views():
        reader = views.open_view(view, read_only=True)
        for p in range(reader.partition_count()):
            for topic, nxt in reader.checkpoint(p).items():
                if nxt > claims.get((topic, p), (0, ""))[0]:
                    claims[(topic, p)] = (nxt, f"the store's view {view} (applied up to offset {nxt - 1})")
    return f"the checkpoints of the store at {root}"


def check_log(root: str | os.PathLike[str], *, store: str | None = None) -> LogReport:
    """Verify every partition of the log folder ``root`` and compare it with downstream (nothing is changed)."""
    base = Path(root)
    scans: dict[tuple[str, int], Scan] = {}
    reports: dict[tuple[str, int], PartitionReport] = {}
    for folder in _topics(base):
        for p, path in enumerate(_partition_files(folder)):
            report = PartitionReport(folder.name, p, path)
            mark_error = None
            try:
                mark = read_mark(path)
            except _Bad as bad:
                mark, mark_error = None, bad.reason
            scan = scan_file(path, full=True)
            report.problems = describe(scan, mark, mark_error)
            if scan.header_error is not None and (header := recover_header(path)) is not None:
                scan = scan_file(path, full=True, header=header)  # to tell what is still readable
                report.problems += [f"after it: {text}" for text in describe(scan, None)]
            _summarise(report, scan, mark)
            scans[(folder.name, p)] = scan
            reports[(folder.name, p)] = report
    claims = _claims(scans)
    compared = ["the sources named by the analyses and dead letters in the log"]
    if store is not None and (what := _store_claims(store, claims)) is not None:
        compared.append(what)
    for (topic, p), (nxt, who) in sorted(claims.items()):
        found = reports.get((topic, p))
        if found is None:
            missing = PartitionReport(topic, p, base / topic / f"{p:05d}.avro", downstream=nxt, seen_by=who)
            if (base / topic).is_dir():
                missing.problems.append(
                    f"the file and its end record are missing, but {who} has seen offsets up to {nxt - 1}"
                )
            else:
                missing.problems.append(
                    f"the log has no topic {topic}, but {who} has seen offsets of it up to {nxt - 1} "
                    "(is that this log's store?)"
                )
            reports[(topic, p)] = missing
            continue
        report = found
        report.downstream, report.seen_by = nxt, who
        scan = scans[(topic, p)]
        if report.problems:
            report.notes.append(f"{who} has seen offsets up to {nxt - 1}: what was made of them downstream stays")
        if nxt > scan.end_offset and scan.header is not None and not scan.missing:
            report.problems.append(
                f"offsets {scan.end_offset}-{nxt - 1} are missing: the file ends at offset {scan.end_offset} "
                f"but {who} has seen offsets up to {nxt - 1}"
            )
    return LogReport(base, sorted(reports.values(), key=lambda r: (r.topic, r.partition)), compared)


def _summarise(report: PartitionReport, scan: Scan, mark: EndMark | None) -> None:
    if scan.missing:
        return
    header = scan.header
    report.codec = header.codec if header else ""
    report.checked = header is not None and header.codec == CODEC
    report.end_offset = scan.end_offset
    report.gaps = [(b.first, b.next) for b in scan.blocks if b.gap]
    report.records = sum(b.count for b in scan.blocks if not b.gap)
    if header is not None and header.codec != CODEC:
        report.notes.append(
            f"written without checksums (codec {header.codec}): a changed byte inside a value goes unseen; "
            "`adamem log repair --upgrade` rewrites it with them"
        )
    if scan.tail is not None and not report.problems:
        report.notes.append(
            f"bytes {scan.tail.start}-{scan.tail.end - 1} are a torn append past the committed end "
            "(a crash while writing; never readable); the next writer sets them aside"
        )
    if mark is None and scan.header is not None:
        report.notes.append("no end record yet (written before them); the next process that opens it writes one")
    elif mark is not None and mark.next < scan.end_offset:
        report.notes.append(f"its end record says offset {mark.next}; the next append brings it up to date")


# ---- repairing ----------------------------------------------------------------------------------


def repair_log(
    root: str | os.PathLike[str], *, store: str | None = None, upgrade: bool = False, fsync: bool = True
) -> LogReport:
    """Repair every damaged partition of the log folder ``root`` (see the module); returns the check it acted on."""
    base = Path(root)
    lock = writer_lock(base)
    try:
        report = check_log(base, store=store)
        for part in report.partitions:
            if part.problems or (upgrade and part.codec and not part.checked) or _needs_tidying(part.path):
                _repair_partition(part, upgrade=upgrade, fsync=fsync)
    finally:
        lock.close()
    return report


def _needs_tidying(path: Path) -> bool:
    """A torn tail or a missing end record: what any writer would fix, done here for every partition."""
    try:
        mark = read_mark(path)
    except _Bad:
        return True
    scan = scan_file(path)
    return not scan.missing and (scan.tail is not None or mark is None or mark.next < scan.end_offset)


def _repair_partition(part: PartitionReport, *, upgrade: bool, fsync: bool) -> None:
    path = part.path
    if not path.parent.is_dir():
        part.actions.append(
            f"not repaired: the log has no topic {part.topic}; if {part.seen_by or 'the store'} belongs to this log, "
            "rebuild the store (`adamem replay`) or restore the topic from a copy"
        )
        return
    try:
        mark = read_mark(path)
    except _Bad:
        mark = None
    committed = max(mark.next if mark else 0, part.downstream)
    aside: list[tuple[int, bytes, str, str]] = []  # start, bytes, kind, why
    rebuilt = False
    if not path.exists():
        scan, header = Scan(path, missing=True), None
        part.actions.append("made the missing file anew")
    else:
        scan = scan_file(path, full=True)
        header = scan.header
        if header is None:
            data = path.read_bytes()
            header = recover_header(path)
            if header is None:
                aside.append((0, data, "unreadable", f"no readable header: {scan.header_error}"))
                scan = Scan(path, missing=True)
            else:
                aside.append((0, data[: header.length], "header", f"damaged header: {scan.header_error}"))
                scan = scan_file(path, full=True, header=header)
                rebuilt = True
                part.actions.append("rebuilt the header (its sync marker and codec recovered from the blocks)")
    if header is None:
        out = Header(0, CODEC, os.urandom(SYNC_SIZE), ENTRY_SCHEMA, True)
    elif upgrade and header.codec != CODEC:
        out = Header(0, CODEC, header.sync, ENTRY_SCHEMA, True)
        part.actions.append("rewrote it with checksums (codec snappy)")
    elif rebuilt:
        out = Header(0, header.codec, header.sync, ENTRY_SCHEMA, True)
    else:
        out = header
    chunks: list[bytes] = []
    expected = kept = 0
    events: list[Block | Damage] = [*scan.blocks, *scan.damage, *([scan.tail] if scan.tail else [])]
    fd = os.open(path, os.O_RDONLY) if events else -1
    try:
        size = os.fstat(fd).st_size if fd >= 0 else 0
        for item in sorted(events, key=lambda e: e.start):
            assert header is not None
            if isinstance(item, Block):
                if out.codec == header.codec and out.sync == header.sync:
                    chunks.append(os.pread(fd, item.end - item.start, item.start))
                else:
                    _, entries = parse_block(fd, size, item.start, header, item.first, full=True)
                    chunks.append(encode_block(entries, out))
                kept += 0 if item.gap else item.count
                expected = item.next
                continue
            is_tail = item is scan.tail
            aside.append(
                (
                    item.start,
                    os.pread(fd, item.end - item.start, item.start),
                    "tail" if is_tail else "damaged",
                    item.reason,
                )
            )
            salvaged, expected = _salvage(fd, size, item, header)
            for entries in salvaged:
                chunks.append(encode_block(entries, out))
                kept += len(entries)
            if salvaged:
                n = sum(map(len, salvaged))
                part.actions.append(f"kept {n} record(s) of bytes {item.start}-{item.end - 1}: they still verify")
            nxt = item.next if item.next is not None else max(committed, expected)
            if nxt > expected:
                why = "committed, but cut off the file" if is_tail else f"unreadable: {item.reason}"
                chunks.append(encode_block([gap_entry(expected, nxt, why)], out))
                part.actions.append(f"recorded {_offsets(expected, nxt)} as a gap ({why}{_seen(part, nxt)})")
                expected = nxt
    finally:
        if fd >= 0:
            os.close(fd)
    if committed > expected:
        chunks.append(encode_block([gap_entry(expected, committed, "committed, but cut off the file")], out))
        part.actions.append(
            f"recorded {_offsets(expected, committed)} as a gap (committed, but cut off the file"
            f"{_seen(part, committed)})"
        )
        expected = committed
    if out is header and not rebuilt:
        with path.open("rb") as fo:
            head = fo.read(header.length)
    else:
        head = encode_header(out.codec, out.sync)
    _replace(path, head, chunks, aside, expected, kept, fsync=fsync, part=part)


def _seen(part: PartitionReport, nxt: int) -> str:
    """Who downstream has seen offsets below ``nxt`` of the partition (so nothing of them is lost there)."""
    return f"; {part.seen_by} has seen offsets up to {part.downstream - 1}" if part.downstream else ""


def _replace(
    path: Path,
    head: bytes,
    chunks: list[bytes],
    aside: list[tuple[int, bytes, str, str]],
    end_offset: int,
    kept: int,
    *,
    fsync: bool,
    part: PartitionReport,
) -> None:
    """Write the new file beside the old one, verify it, set the damaged bytes aside, rename, write the end record."""
    tmp = path.with_name(path.name + ".repair.tmp")
    with tmp.open("wb") as fo:
        fo.write(head)
        for chunk in chunks:
            fo.write(chunk)
        fo.flush()
        os.fsync(fo.fileno())
    check = scan_file(tmp, full=True)
    records = sum(b.count for b in check.blocks if not b.gap)
    if not check.clean or check.tail is not None or check.end_offset != end_offset or records != kept:
        tmp.unlink()
        raise AssertionError(f"the repaired {path} did not verify ({describe(check, None)}); nothing was changed")
    for start, data, kind, why in aside:
        if data:
            kept_at = set_aside(path, start, data, kind)
            part.actions.append(f"set bytes {start}-{start + len(data) - 1} aside in {DAMAGED}/{kept_at.name} ({why})")
    os.replace(tmp, path)
    write_mark(path, EndMark(end_offset, check.size), fsync=fsync)
    if not part.actions:
        part.actions.append("wrote its end record")
    part.actions.append(f"now: {records} record(s), next offset {end_offset}")
