"""What a query returns: ranked items with score breakdowns and provenance, the route, whose memory, timing.

Every class is a frozen dataclass with a ``to_dict()`` that gives plain JSON types (the HTTP layer
serialises it as is). Times are event-time milliseconds since the epoch; -1 means none. When a
message stated the speaker's UTC offset, ``occurred_at_local`` shows when it was said on the speaker's
clock (``2024-03-01T09:00:00+08:00``); without one it is the UTC time (``…Z``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from adamem.events import ms_to_iso
from adamem.owners import split_owner
from adamem.projections.folds.rows import MessageRow
from adamem.retrieval.config import Layer
from adamem.retrieval.fusion import Breakdown, TimeWindow
from adamem.retrieval.route import RoutePlan
from adamem.retrieval.snapshot import AsOf
from adamem.retrieval.whose import WhoseDecision

__all__ = ["Answer", "Item", "PathStep", "Provenance", "Timing", "evidence_ids", "readable", "when_text"]


@dataclass(frozen=True, slots=True)
class Provenance:
    """A source message of an item and where it sits on the log."""

    message_event_id: str
    conversation_id: str
    message_id: str
    speaker: str
    role: str
    occurred_at: int
    source_topic: str
    source_partition: int
    source_offset: int
    analyzer: str
    analysis_event_id: str
    utc_offset_minutes: int | None = None  # the speaker's offset as the message stated it; None: UTC

    @classmethod
    def of(cls, m: MessageRow) -> Provenance:
        """The provenance of an archived message."""
        return cls(
            m.id,
            m.conversation_id,
            m.message_id,
            m.speaker,
            m.role,
            m.occurred_at,
            m.source_topic,
            m.source_partition,
            m.source_offset,
            m.analyzer,
            m.analysis_event_id,
            m.utc_offset_minutes,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "message_event_id": self.message_event_id,
            "conversation_id": self.conversation_id,
            "message_id": self.message_id,
            "speaker": self.speaker,
            "role": self.role,
            "occurred_at": self.occurred_at,
            "utc_offset_minutes": self.utc_offset_minutes,
            "occurred_at_local": ms_to_iso(self.occurred_at, self.utc_offset_minutes),
            "source_topic": self.source_topic,
            "source_partition": self.source_partition,
            "source_offset": self.source_offset,
            "analyzer": self.analyzer,
            "analysis_event_id": self.analysis_event_id,
        }


@dataclass(frozen=True, slots=True)
class PathStep:
    """One node of a graph path; ``edge_type``/``weight`` describe the edge that led to it ("" for the seed)."""

    node: str
    node_type: str
    label: str
    edge_type: str = ""
    weight: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "node": self.node,
            "node_type": self.node_type,
            "label": self.label,
            "edge_type": self.edge_type,
            "weight": self.weight,
        }


@dataclass(frozen=True, slots=True)
class Item:
    """One ranked piece of evidence."""

    rank: int
    layer: Layer
    kind: str  # message | event | fact | attribute | preference | preference_cluster | trait | habit
    id: str  # message event id, episodic record id or persona trait id
    content: str
    score: float
    breakdown: Breakdown
    speaker: str
    role: str
    occurred_at: int  # when it was said (a trait: last seen)
    event_time: int  # when what it reports happened, resolved ("two weeks ago" -> a date); -1 when it dates nothing
    provenance: tuple[Provenance, ...]
    hop_path: tuple[PathStep, ...] = ()
    ordered_by: str = ""  # the ordering rules that moved the item from its place by score ("": none)
    utc_offset_minutes: int | None = None  # the offset of the source message said at ``occurred_at``; None: UTC

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "rank": self.rank,
            "layer": self.layer.value,
            "kind": self.kind,
            "id": self.id,
            "content": self.content,
            "score": round(self.score, 6),
            "breakdown": self.breakdown.to_dict(),
            "speaker": self.speaker,
            "role": self.role,
            "occurred_at": self.occurred_at,
            "utc_offset_minutes": self.utc_offset_minutes,
            "occurred_at_local": None if self.occurred_at < 0 else ms_to_iso(self.occurred_at, self.utc_offset_minutes),
            "event_time": self.event_time,
            "provenance": [p.to_dict() for p in self.provenance],
            "hop_path": [s.to_dict() for s in self.hop_path],
            "ordered_by": self.ordered_by,
        }


@dataclass(frozen=True, slots=True)
class Timing:
    """Milliseconds spent per stage of one query."""

    resolve: float = 0.0  # change token, snapshot, whose memory
    route: float = 0.0
    retrieve: float = 0.0  # question embedding, semantic cache, base retrieval
    expand: float = 0.0
    fuse: float = 0.0
    total: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """JSON-ready form, rounded to 0.01 ms."""
        return {k: round(getattr(self, k), 2) for k in ("resolve", "route", "retrieve", "expand", "fuse", "total")}


def evidence_ids(items: Iterable[Item], limit: int | None = None) -> list[str]:
    """Distinct source ``message_id``s of items' provenance, in rank order, at most ``limit``."""
    seen: dict[str, None] = {}
    for item in items:
        for p in item.provenance:
            seen.setdefault(p.message_id, None)
            if limit is not None and len(seen) >= limit:
                return list(seen)
    return list(seen)


@dataclass(frozen=True, slots=True)
class Answer:
    """The ranked evidence for a question, and how it was found."""

    owner_id: str
    question: str
    items: tuple[Item, ...]
    route: RoutePlan
    whose: WhoseDecision
    timing: Timing
    reference_time: int
    time_windows: tuple[TimeWindow, ...] = ()
    as_of: AsOf | None = None
    config: str = ""
    cached: bool = False
    notices: tuple[str, ...] = ()  # what the reader of the answer should know (``retrieval.language``)

    def message_ids(self, limit: int | None = None) -> list[str]:
        """Distinct source ``message_id``s of the items' provenance, in rank order (the evidence chain)."""
        return evidence_ids(self.items, limit)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        tenant, user_id = split_owner(self.owner_id)
        return {
            "user_id": user_id,
            "tenant": tenant,
            "question": self.question,
            "config": self.config,
            "cached": self.cached,
            "as_of": self.as_of.to_dict() if self.as_of is not None else None,
            "reference_time": self.reference_time,
            "time_windows": [{"start": w.start, "end": w.end, "text": w.text} for w in self.time_windows],
            "whose": self.whose.to_dict(),
            "route": self.route.to_dict(),
            "items": [i.to_dict() for i in self.items],
            "timing_ms": self.timing.to_dict(),
            "notices": list(self.notices),
        }


def when_text(occurred_at: int, event_time: int, utc_offset_minutes: int | None = None) -> str:
    """When an item was said, on the speaker's clock, and the day what it reports happened when that is another day.

    ``2024-04-15T21:02:00Z (happened 2024-04-01)`` for "Two weeks ago I finished my first 5k run";
    ``2024-04-16T05:02:00+08:00 (happened 2024-04-02)`` when the speaker said it at +08:00 (event days are
    the speaker's calendar days already); "-" for an item with no time. What a "when" question asks for is
    the second date.
    """
    if occurred_at < 0:
        return "-"
    said = ms_to_iso(occurred_at, utc_offset_minutes)
    if event_time < 0 or ms_to_iso(event_time)[:10] == said[:10]:
        return said
    return f"{said} (happened {ms_to_iso(event_time)[:10]})"


def readable(content: str, name: str) -> str:
    """A record as an answer shows it: once it has named its speaker, their possessive reads "their" (English)
    or 自己的 (Chinese), as a person writes it ("Alice finished their first 5k run").

    The record keeps the name each time (what full-text search matches: "Alice finished Alice's first 5k
    run"): the rule extractor writes the speaker's first person as their name.
    """
    if not name:
        return content
    first = content.find(name)
    if first < 0:
        return content
    cut = first + len(name)
    rest = re.sub(rf"(?<!\w){re.escape(name)}'s(?!\w)", "their", content[cut:])
    return content[:cut] + rest.replace(f"{name}的", "自己的")
