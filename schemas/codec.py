"""Avro single-object encoding: ``C3 01`` + 8-byte little-endian CRC-64-AVRO fingerprint + body.

Writers frame each event with the fingerprint of the schema they wrote it with. Readers look the
writer schema up by fingerprint (current schemas and every retired version under ``history/``)
and read with their own, current reader schema, so an added field with a default evolves
forward. Neither fastavro nor apache-avro implements the framing; this module does.
"""

from __future__ import annotations

import functools
import io
import json
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from adamem.errors import DecodeError, SchemaError, UnknownSchemaError

__all__ = ["MAGIC", "SCHEMA_DIR", "SchemaRegistry", "default_registry", "fingerprint_of"]

MAGIC = b"\xc3\x01"
SCHEMA_DIR = Path(__file__).resolve().parent
_HEADER = struct.Struct("<Q")

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def fingerprint_of(expanded_schema: Any) -> int:
    """CRC-64-AVRO fingerprint of a fully expanded schema's parsing canonical form."""
    return int(fingerprint(to_parsing_canonical_form(expanded_schema), "CRC-64-AVRO"), 16)


class SchemaRegistry:
    """Schemas by full name (for writing and reading) and by fingerprint (for resolving writers)."""

    def __init__(self) -> None:
        self._named: dict[str, Any] = {}
        self._current: dict[str, Any] = {}
        self._current_fp: dict[str, int] = {}
        self._writers: dict[int, tuple[str, Any]] = {}
        self._upcasters: dict[tuple[str, int], Upcaster] = {}

    def register(self, schema: Mapping[str, Any], *, current: bool = True) -> int:
        """Add a schema; ``current=False`` registers an old writer version only. Returns its fingerprint."""
        named = dict(self._named) if not current else self._named
        try:
            expanded = parse_schema(dict(schema), named_schemas=dict(named), expand=True)
            parse_schema(dict(schema), named_schemas=named)  # remember its named types
            # Readers and writers get the self-contained (expanded) form: no outside references.
            parsed = parse_schema(expanded, named_schemas={}, _write_hint=False)
        except Exception as exc:  # fastavro raises several types for a bad schema
            raise SchemaError(f"schema {schema.get('name')!r} does not parse: {exc}") from exc
        name = str(cast(dict[str, Any], parsed)["name"])
        fp = fingerprint_of(expanded)
        self._writers[fp] = (name, parsed)
        if current:
            self._current[name] = parsed
            self._current_fp[name] = fp
        return fp

    def add_upcaster(self, name: str, from_version: int, upcast: Upcaster) -> None:
        """Register a function that lifts a decoded record of ``name`` from ``from_version`` by one."""
        self._upcasters[(name, from_version)] = upcast

    def names(self) -> list[str]:
        """Full names of the current schemas."""
        return sorted(self._current)

    def fingerprint(self, name: str) -> int:
        """Fingerprint of the current schema named ``name``."""
        try:
            return self._current_fp[name]
        except KeyError:
            raise SchemaError(f"no schema named {name!r}; known: {self.names()}") from None

    def schema(self, name: str) -> Any:
        """The parsed current schema named ``name``."""
        self.fingerprint(name)
        return self._current[name]

    def encode(self, name: str, record: Mapping[str, Any]) -> bytes:
        """Frame ``record`` with the current schema ``name``."""
        buf = io.BytesIO()
        buf.write(MAGIC)
        buf.write(_HEADER.pack(self.fingerprint(name)))
        try:
            schemaless_writer(buf, self._current[name], dict(record))
        except Exception as exc:  # fastavro raises ValueError/TypeError/ValidationError
            raise SchemaError(f"record does not fit schema {name!r}: {exc}") from exc
        return buf.getvalue()

    def writer_of(self, data: bytes) -> str:
        """Full name of the schema ``data`` was written with (reads only the header)."""
        return self._writers[self._read_header(data)][0]

    def decode(self, data: bytes, expected: str | None = None) -> tuple[str, dict[str, Any]]:
        """Decode framed bytes; returns (schema full name, record) read with the current reader schema."""
        fp = self._read_header(data)
        name, writer = self._writers[fp]
        if expected is not None and name != expected:
            raise DecodeError(f"expected a {expected} event, got {name} (fingerprint {fp:016x})")
        reader = self._current.get(name, writer)
        body = io.BytesIO(data[10:])
        try:
            record = schemaless_reader(body, writer, reader)
        except Exception as exc:  # EOFError, UnicodeDecodeError, SchemaResolutionError, ...
            raise DecodeError(
                f"{name} body ({len(data) - 10} bytes) does not decode: {type(exc).__name__}: {exc}"
            ) from exc
        if body.tell() != len(data) - 10:
            raise DecodeError(f"{name} body has {len(data) - 10 - body.tell()} trailing byte(s); the event is corrupt")
        if not isinstance(record, dict):
            raise DecodeError(f"{name} body decoded to {type(record).__name__}, not a record")
        return name, self._upcast(name, record)

    def _read_header(self, data: bytes) -> int:
        if len(data) < 10:
            raise DecodeError(f"{len(data)} byte(s) is too short for a single-object-encoded event")
        if data[:2] != MAGIC:
            raise DecodeError(f"no Avro single-object marker (got {data[:2].hex()}, want c301)")
        (fp,) = _HEADER.unpack_from(data, 2)
        if fp not in self._writers:
            raise UnknownSchemaError(
                f"unknown writer schema fingerprint {fp:016x}: add the writer's .avsc to "
                f"{SCHEMA_DIR / 'history'} (or upgrade) to read it"
            )
        return int(fp)

    def _upcast(self, name: str, record: dict[str, Any]) -> dict[str, Any]:
        version = int(record.get("schema_version", 1))
        while (name, version) in self._upcasters:
            record = self._upcasters[(name, version)](record)
            version += 1
            record["schema_version"] = version
        return record


def _load_all(registry: SchemaRegistry, folder: Path, *, current: bool) -> None:
    pending = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.avsc"))]
    # Schemas may reference each other by name; register in dependency order by retrying.
    while pending:
        failed = []
        for schema in pending:
            try:
                registry.register(schema, current=current)
            except SchemaError:
                failed.append(schema)
        if len(failed) == len(pending):
            names = [s.get("name") for s in failed]
            raise SchemaError(f"schemas {names} in {folder} reference unknown types")
        pending = failed


@functools.cache
def default_registry() -> SchemaRegistry:
    """The registry of every schema shipped in this package (current and historical)."""
    registry = SchemaRegistry()
    _load_all(registry, SCHEMA_DIR, current=True)
    history = SCHEMA_DIR / "history"
    if history.is_dir():
        _load_all(registry, history, current=False)
    return registry
