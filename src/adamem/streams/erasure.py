"""Prove an erasure: find every place in the store, the log and the keystore where a text remains.

Every file is searched three ways, because compression hides text from a byte search:

- its raw bytes, for the text as UTF-8, lower-cased, and JSON-escaped;
- an embedded-log partition file (``*.avro``) block by block with the log's own reader, which
  decompresses each snappy block, checks its CRC and decodes every entry (key, value, headers);
  each value is also decoded as an event and **opened with the keystore**: a sealed message or
  analysis whose key is still there is readable, so its free text counts as remaining (this is
  also what finds the text of owners that were not forgotten), one whose key is gone is not;
- a Lance dataset (``*.lance``) row by row with Lance, in every version it still keeps, and the
  token dictionaries of its full-text indexes (``_indices``) token by token: they keep the words of
  the rows they index as an FST, which no byte search finds. A token counts when it holds the text
  in any form above, or is the text's own search token (``adamem.text``: lower-cased, stemmed).

The keystore's own files are searched raw (they hold keys, not text). For a Kafka log
(``find_text_in_log``) every record of every topic of the deployment (the topic prefix) is read
from the broker and searched the same way — key, value, headers, opened value; the broker's
segment files themselves are on the broker, and hold the same bytes.

A file that cannot be read that way (damaged log blocks, bytes set aside by ``adamem log
repair``) cannot be proven clean and is reported as such.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from adamem.errors import AdaMemError, ConfigError
from adamem.events import ChatMessage, MemoryCompressed, MessageAnalyzed
from adamem.projections.store.lance_scan import index_token_files, index_tokens, lance_datasets, scan_dataset
from adamem.schemas.serde import decode_event
from adamem.streams.embedded_log import DAMAGED, read_entries, scan_file
from adamem.streams.keys import KeyRingLike
from adamem.text import search_text

if TYPE_CHECKING:
    from adamem.settings import Settings
    from adamem.streams.log import EventLog

__all__ = ["Trace", "find_text", "find_text_in_log", "opened_text", "text_forms"]


@dataclass(frozen=True, slots=True)
class Trace:
    """One place the text remains (or may remain: ``unverifiable``)."""

    path: Path
    where: str
    unverifiable: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.where}"


def text_forms(text: str) -> list[bytes]:
    """The byte forms a text is searched in: UTF-8, lower-cased (search tokens), JSON-escaped."""
    if not text.strip():
        raise ConfigError("the text to look for is empty")
    forms = [text.encode(), text.lower().encode(), json.dumps(text)[1:-1].encode()]
    return list(dict.fromkeys(forms))


def _raw(path: Path, forms: Sequence[bytes]) -> list[Trace]:
    data = path.read_bytes()
    found = sorted({data.find(f) for f in forms if f in data})
    return [Trace(path, f"raw bytes at {at}") for at in found]


def opened_text(value: bytes, keys: KeyRingLike | None) -> bytes:
    """The free text an event's bytes still give with the keystore (UTF-8 JSON; empty when none or shredded)."""
    if keys is None:
        return b""
    try:
        event = decode_event(value, keys)
    except AdaMemError:
        return b""
    content: dict[str, Any]
    if isinstance(event, MessageAnalyzed):
        if event.shredded:
            return b""
        content = {**event.content_record(), "message": _message_content(event.message)}
        content["embedding"] = {}
    elif isinstance(event, ChatMessage):
        if event.shredded:
            return b""
        content = _message_content(event)
    elif isinstance(event, MemoryCompressed):
        if event.shredded:
            return b""
        content = event.content_record()
    else:
        content = event.to_record()
    return json.dumps(content, ensure_ascii=False, default=str).encode()


def _message_content(message: ChatMessage) -> dict[str, Any]:
    return {"text": message.text, "speaker": message.speaker.name, "metadata": message.metadata}


def _entry_traces(
    where: str, key: str, value: bytes, headers: dict[str, bytes], forms: Sequence[bytes], keys: KeyRingLike | None
) -> list[str]:
    parts = {"key": key.encode(), "value": value, "value opened with the keystore": opened_text(value, keys)}
    parts.update({f"header {k}": v for k, v in headers.items()})
    return [f"{where}: {part}" for part, data in parts.items() if any(f in data for f in forms)]


def _log_file(path: Path, forms: Sequence[bytes], keys: KeyRingLike | None) -> list[Trace]:
    """Entries of an embedded-log partition file holding the text, read through the log's reader."""
    scan = scan_file(path)
    traces: list[Trace] = []
    if not scan.clean:
        traces.append(Trace(path, "has damaged blocks the reader cannot decode (`adamem log check`)", True))
    if scan.header is None:
        return traces
    for entry in read_entries(scan, 0, scan.end_offset):
        for where in _entry_traces(
            f"offset {entry['offset']}", entry["key"], entry["value"], entry["headers"], forms, keys
        ):
            traces.append(Trace(path, where))
    return traces


def _files(root: Path) -> Iterable[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def find_text(
    text: str,
    *,
    log_root: Path | None,
    store_root: Path | None,
    keys_root: Path | None = None,
    keys: KeyRingLike | None = None,
) -> list[Trace]:
    """Every place under the embedded log, store and keystore folders where ``text`` remains.

    ``keys`` opens sealed events of the log (what a key still opens is still there).
    """
    forms = text_forms(text)
    traces: list[Trace] = []
    for root in (r for r in (log_root, store_root, keys_root) if r is not None):
        if not root.is_dir():
            raise ConfigError(f"{root} is not a folder; give the folders of the embedded log, store and keystore")
        for path in _files(root):
            traces += _raw(path, forms)
            if DAMAGED in path.relative_to(root).parts:
                traces.append(Trace(path, "bytes set aside by `adamem log repair`; may hold compressed text", True))
            elif root == log_root and path.suffix == ".avro":
                traces += _log_file(path, forms, keys)
        if root == store_root:
            for dataset in lance_datasets(root):
                for hit in scan_dataset(dataset, forms):
                    traces.append(Trace(dataset, f"version {hit.version}, column {hit.column}, row {hit.row_id}"))
                traces += _index_traces(dataset, [*forms, *_search_token(text)])
    return traces


def _search_token(text: str) -> list[bytes]:
    """The text as the full-text index stores it, when it is one token (lower-cased, stemmed)."""
    token = search_text(text)
    return [token.encode()] if token and " " not in token else []


def _index_traces(dataset: Path, forms: Sequence[bytes]) -> list[Trace]:
    """Tokens of the dataset's full-text indexes holding the text; a dictionary it cannot read, as unverifiable."""
    traces: list[Trace] = []
    for path in index_token_files(dataset):
        try:
            tokens = index_tokens(path)
        except (OSError, ValueError, pa.ArrowException) as exc:
            traces.append(Trace(path, f"full-text index tokens this scan cannot read ({exc})", True))
            continue
        traces += [
            Trace(path, f"full-text index token {t.decode(errors='replace')!r}")
            for t in tokens
            if any(f in t for f in forms)
        ]
    return traces


async def find_text_in_log(log: EventLog, settings: Settings, text: str, keys: KeyRingLike | None) -> list[Trace]:
    """Every record of every topic of the deployment on a (Kafka) log holding ``text`` (key, value, headers, opened)."""
    forms = text_forms(text)
    topics = getattr(log, "topics", None)
    if topics is None:
        raise ConfigError(f"{log.url} cannot list its topics; search an embedded log's folder instead")
    traces: list[Trace] = []
    for topic in await topics():
        async for rec in log.read(topic):
            where = f"{topic} partition {rec.partition} offset {rec.offset}"
            for hit in _entry_traces(where, rec.key, rec.value, dict(rec.headers), forms, keys):
                traces.append(Trace(Path(log.url), hit))
    return traces
