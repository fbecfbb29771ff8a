"""Avro single-object encoding: ``C3 01`` + 8-byte little-endian CRC-64-AVRO fingerprint + body.

Writers frame each event with the fingerprint of the schema they wrote it with, in the spec's
byte order, the one Avro's Java ``BinaryMessageEncoder`` writes (``ChatMessage``: ``C3 01 D2 DC
C6 4A E1 B2 5B 36``). Readers look the writer schema up by fingerprint (current schemas and every
retired version under ``history/``) and read with their own, current reader schema, so an added
field with a default evolves forward. Earlier releases of this module wrote the 8 bytes
reversed; logs keep such events forever, so a reader also looks a header up in that order
(``header_order`` tells which it was), and no writer writes it. Neither fastavro nor
apache-avro implements the framing; this module does.

Decoding is on the replay hot path, so each writer schema's way of reading is prepared once
(``_Plan``): fastavro gets schemas it has already parsed (it re-parses any other schema on every
record), and a body whose schema ends in an array of floats (``MessageAnalyzed``'s embedding) is
read by fastavro up to that array and the array itself with one ``struct`` call per block, which
gives the same floats several times faster than fastavro's per-item reads. A retired writer schema
that the current one only adds fields with defaults to (every schema under ``history/``) is read the
same way, with its own schema, and the added fields set to their defaults: what Avro's schema
resolution gives, without its per-record cost on logs written before the fields existed. Such an array comes
back as a ``Float32Array``: a list of the floats that also keeps their bytes, which a store can
write as they are. Fields of logical type ``uuid`` (in nested records) come back as their
canonical text, ``str(uuid.UUID(text))``, checked without building a ``UUID`` when the text is
canonical already (events' ids always are).
"""

from __future__ import annotations

import copy
import functools
import io
import json
import re
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from adamem.errors import DecodeError, SchemaError, UnknownSchemaError

__all__ = ["MAGIC", "SCHEMA_DIR", "Float32Array", "HeaderOrder", "SchemaRegistry", "default_registry", "fingerprint_of"]

MAGIC = b"\xc3\x01"
SCHEMA_DIR = Path(__file__).resolve().parent
_HEADER = struct.Struct("<Q")  # the spec's order, the only one written

HeaderOrder = Literal["spec", "reversed"]
"""Byte order of a header's fingerprint: the Avro spec's (little-endian), or the old reversed one."""

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def fingerprint_of(expanded_schema: Any) -> int:
    """CRC-64-AVRO fingerprint of a fully expanded schema's parsing canonical form.

    The number Java's ``SchemaNormalization.parsingFingerprint64`` gives (as unsigned); fastavro
    gives its 8 bytes as hex in little-endian order, the order of the header.
    """
    return int.from_bytes(
        bytes.fromhex(fingerprint(to_parsing_canonical_form(expanded_schema), "CRC-64-AVRO")), "little"
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to read the bodies of one writer schema (prepared once, used for every record)."""

    name: str
    writer: Any  # parsed by fastavro, carrying its "already parsed" marker
    reader: Any | None  # the current schema when it differs from the writer (schema resolution)
    head: Any | None  # the writer without its trailing float array, when it has one and needs no resolution
    tail: tuple[str, ...] = ()  # field path of that array, outermost record first
    uuids: tuple[tuple[str, ...], ...] = ()  # field paths of the uuid fields, read as plain strings
    added: tuple[tuple[tuple[str, ...], Any], ...] = ()  # fields the current schema adds: (path, default)


def _is_float(schema: Any) -> bool:
    return schema == "float" or (isinstance(schema, dict) and schema.get("type") == "float" and len(schema) == 1)


def _float_tail(schema: Any) -> tuple[str, ...]:
    """Field path of the array of floats a record schema ends with (recursively), or ()."""
    if not isinstance(schema, dict) or schema.get("type") != "record" or not schema.get("fields"):
        return ()
    last = schema["fields"][-1]
    kind = last["type"]
    if isinstance(kind, dict) and kind.get("type") == "array" and _is_float(kind.get("items")):
        return (str(last["name"]),)
    inner = _float_tail(kind)
    return (str(last["name"]), *inner) if inner else ()


def _without_tail(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """A copy of a record schema with the field at ``path`` removed."""
    fields = list(schema["fields"])
    if len(path) > 1:
        fields[-1] = {**fields[-1], "type": _without_tail(fields[-1]["type"], path[1:])}
    else:
        fields.pop()
    return {**schema, "fields": fields}


def _is_uuid(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "string" and schema.get("logicalType") == "uuid"


def _uuid_paths(schema: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Field paths of the uuid fields of a record schema, through nested records (not arrays, maps, unions)."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return []
    out: list[tuple[str, ...]] = []
    for f in schema["fields"]:
        where = (*path, str(f["name"]))
        out.extend([where] if _is_uuid(f["type"]) else _uuid_paths(f["type"], where))
    return out


def _plain_uuids(schema: Any) -> Any:
    """A copy of a record schema whose uuid fields (those ``_uuid_paths`` finds) are plain strings."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return schema
    fields = [{**f, "type": "string" if _is_uuid(f["type"]) else _plain_uuids(f["type"])} for f in schema["fields"]]
    return {**schema, "fields": fields}


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuid_text(value: Any) -> str:
    """The canonical text of a UUID (given as text or as a ``UUID``); ValueError for text that is none."""
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        return value
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(value))


def _without_docs(schema: Any) -> Any:
    """A schema with its ``doc`` strings left out (they do not change how a body reads)."""
    if isinstance(schema, dict):
        return {k: _without_docs(v) for k, v in schema.items() if k != "doc"}
    if isinstance(schema, list):
        return [_without_docs(s) for s in schema]
    return schema


def _added_fields(writer: Any, reader: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]] | None:
    """The fields ``reader`` adds to ``writer`` with their defaults, when that is all that differs; else None.

    Records are compared field by field through nested records (a field added inside a union, an array or
    a map, a renamed, removed or retyped field: None, for Avro's schema resolution to read).
    """
    if _without_docs(writer) == _without_docs(reader):
        return []
    is_record = isinstance(writer, dict) and writer.get("type") == "record"
    if not is_record or not isinstance(reader, dict) or reader.get("type") != "record":
        return None
    if writer.get("name") != reader.get("name") or writer.get("namespace") != reader.get("namespace"):
        return None
    wanted = {str(f["name"]): f for f in reader["fields"]}
    if any("aliases" in f for f in reader["fields"]):
        return None
    out: list[tuple[tuple[str, ...], Any]] = []
    for f in writer["fields"]:
        name = str(f["name"])
        if name not in wanted:
            return None
        inner = _added_fields(f["type"], wanted.pop(name)["type"], (*path, name))
        if inner is None:
            return None
        out += inner
    for name, f in wanted.items():
        if "default" not in f:
            return None
        out.append(((*path, name), f["default"]))
    return out


def _reverse(fp: int) -> int:
    """The number a header holding ``fp`` gives when read in the other byte order."""
    return int.from_bytes(fp.to_bytes(8, "little"), "big")


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    """An Avro long (zig-zag varint) at ``pos``; returns (value, next position)."""
    byte = data[pos]
    value, shift = byte & 0x7F, 7
    pos += 1
    while byte & 0x80:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        shift += 7
        pos += 1
    return (value >> 1) ^ -(value & 1), pos


class Float32Array(list[float]):
    """A decoded Avro array of floats that keeps its values' little-endian float32 bytes (``packed``)."""

    __slots__ = ("packed",)

    def __init__(self, values: Iterable[float], packed: bytes) -> None:
        super().__init__(values)
        self.packed = packed


def _read_floats(data: bytes, pos: int) -> tuple[Float32Array, int]:
    """An Avro array of floats (little-endian float32) at ``pos``, in any blocking; returns (values, next position)."""
    blocks: list[bytes] = []
    values: list[float] = []
    while True:
        count, pos = _read_long(data, pos)
        if count == 0:
            packed = blocks[0] if len(blocks) == 1 else b"".join(blocks)
            return Float32Array(values, packed), pos
        if count < 0:  # a negative count is followed by the block's size in bytes
            count = -count
            _, pos = _read_long(data, pos)
        values.extend(struct.unpack_from(f"<{count}f", data, pos))  # struct.error past the end
        blocks.append(data[pos : pos + 4 * count])
        pos += 4 * count


def _put(record: Any, path: tuple[str, ...], value: Any) -> None:
    """Set the field at ``path`` (outermost record first) of a decoded record."""
    for key in path[:-1]:
        record = record[key]
    record[path[-1]] = value


class SchemaRegistry:
    """Schemas by full name (for writing and reading) and by fingerprint (for resolving writers)."""

    def __init__(self) -> None:
        self._named: dict[str, Any] = {}
        self._current: dict[str, Any] = {}
        self._current_fp: dict[str, int] = {}
        self._writers: dict[int, tuple[str, Any]] = {}
        self._reversed: dict[int, int] = {}  # a fingerprint's bytes read reversed -> the fingerprint
        self._upcasters: dict[tuple[str, int], Upcaster] = {}
        self._expanded: dict[int, Any] = {}
        self._plans: dict[int, _Plan] = {}

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
        reversed_fp = _reverse(fp)
        # An old header is looked up reversed, so no fingerprint may be another's reversal.
        if (reversed_fp != fp and reversed_fp in self._writers) or self._reversed.get(fp, fp) != fp:
            raise SchemaError(
                f"schema {name!r}: fingerprint {fp:016x} is another's reversed; headers would be ambiguous"
            )
        self._writers[fp] = (name, parsed)
        self._reversed[reversed_fp] = fp
        self._expanded[fp] = expanded
        if current:
            self._current[name] = parsed
            self._current_fp[name] = fp
        self._plans.clear()  # a new current schema changes how older writers are resolved
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
        plan = self._plans.get(fp) or self._plan(fp)
        name = plan.name
        if expected is not None and name != expected:
            raise DecodeError(f"expected a {expected} event, got {name} (fingerprint {fp:016x})")
        try:
            record, end = self._read_body(plan, data)
        except Exception as exc:  # EOFError, IndexError, UnicodeDecodeError, SchemaResolutionError, ...
            raise DecodeError(
                f"{name} body ({len(data) - 10} bytes) does not decode: {type(exc).__name__}: {exc}"
            ) from exc
        if end != len(data):
            raise DecodeError(f"{name} body has {len(data) - end} trailing byte(s); the event is corrupt")
        if not isinstance(record, dict):
            raise DecodeError(f"{name} body decoded to {type(record).__name__}, not a record")
        return name, self._upcast(name, record)

    def _plan(self, fp: int) -> _Plan:
        """Prepare (once per writer fingerprint) the schemas fastavro reads this writer's bodies with."""
        name, parsed = self._writers[fp]
        expanded = self._expanded[fp]
        current = self._current.get(name)
        wanted = self._expanded[self._current_fp[name]] if current is not None else expanded
        added = _added_fields(expanded, wanted) if current is not None and current is not parsed else []
        if added is None:  # an older writer that differs by more than added fields: fastavro resolves it
            writer = parse_schema(expanded, named_schemas={})
            reader = parse_schema(wanted, named_schemas={})
            plan = _Plan(name, writer, reader, None, (), tuple(_uuid_paths(wanted)))
        else:  # the current writer, or an older one the current schema only adds fields with defaults to
            plain = _plain_uuids(expanded)
            tail = _float_tail(plain)
            head = parse_schema(_without_tail(plain, tail), named_schemas={}) if tail else None
            plan = _Plan(
                name,
                parse_schema(plain, named_schemas={}),
                None,
                head,
                tail,
                tuple(_uuid_paths(expanded)),
                tuple((where, default) for where, default in added),
            )
        self._plans[fp] = plan
        return plan

    @staticmethod
    def _read_body(plan: _Plan, data: bytes) -> tuple[Any, int]:
        """The record of a framed event and the position where its body ended."""
        body = io.BytesIO(data)
        body.seek(10)
        if plan.head is None:
            record = schemaless_reader(body, plan.writer, plan.reader)
            end = body.tell()
        else:
            record = schemaless_reader(body, plan.head, None)
            values, end = _read_floats(data, body.tell())
            _put(record, plan.tail, values)
        for path in plan.uuids:
            inner: Any = record
            for key in path[:-1]:
                inner = inner[key]
            inner[path[-1]] = _uuid_text(inner[path[-1]])
        for path, default in plan.added:
            _put(record, path, copy.deepcopy(default))
        return record, end

    def reframe(self, data: bytes) -> bytes:
        """``data`` with its header in the spec's order (the same bytes when it is already)."""
        header = _HEADER.pack(self._read_header(data))
        return data if data[2:10] == header else MAGIC + header + data[10:]

    def header_order(self, data: bytes) -> HeaderOrder:
        """Byte order of the fingerprint in ``data``'s header (reads only the header)."""
        return "spec" if self._read_header(data) == _HEADER.unpack_from(data, 2)[0] else "reversed"

    def _read_header(self, data: bytes) -> int:
        """The writer schema's fingerprint, from a header in the spec's order or the old reversed one."""
        if len(data) < 10:
            raise DecodeError(f"{len(data)} byte(s) is too short for a single-object-encoded event")
        if data[:2] != MAGIC:
            raise DecodeError(f"no Avro single-object marker (got {data[:2].hex()}, want c301)")
        (fp,) = _HEADER.unpack_from(data, 2)
        if fp in self._writers:
            return int(fp)
        old = self._reversed.get(fp)
        if old is not None:
            return old
        raise UnknownSchemaError(
            f"unknown writer schema fingerprint {fp:016x} (header {data[:10].hex(' ')}): add the writer's "
            f".avsc to {SCHEMA_DIR / 'history'} (or upgrade) to read it"
        )

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
