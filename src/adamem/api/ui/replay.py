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
replay's in every field but ``vector``, and the fold takes about half the time. The decoded events
of an owner are kept while the partition's end does not move, and the folded rows per (owner, point,
end), a few of each.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from adamem.errors import AdaMemError
from adamem.events import ChatMessage, Embedding, Event, MemoryForgotten, MessageAnalyzed
from adamem.owners import partition_key
from adamem.partitioning import owner_partition
from adamem.projections.folds.apply import Positioned, apply
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.folds.rows import PersonaRow
from adamem.projections.folds.state import OwnerMemory
from adamem.projections.store.ports import MemoryStore
from adamem.retrieval.snapshot import AsOf
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.generations import active
from adamem.streams.keys import keystore_for
from adamem.streams.log import EventLog, LogRecord
from adamem.streams.replay_jobs import folded_until

__all__ = ["PersonaAt", "PersonaReplays", "fold_persona"]

_K = TypeVar("_K", bound=Hashable)
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


def fold_persona(owner_id: str, events: list[Positioned], point: AsOf, params: MemoryParameters) -> PersonaAt:
    """Fold an owner's events (log order) as a replay to ``point`` does; the persona rows it leaves."""
    state = OwnerMemory(owner_id)
    count, end = 0, (events[-1].offset + 1 if events else 0)
    for positioned in events:
        event = positioned.event
        if point.offset is not None:
            if positioned.offset >= point.offset and not isinstance(event, MemoryForgotten):
                continue
        elif not folded_until(event, point.time):
            continue
        apply(state, positioned, params)
        count += 1
    traits = {i: r for i, r in state.tables["persona"].items() if isinstance(r, PersonaRow)}
    return PersonaAt(traits, count, end)


class PersonaReplays:
    """Folds of owners' persona at points, from one log, kept per (owner, point, partition end)."""

    def __init__(self, log: EventLog, settings: Settings, size: int = 8) -> None:
        self.log, self.settings = log, settings
        self._events: _Bounded[tuple[str, str, int, int], list[Positioned]] = _Bounded(2)
        self._folds: _Bounded[tuple[str, AsOf, str, int, int], PersonaAt] = _Bounded(size)

    async def at(self, store: MemoryStore, owner_id: str, point: AsOf, params: MemoryParameters) -> PersonaAt:
        """The owner's persona rows at ``point``, as a replay to it folds them."""
        topic = (await asyncio.to_thread(active, self.settings, store)).topic("analyses")
        partition = owner_partition(owner_id, self.log.partitions(topic))
        end = (await self.log.end_offsets(topic)).get(partition, 0)
        key = (owner_id, point, topic, partition, end)
        found = self._folds.get(key)
        if found is not None:
            return found
        events = self._events.get(key[:1] + key[2:])
        if events is None:
            raw = [
                rec
                async for rec in self.log.read(
                    topic, from_offsets={partition: 0}, until={partition: end}, key=partition_key(owner_id)
                )
            ]
            events = await asyncio.to_thread(self._decode, owner_id, raw)
            self._events.put(key[:1] + key[2:], events)
        folded = await asyncio.to_thread(fold_persona, owner_id, events, point, params)
        found = PersonaAt(folded.traits, folded.events, end)
        self._folds.put(key, found)
        return found

    def _decode(self, owner_id: str, records: list[LogRecord]) -> list[Positioned]:
        keys = keystore_for(self.log, self.settings)
        out: list[Positioned] = []
        for rec in records:
            try:
                event = decode_event(rec.value, keys)  # a forgotten message comes back shredded
            except AdaMemError:
                continue  # dead-lettered when it was first projected
            if isinstance(event, ChatMessage) or event.owner_id != owner_id:
                continue
            out.append(Positioned(_without_vector(event), rec.topic, rec.partition, rec.offset))
        return out
