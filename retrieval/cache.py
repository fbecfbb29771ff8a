"""Caches of the query service, both invalidated when an owner's projections change.

The change token of an owner is the checkpoint of the owner's shard
(``store.checkpoint(partition_for(user, partitions))``) together with the store's active view (a
rebuilt LanceDB view can reach the same offsets with different rows): every commit of new events
moves it, so a query after new messages always sees a token it has not cached. (The token is per
shard, so a commit for another owner of the same shard also invalidates: safe, merely conservative.)

- ``HotCache``: an LFU cache of owner snapshots (every row, the graph, the text index) for the
  most frequently queried owners, plus every queried owner's working memory, which is pinned
  (never evicted by LFU; replaced only when its token is stale).
- ``QueryCache``: per owner, answers keyed by question vector; a new question reuses an answer
  when the cosine of the two vectors is ≥ ``query_cosine`` (0.92) *and* the guard matches (same
  top-k, as-of, route, whose memory, time windows and — by default — content words). The guard
  exists because e5's cosines are compressed: "where do I live?" and "where does my sister live?"
  score 0.92, "why did I start working out?" and "when did I …" 0.96.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from adamem.partitioning import partition_for
from projections.store.base import MemoryStore

__all__ = ["HotCache", "LFUCache", "QueryCache", "Token", "change_token", "store_partitions"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Token = tuple[str, tuple[tuple[str, int], ...]]


def store_partitions(store: MemoryStore) -> int:
    """The shard count a store is bound to (1 if it cannot tell).

    The ``MemoryStore`` port has no accessor yet, so this reads the two adapters' bound count;
    pass ``partitions`` to ``Retriever`` to avoid it.
    """
    count = getattr(store, "partitions", None)
    if isinstance(count, int) and count > 0:
        return count
    bound = getattr(store, "_partitions", None)
    if isinstance(bound, int) and bound > 0:
        return bound
    meta = getattr(store, "_meta", None)
    if isinstance(meta, dict) and isinstance(meta.get("partitions"), int) and meta["partitions"] > 0:
        return int(meta["partitions"])
    return 1


def change_token(store: MemoryStore, user_id: str, partitions: int) -> Token:
    """The store's active view and the owner's shard checkpoint: it moves on every commit and view switch."""
    offsets = store.checkpoint(partition_for(user_id, partitions))  # (LanceDB follows a view switch here)
    return str(getattr(store, "view", "")), tuple(sorted(offsets.items()))


class LFUCache(Generic[K, V]):
    """Least-frequently-used cache; ties evict the least recently inserted. Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._data: dict[K, V] = {}
        self._hits: dict[K, int] = {}
        self._clock: dict[K, int] = {}
        self._tick = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: K) -> V | None:
        """The value, counting a use, or None."""
        with self._lock:
            if key not in self._data:
                return None
            self._hits[key] += 1
            return self._data[key]

    def put(self, key: K, value: V) -> None:
        """Insert or replace, evicting the least frequently used entry when full."""
        if self.capacity == 0:
            return
        with self._lock:
            self._tick += 1
            if key not in self._data and len(self._data) >= self.capacity:
                victim = min(self._data, key=lambda k: (self._hits[k], self._clock[k]))
                self.pop_locked(victim)
            self._data[key] = value
            self._hits[key] = self._hits.get(key, 0) + 1
            self._clock[key] = self._tick

    def pop(self, key: K) -> None:
        """Remove an entry if present."""
        with self._lock:
            self.pop_locked(key)

    def pop_locked(self, key: K) -> None:
        """Remove an entry; the caller holds the lock."""
        self._data.pop(key, None)
        self._hits.pop(key, None)
        self._clock.pop(key, None)

    def items(self) -> list[tuple[K, V]]:
        """A copy of the entries."""
        with self._lock:
            return list(self._data.items())

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._data.clear()
            self._hits.clear()
            self._clock.clear()


S = TypeVar("S")
W = TypeVar("W")


class HotCache(Generic[S, W]):
    """LFU of owner snapshots, with every owner's working memory pinned; entries carry their token."""

    def __init__(self, capacity: int) -> None:
        self._snapshots: LFUCache[str, tuple[Token, S]] = LFUCache(capacity)
        self._working: dict[str, tuple[Token, W]] = {}
        self._lock = threading.Lock()

    def snapshot(self, user_id: str, token: Token, load: Callable[[], S]) -> S:
        """The owner's snapshot for this token, loading (and caching) it when missing or stale."""
        hit = self._snapshots.get(user_id)
        if hit is not None and hit[0] == token:
            return hit[1]
        value = load()
        self._snapshots.put(user_id, (token, value))
        return value

    def working(self, user_id: str, token: Token, load: Callable[[], W]) -> W:
        """The owner's working memory for this token (pinned: never evicted, only refreshed)."""
        with self._lock:
            hit = self._working.get(user_id)
        if hit is not None and hit[0] == token:
            return hit[1]
        value = load()
        with self._lock:
            self._working[user_id] = (token, value)
        return value

    def __len__(self) -> int:
        return len(self._snapshots)


@dataclass
class _Entry(Generic[V]):
    vector: npt.NDArray[np.float64]
    guard: Hashable
    value: V


@dataclass
class _OwnerQueries(Generic[V]):
    token: Token
    entries: LFUCache[int, _Entry[V]]
    next_id: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class QueryCache(Generic[V]):
    """Per-owner semantic cache of answers: similar question vector + equal guard → the cached value."""

    def __init__(self, per_owner: int, threshold: float) -> None:
        self.per_owner = per_owner
        self.threshold = threshold
        self._owners: dict[str, _OwnerQueries[V]] = {}
        self._lock = threading.Lock()

    def _owner(self, user_id: str, token: Token) -> _OwnerQueries[V]:
        with self._lock:
            owner = self._owners.get(user_id)
            if owner is None or owner.token != token:  # projections changed: nothing cached is valid
                owner = _OwnerQueries(token, LFUCache(self.per_owner))
                self._owners[user_id] = owner
            return owner

    def get(self, user_id: str, token: Token, vector: npt.NDArray[np.float64], guard: Hashable) -> V | None:
        """The best cached value with an equal guard and cosine ≥ threshold, or None."""
        owner = self._owner(user_id, token)
        best: tuple[float, int] | None = None
        for key, entry in owner.entries.items():
            if entry.guard != guard:
                continue
            cos = float(entry.vector @ vector)
            if cos >= self.threshold and (best is None or (cos, -key) > (best[0], -best[1])):
                best = (cos, key)
        if best is None:
            return None
        hit = owner.entries.get(best[1])
        return hit.value if hit is not None else None

    def put(self, user_id: str, token: Token, vector: npt.NDArray[np.float64], guard: Hashable, value: V) -> None:
        """Remember a value for this owner and token."""
        owner = self._owner(user_id, token)
        with owner.lock:
            key = owner.next_id
            owner.next_id += 1
        owner.entries.put(key, _Entry(vector, guard, value))

    def clear(self, user_id: str | None = None) -> None:
        """Forget one owner's answers, or everyone's."""
        with self._lock:
            if user_id is None:
                self._owners.clear()
            else:
                self._owners.pop(user_id, None)
