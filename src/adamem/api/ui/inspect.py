"""An owner's memory as the inspector shows it: every row, and which of them stood at an as-of point.

The point means what it means to a query (``retrieval.snapshot.View``): at event time T, messages
said by T, records valid at T, traits first seen by T and not superseded before T; at log offset O,
messages below O on the owner's analyses partition and everything else as at the event time of the
newest such message. The persona panel's traits at a point are the persona fold replayed to it
from the log instead (``api.ui.replay``; ``Inspection.replayed``) when the service has a log. A
long-lived owner's snapshot holds its newest messages only; the inspector
reads every message of the owner from the store (kept while the owner's shard does not change), so
that the timeline, the slider and an offset's time cover them all.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import cast

from adamem.api.models import MAX_OFFSET, MAX_TIME_MS, MIN_TIME_MS
from adamem.api.ui.replay import PersonaAt
from adamem.events import ms_to_iso
from adamem.ingest import parse_time
from adamem.projections.folds.params import DAY_MS, MemoryParameters
from adamem.projections.folds.persona import evidence_strength, strength_at
from adamem.projections.folds.rows import EpisodicRow, GraphEdgeRow, GraphNodeRow, MessageRow, PersonaRow, Row
from adamem.projections.store.ports import StoreReader
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf, OwnerSnapshot, View

__all__ = [
    "WEEK_MS",
    "AsOfError",
    "Inspection",
    "MessageCache",
    "StabilityWeek",
    "TraitAt",
    "WrittenBy",
    "as_of_text",
    "parse_as_of",
]

WEEK_MS = 7 * DAY_MS
MAX_WEEKS = 52  # points of the stability chart: the owner's weeks, evenly thinned to this many

_OFFSET = re.compile(r"(?:offset|@)\s*[:=]?\s*([0-9]+)", re.IGNORECASE)
_MILLIS = re.compile(r"-?[0-9]+")


class AsOfError(ValueError):
    """An as-of text that is neither a time nor a log offset."""


def parse_as_of(text: str | None) -> AsOf | None:
    """The point an as-of text names: an ISO-8601 time or integer milliseconds (event time, as the API and
    ``adamem query --as-of`` read them), or ``offset:N`` (a log offset of the owner's analyses partition).

    None for no text; ``AsOfError`` with a sentence for anything else.
    """
    value = (text or "").strip()
    if not value:
        return None
    m = _OFFSET.fullmatch(value)
    if m is not None:
        offset = int(m.group(1))
        if offset > MAX_OFFSET:
            raise AsOfError(f"as_of {value!r}: the offset is past {MAX_OFFSET}")
        return AsOf(offset=offset)
    if _MILLIS.fullmatch(value):
        ms = int(value)
    else:
        try:
            ms = parse_time(value)
        except ValueError:
            raise AsOfError(
                f"as_of {value!r} is not a time or a log offset: give an ISO-8601 time such as 2024-03-11T19:33:00Z, "
                "integer milliseconds since the epoch, or offset:N for a log offset"
            ) from None
    if not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        raise AsOfError(f"as_of {value!r} is outside the years 0001-9999")
    return AsOf(time=ms)


def as_of_text(point: AsOf | None) -> str:
    """The canonical text of a point (what ``parse_as_of`` reads back); "" for now."""
    if point is None:
        return ""
    if point.offset is not None:
        return f"offset:{point.offset}"
    assert point.time is not None
    return ms_to_iso(point.time)


class MessageCache:
    """Every message of recently inspected owners, in arrival order, kept while the owner's shard token holds."""

    def __init__(self, owners: int = 4) -> None:
        self._kept: OrderedDict[str, tuple[str, tuple[MessageRow, ...]]] = OrderedDict()
        self._owners = owners
        self._lock = threading.Lock()

    def messages(self, retriever: Retriever, owner_id: str, snap: OwnerSnapshot) -> tuple[MessageRow, ...]:
        """The owner's messages: the snapshot's when it holds them all, else read from the store."""
        if snap.archive is None:
            return tuple(snap.by_seq)
        token = retriever.token(owner_id)
        with self._lock:
            kept = self._kept.get(owner_id)
            if kept is not None and kept[0] == token:
                self._kept.move_to_end(owner_id)
                return kept[1]
        rows = [r for r in retriever.store.rows("messages", owner_id) if isinstance(r, MessageRow)]
        found = tuple(sorted(rows, key=lambda m: (m.seq, m.id)))
        with self._lock:
            self._kept[owner_id] = (token, found)
            while len(self._kept) > self._owners:
                self._kept.popitem(last=False)
        return found


@dataclass(frozen=True)
class TraitAt:
    """A persona trait as it stood at a point.

    ``exact``: the strength is the fold's own (as last computed, or decayed from it with ``strength_at``
    when the point is at or after the fold's last computation, or the row of the fold replayed to the
    point: ``Inspection.replayed``); otherwise it is recomputed with the fold's formula from the
    evidence dated by the point, which does not replay the damping of a conflict. ``disputed`` is None
    when the flags changed after the point: the rows keep a trait's latest change only, so its dispute
    flag before that change is not known.
    """

    strength: float
    mentions: int
    stable: bool
    disputed: bool | None
    exact: bool
    last_seen: int  # the newest evidence by then


@dataclass(frozen=True)
class StabilityWeek:
    """The persona stability index of one week ``[start, end)``: ``changed`` of ``core`` traits changed."""

    start: int
    end: int
    core: int
    changed: int

    @property
    def rate(self) -> float:
        """The index: the share of core traits that changed (0.0 without core traits)."""
        return self.changed / self.core if self.core else 0.0


@dataclass
class Inspection:
    """One owner's rows and the as-of point they are shown at.

    ``replayed``: the owner's persona folded again from the log up to the point
    (``api.ui.replay.PersonaReplays``), when a service with a log has folded it; the persona at the
    point is then those rows (``traits_at``, ``trait_at``), else it is recomputed from the rows as
    they stand now.
    """

    owner_id: str
    snap: OwnerSnapshot
    all_messages: tuple[MessageRow, ...]
    point: AsOf | None
    replayed: PersonaAt | None = None

    @cached_property
    def time(self) -> int | None:
        """The event time of the point (an offset's: its newest message's); None for now."""
        if self.point is None:
            return None
        if self.point.offset is not None:
            offset = self.point.offset
            return max((m.occurred_at for m in self.all_messages if m.source_offset < offset), default=-1)
        return self.point.time

    @cached_property
    def view(self) -> View:
        """The retriever's view at the point's event time (records, traits, nodes, edges)."""
        return View(self.snap, None if self.time is None else AsOf(time=self.time))

    @cached_property
    def by_id(self) -> dict[str, MessageRow]:
        """Every message by its event id."""
        return {m.id: m for m in self.all_messages}

    def message(self, m: MessageRow) -> bool:
        """Whether a message existed at the point."""
        if self.point is None:
            return True
        if self.point.offset is not None and m.source_offset >= self.point.offset:
            return False
        return self.time is None or m.occurred_at <= self.time

    @cached_property
    def messages(self) -> list[MessageRow]:
        """The messages that existed at the point, in arrival order."""
        return [m for m in self.all_messages if self.message(m)]

    @cached_property
    def working(self) -> frozenset[str]:
        """Ids of the messages in working memory at the point (the FIFO replayed over the visible ones)."""
        if self.point is None:
            return frozenset(m.id for m in self.all_messages if m.in_working)
        seen, params = self.messages, self.snap.params
        n, cap, batch = len(seen), params.working_capacity, params.eviction_batch
        keep = n if n <= cap else cap + 1 - batch + (n - cap - 1) % batch
        return frozenset(m.id for m in seen[n - keep :])

    def record_valid(self, r: EpisodicRow) -> bool:
        """Whether a record was valid at the point (now: active and not about to be superseded)."""
        return self.view.record(r)

    def record_known(self, r: EpisodicRow) -> bool:
        """Whether a record had been written by the point (valid then, or valid before it)."""
        if self.time is None:
            return True
        return min(r.valid_from, r.occurred_at) <= self.time

    def replaced_by_then(self, r: EpisodicRow) -> bool:
        """Whether a record's replacement happened by the point."""
        return r.valid_to >= 0 and (self.time is None or r.valid_to <= self.time)

    def trait(self, t: PersonaRow) -> bool:
        """Whether a persona trait stood at the point."""
        return self.view.trait(t)

    def evidence(self, t: PersonaRow) -> list[tuple[str, float, int]]:
        """A trait's (message id, confidence, time) evidence that existed at the point."""
        out = []
        for mid, conf, at in zip(t.evidence_message_ids, t.evidence_confidences, t.evidence_times, strict=True):
            m = self.by_id.get(mid)
            if m is not None and self.message(m):
                out.append((mid, conf, at))
        return out

    def _evidence_of(self, t: PersonaRow) -> list[tuple[str, float, int]]:
        """``evidence`` kept per trait: the stability chart asks for each trait's twice a week."""
        found = self._evidence.get(t.id)
        if found is None:
            found = self._evidence[t.id] = self.evidence(t)
        return found

    @cached_property
    def _evidence(self) -> dict[str, list[tuple[str, float, int]]]:
        return {}

    def node(self, n: GraphNodeRow) -> bool:
        """Whether a graph node stood for something that existed at the point."""
        if n.node_type == "message":
            m = self.by_id.get(n.ref_id)
            return m is not None and self.message(m)
        return self.view.node(n)

    def edge(self, e: GraphEdgeRow) -> bool:
        """Whether an edge and both its ends existed at the point."""
        if not self.view.edge(e):
            return False
        ends = (self.snap.nodes.get(e.src), self.snap.nodes.get(e.dst))
        return all(n is not None and self.node(n) for n in ends)

    def traits_at(self) -> tuple[list[PersonaRow], list[PersonaRow]]:
        """The persona at the point: the traits standing then, and those superseded or not standing.

        Replayed: the fold's active rows, and its superseded ones. Otherwise the rows as they stand
        now: those standing at the point (``trait``), and the others first seen by then.
        """
        if self.replayed is not None:
            rows = sorted(self.replayed.traits.values(), key=lambda t: t.id)
            return [t for t in rows if t.status == "active"], [t for t in rows if t.status != "active"]
        now = self.snap.traits.values()
        standing = [t for t in now if self.trait(t)]
        history = [t for t in now if not self.trait(t) and (self.time is None or t.first_seen <= self.time)]
        return standing, history

    def trait_at(self, t: PersonaRow, time: int | None = None) -> TraitAt:
        """A trait's strength, mentions and flags at the point (or at event ``time``, with the point's messages).

        Now: the row as the fold last wrote it. A row of the fold replayed to the point
        (``replayed``, asked without ``time``): its strength decayed to the point (``strength_at``), its
        mentions and flags. Otherwise, at or after the row's ``updated_at``: the same. Before it: the
        mentions are the row's count less the kept evidence not yet there, the strength is
        ``evidence_strength`` over the evidence dated by then, stable is strength ≥
        ``persona_stable_strength`` with ``persona_min_evidence`` mentions, and the flags are the row's
        when its latest change (``changed_at``) came by then.
        """
        at = self.time if time is None else time
        params: MemoryParameters = self.snap.params
        if at is None:
            return TraitAt(t.strength, t.mention_count, t.stable, t.disputed, True, t.last_seen)
        if (self.replayed is not None and time is None) or at >= t.updated_at:
            return TraitAt(strength_at(t, at, params), t.mention_count, t.stable, t.disputed, True, t.last_seen)
        kept = [e for e in self._evidence_of(t) if e[2] <= at]
        mentions = max(len(kept), t.mention_count - (len(t.evidence_message_ids) - len(kept)))
        strength = evidence_strength([e[1] for e in kept], [e[2] for e in kept], mentions, at, params)
        last = max((e[2] for e in kept), default=t.first_seen)
        if at >= t.changed_at:
            return TraitAt(strength, mentions, t.stable, t.disputed, False, last)
        stable = strength >= params.persona_stable_strength and mentions >= params.persona_min_evidence
        return TraitAt(strength, mentions, stable, None, False, last)

    def _standing(self, t: PersonaRow, at: int) -> bool:
        return t.first_seen <= at and (t.status == "active" or t.valid_to < 0 or t.valid_to > at)

    @cached_property
    def stability(self) -> list[StabilityWeek]:
        """The persona stability index of each week of the owner's timeline up to the point.

        Weeks run from the owner's first message, ``[first + k·7 d, first + (k+1)·7 d)``, to the week
        holding the point, cut at it (now: the newest message); more than ``MAX_WEEKS`` are evenly thinned. For a
        week ``[s, e)`` a trait first seen before ``e`` *changed* when its recorded latest change
        (``changed_at``) falls in the week, or when its state at ``e - 1`` differs from its state at
        ``s - 1`` in standing (existing and not superseded), stability or a known dispute flag
        (``trait_at``); the week's *core* traits are those standing and stable at ``e - 1`` plus those
        changed. The index is ``changed / core`` (0 without core traits) — the design's weekly change
        rate of core traits (healthy: 15–30 %), which ``projections.folds.persona.stability_index``
        computes for the last week from the rows alone.
        """
        times = [m.occurred_at for m in self.messages]
        if not times:
            return []
        first, last = min(times), max(times) if self.time is None else self.time
        count = max(1, (last - first) // WEEK_MS + 1)
        picks = (
            sorted({round(i * (count - 1) / (MAX_WEEKS - 1)) for i in range(MAX_WEEKS)})
            if count > MAX_WEEKS
            else range(count)
        )
        traits = list(self.snap.traits.values())
        out = []
        for k in picks:
            s, e = first + k * WEEK_MS, first + (k + 1) * WEEK_MS
            if self.time is not None:
                e = min(e, self.time + 1)  # the week holding the point ends there
            core = changed = 0
            for t in traits:
                if t.first_seen >= e:
                    continue
                before, after = self._state(t, s - 1), self._state(t, e - 1)
                flags = before[2] is not None and after[2] is not None and before[2] != after[2]
                moved = s <= t.changed_at < e or before[:2] != after[:2] or flags
                if moved or (after[0] and after[1]):
                    core += 1
                    changed += moved
            out.append(StabilityWeek(s, e, core, changed))
        return out

    def _state(self, t: PersonaRow, at: int) -> tuple[bool, bool, bool | None]:
        """(standing, stable, dispute flag or None when not known) of a trait at event time ``at``."""
        if not self._standing(t, at):
            return (False, False, None)
        state = self.trait_at(t, at)
        return (True, state.stable, state.disputed)

    def written(self, row: Row) -> bool:
        """Whether a row of this or another view had been written by the point (its content as it stands).

        A message: when it existed at the point (one the owner's rows do not hold: by its event time);
        a record: valid then or before; a trait: first seen by then; a graph node or edge: by its time.
        """
        if self.time is None:
            return True
        if isinstance(row, MessageRow):
            mine = self.by_id.get(row.id)
            return self.message(mine) if mine is not None else row.occurred_at <= self.time
        if isinstance(row, EpisodicRow):
            return self.record_known(row)
        if isinstance(row, PersonaRow):
            return row.first_seen <= self.time
        if isinstance(row, GraphNodeRow | GraphEdgeRow):
            return row.occurred_at <= self.time
        return True


class WrittenBy:
    """A store's rows of an owner that had been written by an inspection's point (``Inspection.written``).

    It answers ``load_owner`` and ``owners``, what a comparison of views (``streams.reanalyze.layer_changes``)
    reads; ``reader`` types it as the store reader it stands in for.
    """

    def __init__(self, store: StoreReader, insp: Inspection) -> None:
        self._store, self._insp = store, insp

    def load_owner(self, owner_id: str, messages_from_seq: int = 0) -> list[Row]:
        """The owner's rows written by the point."""
        return [r for r in self._store.load_owner(owner_id, messages_from_seq) if self._insp.written(r)]

    def owners(self) -> list[str]:
        """The store's owners."""
        return self._store.owners()

    @property
    def reader(self) -> StoreReader:
        """This filter where a store reader is expected."""
        return cast(StoreReader, self)
