"""Sealing an event's free text under its message's key (AES-256-GCM): the wire half of crypto-shredding.

A ``ChatMessage``'s text, speaker name and metadata, and a ``MessageAnalyzed``'s derived fields
(summary, topics, facts, attributes, events, entities) and vector, are written to the log as one
``Sealed`` ciphertext each: the single-object Avro encoding of a ``MessageContent`` or
``AnalysisContent`` record (``schemas/*.avsc``), encrypted with AES-256-GCM under the **data key of
the message** (an analysis uses the key of the message it analyses), a random 96-bit nonce, and
associated data that binds the ciphertext to its content schema, its owner key and its event id
(a ciphertext moved to another event or owner does not open). Ids, owner, times, roles and the
analysis's categorical fields (sentiment, dialog act, certainty, analyzer, embedding model) stay
in the clear: the log stays routable, orderable and checkable without keys.

A ``MemoryCompressed`` event's key, content and vector (a summary of several messages' records)
are sealed as a ``CompressionContent`` record under the key of EVERY source message in turn
(``LAYERED``: AES-256-GCM under the first message's key, that ciphertext under the second's, …, one
nonce, the same associated data): destroying any one of those keys makes the summary unreadable.

The keys are not here: a ``KeyRing`` (``adamem.streams.keys``) holds them, outside the log.
Destroying a message's key makes every copy of it on the log — the messages topic, every
analyses generation, dead letters of sealed records, Kafka's segment files, backups of the log —
opaque bytes for ever. Decoding without a key, or with a key ring that no longer has it, gives
the event with empty free text and ``shredded`` set, never an error; a key that is there but does
not open the ciphertext (tampering, a wrong keystore) is a ``DecodeError``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adamem.errors import DecodeError, SchemaError
from adamem.events import ChatMessage, MemoryCompressed, MessageAnalyzed, Sealed
from adamem.owners import owner_key
from adamem.schemas.codec import default_registry

__all__ = [
    "ANALYSIS_CONTENT",
    "COMPRESSION_CONTENT",
    "LAYERED",
    "MESSAGE_CONTENT",
    "SCHEME",
    "KeyRing",
    "open_analysis_record",
    "open_compression_record",
    "open_message_record",
    "seal_analysis",
    "seal_compression",
    "seal_message",
]

SCHEME = "aes256gcm/1"
MESSAGE_CONTENT = "adamem.events.MessageContent"
ANALYSIS_CONTENT = "adamem.events.AnalysisContent"
COMPRESSION_CONTENT = "adamem.events.CompressionContent"
LAYERED = "aes256gcm-layers/1"
KEY_BYTES = 32
NONCE_BYTES = 12


class KeyRing(Protocol):
    """Where the data keys of messages are kept, by owner key and message event id."""

    def get(self, owner: str, message: str) -> bytes | None:
        """The key of ``owner``'s message ``message``, or None when there is none (forgotten, lost, never made)."""

    def get_or_create(self, owner: str, message: str) -> bytes:
        """The message's key, made now when it has none (not durable before ``flush``)."""


def _aad(content: str, owner: str, event_id: str) -> bytes:
    return "\x1f".join(("adamem", SCHEME, content, owner, event_id)).encode()


def _seal(key: bytes, content: str, record: dict[str, object], owner: str, event_id: str) -> Sealed:
    plain = default_registry().encode(content, record)
    nonce = os.urandom(NONCE_BYTES)
    return Sealed(SCHEME, nonce, AESGCM(key).encrypt(nonce, plain, _aad(content, owner, event_id)))


def _open(aead: AESGCM, sealed: dict[str, Any], content: str, owner: str, event_id: str) -> dict[str, object]:
    """The content record of a decoded ``Sealed`` record, opened with ``aead`` (the AES-GCM of its key)."""
    if sealed["scheme"] != SCHEME:
        raise DecodeError(
            f"event {event_id}: unknown sealing scheme {sealed['scheme']!r} (this version reads {SCHEME})"
        )
    try:
        plain = aead.decrypt(sealed["nonce"], sealed["ciphertext"], _aad(content, owner, event_id))
    except (InvalidTag, ValueError) as exc:
        raise _does_not_open(owner, event_id) from exc
    return default_registry().decode(plain, expected=content)[1]


def _aead(key: bytes, owner: str, event_id: str) -> AESGCM:
    """The AES-GCM of a message's key (made once for its message and its analysis)."""
    try:
        return AESGCM(key)
    except ValueError as exc:  # not a 256-bit key
        raise _does_not_open(owner, event_id) from exc


def _does_not_open(owner: str, event_id: str) -> DecodeError:
    return DecodeError(
        f"event {event_id} of owner {owner!r}: its sealed content does not open with the keystore's key for it "
        "(tampered bytes, or another keystore than the one it was sealed with)"
    )


def seal_message(message: ChatMessage, keys: KeyRing) -> ChatMessage:
    """The message with its free text sealed under its key (made when it has none); a sealed one as it is."""
    if message.sealed is not None:
        return message
    record: dict[str, object] = {
        "schema_version": 1,
        "text": message.text,
        "speaker_name": message.speaker.name,
        "metadata": dict(message.metadata),
    }
    key = keys.get_or_create(message.owner_id, message.event_id)
    return dataclasses.replace(
        message, sealed=_seal(key, MESSAGE_CONTENT, record, message.owner_id, message.event_id), shredded=False
    )


def open_message_record(record: dict[str, Any], keys: KeyRing) -> None:
    """Open a decoded ``ChatMessage`` record in place: its free text, or ``shredded`` when its key is not there.

    Records are opened before their model is built (``serde``), so each model is built once. A
    record this opened carries ``shredded`` (``ChatMessage.from_record`` reads it); one in the clear
    is left as it is.
    """
    if record.get("sealed") is None:
        return
    owner = owner_key(record["tenant"], record["user_id"])
    key = keys.get(owner, record["event_id"])
    _open_message_record(record, owner, None if key is None else _aead(key, owner, record["event_id"]))


def _open_message_record(record: dict[str, Any], owner: str, aead: AESGCM | None) -> None:
    if aead is None:
        record["shredded"] = True
        return
    r = _open(aead, record["sealed"], MESSAGE_CONTENT, owner, record["event_id"])
    metadata = r["metadata"]
    assert isinstance(metadata, dict)
    record["text"] = str(r["text"])
    record["speaker"]["name"] = str(r["speaker_name"])
    record["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    record["shredded"] = False


def seal_analysis(analysis: MessageAnalyzed, keys: KeyRing) -> MessageAnalyzed:
    """The analysis with its message sealed (as published, or now) and its derived fields under the message's key."""
    if analysis.message.shredded:
        raise SchemaError(f"analysis {analysis.event_id} is of a shredded message: there is nothing to seal")
    message = seal_message(analysis.message, keys)
    record = {
        "schema_version": 1,
        "summary": analysis.summary,
        "topics": list(analysis.topics),
        "facts": [
            {"content": f.content, "type": f.type, "key": f.key, "confidence": f.confidence} for f in analysis.facts
        ],
        "attributes": [{"key": a.key, "value": a.value, "confidence": a.confidence} for a in analysis.attributes],
        "events": [
            {"content": e.content, "when": e.when, "when_text": e.when_text, "confidence": e.confidence}
            for e in analysis.events
        ],
        "entities": list(analysis.entities),
        "vector": list(analysis.embedding.vector),
    }
    key = keys.get_or_create(message.owner_id, message.event_id)
    sealed = _seal(key, ANALYSIS_CONTENT, record, message.owner_id, analysis.event_id)
    return dataclasses.replace(analysis, message=message, sealed=sealed)


def open_analysis_record(record: dict[str, Any], keys: KeyRing) -> None:
    """Open a decoded ``MessageAnalyzed`` record in place: its message and derived fields (one key opens both).

    The message is left ``shredded`` when the key is not there, and so is an analysis sealed whose
    message is not (another producer's): nothing derived is known then.
    """
    message = record["message"]
    sealed_message = message.get("sealed") is not None
    if record.get("sealed") is None and not sealed_message:
        return
    owner = owner_key(message["tenant"], message["user_id"])
    key = keys.get(owner, message["event_id"])
    aead = None if key is None else _aead(key, owner, record["event_id"])
    if sealed_message:
        _open_message_record(message, owner, aead)
    if record.get("sealed") is None or message.get("shredded"):
        return
    if aead is None:
        message["shredded"] = True
        return
    r = _open(aead, record["sealed"], ANALYSIS_CONTENT, owner, record["event_id"])
    for name in ("summary", "topics", "facts", "attributes", "events", "entities"):
        record[name] = r[name]
    record["embedding"]["vector"] = r["vector"]


def seal_compression(event: MemoryCompressed, keys: KeyRing) -> MemoryCompressed:
    """The compression with its key, content and vector sealed under each source message's key in turn.

    Its source messages are readable when it is made, so their keys are there; one that is not
    (forgotten since) is a ``SchemaError``: such a summary must not be written.
    """
    if event.sealed is not None:
        return event
    if not event.source_message_ids:
        raise SchemaError(f"compression {event.event_id} has no source message to seal it under")
    owner = event.owner_id
    record = {"schema_version": 1, "key": event.key, "content": event.content, "vector": list(event.vector)}
    data = default_registry().encode(COMPRESSION_CONTENT, record)
    nonce, aad = os.urandom(NONCE_BYTES), _aad(COMPRESSION_CONTENT, owner, event.event_id)
    for message in event.source_message_ids:
        key = keys.get(owner, message)
        if key is None:
            raise SchemaError(
                f"compression {event.event_id}: source message {message} of {owner!r} has no key (forgotten): "
                "propose it again from the current records"
            )
        data = AESGCM(key).encrypt(nonce, data, aad)
    return dataclasses.replace(event, sealed=Sealed(LAYERED, nonce, data), shredded=False)


def open_compression_record(record: dict[str, Any], keys: KeyRing) -> None:
    """Open a decoded ``MemoryCompressed`` record in place, or mark it ``shredded`` when a source key is gone."""
    sealed = record.get("sealed")
    if sealed is None:
        return
    owner, event_id = owner_key(record["tenant"], record["user_id"]), record["event_id"]
    if sealed["scheme"] != LAYERED:
        raise DecodeError(
            f"event {event_id}: unknown sealing scheme {sealed['scheme']!r} (this version reads {LAYERED})"
        )
    found = [keys.get(owner, m) for m in record["source_message_ids"]]
    if any(k is None for k in found):
        record["shredded"] = True
        return
    data, aad = sealed["ciphertext"], _aad(COMPRESSION_CONTENT, owner, event_id)
    for key in reversed(found):
        assert key is not None
        try:
            data = _aead(key, owner, event_id).decrypt(sealed["nonce"], data, aad)
        except (InvalidTag, ValueError) as exc:
            raise _does_not_open(owner, event_id) from exc
    r = default_registry().decode(data, expected=COMPRESSION_CONTENT)[1]
    record["key"], record["content"], record["vector"] = r["key"], r["content"], r["vector"]
    record["shredded"] = False
