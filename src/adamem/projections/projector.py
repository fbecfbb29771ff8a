"""Folds batches of positioned events into a store: the projection step shared by every runner.

The Faust worker, ``adamem project`` and replay all call ``Projector.apply_batch``: events of one
partition, in offset order. Events below the shard's checkpoint were applied already and are
skipped (at-least-once delivery, exactly-once effect). Fold states are cached per owner and
rebuilt from the store's rows on a miss, so a restarted worker continues exactly where it was.
The cache is trimmed to its size only after a batch is committed: an owner evicted mid-batch would
be reloaded from rows that do not hold the batch's earlier events yet.
A batch that applied a ``MemoryForgotten`` is followed by ``store.erase_history``: the rows it
deleted must not survive in older versions of the store or in other views.
With ``feed`` (the default) a batch also returns its change feed (``BatchResult.feed``: one
``MemoryChanged`` per folded event that changed memory, from ``projections.feed``), computed from
the fold's own changes; the runner publishes it once the batch is committed. A rebuild that no one
subscribes to turns it off.
Each batch is timed (``adamem_fold_duration_seconds``, ``adamem_commit_duration_seconds``) around
the folds, never inside them: the folds read no clock.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from adamem import metrics
from adamem.events import MemoryForgotten
from adamem.feed import MemoryChanged
from adamem.projections.feed import change_events
from adamem.projections.folds.apply import Positioned, apply
from adamem.projections.folds.changes import Change
from adamem.projections.folds.params import SEED_DEFAULT, MemoryParameters
from adamem.projections.folds.state import OwnerMemory
from adamem.projections.packs import owner_parameters, recorded_parameters
from adamem.projections.store.base import MemoryStore

__all__ = ["BatchResult", "Projector"]


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What one batch did: events applied, skipped as already applied, rows changed, views removed by erasure.

    ``feed`` holds the batch's change events (empty when the projector computes no feed) and
    ``reach`` the next offset of the batch's topic that the commit recorded.
    """

    applied: int
    skipped: int
    changes: int
    removed_views: tuple[str, ...] = ()
    feed: tuple[MemoryChanged, ...] = ()
    reach: int = 0


class Projector:
    """Applies events to owner states and commits the changes with the offsets they reach."""

    def __init__(
        self, store: MemoryStore, params: MemoryParameters = SEED_DEFAULT, cache_size: int = 2_000, *, feed: bool = True
    ) -> None:
        self.store = store
        self.feed = feed
        # Partitions whose published feed a runner has compared with the store in this process
        # (``streams.feed.recover_feed``, once, before the partition's first batch).
        self.feed_checked: set[int] = set()
        self.params = params
        self._tenant_params = recorded_parameters(store, params)
        self._cache: OrderedDict[str, OwnerMemory] = OrderedDict()
        self._cache_size = cache_size
        self._view = store.view
        self.erased = 0  # batches whose forgets were followed by ``erase_history``

    def params_for(self, owner_id: str) -> MemoryParameters:
        """The fold parameters of an owner: ``params`` with its tenant's recorded domain packs, if any."""
        return owner_parameters(self._tenant_params, owner_id, self.params)

    def _state(self, owner_id: str) -> OwnerMemory:
        state = self._cache.get(owner_id)
        if state is None:
            state = OwnerMemory.from_rows(owner_id, self.store.load_owner(owner_id))
            self._cache[owner_id] = state
        else:
            self._cache.move_to_end(owner_id)
        return state

    def _trim(self) -> None:
        """Evict the least recently used states beyond the cache size (between batches only)."""
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def forget_cache(self) -> None:
        """Drop every cached state (after a rebalance: another worker may have written them)."""
        self._cache.clear()

    def apply_batch(
        self, partition: int, topic: str, events: Sequence[Positioned], upto: int | None = None
    ) -> BatchResult:
        """Fold events of one partition of ``topic`` (offset order) and commit them with their offset.

        ``upto`` is the next offset the batch reaches when it ends with records that were not
        events (dead-lettered); by default the offset after the last event.
        """
        done = self.store.checkpoint(partition).get(topic, 0)
        view = self.store.view
        if view != self._view:  # the store followed a switch to a rebuilt view: cached states are stale
            self._view = view
            self.forget_cache()
            self._tenant_params = recorded_parameters(self.store, self.params)
        todo = [e for e in events if e.offset >= done]
        reach = upto if upto is not None else (events[-1].offset + 1 if events else done)
        metrics.EVENTS_SKIPPED.inc(len(events) - len(todo))
        if not todo:
            if reach > done:
                self.store.commit(partition, [], {topic: reach})
                metrics.CHECKPOINT_TIME.labels(str(partition)).set_to_current_time()
            return BatchResult(0, len(events), 0, reach=max(reach, done))
        changes: list[Change] = []
        feed: list[MemoryChanged] = []
        view_name = view if isinstance(view, str) else ""
        touched: set[str] = set()
        try:
            started = time.perf_counter()
            for positioned in todo:
                owner = positioned.event.owner_id
                touched.add(owner)
                _, delta = apply(self._state(owner), positioned, self.params_for(owner))
                changes.extend(delta)
                if self.feed and delta:
                    feed.extend(change_events(positioned, delta, view_name))
            folded = time.perf_counter()
            reach = max(reach, todo[-1].offset + 1)
            if _forgets(todo):
                self.store.note_forgets(partition)
            self.store.commit(partition, changes, {topic: reach})
            metrics.FOLD_DURATION.observe(folded - started)
            metrics.COMMIT_DURATION.observe(time.perf_counter() - folded)
            metrics.EVENTS_FOLDED.inc(len(todo))
            metrics.CHECKPOINT_TIME.labels(str(partition)).set_to_current_time()
        except BaseException:
            for owner in touched:  # their cached states hold effects that were never stored
                self._cache.pop(owner, None)
            raise
        finally:
            self._trim()
        erased = self._erase(partition, todo)
        return BatchResult(len(todo), len(events) - len(todo), len(changes), erased, tuple(feed), reach)

    def apply_forgets(self, partition: int, events: Sequence[Positioned]) -> BatchResult:
        """Fold the forgets among events past the checkpoint without moving it (a view as of an earlier offset)."""
        todo = [e for e in events if isinstance(e.event, MemoryForgotten)]
        changes: list[Change] = []
        try:
            for positioned in todo:
                _, delta = apply(
                    self._state(positioned.event.owner_id), positioned, self.params_for(positioned.event.owner_id)
                )
                changes.extend(delta)
            if changes:
                self.store.note_forgets(partition)
                self.store.commit(partition, changes, {})
        except BaseException:
            self.forget_cache()
            raise
        return BatchResult(len(todo), len(events) - len(todo), len(changes), self._erase(partition, todo))

    def _erase(self, partition: int, applied: Sequence[Positioned]) -> tuple[str, ...]:
        """After forgets were committed: ``store.erase_history``; the views it removed."""
        if not _forgets(applied):
            return ()
        self.erased += 1
        return tuple(self.store.erase_history(partition))


def _forgets(events: Sequence[Positioned]) -> bool:
    return any(isinstance(p.event, MemoryForgotten) for p in events)
