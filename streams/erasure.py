"""Prove an erasure: find every place under the store and the embedded log where a text remains.

Every file is searched three ways, because compression hides text from a byte search:

- its raw bytes, for the text as UTF-8, lower-cased, and JSON-escaped;
- an embedded-log partition file (``*.avro``) block by block with the log's own reader, which
  decompresses each snappy block, checks its CRC and decodes every entry (key, value, headers);
- a Lance dataset (``*.lance``) row by row with Lance, in every version it still keeps.

A file that cannot be read that way (damaged log blocks, bytes set aside by ``adamem log
repair``) cannot be proven clean and is reported as such.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adamem.errors import ConfigError
from adamem.projections.store.lance_scan import lance_datasets, scan_dataset
from adamem.streams.embedded_log import DAMAGED, read_entries, scan_file

__all__ = ["Trace", "find_text", "text_forms"]


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


def _log_file(path: Path, forms: Sequence[bytes]) -> list[Trace]:
    """Entries of an embedded-log partition file holding the text, read through the log's reader."""
    scan = scan_file(path)
    traces: list[Trace] = []
    if not scan.clean:
        traces.append(Trace(path, "has damaged blocks the reader cannot decode (`adamem log check`)", True))
    if scan.header is None:
        return traces
    for entry in read_entries(scan, 0, scan.end_offset):
        parts = {"key": entry["key"].encode(), "value": entry["value"]}
        parts.update({f"header {k}": v for k, v in entry["headers"].items()})
        for part, data in parts.items():
            if any(f in data for f in forms):
                traces.append(Trace(path, f"offset {entry['offset']}: {part}"))
    return traces


def _files(root: Path) -> Iterable[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def find_text(text: str, *, log_root: Path | None, store_root: Path | None) -> list[Trace]:
    """Every place under the embedded log folder and the store folder where ``text`` remains."""
    forms = text_forms(text)
    traces: list[Trace] = []
    for root in (r for r in (log_root, store_root) if r is not None):
        if not root.is_dir():
            raise ConfigError(f"{root} is not a folder; give the embedded log's and the store's folders")
        for path in _files(root):
            traces += _raw(path, forms)
            if DAMAGED in path.relative_to(root).parts:
                traces.append(Trace(path, "bytes set aside by `adamem log repair`; may hold compressed text", True))
            elif root == log_root and path.suffix == ".avro":
                traces += _log_file(path, forms)
        if root == store_root:
            for dataset in lance_datasets(root):
                for hit in scan_dataset(dataset, forms):
                    traces.append(Trace(dataset, f"version {hit.version}, column {hit.column}, row {hit.row_id}"))
    return traces
