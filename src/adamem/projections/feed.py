"""The change feed of a fold: which rows one event added, updated, superseded or removed.

``change_events(positioned, changes, view)`` turns the changes the fold made for one event into
``MemoryChanged`` events. The kind of a change is read from the fold's own state before the event
(``Upsert.previous``), never from the store or a clock, so a replay of the same log computes the
same events, byte for byte, apart from ``view``:

* ``Delete`` → ``removed``;
* an upsert of an id the state did not hold → ``added``;
* an upsert that turns a current row into history → ``superseded``: an episodic record or a
  persona trait whose ``status`` becomes ``superseded`` (its ``valid_to`` closed), a graph node
  that becomes inactive;
* any other upsert → ``updated``, with the names of the columns that changed.

The ``owners`` table (the fold's clock) is bookkeeping, not memory, and is not reported. An event
with more than ``PART_SIZE`` changes (a whole owner forgotten) gives several events, ``part`` 0, 1, …
"""

from __future__ import annotations

from collections.abc import Sequence

from adamem.events import MessageAnalyzed
from adamem.feed import FEED_LAYERS, ChangeKind, ItemChange, MemoryChanged, change_event_id
from adamem.owners import split_owner
from adamem.projections.folds.apply import Positioned
from adamem.projections.folds.changes import Change, Delete
from adamem.projections.folds.rows import EpisodicRow, GraphNodeRow, PersonaRow, Row, changed_fields

__all__ = ["PART_SIZE", "change_events", "item_change"]

PART_SIZE = 500
"""Item changes per ``MemoryChanged``: keeps a record far below Kafka's default 1 MB limit."""

_LAYERS = frozenset(FEED_LAYERS)


def _historical(row: Row) -> bool:
    """Whether a row is history rather than current memory."""
    if isinstance(row, EpisodicRow | PersonaRow):
        return row.status == "superseded"
    if isinstance(row, GraphNodeRow):
        return not row.active
    return False


def item_change(change: Change) -> ItemChange | None:
    """The feed's view of one fold change (None for tables the feed does not report)."""
    if change.table not in _LAYERS:
        return None
    if isinstance(change, Delete):
        return ItemChange(change.table, "removed", change.id)
    old, new = change.previous, change.row
    if old is None:
        return ItemChange(change.table, "added", new.id)
    kind: ChangeKind = "superseded" if _historical(new) and not _historical(old) else "updated"
    return ItemChange(change.table, kind, new.id, changed_fields(old, new))


def change_events(positioned: Positioned, changes: Sequence[Change], view: str = "") -> list[MemoryChanged]:
    """The ``MemoryChanged`` events of one folded event's changes (none when it changed no memory)."""
    items = [c for c in (item_change(ch) for ch in changes) if c is not None]
    if not items:
        return []
    event = positioned.event
    tenant, user_id = split_owner(event.owner_id)
    occurred_at = event.message.occurred_at if isinstance(event, MessageAnalyzed) else event.occurred_at
    where = (positioned.topic, positioned.partition, positioned.offset)
    return [
        MemoryChanged(
            event_id=change_event_id(event.owner_id, *where, part),
            tenant=tenant,
            user_id=user_id,
            source_topic=where[0],
            source_partition=where[1],
            source_offset=where[2],
            causation_id=event.event_id,
            occurred_at=occurred_at,
            changes=tuple(items[start : start + PART_SIZE]),
            part=part,
            view=view,
        )
        for part, start in enumerate(range(0, len(items), PART_SIZE))
    ]
