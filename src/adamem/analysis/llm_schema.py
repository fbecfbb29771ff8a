"""The contract with an LLM extractor: the prompt, the JSON schema of its answer, and the validator.

``parse_extraction`` accepts exactly the JSON the schema describes (missing lists count as empty),
clamps confidences to [0, 1] and sentiment to [-1, 1], resolves ``when`` (ISO date, ISO datetime
or integer ms) to ms, and raises ``ValueError`` naming the offending field otherwise.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from adamem.analysis import Extraction
from adamem.analysis.lexicon import TOPIC_LABELS
from adamem.events import ChatMessage, ExtractedAttribute, ExtractedEvent, ExtractedFact, ms_to_iso

__all__ = ["DIALOG_ACTS", "EXTRACTION_SCHEMA", "SYSTEM_PROMPT", "parse_extraction", "user_prompt"]

DIALOG_ACTS = ("statement", "question", "request", "other")
CERTAINTIES = ("certain", "possible", "guess")


def _object(properties: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


_CONFIDENCE = {"type": "number", "description": "0..1; 0.8 or more only for plain first-person statements"}
EXTRACTION_SCHEMA: dict[str, Any] = _object(
    {
        "summary": {"type": "string", "description": "One sentence, prefixed with the speaker name: 'Alice: ...'"},
        "topics": {"type": "array", "items": {"type": "string"}, "description": "Lower-case topic labels"},
        "sentiment": {"type": "number", "description": "-1 (negative) .. 1 (positive)"},
        "dialog_act": {"type": "string", "enum": list(DIALOG_ACTS)},
        "certainty": {"type": "string", "enum": list(CERTAINTIES)},
        "facts": {
            "type": "array",
            "items": _object(
                {
                    "content": {"type": "string", "description": "A readable sentence naming the speaker"},
                    "type": {"type": "string", "description": "location, work, relationship, health, pet, ..."},
                    "key": {"type": "string", "description": "Conflict slot, e.g. lives_in; same key = conflict"},
                    "confidence": _CONFIDENCE,
                },
                "A fact about the speaker",
            ),
        },
        "attributes": {
            "type": "array",
            "items": _object(
                {
                    "key": {"type": "string", "description": "likes, dislikes, allergy, favourite_<thing>, trait, ..."},
                    "value": {"type": "string", "description": "Short and normalised, e.g. 'spicy food'"},
                    "confidence": _CONFIDENCE,
                },
                "A preference or trait of the speaker",
            ),
        },
        "events": {
            "type": "array",
            "items": _object(
                {
                    "content": {"type": "string", "description": "What happened or is planned, naming the speaker"},
                    "when": {
                        "type": ["string", "null"],
                        "description": "Resolved date YYYY-MM-DD relative to the message time, or null",
                    },
                    "when_text": {"type": "string", "description": "The time expression as written, or ''"},
                    "confidence": _CONFIDENCE,
                },
                "An event bounded in time (including decisions and plans)",
            ),
        },
        "entities": {"type": "array", "items": {"type": "string"}, "description": "Names of people, places, things"},
    },
    "What the message says about its speaker",
)

SYSTEM_PROMPT = (
    "You are the Memory Agent of a conversational memory system. For one chat message, extract what it says "
    "about its speaker and answer with JSON matching the schema. Rules: only first-person statements by the "
    "speaker give facts and attributes about the speaker; questions give none. Facts, attributes and events "
    "are written in the message's language (English or Chinese), name the speaker instead of 'I'/'我', and "
    "keys are English snake_case (lives_in, works_at, job, likes, dislikes, allergy, favourite_food, trait). "
    "Resolve relative times (yesterday, last Sunday, 两周前) against the message time into YYYY-MM-DD. "
    f"Prefer these topic labels: {', '.join(TOPIC_LABELS)}. Hedged statements (maybe, probably, 可能, 大概) "
    "get lower confidence and certainty 'possible' or 'guess'. Use empty lists when nothing applies."
)


def user_prompt(message: ChatMessage) -> str:
    """The user turn sent to the model for one message (its time on the speaker's clock when the message stated it)."""
    offset = message.utc_offset_minutes
    clock = "UTC" if offset is None else "the speaker's local time"
    return (
        f"Speaker: {message.speaker.name} (role: {message.speaker.role})\n"
        f"Message time ({clock}): {ms_to_iso(message.occurred_at, offset)}\n"
        f"Message:\n{message.text}"
    )


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {type(value).__name__}")
    return value.strip()


def _number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{where} must be a number, got {value!r}")
    return round(min(high, max(low, float(value))), 4)


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key} must be a list, got {type(value).__name__}")
    return value


def _items(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = _list(data, key)
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"{key}[{i}] must be an object, got {type(item).__name__}")
    return items


def _when(value: Any, where: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().replace("Z", "+00:00")
        try:
            if len(text) == 10:
                day = dt.date.fromisoformat(text)
                return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp() * 1000)
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{where} must be an ISO date (YYYY-MM-DD) or null, got {value!r}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        return int(parsed.timestamp() * 1000)
    raise ValueError(f"{where} must be an ISO date (YYYY-MM-DD) or null, got {value!r}")


def parse_extraction(data: Any) -> Extraction:
    """Validate a model's JSON answer and turn it into an ``Extraction``; ``ValueError`` names what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"the answer must be a JSON object, got {type(data).__name__}")
    dialog_act = _string(data.get("dialog_act", "statement"), "dialog_act").lower()
    if dialog_act not in DIALOG_ACTS:
        raise ValueError(f"dialog_act must be one of {', '.join(DIALOG_ACTS)}, got {dialog_act!r}")
    certainty = _string(data.get("certainty", "certain"), "certainty").lower()
    if certainty not in CERTAINTIES:
        raise ValueError(f"certainty must be one of {', '.join(CERTAINTIES)}, got {certainty!r}")
    topics = [_string(t, f"topics[{i}]").lower() for i, t in enumerate(_list(data, "topics"))]
    entities = [_string(e, f"entities[{i}]") for i, e in enumerate(_list(data, "entities"))]
    facts = tuple(
        ExtractedFact(
            content=_string(f.get("content"), f"facts[{i}].content"),
            confidence=_number(f.get("confidence"), f"facts[{i}].confidence", 0.0, 1.0),
            type=_string(f.get("type", "general"), f"facts[{i}].type") or "general",
            key=_string(f.get("key", ""), f"facts[{i}].key"),
        )
        for i, f in enumerate(_items(data, "facts"))
    )
    attributes = tuple(
        ExtractedAttribute(
            key=_string(a.get("key"), f"attributes[{i}].key"),
            value=_string(a.get("value"), f"attributes[{i}].value"),
            confidence=_number(a.get("confidence"), f"attributes[{i}].confidence", 0.0, 1.0),
        )
        for i, a in enumerate(_items(data, "attributes"))
    )
    events = tuple(
        ExtractedEvent(
            content=_string(e.get("content"), f"events[{i}].content"),
            confidence=_number(e.get("confidence"), f"events[{i}].confidence", 0.0, 1.0),
            when=_when(e.get("when"), f"events[{i}].when"),
            when_text=_string(e.get("when_text", ""), f"events[{i}].when_text"),
        )
        for i, e in enumerate(_items(data, "events"))
    )
    return Extraction(
        summary=_string(data.get("summary", ""), "summary"),
        topics=tuple(dict.fromkeys(t for t in topics if t)),
        sentiment=_number(data.get("sentiment", 0.0), "sentiment", -1.0, 1.0),
        dialog_act=dialog_act,
        certainty=certainty,
        facts=tuple(f for f in facts if f.content),
        attributes=tuple(a for a in attributes if a.key and a.value),
        events=tuple(e for e in events if e.content),
        entities=tuple(dict.fromkeys(e for e in entities if e)),
    )
