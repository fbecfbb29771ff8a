"""Read every version of every Lance dataset under a folder and find rows holding given bytes.

Lance may compress or re-encode string columns, so a byte search of its files alone proves
nothing: this reads the rows back, every version the dataset still has, with Lance itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import lance
import pyarrow as pa

__all__ = ["LanceHit", "lance_datasets", "scan_dataset"]


@dataclass(frozen=True, slots=True)
class LanceHit:
    """A row of one version of a Lance dataset whose column holds the text."""

    dataset: Path
    version: int
    column: str
    row_id: str


def lance_datasets(root: Path) -> Iterator[Path]:
    """Every Lance dataset folder (``*.lance`` directories) under ``root``."""
    for path in sorted(root.rglob("*.lance")):
        if path.is_dir() and (path / "_versions").is_dir():
            yield path


def _texts(column: pa.ChunkedArray) -> list[bytes | None]:
    """A column's values as bytes: strings UTF-8 encoded, nested values as their text form."""
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return [None if v is None else v.encode() for v in column.to_pylist()]
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return column.to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_list(kind) or pa.types.is_struct(kind) or pa.types.is_map(kind):
        return [None if v is None else repr(v).encode() for v in column.to_pylist()]
    return []


def scan_dataset(path: Path, forms: Sequence[bytes]) -> list[LanceHit]:
    """Rows of every stored version of the dataset at ``path`` with any of ``forms`` in a text column."""
    hits: list[LanceHit] = []
    latest = lance.dataset(str(path))
    for info in latest.versions():
        version = int(info["version"])
        data = lance.dataset(str(path), version=version).to_table()
        ids = data.column("id").to_pylist() if "id" in data.column_names else list(range(data.num_rows))
        for name in data.column_names:
            for i, value in enumerate(_texts(data.column(name))):
                if value is not None and any(f in value for f in forms):
                    hits.append(LanceHit(path, version, name, str(ids[i])))
    return hits
