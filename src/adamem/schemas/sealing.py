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

The keys are not here: a ``KeyRing`` (``adamem.streams.keys``) holds them, outside the log.
Destroying a message's key makes every copy of it on the log — the messages topic, every
analyses generation, dead letters of sealed records, Kafka's segment files, backups of the log —
opaque bytes for ever. Decoding without a key, or with a key ring that no longer has it, gives
the event with empty free text and ``shredded`` set, never an error; a key that is there but does
not open the ciphertext (tampering, a wrong keystore) is a ``DecodeError``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adamem.errors import DecodeError, SchemaError
from adamem.events import (
    ChatMessage,
    Embedding,
    ExtractedAttribute,
    ExtractedEvent,
    ExtractedFact,
    Float32Vector,
    MessageAnalyzed,
    Sealed,
    Speaker,
)
from adamem.schemas.codec import default_registry

__all__ = [
    "ANALYSIS_CONTENT",
    "MESSAGE_CONTENT",
    "SCHEME",
    "KeyRing",
    "open_analysis",
    "open_message",
    "seal_analysis",
    "seal_message",
]

SCHEME = "aes256gcm/1"
MESSAGE_CONTENT = "adamem.events.MessageContent"
ANALYSIS_CONTENT = "adamem.events.AnalysisContent"
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


def _open(key: bytes, sealed: Sealed, content: str, owner: str, event_id: str) -> dict[str, object]:
    if sealed.scheme != SCHEME:
        raise DecodeError(f"event {event_id}: unknown sealing scheme {sealed.scheme!r} (this version reads {SCHEME})")
    try:
        plain = AESGCM(key).decrypt(sealed.nonce, sealed.ciphertext, _aad(content, owner, event_id))
    except (InvalidTag, ValueError) as exc:
        raise DecodeError(
            f"event {event_id} of owner {owner!r}: its sealed content does not open with the keystore's key for it "
            "(tampered bytes, or another keystore than the one it was sealed with)"
        ) from exc
    return default_registry().decode(plain, expected=content)[1]


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


def open_message(message: ChatMessage, keys: KeyRing | None) -> ChatMessage:
    """The message with its free text opened; ``shredded`` when its key is not there. Unsealed: as it is."""
    if message.sealed is None or not message.shredded or keys is None:
        return message
    return _open_message(message, keys.get(message.owner_id, message.event_id))


def _open_message(message: ChatMessage, key: bytes | None) -> ChatMessage:
    if message.sealed is None or not message.shredded or key is None:
        return message
    r = _open(key, message.sealed, MESSAGE_CONTENT, message.owner_id, message.event_id)
    metadata = r["metadata"]
    assert isinstance(metadata, dict)
    return dataclasses.replace(
        message,
        text=str(r["text"]),
        speaker=Speaker(message.speaker.role, str(r["speaker_name"])),
        metadata={str(k): str(v) for k, v in metadata.items()},
        shredded=False,
    )


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


def open_analysis(analysis: MessageAnalyzed, keys: KeyRing | None) -> MessageAnalyzed:
    """The analysis with its message and derived fields opened; its message ``shredded`` when the key is not there."""
    original = analysis.message
    sealed_message = original.sealed is not None and original.shredded
    if keys is None or (analysis.sealed is None and not sealed_message):
        return analysis
    key = keys.get(original.owner_id, original.event_id)  # one key opens the message and what was derived
    message = _open_message(original, key)
    if analysis.sealed is None:
        return analysis if message is original else dataclasses.replace(analysis, message=message)
    if message.shredded:
        return analysis
    if key is None:  # an analysis sealed, its message not (another producer's): no key, nothing derived is known
        return dataclasses.replace(analysis, message=dataclasses.replace(message, shredded=True))
    r = _open(key, analysis.sealed, ANALYSIS_CONTENT, message.owner_id, analysis.event_id)
    facts, attributes, events, vector = r["facts"], r["attributes"], r["events"], r["vector"]
    assert isinstance(facts, list) and isinstance(attributes, list) and isinstance(events, list)
    assert isinstance(vector, list)
    return dataclasses.replace(
        analysis,
        message=message,
        summary=str(r["summary"]),
        topics=tuple(r["topics"]),  # type: ignore[arg-type]
        facts=tuple(ExtractedFact(**f) for f in facts),
        attributes=tuple(ExtractedAttribute(**a) for a in attributes),
        events=tuple(
            ExtractedEvent(
                content=e["content"],
                confidence=e["confidence"],
                when=None if e.get("when") is None else _ms(e["when"]),
                when_text=e.get("when_text", ""),
            )
            for e in events
        ),
        entities=tuple(r["entities"]),  # type: ignore[arg-type]
        embedding=Embedding(analysis.embedding.model, Float32Vector.of(vector)),
    )


def _ms(value: object) -> int:
    if isinstance(value, dt.datetime):
        return round(value.timestamp() * 1000)
    assert isinstance(value, int)
    return value
