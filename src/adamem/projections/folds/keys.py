"""Keys that rows are indexed and compared by, each a pure function of one row or one extracted item."""

from __future__ import annotations

import json

from adamem.packs import TERM_PREFIX
from adamem.projections.folds.lexicon import is_single_valued, normalize, preference_polarity
from adamem.projections.folds.params import DAY_MS
from adamem.projections.folds.rows import EpisodicRow, MessageRow, PersonaRow

__all__ = [
    "attribute_identity",
    "attribute_slot",
    "event_content_key",
    "record_content_key",
    "speaker_key",
    "term_kinds",
    "trait_slot",
]


def term_kinds(extraction_json: str) -> frozenset[str]:
    """The entity types (``symptom``) of the typed mentions recorded in a message row's extraction."""
    if TERM_PREFIX not in extraction_json:
        return frozenset()
    facts = json.loads(extraction_json).get("facts", ())
    return frozenset(f["type"][len(TERM_PREFIX) :] for f in facts if f.get("type", "").startswith(TERM_PREFIX))


def speaker_key(row: MessageRow) -> str:
    """Who said a message: role and normalised name."""
    return f"{row.role}\x1f{normalize(row.speaker)}"


def attribute_identity(key: str, value: str) -> tuple[str, str, str]:
    """(persona kind, canonical key, normalised value) of an attribute: ``likes``/``dislikes`` for preferences."""
    polarity = preference_polarity(key)
    if polarity is not None:
        return "preference", polarity, normalize(value)
    return "trait", normalize(key).replace(" ", "_"), normalize(value)


def attribute_slot(key: str, value: str) -> str:
    """Episodic conflict slot of an attribute: the preferred value, a single-valued key, or none."""
    kind, canonical, norm_value = attribute_identity(key, value)
    if kind == "preference":
        return f"pref:{norm_value}"
    return f"attr:{canonical}" if is_single_valued(canonical) else ""


def event_content_key(content: str, effective_time: int) -> str:
    """Redundancy key of an event: its content on one (UTC) day."""
    return f"{normalize(content)}|{effective_time // DAY_MS}"


def record_content_key(row: EpisodicRow) -> str:
    """Redundancy key of a record: two active records with the same key say the same thing."""
    if row.type == "attribute":
        _, canonical, norm_value = attribute_identity(row.attribute_key, row.attribute_value)
        return f"{canonical}|{norm_value}"
    if row.type == "event":
        return event_content_key(row.content, row.event_time if row.event_time >= 0 else row.occurred_at)
    return normalize(row.content)


def trait_slot(row: PersonaRow) -> str:
    """Persona conflict slot: traits in one slot with different key/value contradict each other."""
    if row.kind == "preference":
        return f"pref:{row.value}"
    if row.kind == "preference_cluster":
        return f"cluster:{row.cluster}"
    if row.kind == "trait" and is_single_valued(row.key):
        return f"trait:{row.key}"
    return ""
