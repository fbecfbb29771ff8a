"""The Research Agent: evidence gathered in rounds, each item graded, conflicts shown (design document 6.2).

``research(retriever, owner_id, ResearchRequest(query, context, memory_hints, depth))`` → ``Research``.

**Rounds.** Round 1 is the query service's own answer; memory hints and the context's rarest words
(those the owner's messages hold) join the question's BM25 terms. Each later round takes cues from
the evidence found so far (``retrieval.feedback``: the best messages not used yet move the
question's vector and give their rarest words — names, places, the event a "why" named) and asks
again. Research stops when ``depth`` rounds ran, when no unused evidence is left to take cues
from, or when a round brings no new evidence message. The rounds' rankings are merged by
reciprocal rank (k 60): an item found again ranks higher, a round's new item joins where its ranks
put it. Every round is reported with its cues and what it added.

**Grading**, for every returned item:

- reliability: a raw message 1.0; a record derived from one (event, fact, attribute) 0.8; a persona
  trait, distilled from several, 0.7;
- freshness: ``0.5 ** (age / half-life)``, the age counted in event time from the owner's clock;
- agreement: the other returned items standing on the same evidence messages, and the other messages
  a record or trait was made from (the folds merge a repeated statement into one record or trait);
- conflict: the folds' conflict slots say when two records disagree (one superseded the other, or
  a persona trait is disputed); a message still in working memory is checked too, through the slots
  its recorded analysis will take at consolidation (``projections.folds.episodic.items_of``). Both
  sides are shown with their dates, the newer one current.

The grade is ``reliability × (0.5 + 0.5 × freshness)``, lifted 10 % per agreeing item (at most
three; never above 1) and halved for the superseded side of a conflict. The answer says how sure it is, and why,
in one line. Nothing here reads a clock: ages are counted from the owner's newest event (or the
as-of time).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from adamem.errors import ConfigError
from adamem.owners import split_owner
from adamem.projections.folds.episodic import items_of
from adamem.projections.folds.keys import record_content_key
from adamem.projections.folds.lexicon import normalize
from adamem.projections.folds.rows import EpisodicRow, MessageRow, PersonaRow
from adamem.retrieval.answer import Answer, Item, evidence_ids
from adamem.retrieval.base import query_terms
from adamem.retrieval.feedback import Feedback, feedback_of, surface_words
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf, OwnerSnapshot, View
from adamem.text import tokenize

__all__ = [
    "MAX_DEPTH",
    "Conflict",
    "Grade",
    "GradedItem",
    "Research",
    "ResearchRequest",
    "ResearchRound",
    "ResearchSettings",
    "research",
]

MAX_DEPTH = 5
"""The most rounds a request may ask for (the design document uses 2–3)."""

RELIABILITY = {"message": 1.0, "event": 0.8, "fact": 0.8, "attribute": 0.8}
"""Source reliability by item kind: a raw message outranks what was derived from it; anything else is a trait."""
TRAIT_RELIABILITY = 0.7

_DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class ResearchSettings:
    """The Research Agent's numbers."""

    feedback_messages: int = 3
    """Evidence messages whose words and vector a later round takes as cues."""
    feedback_weight: float = 0.5
    """Rocchio's β for the moved vector, and the weight of the strongest cue word against a question word."""
    feedback_terms: int = 10
    """Cue words a later round adds."""
    context_terms: int = 10
    """Words of the request's context added to round 1 (the rarest the owner's messages hold)."""
    context_weight: float = 0.5
    """Weight of a context word against a question word (a memory hint counts as one)."""
    rrf_k: int = 60
    """Reciprocal-rank constant merging the rounds' rankings."""
    half_life_days: float = 180.0
    """Freshness halves every this many days of event time."""


@dataclass(frozen=True, slots=True)
class ResearchRequest:
    """A request to the Research Agent: ``ResearchRequest{query, context, memory_hints, depth}``."""

    query: str
    context: str = ""
    """Text around the question (the agent's current conversation): its rarest words help round 1."""
    memory_hints: tuple[str, ...] = ()
    """Words or names the caller knows matter ("Porto", "the new job"): searched for in round 1."""
    depth: int = 1
    """Rounds at most (1: the query service's answer, graded)."""
    top_k: int = 10

    def __post_init__(self) -> None:
        problems = []
        if not self.query.strip():
            problems.append("query: must not be empty or only whitespace")
        if not 1 <= self.depth <= MAX_DEPTH:
            problems.append(f"depth: must be between 1 and {MAX_DEPTH}, got {self.depth}")
        if not 1 <= self.top_k <= 100:
            problems.append(f"top_k: must be between 1 and 100, got {self.top_k}")
        if problems:
            raise ConfigError("research request: " + "; ".join(problems))


@dataclass(frozen=True, slots=True)
class ResearchRound:
    """One round: the cue words it searched for besides the question, and the items it added."""

    number: int
    cues: tuple[str, ...]
    added: tuple[str, ...]
    """Ids of items whose evidence no earlier round had."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"round": self.number, "cues": list(self.cues), "added": list(self.added)}


@dataclass(frozen=True, slots=True)
class Grade:
    """How far an item can be trusted, and why."""

    reliability: float
    freshness: float
    agreement: int
    """Other returned items that support this one."""
    conflicts: tuple[str, ...]
    """Ids of the returned items this one disagrees with."""
    current: bool
    """False for the superseded side of a conflict."""
    score: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "reliability": self.reliability,
            "freshness": round(self.freshness, 4),
            "agreement": self.agreement,
            "conflicts": list(self.conflicts),
            "current": self.current,
            "score": round(self.score, 4),
        }


@dataclass(frozen=True, slots=True)
class GradedItem:
    """A returned item, the round that first found it, and its grade."""

    item: Item
    found_in_round: int
    grade: Grade

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the item's own fields, then ``round`` and ``grade``."""
        return {**self.item.to_dict(), "round": self.found_in_round, "grade": self.grade.to_dict()}


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two returned items that disagree: the current statement and the one it replaced, with their dates."""

    current: str
    earlier: str
    current_text: str
    earlier_text: str
    current_at: int
    earlier_at: int
    slot: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "slot": self.slot,
            "current": {"id": self.current, "content": self.current_text, "occurred_at": self.current_at},
            "earlier": {"id": self.earlier, "content": self.earlier_text, "occurred_at": self.earlier_at},
        }


@dataclass(frozen=True, slots=True)
class Research:
    """The Research Agent's answer: graded evidence, the rounds that found it, conflicts, how sure it is."""

    owner_id: str
    request: ResearchRequest
    items: tuple[GradedItem, ...]
    rounds: tuple[ResearchRound, ...]
    conflicts: tuple[Conflict, ...]
    confidence: str
    """high | medium | low."""
    because: str
    """One line a person can read: why that confidence."""
    first: Answer
    """Round 1's answer (route, whose memory, time windows)."""
    stopped: str
    """Why the rounds ended."""
    timing_ms: float = 0.0
    reference_time: int = -1

    def message_ids(self, limit: int | None = None) -> list[str]:
        """Distinct source ``message_id``s of the items' provenance, in rank order."""
        return evidence_ids((g.item for g in self.items), limit)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        tenant, user_id = split_owner(self.owner_id)
        return {
            "user_id": user_id,
            "tenant": tenant,
            "query": self.request.query,
            "depth": self.request.depth,
            "confidence": self.confidence,
            "because": self.because,
            "stopped": self.stopped,
            "reference_time": self.reference_time,
            "route": self.first.route.to_dict(),
            "whose": self.first.whose.to_dict(),
            "rounds": [r.to_dict() for r in self.rounds],
            "conflicts": [c.to_dict() for c in self.conflicts],
            "items": [g.to_dict() for g in self.items],
            "timing_ms": round(self.timing_ms, 2),
        }


@dataclass
class _Gathered:
    """Items found so far: first sighting, round, and each round's ranking."""

    items: dict[str, tuple[Item, int]] = field(default_factory=dict)
    rankings: list[list[str]] = field(default_factory=list)
    evidence: set[str] = field(default_factory=set)

    def add(self, answer: Answer, number: int) -> tuple[str, ...]:
        """Take a round's answer in; the ids of the items whose evidence no earlier round had."""
        added = []
        for item in answer.items:
            ids = {p.message_event_id for p in item.provenance} or {item.id}
            if item.id not in self.items:
                self.items[item.id] = (item, number)
            if not ids <= self.evidence:
                added.append(item.id)
        for item in answer.items:
            self.evidence |= {p.message_event_id for p in item.provenance} or {item.id}
        self.rankings.append([i.id for i in answer.items])
        return tuple(added)

    def merged(self, rrf_k: int, k: int) -> list[str]:
        """Item ids by reciprocal rank over every round, ties in order of first sighting."""
        score: dict[str, float] = {}
        for ranking in self.rankings:
            for rank, item_id in enumerate(ranking, start=1):
                score[item_id] = score.get(item_id, 0.0) + 1.0 / (rrf_k + rank)
        order = {item_id: n for n, item_id in enumerate(self.items)}
        return sorted(score, key=lambda i: (-score[i], order[i]))[:k]


def _hint_terms(request: ResearchRequest, snap: OwnerSnapshot, settings: ResearchSettings) -> dict[str, float]:
    """Round 1's words besides the question's: every memory hint word, and the context's rarest known words."""
    text = snap.text_index("messages")
    terms = {t: 1.0 for hint in request.memory_hints for t in tokenize(hint)}
    known = {t for t in tokenize(request.context) if t not in terms and text.document_frequency(t) > 0}
    rare = sorted(known, key=lambda t: (-text.idf(t), t))[: settings.context_terms]
    terms.update({t: settings.context_weight for t in rare})
    return terms


def research(
    retriever: Retriever,
    owner_id: str,
    request: ResearchRequest,
    settings: ResearchSettings = ResearchSettings(),
    as_of: int | AsOf | None = None,
) -> Research:
    """Answer a research request over ``owner_id``'s memory in up to ``request.depth`` rounds, graded."""
    started = time.perf_counter()
    k = request.top_k
    snap = retriever.snapshot(owner_id)  # raises UnknownOwner
    qvec = retriever.embed(request.query)
    hints = _hint_terms(request, snap, settings)
    refine = Feedback(qvec, hints, ()) if hints else None
    first = retriever.query(owner_id, request.query, k, as_of, refine=refine)
    gathered = _Gathered()
    shown = surface_words(hints, [*request.memory_hints, request.context])
    hint_cues = tuple(shown.get(t, t) for t in sorted(hints, key=lambda t: (-hints[t], t)))
    rounds = [ResearchRound(1, hint_cues, gathered.add(first, 1))]
    used: set[str] = set()
    stopped = "depth reached" if request.depth == 1 else ""
    asked = set(query_terms(request.query)) | set(hints)
    for number in range(2, request.depth + 1):
        sources = _unused_evidence(gathered, snap, used, settings.feedback_messages)
        if not sources:
            stopped = "no evidence left to take cues from"
            break
        used |= {m.id for m in sources}
        fb = feedback_of(
            qvec,
            sorted(asked),
            sources,
            snap.vector_index("messages"),
            snap.text_index("messages"),
            settings.feedback_weight,
            settings.feedback_terms,
        )
        terms = {**fb.terms, **hints}
        answer = retriever.query(owner_id, request.query, k, as_of, refine=Feedback(fb.vector, terms, fb.sources))
        added = gathered.add(answer, number)
        rounds.append(ResearchRound(number, tuple(fb.cues()), added))
        if not added:
            stopped = f"round {number} brought no new evidence"
            break
    else:
        stopped = stopped or "depth reached"
    ids = gathered.merged(settings.rrf_k, k)
    now = first.reference_time
    point = AsOf(time=as_of) if isinstance(as_of, int) else as_of
    graded, conflicts = _grade([gathered.items[i] for i in ids], View(snap, point), now, settings)
    confidence, because = _confidence(graded, conflicts)
    return Research(
        owner_id,
        request,
        tuple(graded),
        tuple(rounds),
        tuple(conflicts),
        confidence,
        because,
        first,
        stopped,
        (time.perf_counter() - started) * 1000.0,
        now,
    )


def _unused_evidence(gathered: _Gathered, snap: OwnerSnapshot, used: set[str], n: int) -> list[MessageRow]:
    """The best evidence messages of the latest round (then earlier ones) not yet used for cues."""
    out: list[MessageRow] = []
    for ranking in reversed(gathered.rankings):
        for item_id in ranking:
            item = gathered.items[item_id][0]
            for p in item.provenance:
                m = snap.message(p.message_event_id)
                if m is not None and m.id not in used and all(m.id != o.id for o in out):
                    out.append(m)
                if len(out) >= n:
                    return out
    return out


def _rows_of(item: Item, snap: OwnerSnapshot) -> list[EpisodicRow]:
    """The episodic records an item stands for: itself, or the records made from its message."""
    if item.kind == "message":
        return [snap.records[i] for i in snap.records_of_message.get(item.id, ()) if i in snap.records]
    record = snap.records.get(item.id)
    return [record] if record is not None else []


def _grade(
    found: Sequence[tuple[Item, int]], view: View, now: int, settings: ResearchSettings
) -> tuple[list[GradedItem], list[Conflict]]:
    """Grade the returned items against each other, and the conflicts their records are part of.

    A conflict is the folds' own: a record of a returned item that replaced an older record of its
    slot, or was replaced by a newer one. Both sides are shown, returned or not. As of a past point only what
    had been said by then counts: a replacement made later is no conflict yet."""
    snap = view.snapshot
    records = {item.id: _rows_of(item, snap) for item, _ in found}
    evidence = {item.id: {p.message_event_id for p in item.provenance} for item, _ in found}
    holder: dict[str, str] = {}  # record id -> the first returned item standing on it
    for item, _ in found:
        for r in records[item.id]:
            holder.setdefault(r.id, item.id)
    agree: dict[str, set[str]] = {item.id: set() for item, _ in found}
    against: dict[str, set[str]] = {item.id: set() for item, _ in found}
    superseded: set[str] = set()
    conflicts: dict[tuple[str, str], Conflict] = {}
    for item, _ in found:
        for r in records[item.id]:
            for newer, older in ((r, snap.records.get(r.supersedes)), (snap.records.get(r.superseded_by), r)):
                if newer is None or older is None or (newer.id, older.id) in conflicts or not _said(newer, view):
                    continue
                conflicts[(newer.id, older.id)] = Conflict(
                    holder.get(newer.id, newer.id),
                    holder.get(older.id, older.id),
                    newer.content,
                    older.content,
                    newer.valid_from,
                    older.valid_from,
                    newer.key or older.key,
                )
                if older.id in holder:
                    superseded.add(holder[older.id])
                if newer.id in holder and older.id in holder:
                    against[holder[newer.id]].add(holder[older.id])
                    against[holder[older.id]].add(holder[newer.id])
    for item, _ in found:  # a message not yet consolidated: the slots its recorded analysis will take
        message = snap.message(item.id) if item.kind == "message" and not records[item.id] else None
        for statement, replaced in _pending_replacements(message, view):
            conflicts.setdefault(
                (item.id, replaced.id),
                Conflict(
                    item.id,
                    holder.get(replaced.id, replaced.id),
                    statement,
                    replaced.content,
                    item.occurred_at,
                    replaced.valid_from,
                    replaced.key,
                ),
            )
            if replaced.id in holder:
                superseded.add(holder[replaced.id])
                against[item.id].add(holder[replaced.id])
                against[holder[replaced.id]].add(item.id)
    for a_id in evidence:
        for b_id in evidence:
            if a_id != b_id and evidence[a_id] & evidence[b_id]:
                agree[a_id].add(b_id)
    graded = []
    for rank, (item, number) in enumerate(found, start=1):
        reliability = RELIABILITY.get(item.kind, TRAIT_RELIABILITY)
        said = item.occurred_at
        age_days = max(0, now - said) / _DAY_MS if said >= 0 and now >= 0 else 0.0
        freshness = 0.5 ** (age_days / settings.half_life_days) if settings.half_life_days > 0 else 1.0
        support = len(agree[item.id] - against[item.id]) + _corroborated(item, view)
        current = item.id not in superseded and not _disputed(item, snap)
        lift = 1 + 0.1 * min(support, 3)
        score = min(1.0, reliability * (0.5 + 0.5 * freshness) * lift) * (1.0 if current else 0.5)
        grade = Grade(reliability, freshness, support, tuple(sorted(against[item.id])), current, score)
        graded.append(GradedItem(_ranked(item, rank), number, grade))
    return graded, list(conflicts.values())


def _pending_replacements(message: MessageRow | None, view: View) -> list[tuple[str, EpisodicRow]]:
    """What a message still in working memory will replace at consolidation: (its statement, the active record)
    for every conflict slot of its recorded analysis that an active record holds with other content."""
    if message is None or not message.extraction_json:
        return []
    out = []
    for extracted in items_of(json.loads(message.extraction_json), message.occurred_at):
        if not extracted.slot:
            continue
        for record in sorted(view.snapshot.records.values(), key=lambda r: r.id):
            if (
                record.key == extracted.slot
                and record.type == extracted.type
                and _said(record, view)
                and record.valid_from < message.occurred_at
                and normalize(record.content) != extracted.content_key
                and (extracted.type != "attribute" or record_content_key(record) != extracted.content_key)
            ):
                out.append((extracted.content, record))
    return out


def _ranked(item: Item, rank: int) -> Item:
    return item if item.rank == rank else replace(item, rank=rank)


def _corroborated(item: Item, view: View) -> int:
    """Other messages saying what a record or trait says (the fold merged their repetitions into it)."""
    snap = view.snapshot
    record = snap.records.get(item.id)
    if record is not None:
        return max(0, len(snap.messages_for(record.source_message_ids)) - 1)
    trait = snap.traits.get(item.id)
    return max(0, len(view.evidence(trait)) - 1) if trait is not None else 0


def _said(record: EpisodicRow, view: View) -> bool:
    """Whether a record stands at the view's point: active now (made, or waiting in working memory), or valid then."""
    return record.status == "active" if view.live else view.record(record)


def _disputed(item: Item, snap: OwnerSnapshot) -> bool:
    row = snap.traits.get(item.id)
    return isinstance(row, PersonaRow) and row.disputed


def _date(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d") if ms >= 0 else "an unknown date"


def _confidence(graded: Sequence[GradedItem], conflicts: Sequence[Conflict]) -> tuple[str, str]:
    """How sure the answer is, and why, in one line.

    high: the best item is current, a message or a record, fresh (grade ≥ 0.6) and another returned item
    agrees with it; low: nothing found, or the best match was replaced by a newer statement; else medium."""
    if not graded:
        return "low", "no evidence was found"
    top = graded[0]
    what = "message" if top.item.kind == "message" else f"{top.item.kind} record"
    if top.item.kind not in RELIABILITY:
        what = "persona trait"
    parts = [f"the best evidence is {_article(what)} {what} from {_date(top.item.occurred_at)}"]
    n = top.grade.agreement
    parts.append(
        f"{n} other statement{'s' if n != 1 else ''} agree{'s' if n == 1 else ''}" if n else "nothing else agrees"
    )
    if conflicts:
        c = conflicts[0]
        slot = c.slot.replace("_", " ") if c.slot else "one statement"
        more = f" (+{len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
        parts.append(f"conflict on {slot}: {_date(c.current_at)} replaces {_date(c.earlier_at)}{more}")
    if not top.grade.current:
        level = "low"
        parts.append("the best match was replaced by a newer statement")
    elif top.grade.reliability >= 0.8 and top.grade.score >= 0.6 and n > 0:
        level = "high"
    else:
        level = "medium"
    return level, "; ".join(parts)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"
