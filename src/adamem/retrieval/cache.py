"""Caches of the query service, sized by memory and evicting the least frequently used.

Every owner the service has seen has an ``OwnerState``: the store's change token of its shard
when the service last synchronised, its snapshot's *version* (a number that moves whenever the
owner's rows do) and the few facts a query needs before any row (``OwnerFacts``: speakers, clock,
tenants). A commit to the shard moves the token; the service then asks the store what changed for
this owner (``MemoryStore.owner_changes``) and moves the version only if the owner's rows changed —
a commit for another owner of the shard, or a view switch to identical rows, invalidates nothing
of a hot owner. Cached values are keyed by the version, so a query after new rows never sees a
value made before them.

- ``LFUCache``: least frequently used first, ties least recently used first; bounded by an entry
  count and a total weight (approximate bytes); O(1) per operation.
- snapshots (``OwnerSnapshot``) in an ``LFUCache`` weighted by ``OwnerSnapshot.size`` (so a store of
  1,000 small owners is held whole, a few huge ones are not);
- ``QueryCache``: answers keyed by question vector; a new question reuses an answer when the
  cosine of the two vectors is ≥ ``query_cosine`` (0.92) *and* the guard matches (same top-k,
  as-of, route, whose memory, time windows and — by default — content words). The guard exists
  because e5's cosines are compressed: "where do I live?" and "where does my sister live?" score
  0.92, "why did I start working out?" and "when did I …" 0.96. Bounded per owner and in total.
- ``VectorMemo``: an LRU of question vectors by (embedder, text): asking again costs no embedding.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["LFUCache", "OwnerFacts", "OwnerState", "QueryCache", "VectorMemo"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Vector = npt.NDArray[np.float64]


class LFUCache(Generic[K, V]):
    """Least-frequently-used cache; ties evict the least recently used. Thread-safe, O(1) per operation.

    Bounded by ``capacity`` entries and, when ``weigh`` is given, by ``budget`` total weight; the
    entry just put is never the one evicted (a value heavier than the budget is kept alone).
    ``on_evict`` is called (under the cache's lock) with every entry evicted to make room.
    """

    def __init__(
        self,
        capacity: int,
        budget: int = 0,
        weigh: Callable[[V], int] | None = None,
        on_evict: Callable[[K, V], None] | None = None,
    ) -> None:
        self.capacity = max(0, capacity)
        self.budget = budget
        self.weight = 0
        self._weigh = weigh
        self._on_evict = on_evict
        self._data: dict[K, tuple[V, int]] = {}  # value, weight
        self._uses: dict[K, int] = {}
        self._by_uses: dict[int, OrderedDict[K, None]] = {}  # uses → keys, least recently used first
        self._lock = threading.Lock()
        self.hits = 0  # get() calls that found their key (read by the service's metrics)
        self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def _touch(self, key: K, uses: int) -> None:
        old = self._uses.get(key)
        if old is not None:
            bucket = self._by_uses[old]
            del bucket[key]
            if not bucket:
                del self._by_uses[old]
        self._uses[key] = uses
        self._by_uses.setdefault(uses, OrderedDict())[key] = None

    def get(self, key: K) -> V | None:
        """The value, counting a use, or None."""
        with self._lock:
            found = self._data.get(key)
            if found is None:
                self.misses += 1
                return None
            self.hits += 1
            self._touch(key, self._uses[key] + 1)
            return found[0]

    def uses(self, key: K) -> int:
        """How often an entry was put or got (0 when absent)."""
        with self._lock:
            return self._uses.get(key, 0)

    def peek(self, key: K) -> V | None:
        """The value without counting a use, or None."""
        with self._lock:
            found = self._data.get(key)
            return found[0] if found is not None else None

    def put(self, key: K, value: V) -> None:
        """Insert or replace (a replaced entry keeps its uses and gains one), then evict to fit."""
        if self.capacity == 0:
            return
        weight = self._weigh(value) if self._weigh is not None else 0
        with self._lock:
            old = self._data.get(key)
            if old is not None:
                self.weight -= old[1]
            self._data[key] = (value, weight)
            self.weight += weight
            self._touch(key, self._uses.get(key, 0) + 1)
            while len(self._data) > self.capacity or (self._weigh is not None and self.weight > self.budget):
                victim = self._victim(key)
                if victim is None:
                    break
                evicted = self._data[victim][0]
                self._remove(victim)
                if self._on_evict is not None:
                    self._on_evict(victim, evicted)

    def _victim(self, keep: K) -> K | None:
        for uses in sorted(self._by_uses):
            for key in self._by_uses[uses]:
                if key != keep:
                    return key
        return None

    def _remove(self, key: K) -> None:
        found = self._data.pop(key, None)
        if found is None:
            return
        self.weight -= found[1]
        uses = self._uses.pop(key)
        bucket = self._by_uses[uses]
        del bucket[key]
        if not bucket:
            del self._by_uses[uses]

    def pop(self, key: K) -> None:
        """Remove an entry if present."""
        with self._lock:
            self._remove(key)

    def items(self) -> list[tuple[K, V]]:
        """A copy of the entries."""
        with self._lock:
            return [(k, v) for k, (v, _) in self._data.items()]

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._data.clear()
            self._uses.clear()
            self._by_uses.clear()
            self.weight = 0


@dataclass(frozen=True, slots=True)
class OwnerFacts:
    """What a query needs of an owner before its rows: whether it exists, whose memory, the clock."""

    known: bool  # the owner has any memory
    speakers: tuple[tuple[str, str], ...]
    last_event_time: int


@dataclass(frozen=True, slots=True)
class OwnerState:
    """An owner as last synchronised: the shard's change token then, and the version of its rows."""

    token: str
    version: int
    facts: OwnerFacts


@dataclass
class _Entry(Generic[V]):
    vector: Vector
    guard: Hashable
    value: V


@dataclass
class _OwnerQueries(Generic[V]):
    version: int
    entries: dict[int, _Entry[V]] = field(default_factory=dict)


class QueryCache(Generic[V]):
    """Semantic cache of answers per owner: a similar question vector and an equal guard give the cached value.

    Values are kept for one version of an owner's rows (a new version drops the owner's old
    ones), at most ``per_owner`` per owner and ``budget`` total weight (``weigh``), least
    frequently used out first.
    """

    def __init__(
        self, per_owner: int, threshold: float, budget: int = 1 << 62, weigh: Callable[[V], int] | None = None
    ) -> None:
        self.per_owner = per_owner
        self.threshold = threshold
        self._owners: dict[str, _OwnerQueries[V]] = {}
        self._lock = threading.RLock()
        self._next = 0
        self._weigh = weigh
        self.hits = 0  # get() calls answered from the cache (read by the service's metrics)
        self.misses = 0

        def weight(entry: _Entry[V]) -> int:
            return weigh(entry.value) if weigh is not None else 1

        self._lfu: LFUCache[tuple[str, int], _Entry[V]] = LFUCache(1 << 62, budget, weight, self._evicted)

    def _evicted(self, key: tuple[str, int], entry: _Entry[V]) -> None:
        owner = self._owners.get(key[0])
        if owner is not None:
            owner.entries.pop(key[1], None)
            if not owner.entries:
                del self._owners[key[0]]

    def _owner(self, owner_id: str, version: int) -> _OwnerQueries[V]:
        owner = self._owners.get(owner_id)
        if owner is None or owner.version != version:  # the owner's rows changed: nothing cached is valid
            if owner is not None:
                for key in owner.entries:
                    self._lfu.pop((owner_id, key))
            owner = self._owners[owner_id] = _OwnerQueries(version)
        return owner

    def get(self, owner_id: str, version: int, vector: Vector, guard: Hashable) -> V | None:
        """The best cached value with an equal guard and cosine ≥ threshold, or None."""
        with self._lock:
            owner = self._owner(owner_id, version)
            best: tuple[float, int] | None = None
            for key, entry in owner.entries.items():
                if entry.guard != guard:
                    continue
                cos = float(entry.vector @ vector)
                if cos >= self.threshold and (best is None or (cos, -key) > (best[0], -best[1])):
                    best = (cos, key)
            hit = self._lfu.get((owner_id, best[1])) if best is not None else None
            if hit is None:
                self.misses += 1
                return None
            self.hits += 1
            return hit.value

    def put(self, owner_id: str, version: int, vector: Vector, guard: Hashable, value: V) -> None:
        """Remember a value for this owner and version."""
        if self.per_owner <= 0:
            return
        with self._lock:
            owner = self._owner(owner_id, version)
            key = self._next
            self._next += 1
            entry = _Entry(vector, guard, value)
            owner.entries[key] = entry
            self._lfu.put((owner_id, key), entry)
            while len(owner.entries) > self.per_owner:
                victim = min(owner.entries, key=lambda k: (self._lfu.uses((owner_id, k)), k))
                owner.entries.pop(victim)
                self._lfu.pop((owner_id, victim))

    def __len__(self) -> int:
        return len(self._lfu)

    def clear(self, owner_id: str | None = None) -> None:
        """Forget one owner's answers, or everyone's."""
        with self._lock:
            users = list(self._owners) if owner_id is None else [owner_id]
            for user in users:
                owner = self._owners.pop(user, None)
                for key in owner.entries if owner is not None else ():
                    self._lfu.pop((user, key))


class VectorMemo:
    """An LRU of question vectors by (embedder name, question). Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: OrderedDict[tuple[str, str], Vector] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # questions found memoised (read by the service's metrics)
        self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def vector(self, embedder: str, question: str, embed: Callable[[str], Vector]) -> Vector:
        """The memoised vector of ``question``, embedding it on a miss."""
        key = (embedder, question)
        with self._lock:
            found = self._data.get(key)
            if found is not None:
                self.hits += 1
                self._data.move_to_end(key)
                return found
            self.misses += 1
        vector = embed(question)
        if self.capacity > 0:
            with self._lock:
                self._data[key] = vector
                while len(self._data) > self.capacity:
                    self._data.popitem(last=False)
        return vector
