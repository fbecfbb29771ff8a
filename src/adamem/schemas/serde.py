"""Encode and decode event models to and from framed Avro bytes (the bytes on the log).

With a key ring (``keys``), messages and analyses are sealed on encoding and opened on decoding
(``adamem.schemas.sealing``); without one they are written in the clear, and sealed ones decode
``shredded`` (their free text empty). An analysis of a sealed message is never written in the
clear: encoding one without a key ring is a ``SchemaError``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from adamem.errors import DecodeError, SchemaError
from adamem.events import (
    AnswerFeedback,
    ChatMessage,
    Event,
    GrantChanged,
    MemoryCompressed,
    MemoryCorrected,
    MemoryForgotten,
    MemoryRead,
    MessageAnalyzed,
)
from adamem.feed import MemoryChanged
from adamem.schemas import default_registry
from adamem.schemas.sealing import (
    KeyRing,
    open_analysis_record,
    open_compression_record,
    open_message_record,
    seal_analysis,
    seal_compression,
    seal_message,
)

__all__ = ["decode_as", "decode_event", "encode_event", "reframe"]

_MODELS: dict[str, type[Event]] = {
    cls.SCHEMA: cls
    for cls in (
        ChatMessage,
        MessageAnalyzed,
        MemoryForgotten,
        MemoryCorrected,
        GrantChanged,
        AnswerFeedback,
        MemoryCompressed,
    )
}

E = TypeVar(
    "E",
    ChatMessage,
    MessageAnalyzed,
    MemoryForgotten,
    MemoryCorrected,
    GrantChanged,
    AnswerFeedback,
    MemoryCompressed,
    MemoryChanged,
    MemoryRead,
)


def encode_event(event: Event | MemoryChanged | MemoryRead, keys: KeyRing | None = None) -> bytes:
    """Single-object-encode an event with its current schema; with ``keys``, seal its free text.

    A ``MemoryChanged`` (the change feed) holds ids only and is never sealed; nor is a ``MemoryRead``
    (the audit trail: ids, a route name and a time).
    """
    if keys is not None:
        if isinstance(event, ChatMessage):
            event = seal_message(event, keys)
        elif isinstance(event, MessageAnalyzed):
            event = seal_analysis(event, keys)
        elif isinstance(event, MemoryCompressed):
            event = seal_compression(event, keys)
    elif isinstance(event, MessageAnalyzed) and event.message.sealed is not None and event.sealed is None:
        raise SchemaError(
            f"analysis {event.event_id} is of a sealed message: encode it with the keystore, never in the clear"
        )
    return default_registry().encode(event.SCHEMA, event.to_record())


def _open(name: str, record: dict[str, Any], keys: KeyRing | None) -> None:
    """Open what is sealed in a decoded record, before its model is built (each model is built once)."""
    if keys is None:
        return
    if name == MessageAnalyzed.SCHEMA:
        open_analysis_record(record, keys)
    elif name == ChatMessage.SCHEMA:
        open_message_record(record, keys)
    elif name == MemoryCompressed.SCHEMA:
        open_compression_record(record, keys)


def decode_event(data: bytes, keys: KeyRing | None = None) -> Event:
    """Decode framed bytes into the event model its writer schema names; with ``keys``, open what is sealed."""
    name, record = default_registry().decode(data)
    try:
        _open(name, record, keys)
        return _MODELS[name].from_record(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise DecodeError(f"{name} record does not build a model: {exc}") from exc


def decode_as(data: bytes, model: type[E], keys: KeyRing | None = None) -> E:
    """Decode framed bytes that must hold an event of ``model``'s schema; with ``keys``, open what is sealed."""
    name, record = default_registry().decode(data, expected=model.SCHEMA)
    try:
        _open(name, record, keys)
        return model.from_record(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise DecodeError(f"{name} record does not build a model: {exc}") from exc


def reframe(data: bytes) -> bytes:
    """Framed bytes with the header in the spec's order: how an event read from the log is passed on.

    Events written by earlier releases have the fingerprint reversed; a forwarded copy is
    written in the spec's order, like every other write. The body is kept byte for byte.
    """
    return default_registry().reframe(data)
