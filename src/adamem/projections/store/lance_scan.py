"""Read every version of every Lance dataset under a folder and find rows holding given bytes.

Lance may compress or re-encode string columns, so a byte search of its files alone proves
nothing: this reads the rows back, every version the dataset still has, with Lance itself. A
full-text index keeps the words of the rows it indexes as an FST (a byte of a word per transition,
shared prefixes and suffixes): ``index_tokens`` reads its dictionary files back into the tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import lance
import pyarrow as pa
from lance.file import LanceFileReader

__all__ = ["LanceHit", "fst_keys", "index_token_files", "index_tokens", "lance_datasets", "scan_dataset"]


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


def index_token_files(dataset: Path) -> Iterator[Path]:
    """The token dictionaries of a Lance dataset's full-text indexes (``_indices/<uuid>/*tokens.lance``)."""
    for path in sorted((dataset / "_indices").glob("*/*tokens.lance")):
        if path.is_file():
            yield path


def index_tokens(path: Path) -> list[bytes]:
    """Every token of a full-text index's dictionary file: the keys of the FSTs it stores."""
    data = LanceFileReader(str(path)).read_all().to_table()
    if "_token_fst_bytes" not in data.column_names:
        raise ValueError(f"{path} holds no token FST (columns {data.column_names}): a format this scan cannot read")
    return [key for fst in data.column("_token_fst_bytes").to_pylist() for key in fst_keys(fst)]


# The byte a transition of a one-transition FST node stands for when its state byte gives only its
# index here (the fst crate's ``COMMON_INPUTS_INV``).
_COMMON_INPUTS = b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHGW"


def fst_keys(fst: bytes) -> list[bytes]:
    """The keys of a serialised FST (the ``fst`` crate's format, versions 2 and 3), in order.

    Nodes are read backwards from their address (the address of their last byte, the state byte):
    one transition to the node just before (``11`` + common input), one transition (``10``), or any
    number (``0F``, F: final), with addresses packed as deltas below the node.
    """
    version = int.from_bytes(fst[0:8], "little")
    end = len(fst) if version <= 2 else len(fst) - 4  # version 3 ends with a checksum
    count = int.from_bytes(fst[end - 16 : end - 8], "little")
    root = int.from_bytes(fst[end - 8 : end], "little")
    keys: list[bytes] = []
    stack: list[tuple[int, bytes]] = [(root, b"")]
    while stack:
        addr, prefix = stack.pop()
        final, transitions = _fst_node(fst, addr, version)
        if final:
            keys.append(prefix)
        stack.extend((target, prefix + bytes([byte])) for byte, target in reversed(transitions))
    if len(keys) != count:
        raise ValueError(f"an FST of {count} keys read as {len(keys)}: a format this scan cannot read")
    return sorted(keys)


def _unpack(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at : at + size], "little")


def _delta(data: bytes, at: int, size: int, node_end: int) -> int:
    delta = _unpack(data, at, size)
    return 0 if delta == 0 else node_end - delta


def _fst_node(fst: bytes, addr: int, version: int) -> tuple[bool, list[tuple[int, int]]]:
    """(final, [(input byte, target address)]) of the node at ``addr`` (0: the empty final node)."""
    if addr == 0:
        return True, []
    state = fst[addr]
    kind = state >> 6
    if kind in (0b11, 0b10):  # one transition
        common = state & 0b0011_1111
        input_len = 0 if common else 1
        byte = _COMMON_INPUTS[common - 1] if common else fst[addr - 1]
        if kind == 0b11:  # ... to the node compiled immediately before it
            return False, [(byte, addr - input_len - 1)]
        sizes = fst[addr - input_len - 1]
        tsize, osize = sizes >> 4, sizes & 0x0F
        node_end = addr - input_len - 1 - tsize - osize
        return False, [(byte, _delta(fst, addr - input_len - 1 - tsize, tsize, node_end))]
    final = bool(state & 0b0100_0000)
    ntrans = state & 0b0011_1111
    ntrans_len = 0 if ntrans else 1
    if not ntrans:
        ntrans = fst[addr - 1]
        ntrans = 256 if ntrans == 1 else ntrans
    sizes = fst[addr - ntrans_len - 1]
    tsize, osize = sizes >> 4, sizes & 0x0F
    index_size = 256 if version >= 2 and ntrans > 32 else 0
    total_trans = ntrans + ntrans * tsize + index_size
    node_end = addr - ntrans_len - 1 - total_trans - ntrans * osize - (osize if final else 0)
    inputs_at = addr - ntrans_len - 1 - index_size
    transitions = []
    for i in range(ntrans):
        byte = fst[inputs_at - i - 1]
        at = inputs_at - ntrans - i * tsize - tsize
        transitions.append((byte, _delta(fst, at, tsize, node_end)))
    return final, transitions
