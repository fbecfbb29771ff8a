"""The single-object codec: framing, fingerprints, schema evolution and independent decoding."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import struct
import uuid
from pathlib import Path

import avro.io
import avro.schema
import fastavro
import pytest

from adamem.errors import DecodeError, SchemaError, UnknownSchemaError
from adamem.events import (
    Analyzer,
    AnswerFeedback,
    ChatMessage,
    Embedding,
    ExtractedAttribute,
    ExtractedEvent,
    ExtractedFact,
    GrantChanged,
    JudgedItem,
    MemoryCompressed,
    MemoryCorrected,
    MemoryForgotten,
    MemoryRead,
    MessageAnalyzed,
    Speaker,
)
from adamem.schemas import MAGIC, SchemaRegistry, codec, default_registry
from adamem.schemas.codec import SCHEMA_DIR
from adamem.schemas.serde import decode_as, decode_event, encode_event

MSG = ChatMessage(
    event_id="0b6f8f64-4c59-4f55-9a40-3f0e5a7f1a10",
    user_id="alice",
    conversation_id="s1",
    message_id="m1",
    speaker=Speaker("user", "Alice"),
    text="I moved from Shanghai to Beijing — 我喜欢吃辣的",
    occurred_at=1_709_542_800_000,
    metadata={"source": "test"},
    utc_offset_minutes=480,
)
ANALYSIS = MessageAnalyzed(
    event_id="7d7f6c59-2a7e-5d5b-8d3e-1f2a3b4c5d6e",
    message=MSG,
    analyzer=Analyzer("rules", "1"),
    embedding=Embedding("test-embedder/1", (0.5, -0.25, 0.125)),
    summary="Alice moved",
    topics=("housing",),
    sentiment=0.5,
    dialog_act="statement",
    certainty="certain",
    facts=(ExtractedFact("Alice lives in Beijing", 0.875, "location", "lives_in"),),
    attributes=(ExtractedAttribute("likes", "spicy food", 0.875),),
    events=(ExtractedEvent("moved to Beijing", 0.75, 1_709_000_000_000, "last week"),),
    entities=("Shanghai", "Beijing"),
)
FORGOT = MemoryForgotten("1b6f8f64-4c59-4f55-9a40-3f0e5a7f1a10", "alice", "message", 1_709_542_900_000, MSG.event_id)
CORRECTED = MemoryCorrected(
    "2b6f8f64-4c59-4f55-9a40-3f0e5a7f1a10", "alice", "rec-1", "Alice lives in Tianjin", 1_709_543_000_000
)

GRANTED = GrantChanged(
    "3b6f8f64-4c59-4f55-9a40-3f0e5a7f1a10",
    "alice",
    "grant-1",
    "granted",
    1_709_543_100_000,
    grantee_tenant="clinic",
    layers=("episodic", "archive"),
    topics=("health", "健康"),
    scope_from=1_709_000_000_000,
    include_sensitive=True,
    expires_at=1_719_000_000_000,
    reason="a new doctor",
)
READ = MemoryRead(
    "4b6f8f64-4c59-4f55-9a40-3f0e5a7f1a10",
    "alice",
    "grant-1",
    "clinic",
    "POST /v1/users/{user}/query",
    1_709_543_200_000,
    item_ids=(MSG.event_id, "rec-1"),
)
FEEDBACK = AnswerFeedback(
    "4b6f8f64-4c59-4f55-9a40-3f0e5a7f1a10",
    "alice",
    (JudgedItem("rec-1", "episodic", "fact", True), JudgedItem(MSG.event_id, "archive", "message", False)),
    1_709_543_100_000,
)
COMPRESSED = MemoryCompressed(
    "5b6f8f64-4c59-4f55-9a40-3f0e5a7f1a10",
    "alice",
    "running",
    "March–May 2024: running, 5 times (about every 2 weeks)",
    ("rec-1", "rec-2"),
    (MSG.event_id,),
    1_709_000_000_000,
    1_709_543_000_000,
    1_709_543_000_000,
    "rules",
    "1",
    vector=(0.5, -0.25),
    embedding_model="e5",
)
EVERY_EVENT = [MSG, ANALYSIS, FORGOT, CORRECTED, GRANTED, FEEDBACK, COMPRESSED, READ]


# The headers Avro's Java BinaryMessageEncoder (1.12.2) writes for the current schemas: C3 01 and
# SchemaNormalization.parsingFingerprint64 in little-endian order. tests/conformance/test_java.py
# checks them against Java itself.
JAVA_HEADERS = {  # ChatMessage (and MessageAnalyzed, which carries it) with `sealed` and `utc_offset_minutes`
    ChatMessage.SCHEMA: "c3 01 1e dd 8e e6 b4 4b 91 13",  # parsingFingerprint64 = 0x13914bb4e68edd1e
    MessageAnalyzed.SCHEMA: "c3 01 7b ff 90 4c 87 bd 18 79",  # 0x7918bd874c90ff7b
    MemoryForgotten.SCHEMA: "c3 01 e4 b6 a4 fa 4b ea 06 a1",  # 0xa106ea4bfaa4b6e4
    MemoryCorrected.SCHEMA: "c3 01 bd 01 da 2a 7d 64 73 6b",  # 0x6b73647d2ada01bd
    GrantChanged.SCHEMA: "c3 01 8e 74 06 da 85 55 52 d9",  # 0xd9525585da06748e
    MemoryRead.SCHEMA: "c3 01 de 9e 2b 36 ce 7a 2b db",  # 0xdb2b7ace362b9ede
    AnswerFeedback.SCHEMA: "c3 01 33 a9 da 3c 29 dd 65 7b",  # 0x7b65dd293cdaa933
    MemoryCompressed.SCHEMA: "c3 01 4e 96 e0 2c fa 21 fa 8b",  # 0x8bfa21fa2ce0964e
}
# Before the `sealed` fields: still read, from schemas/history/, never written.
V1_HEADERS = {
    ChatMessage.SCHEMA: "c3 01 d2 dc c6 4a e1 b2 5b 36",  # 0x365bb2e14ac6dcd2
    MessageAnalyzed.SCHEMA: "c3 01 8e 73 09 29 a9 53 ca 59",  # 0x59ca53a92909738e
}
# With `sealed`, before `utc_offset_minutes`: still read, from schemas/history/*.v2.avsc, never written.
V2_HEADERS = {
    ChatMessage.SCHEMA: "c3 01 e4 9d 78 78 83 35 b6 04",  # 0x04b6358378789de4
    MessageAnalyzed.SCHEMA: "c3 01 cd e0 84 ff e6 37 86 bc",  # 0xbc8637e6ff84e0cd
}


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_every_event_round_trips(event: object) -> None:
    data = encode_event(event)  # type: ignore[arg-type]
    assert data[:2] == MAGIC
    assert struct.unpack("<Q", data[2:10])[0] == default_registry().fingerprint(event.SCHEMA)  # type: ignore[attr-defined]
    assert decode_as(data, type(event)) == event  # type: ignore[type-var]
    if not isinstance(event, MemoryRead):  # the audit trail is read as what it is, never as a loggable event
        assert decode_event(data) == event


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_the_header_is_the_one_java_writes(event: object) -> None:
    data = encode_event(event)  # type: ignore[arg-type]
    assert data[:10].hex(" ") == JAVA_HEADERS[event.SCHEMA]  # type: ignore[attr-defined]
    assert default_registry().header_order(data) == "spec"
    assert default_registry().fingerprint(event.SCHEMA) == int.from_bytes(data[2:10], "little")  # type: ignore[attr-defined]


def test_fingerprint_agrees_with_apache_avro() -> None:
    # Apache avro's Python canonical form keeps {"type": "long"} for logical types, against the
    # spec's [PRIMITIVES] rule (Java and fastavro reduce it to "long"), so compare on a schema
    # without logical types: the CRC-64-AVRO arithmetic and byte order must agree.
    schema = json.loads((SCHEMA_DIR / "chat_message.avsc").read_text())
    for f in schema["fields"]:
        if isinstance(f["type"], dict) and "logicalType" in f["type"]:
            f["type"] = f["type"]["type"]
    theirs = avro.schema.parse(json.dumps(schema)).fingerprint("CRC-64-AVRO")  # the spec's 8 bytes, little-endian
    registry = SchemaRegistry()
    fp = registry.register(schema)
    assert fp == int.from_bytes(theirs, "little")
    assert registry.encode(ChatMessage.SCHEMA, MSG.to_record())[:10] == MAGIC + theirs


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_apache_avro_decodes_our_bodies_from_the_avsc_files_alone(event: object) -> None:
    names = avro.schema.Names()
    schemas = {}
    first = ("chat_message.avsc", "message_analyzed.avsc")  # the others name their types
    for path in sorted(
        Path(SCHEMA_DIR).glob("*.avsc"),
        key=lambda p: (p.name not in first, first.index(p.name) if p.name in first else 0, p.name),
    ):
        s = avro.schema.make_avsc_object(json.loads(path.read_text()), names)
        schemas[s.fullname] = s
    data = encode_event(event)  # type: ignore[arg-type]
    schema = schemas[event.SCHEMA]  # type: ignore[attr-defined]
    decoded = avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(io.BytesIO(data[10:])))
    assert decoded["event_id"] == event.event_id  # type: ignore[attr-defined]
    assert decoded["user_id"] if "user_id" in decoded else decoded["message"]["user_id"] == "alice"
    if isinstance(event, MessageAnalyzed):
        assert decoded["message"]["text"] == MSG.text
        assert decoded["attributes"][0]["value"] == "spicy food"
        assert decoded["embedding"]["vector"] == [0.5, -0.25, 0.125]


def _old_chat_schema() -> dict[str, object]:
    """ChatMessage as a hypothetical older writer had it: without ``metadata``."""
    schema = json.loads((SCHEMA_DIR / "chat_message.avsc").read_text())
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "metadata"]
    return schema


def test_newer_reader_reads_older_writer_with_default() -> None:
    registry = SchemaRegistry()
    registry.register(_old_chat_schema())
    old_bytes = registry.encode(
        "adamem.events.ChatMessage", {k: v for k, v in MSG.to_record().items() if k != "metadata"}
    )
    current = SchemaRegistry()
    for path in sorted(SCHEMA_DIR.glob("*.avsc")):
        if path.name == "chat_message.avsc":
            current.register(json.loads(path.read_text()))
    current.register(_old_chat_schema(), current=False)  # known as a writer only
    name, record = current.decode(old_bytes)
    assert name == "adamem.events.ChatMessage"
    assert record["metadata"] == {}  # filled from the reader schema's default
    assert record["text"] == MSG.text


@pytest.mark.parametrize("event", [MSG, ANALYSIS], ids=lambda e: type(e).__name__)
def test_events_written_before_the_utc_offset_read_as_utc(event: ChatMessage | MessageAnalyzed) -> None:
    """A writer of the schemas in history/*.v2.avsc (no ``utc_offset_minutes``) is resolved: the offset reads None."""
    writer = SchemaRegistry()
    stem = "chat_message" if isinstance(event, ChatMessage) else "message_analyzed"
    writer.register(json.loads((SCHEMA_DIR / "history" / f"{stem}.v2.avsc").read_text()))
    record = event.to_record()
    message = record if isinstance(event, ChatMessage) else record["message"]
    assert message.pop("utc_offset_minutes") == 480
    old = writer.encode(event.SCHEMA, record)
    assert old[:10].hex(" ") == V2_HEADERS[event.SCHEMA]
    decoded = decode_event(old)
    message_read = decoded if isinstance(decoded, ChatMessage) else decoded.message  # type: ignore[union-attr]
    assert isinstance(message_read, ChatMessage)
    assert message_read.utc_offset_minutes is None
    assert dataclasses.replace(message_read, utc_offset_minutes=480) == MSG


def test_upcaster_lifts_old_versions() -> None:
    registry = SchemaRegistry()
    registry.register(json.loads((SCHEMA_DIR / "chat_message.avsc").read_text()))

    def v1_to_v2(r: dict[str, object]) -> dict[str, object]:
        r = dict(r)
        r["text"] = str(r["text"]).strip()
        return r

    registry.add_upcaster("adamem.events.ChatMessage", 1, v1_to_v2)
    record = copy.deepcopy(MSG.to_record())
    record["text"] = "  padded  "
    _, decoded = registry.decode(registry.encode("adamem.events.ChatMessage", record))
    assert decoded["schema_version"] == 2
    assert decoded["text"] == "padded"


def test_unknown_fingerprint_is_a_typed_error() -> None:
    data = bytearray(encode_event(MSG))
    data[2:10] = struct.pack("<Q", 0x1234)
    with pytest.raises(UnknownSchemaError, match="0000000000001234"):
        decode_event(bytes(data))


def test_a_header_in_the_old_reversed_order_is_still_read() -> None:
    data = encode_event(MSG)
    old = data[:2] + data[2:10][::-1] + data[10:]
    assert default_registry().header_order(old) == "reversed"
    assert default_registry().writer_of(old) == ChatMessage.SCHEMA
    assert decode_event(old) == MSG
    assert encode_event(decode_event(old)) == data  # written again: the spec's order
    assert default_registry().reframe(old) == data  # passed on (forwarded): the spec's order, the same body
    assert default_registry().reframe(data) is data


def test_a_fingerprint_that_is_another_s_reversed_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Old headers are looked up reversed, so such a pair would make a header ambiguous.
    registry = SchemaRegistry()
    fp = registry.register(json.loads((SCHEMA_DIR / "memory_corrected.avsc").read_text()))
    monkeypatch.setattr(codec, "fingerprint_of", lambda _: int.from_bytes(fp.to_bytes(8, "little"), "big"))
    with pytest.raises(SchemaError, match="ambiguous"):
        registry.register(json.loads((SCHEMA_DIR / "chat_message.avsc").read_text()))


@pytest.mark.parametrize("cut", [0, 1, 5, 9, 12, 40])
def test_truncated_bytes_are_a_typed_error(cut: int) -> None:
    data = encode_event(MSG)
    with pytest.raises(DecodeError):
        decode_event(data[:cut])


def test_missing_marker_and_trailing_bytes_are_rejected() -> None:
    data = encode_event(MSG)
    with pytest.raises(DecodeError, match="marker"):
        decode_event(b"\x00\x01" + data[2:])
    with pytest.raises(DecodeError, match="trailing"):
        decode_event(data + b"\x00")


def test_decode_as_refuses_another_event_type() -> None:
    with pytest.raises(DecodeError, match=r"expected a adamem\.events\.MessageAnalyzed"):
        decode_as(encode_event(MSG), MessageAnalyzed)


def test_every_schema_documents_every_field() -> None:
    for path in SCHEMA_DIR.glob("*.avsc"):
        schema = json.loads(path.read_text())
        assert schema["namespace"] == "adamem.events"
        assert schema["doc"] and "version" in schema["doc"].lower()
        assert schema["fields"][0]["name"] == "schema_version"
        for f in schema["fields"]:
            assert f.get("doc"), f"{path.name}: field {f['name']} has no doc"


def _texts(value: object) -> object:
    """A decoded value with every ``UUID`` as its text (the codec returns uuid fields as text)."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _texts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_texts(v) for v in value]
    return value


def _generic_decode(data: bytes) -> dict[str, object]:
    """The record fastavro alone reads from a current-schema body (no fast path), UUIDs as text."""
    registry = default_registry()
    name = registry.writer_of(data)
    return _texts(fastavro.schemaless_reader(io.BytesIO(data[10:]), registry.schema(name), None))  # type: ignore[return-value]


def _zigzag(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


@pytest.mark.parametrize(
    "vector",
    [(), (0.5,), tuple((i - 191.5) / 97.0 for i in range(384)), (-0.0, 1e-45, 3.4e38, float("inf"), -1.0 / 3)],
    ids=["empty", "one", "dim384", "special"],
)
def test_the_vector_fast_path_reads_what_fastavro_reads(vector: tuple[float, ...]) -> None:
    event = dataclasses.replace(ANALYSIS, embedding=Embedding("e", vector))
    data = encode_event(event)
    name, record = default_registry().decode(data)
    assert name == MessageAnalyzed.SCHEMA
    assert record == _generic_decode(data)
    assert [struct.pack("<f", x) for x in record["embedding"]["vector"]] == [struct.pack("<f", x) for x in vector]
    assert record["embedding"]["vector"].packed == struct.pack(f"<{len(vector)}f", *vector)  # the bytes, kept


def test_the_vector_fast_path_reads_arrays_written_in_several_blocks() -> None:
    vector = [float(i) / 8 for i in range(10)]
    empty = encode_event(dataclasses.replace(ANALYSIS, embedding=Embedding("e", ())))
    assert empty[-1:] == b"\x00"  # an empty array is its terminating zero count
    blocks = _zigzag(3) + struct.pack("<3f", *vector[:3])
    blocks += _zigzag(-7) + _zigzag(28) + struct.pack("<7f", *vector[3:])  # a negative count carries the byte size
    data = empty[:-1] + blocks + b"\x00"
    _, record = default_registry().decode(data)
    assert record["embedding"]["vector"] == vector
    assert record["embedding"]["vector"].packed == struct.pack("<10f", *vector)
    assert record == _generic_decode(data)


@pytest.mark.parametrize("cut", [1, 2, 5, 200])
def test_a_body_cut_inside_the_vector_is_a_typed_error(cut: int) -> None:
    data = encode_event(ANALYSIS)
    with pytest.raises(DecodeError):
        decode_event(data[:-cut])
    with pytest.raises(DecodeError, match="trailing"):
        decode_event(data + b"\x00\x00")


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_every_event_decodes_as_fastavro_reads_it(event: object) -> None:
    data = encode_event(event)  # type: ignore[arg-type]
    _, record = default_registry().decode(data)
    assert record == _generic_decode(data)
    assert isinstance(record["event_id"], str)


def test_uuid_fields_come_back_as_canonical_text_and_bad_ones_are_refused() -> None:
    registry = default_registry()
    loose = MSG.to_record() | {"event_id": "{0B6F8F64-4C59-4F55-9A40-3F0E5A7F1A10}"}
    _, record = registry.decode(registry.encode(ChatMessage.SCHEMA, loose))
    assert record["event_id"] == "0b6f8f64-4c59-4f55-9a40-3f0e5a7f1a10" == str(uuid.UUID(loose["event_id"]))
    nested = ANALYSIS.to_record()
    nested["message"] = nested["message"] | {"event_id": "0B6F8F644C594F559A403F0E5A7F1A10"}
    _, record = registry.decode(registry.encode(MessageAnalyzed.SCHEMA, nested))
    assert record["message"]["event_id"] == MSG.event_id
    with pytest.raises(DecodeError, match="badly formed"):
        registry.decode(registry.encode(ChatMessage.SCHEMA, MSG.to_record() | {"event_id": "not-a-uuid"}))


def _plain(value: object) -> object:
    """A decoded value with Apache Avro's and this codec's representations made alike (UUIDs as text, lists)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


@pytest.mark.parametrize("stem", ["chat_message.v1", "chat_message.v2", "message_analyzed.v1", "message_analyzed.v2"])
def test_an_older_writer_reads_as_apache_avro_resolves_it(stem: str) -> None:
    """The retired schemas differ from the current ones by added fields with defaults: their bodies are read
    with the writer's schema and the defaults filled in (the fast path), and come out as Apache Avro's
    resolution of writer against reader gives them."""
    old = json.loads((SCHEMA_DIR / "history" / f"{stem}.avsc").read_text())
    event = MSG if stem.startswith("chat") else ANALYSIS
    writer = SchemaRegistry()
    writer.register(old)
    data = writer.encode(event.SCHEMA, event.to_record())
    name, ours = default_registry().decode(data)
    names = avro.schema.Names()  # the current schemas, MessageAnalyzed naming ChatMessage
    reader = avro.schema.make_avsc_object(json.loads((SCHEMA_DIR / "chat_message.avsc").read_text()), names)
    if stem.startswith("message_analyzed"):
        reader = avro.schema.make_avsc_object(json.loads((SCHEMA_DIR / "message_analyzed.avsc").read_text()), names)
    theirs = avro.io.DatumReader(avro.schema.parse(json.dumps(old)), reader).read(
        avro.io.BinaryDecoder(io.BytesIO(data[10:]))
    )
    assert name == event.SCHEMA
    assert _plain(ours) == _plain(theirs)
    message = ours if stem.startswith("chat") else ours["message"]
    assert message["utc_offset_minutes"] is None and message["sealed"] is None
