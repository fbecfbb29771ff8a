"""Encode and decode event models to and from framed Avro bytes (the bytes on the log)."""

from __future__ import annotations

from typing import TypeVar

from adamem.errors import DecodeError
from adamem.events import ChatMessage, Event, MemoryCorrected, MemoryForgotten, MessageAnalyzed
from adamem.schemas import default_registry

__all__ = ["decode_as", "decode_event", "encode_event", "reframe"]

_MODELS: dict[str, type[ChatMessage] | type[MessageAnalyzed] | type[MemoryForgotten] | type[MemoryCorrected]] = {
    cls.SCHEMA: cls for cls in (ChatMessage, MessageAnalyzed, MemoryForgotten, MemoryCorrected)
}

E = TypeVar("E", ChatMessage, MessageAnalyzed, MemoryForgotten, MemoryCorrected)


def encode_event(event: Event) -> bytes:
    """Single-object-encode an event with its current schema."""
    return default_registry().encode(event.SCHEMA, event.to_record())


def decode_event(data: bytes) -> Event:
    """Decode framed bytes into the event model its writer schema names."""
    name, record = default_registry().decode(data)
    try:
        return _MODELS[name].from_record(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise DecodeError(f"{name} record does not build a model: {exc}") from exc


def decode_as(data: bytes, model: type[E]) -> E:
    """Decode framed bytes that must hold an event of ``model``'s schema."""
    name, record = default_registry().decode(data, expected=model.SCHEMA)
    try:
        return model.from_record(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise DecodeError(f"{name} record does not build a model: {exc}") from exc


def reframe(data: bytes) -> bytes:
    """Framed bytes with the header in the spec's order: how an event read from the log is passed on.

    Events written before issue 13's fix have the fingerprint reversed; a forwarded copy is
    written in the spec's order, like every other write. The body is kept byte for byte.
    """
    return default_registry().reframe(data)
