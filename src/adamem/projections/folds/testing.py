"""Hand-built analyses for tests and benchmarks: a scripted chat whose extractions the caller sets.

No extractor or embedder is involved: facts, attributes, events and topics are given explicitly and
the vector is a 4-dim unit vector derived from the text by SHA-1.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from adamem.events import (
    Analyzer,
    AnswerFeedback,
    ChatMessage,
    Embedding,
    ExtractedAttribute,
    ExtractedEvent,
    ExtractedFact,
    GrantAction,
    GrantChanged,
    JudgedItem,
    MemoryCorrected,
    MemoryForgotten,
    MessageAnalyzed,
    Speaker,
    analysis_event_id,
    message_event_id,
)
from adamem.owners import owner_key
from adamem.projections.folds import Change, OwnerMemory, Positioned, Row, apply
from adamem.projections.folds.ids import node_id, record_id
from adamem.projections.folds.lexicon import normalize

__all__ = [
    "DAY",
    "HOUR",
    "T0",
    "WEEK",
    "Chat",
    "attr",
    "event",
    "fact",
    "fold",
    "replay_changes",
    "scenario",
    "vector_of",
]

Role = Literal["user", "assistant", "other"]
Scope = Literal["item", "message", "user"]
HOUR = 3_600_000
DAY = 24 * HOUR
WEEK = 7 * DAY
T0 = 1_709_510_400_000  # 2024-03-04T00:00:00Z, a Monday


def fact(content: str, confidence: float = 0.9, key: str = "", type: str = "general") -> ExtractedFact:
    """An extracted fact."""
    return ExtractedFact(content=content, confidence=confidence, type=type, key=key)


def attr(key: str, value: str, confidence: float = 0.9) -> ExtractedAttribute:
    """An extracted attribute."""
    return ExtractedAttribute(key=key, value=value, confidence=confidence)


def event(content: str, confidence: float = 0.9, when: int | None = None, when_text: str = "") -> ExtractedEvent:
    """An extracted event."""
    return ExtractedEvent(content=content, confidence=confidence, when=when, when_text=when_text)


def vector_of(text: str) -> tuple[float, ...]:
    """A 4-dim unit vector derived from the text (stands in for the embedder)."""
    digest = hashlib.sha1(text.encode()).digest()
    raw = [b - 127.5 for b in digest[:4]]
    norm = math.sqrt(sum(x * x for x in raw))
    return tuple(x / norm for x in raw)


@dataclass
class Chat:
    """Builds positioned ``MessageAnalyzed`` and control events of one memory owner, offsets counting up."""

    user: str = "alice"
    topic: str = "adamem.analyses"
    tenant: str = "default"
    offset: int = 0
    counters: dict[str, int] = field(default_factory=dict)

    def say(
        self,
        text: str,
        *,
        at: int,
        conv: str = "s1",
        speaker: str = "Alice",
        role: Role = "user",
        topics: Sequence[str] = (),
        facts: Sequence[ExtractedFact] = (),
        attributes: Sequence[ExtractedAttribute] = (),
        events: Sequence[ExtractedEvent] = (),
        entities: Sequence[str] = (),
        message_id: str | None = None,
        vector: Sequence[float] | None = None,
    ) -> Positioned:
        """One analysed message (its vector ``vector_of(text)`` unless given)."""
        n = self.counters[conv] = self.counters.get(conv, 0) + 1
        mid = message_id or f"{conv}-{n}"
        eid = message_event_id(self.tenant, self.user, conv, mid)
        msg = ChatMessage(
            event_id=eid,
            user_id=self.user,
            tenant=self.tenant,
            conversation_id=conv,
            message_id=mid,
            speaker=Speaker(role=role, name=speaker),
            text=text,
            occurred_at=at,
        )
        analysis = MessageAnalyzed(
            event_id=analysis_event_id(eid, "test", "1", "g1"),
            message=msg,
            analyzer=Analyzer(name="test", version="1"),
            embedding=Embedding(model="sha1-4", vector=vector_of(text) if vector is None else tuple(vector)),
            topics=tuple(topics),
            facts=tuple(facts),
            attributes=tuple(attributes),
            events=tuple(events),
            entities=tuple(entities),
        )
        return self._position(analysis)

    def forget(self, scope: Scope, target: str | None, *, at: int, n: int = 0) -> Positioned:
        """A ``MemoryForgotten`` control event."""
        ev = MemoryForgotten(
            event_id=f"forget-{scope}-{target}-{n}",
            user_id=self.user,
            tenant=self.tenant,
            scope=scope,
            occurred_at=at,
            target_id=target,
        )
        return Positioned(ev, "adamem.control", 0, self._next())

    def correct(self, item_id: str, content: str, *, at: int, confidence: float = 1.0) -> Positioned:
        """A ``MemoryCorrected`` control event."""
        ev = MemoryCorrected(
            event_id=f"correct-{item_id}-{at}",
            user_id=self.user,
            tenant=self.tenant,
            item_id=item_id,
            content=content,
            occurred_at=at,
            confidence=confidence,
        )
        return Positioned(ev, "adamem.control", 0, self._next())

    def feedback(self, judged: Sequence[tuple[str, str, str, bool]], *, at: int, n: int = 0) -> Positioned:
        """An ``AnswerFeedback`` control event: ``(item_id, layer, kind, helped)`` per judged item."""
        ev = AnswerFeedback(
            event_id=f"feedback-{at}-{n}",
            user_id=self.user,
            tenant=self.tenant,
            items=tuple(JudgedItem(*j) for j in judged),
            occurred_at=at,
        )
        return Positioned(ev, "adamem.control", 0, self._next())

    def grant(
        self,
        grant_id: str,
        action: GrantAction,
        *,
        at: int,
        grantee: str = "clinic",
        layers: Sequence[str] = ("episodic",),
        topics: Sequence[str] = (),
        scope_from: int | None = None,
        scope_until: int | None = None,
    ) -> Positioned:
        """A ``GrantChanged`` control event (the scope matters for ``granted`` only)."""
        ev = GrantChanged(
            event_id=f"grant-{self.owner_id}-{action}-{grant_id}-{at}",
            user_id=self.user,
            tenant=self.tenant,
            grant_id=grant_id,
            action=action,
            occurred_at=at,
            grantee_tenant=grantee,
            layers=tuple(layers),
            topics=tuple(topics),
            scope_from=scope_from,
            scope_until=scope_until,
        )
        return Positioned(ev, "adamem.control", 0, self._next())

    @property
    def owner_id(self) -> str:
        """The owner key of this chat's user (``tenant:user``)."""
        return owner_key(self.tenant, self.user)

    def node(self, node_type: str, ref_id: str) -> str:
        """Graph node id of this owner."""
        return node_id(self.owner_id, node_type, ref_id)

    def _next(self) -> int:
        self.offset += 1
        return self.offset - 1

    def _position(self, analysis: MessageAnalyzed) -> Positioned:
        return Positioned(analysis, self.topic, 0, self._next())


def _mid(p: Positioned) -> str:
    assert isinstance(p.event, MessageAnalyzed)
    return p.event.message.event_id


def scenario(user: str = "alice", weeks: int = 8, start_at: int = T0) -> list[Positioned]:
    """Weeks of English and Chinese sessions with evictions, conflicts, habits, a correction, forgets and grants."""
    chat = Chat(user=user)
    out: list[Positioned] = []
    firsts: dict[int, str] = {}
    for week in range(weeks):
        start = start_at + week * WEEK + 2 * DAY + 19 * HOUR  # Wednesday evenings
        conv = f"week-{week}"
        chinese = week % 2 == 1
        for i in range(14 if week % 3 == 2 else 6):
            at = start + i * 5 * 60_000
            user_turn = i % 2 == 0
            speaker = "Alice" if user_turn else "Assistant"
            role: Role = "user" if user_turn else "assistant"
            facts: list[ExtractedFact] = []
            attributes: list[ExtractedAttribute] = []
            events: list[ExtractedEvent] = []
            topics = ["日常" if chinese else "daily"]
            if user_turn and i == 0:
                city = ["Shanghai", "Beijing", "Shenzhen"][min(week // 3, 2)]
                facts.append(fact(f"住在{city}" if chinese else f"lives in {city}", 0.8 + 0.02 * week, key="lives_in"))
                events.append(event("去健身房锻炼" if chinese else "went to the gym", 0.9))
                topics.append("健身" if chinese else "fitness")
            if user_turn and i == 2:
                attributes.append(attr("喜欢", "川菜") if chinese else attr("likes", "spicy food", 0.85))
                topics.append("food")
            if user_turn and i == 4:
                late = attr("dislikes", "spicy food", 0.9) if week == 6 else attr("likes", "green tea", 0.75)
                attributes.append(late)
                facts.append(fact("the company is in Haidian, Beijing", 0.9))
            text = f"{'第' if chinese else 'turn '}{week}-{i} {' '.join(topics)}"
            out.append(
                chat.say(
                    text,
                    at=at,
                    conv=conv,
                    speaker=speaker,
                    role=role,
                    topics=topics,
                    facts=facts,
                    attributes=attributes,
                    events=events,
                    entities=["Beijing"] if facts else [],
                )
            )
            if i == 0:
                firsts[week] = _mid(out[-1])
        if week == 4:
            # week 3's "住在Beijing" updated "lives in Shanghai" and was consolidated when week 4 began
            city = record_id(chat.owner_id, firsts[3], "fact", normalize("住在Beijing"))
            out.append(chat.correct(city, "lives in Hangzhou", at=start + 2 * HOUR, confidence=0.95))
            out.append(chat.forget("message", _mid(out[-10]), at=start + 3 * HOUR))
            tea = record_id(chat.owner_id, _mid(out[4]), "attribute", "likes|green tea")
            out.append(chat.forget("item", tea, at=start + 4 * HOUR))
            # a grant to a clinic, confirmed; another, revoked before it was confirmed
            out.append(chat.grant("g-clinic", "granted", at=start + 5 * HOUR, topics=("fitness", "健身")))
            out.append(chat.grant("g-clinic", "confirmed", at=start + 6 * HOUR))
            out.append(chat.grant("g-shop", "granted", at=start + 5 * HOUR, grantee="shop", layers=("persona",)))
            out.append(chat.grant("g-shop", "revoked", at=start + 7 * HOUR))
    return out


def fold(
    events: Iterable[Positioned], state: OwnerMemory | None = None, user: str = "alice", tenant: str = "default"
) -> tuple[OwnerMemory, list[Change]]:
    """Fold events into a (fresh) state of ``tenant``'s ``user``; returns it and every change, in order."""
    state = state if state is not None else OwnerMemory(owner_key(tenant, user))
    out: list[Change] = []
    for e in events:
        state, changes = apply(state, e)
        out.extend(changes)
    return state, out


def replay_changes(changes: Iterable[Change]) -> dict[tuple[str, str], Row]:
    """What a store holds after applying the changes in order (a dict standing in for the tables)."""
    tables: dict[tuple[str, str], Row] = {}
    for c in changes:
        if hasattr(c, "row"):
            tables[(c.table, c.id)] = c.row
        else:
            tables.pop((c.table, c.id), None)
    return tables
