"""An owner's persona as it stood at an as-of point, folded again from the owner's recorded events.

``PersonaReplays.at`` reads the owner's records of the analyses topic (the store's generation's,
on the owner's partition, up to the partition's end now), folds them into a fresh state in memory
with the fold replay uses (``projections.folds.apply``, the retriever's ``MemoryParameters``) and
returns that state's persona rows. What is folded is what ``adamem replay --until`` folds
(``streams.replay_jobs``):

- at event time T: every analysis of a message said by T and every correction made by T, in log
  order, and every forget, whenever it was asked for;
- at log offset O: every event below O, then the forgets at and past O.

So a forgotten message never comes back at an earlier point: its forget is folded there too (and a
sealed message whose key the forget destroyed decodes shredded, and is not folded at all).

The fold reads no embedding to decide anything (message vectors are copied into rows, and a trait's
vector is their sum), so the analyses are folded without their vectors: the persona rows are the
replay's in every field but ``vector``, and the fold takes about half the time. A record is decoded
only when the fold may take it: one its schema (the framing's header) or the store's row of its
message (said after the time) shows a replay to the point passes over is not. The records of an
owner and their fold so far (``Frontier``: a point after the last one folds on from it, an earlier
one from a kept copy of the state) are kept while the partition's end does not move, and the
folded rows per (owner, point, end), a few of each.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Generic, TypeVar

from adamem.errors import AdaMemError
from adamem.events import ChatMessage, Embedding, Event, MemoryForgotten, MessageAnalyzed
from adamem.owners import partition_key
from adamem.partitioning import owner_partition
from adamem.projections.folds.apply import Positioned, apply
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import MessageRow, PersonaRow
from adamem.projections.folds.state import OwnerMemory
from adamem.projections.store.ports import MemoryStore
from adamem.retrieval.snapshot import AsOf
from adamem.schemas.codec import default_registry
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.generations import active
from adamem.streams.keys import KeyRingLike, keystore_for
from adamem.streams.log import EventLog, LogRecord
from adamem.streams.replay_jobs import folded_until

__all__ = ["Frontier", "PersonaAt", "PersonaReplays", "fold_persona", "folds"]

_K = TypeVar("_K", bound=Hashable)
_R = TypeVar("_R")
_V = TypeVar("_V")


@dataclass(frozen=True)
class PersonaAt:
    """The persona rows of an owner's fold at a point: every row, active or superseded, by id."""

    traits: dict[str, PersonaRow]
    events: int  # the events folded
    end: int  # the end of the owner's analyses partition that was read to


class _Bounded(Generic[_K, _V]):
    """A few values, the least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self._kept: OrderedDict[_K, _V] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            value = self._kept.get(key)
            if value is not None:
                self._kept.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)


def _without_vector(event: Event) -> Event:
    if isinstance(event, MessageAnalyzed) and event.embedding.vector:
        return replace(event, embedding=Embedding(event.embedding.model, ()))
    return event


def folds(positioned: Positioned, point: AsOf) -> bool:
    """Whether a replay to ``point`` folds the event: below an offset (or a forget), or dated by a time."""
    if point.offset is not None:
        return positioned.offset < point.offset or isinstance(positioned.event, MemoryForgotten)
    return folded_until(positioned.event, point.time)


def fold_persona(owner_id: str, events: list[Positioned], point: AsOf, params: MemoryParameters) -> PersonaAt:
    """Fold an owner's events (log order) as a replay to ``point`` does; the persona rows it leaves."""
    state = OwnerMemory(owner_id)
    count = 0
    for positioned in events:
        if folds(positioned, point):
            apply(state, positioned, params)
            count += 1
    return PersonaAt(_persona(state), count, events[-1].offset + 1 if events else 0)


def _persona(state: OwnerMemory) -> dict[str, PersonaRow]:
    return {i: r for i, r in state.tables["persona"].items() if isinstance(r, PersonaRow)}


def _copy(state: OwnerMemory) -> OwnerMemory:
    """Another state with the same rows (rows are immutable values; the index is rebuilt on first use)."""
    copy = OwnerMemory(state.owner_id)
    copy.tables = {table: dict(rows) for table, rows in state.tables.items()}
    return copy


class Frontier(Generic[_R]):
    """One owner's records folded from the first on, resumable: the fold to a point reuses the fold so far.

    ``records`` are the owner's records in log order; ``decode`` makes one an event (None: nothing a
    replay folds — another owner's, a bare message, one that does not decode), once, when first
    needed; ``skip(record, point)`` may tell without decoding that a replay to the point does not
    fold it (False: decode and see).

    ``at(point)`` folds the longest run of records from the first that a replay to the point folds
    (``folds``) into the kept state — on from where it stands, or from the newest kept copy at or
    before the run's end when the run is shorter — and the rest of what the replay folds (the
    forgets past an offset, an event dated by a time that comes after one that is not) into a copy
    of it. A copy of the state is kept every ``every`` events folded, so a point earlier than the
    last one folds at most that many events again. The fold is sequential and its state is nothing
    but its rows, so the rows equal ``fold_persona``'s.
    """

    def __init__(
        self,
        owner_id: str,
        records: Sequence[_R],
        decode: Callable[[_R], Positioned | None],
        params: MemoryParameters,
        *,
        skip: Callable[[_R, AsOf], bool] | None = None,
        every: int = 2_000,
    ) -> None:
        self.owner_id, self.records, self.params, self.every = owner_id, records, params, every
        self._decode, self._skip = decode, skip
        self._events: dict[int, Positioned | None] = {}
        self.state = OwnerMemory(owner_id)
        self.folded = 0  # records, from the first, folded into ``state``
        self._kept: dict[int, OwnerMemory] = {0: OwnerMemory(owner_id)}
        self.lock = threading.Lock()

    def _event(self, i: int) -> Positioned | None:
        if i not in self._events:
            self._events[i] = self._decode(self.records[i])
        return self._events[i]

    def _folds(self, i: int, point: AsOf) -> bool:
        """Whether a replay to the point folds record ``i`` (a record that is no event is passed over)."""
        if self._skip is not None and self._skip(self.records[i], point):
            return False
        event = self._event(i)
        return event is None or folds(event, point)

    def at(self, point: AsOf) -> PersonaAt:
        """The persona rows of a replay to ``point`` (hold ``lock``: the state is folded in place)."""
        count = len(self.records)
        run = next((i for i in range(count) if not self._folds(i, point)), count)
        if self.folded > run:
            mark = max(m for m in self._kept if m <= run)
            self.state, self.folded = _copy(self._kept[mark]), mark
        while self.folded < run:
            event = self._event(self.folded)
            if event is not None:
                apply(self.state, event, self.params)
            self.folded += 1
            if self.folded % self.every == 0 and self.folded not in self._kept:
                self._kept[self.folded] = _copy(self.state)
        rest = [e for i in range(run, count) if self._folds(i, point) and (e := self._event(i)) is not None]
        state = self.state
        if rest:
            state = _copy(state)
            for positioned in rest:
                apply(state, positioned, self.params)
        folded = sum(self._events.get(i) is not None for i in range(run)) + len(rest)
        return PersonaAt(_persona(state), folded, 0)


class PersonaReplays:
    """Folds of owners' persona at points, from one log, kept per (owner, point, partition end).

    Per owner (a few) the records read and their ``Frontier`` (which decodes them as it needs them)
    are kept while the partition's end does not move.
    """

    def __init__(self, log: EventLog, settings: Settings, size: int = 8) -> None:
        self.log, self.settings = log, settings
        self._frontiers: _Bounded[tuple[str, str, int, int, MemoryParameters], Frontier[LogRecord]] = _Bounded(2)
        self._folds: _Bounded[tuple[str, AsOf, str, int, int, MemoryParameters], PersonaAt] = _Bounded(size)

    async def at(
        self,
        store: MemoryStore,
        owner_id: str,
        point: AsOf,
        params: MemoryParameters,
        messages: Sequence[MessageRow] = (),
    ) -> PersonaAt:
        """The owner's persona rows at ``point``, as a replay to it folds them.

        ``messages``: the owner's message rows in the store, if at hand: the analyses they were folded
        from need not be decoded to be passed over at a time before them.
        """
        topic = (await asyncio.to_thread(active, self.settings, store)).topic("analyses")
        partition = owner_partition(owner_id, self.log.partitions(topic))
        end = (await self.log.end_offsets(topic)).get(partition, 0)
        key = (owner_id, point, topic, partition, end, params)
        found = self._folds.get(key)
        if found is not None:
            return found
        owner = (owner_id, topic, partition, end, params)
        frontier = self._frontiers.get(owner)
        if frontier is None:
            raw = [
                rec
                async for rec in self.log.read(
                    topic, from_offsets={partition: 0}, until={partition: end}, key=partition_key(owner_id)
                )
            ]
            dated = {
                m.source_offset: m.occurred_at
                for m in messages
                if m.source_topic == topic and m.source_partition == partition
            }
            keys = keystore_for(self.log, self.settings)
            frontier = Frontier(owner_id, raw, partial(_decoded, owner_id, keys), params, skip=partial(_skipped, dated))
            self._frontiers.put(owner, frontier)

        def fold() -> PersonaAt:
            with frontier.lock:
                return frontier.at(point)

        folded = await asyncio.to_thread(fold)
        found = PersonaAt(folded.traits, folded.events, end)
        self._folds.put(key, found)
        return found


def _decoded(owner_id: str, keys: KeyRingLike, rec: LogRecord) -> Positioned | None:
    """A record of the owner's as the fold takes it (without its vector); None for anything it does not fold."""
    try:
        event = decode_event(rec.value, keys)  # a forgotten message comes back shredded
    except AdaMemError:
        return None  # dead-lettered when it was first projected
    if isinstance(event, ChatMessage) or event.owner_id != owner_id:
        return None
    return Positioned(_without_vector(event), rec.topic, rec.partition, rec.offset)


def _skipped(dated: Mapping[int, int], rec: LogRecord, point: AsOf) -> bool:
    """Whether a replay to the point does not fold a record, told without decoding it (False: not known).

    By its schema (the framing's header): at an offset, a record at or past it that is not a forget.
    At a time, an analysis whose message the store holds (``dated``: the event time of the message
    each of the owner's rows was folded from, by the offset of its analysis) as said after the time.
    """
    try:
        schema = default_registry().writer_of(rec.value)
    except AdaMemError:
        return False
    if point.offset is not None:
        return rec.offset >= point.offset and schema != MemoryForgotten.SCHEMA
    if schema == ChatMessage.SCHEMA:
        return True
    said = dated.get(rec.offset) if schema == MessageAnalyzed.SCHEMA else None
    return said is not None and point.time is not None and said > point.time
