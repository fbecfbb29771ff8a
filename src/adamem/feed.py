"""The memory change feed's event: ``MemoryChanged``, what one event on the log changed in an owner's memory.

A ``MemoryChanged`` names the causing event's log position and, per changed row, its layer
(table), its id and the kind of change — ``added``, ``updated``, ``superseded``, ``removed`` —
never its content: the log is crypto-shredded (text exists on it only sealed under a message's
key), so the feed carries ids, and a subscriber reads rows through the query service. Event ids
are derived from the owner, the source position and the part number, so a replay of the same log
computes the same events, and a consumer dedupes a redelivery by ``event_id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple

from adamem.events import NAMESPACE, _ms
from adamem.owners import owner_key

__all__ = ["CHANGE_KINDS", "FEED_LAYERS", "ItemChange", "MemoryChanged", "change_event_id"]

ChangeKind = Literal["added", "updated", "superseded", "removed"]
CHANGE_KINDS: tuple[str, ...] = ("added", "updated", "superseded", "removed")
FEED_LAYERS: tuple[str, ...] = ("messages", "episodic", "persona", "graph_nodes", "graph_edges")
"""The tables the feed reports (the ``owners`` bookkeeping table is not memory and is left out)."""


def change_event_id(owner_id: str, topic: str, partition: int, offset: int, part: int) -> str:
    """Deterministic id of the ``part``-th change event caused by the event at (topic, partition, offset)."""
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(("chg", owner_id, topic, str(partition), str(offset), str(part)))))


class ItemChange(NamedTuple):
    """One row of one layer that changed, and how (a named tuple: the fold makes one per changed row)."""

    layer: str  # one of FEED_LAYERS
    kind: ChangeKind
    item_id: str
    fields: tuple[str, ...] = ()  # changed columns, for updated and superseded

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this change."""
        return {"layer": self.layer, "kind": self.kind, "item_id": self.item_id, "fields": list(self.fields)}

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> ItemChange:
        """Build from a decoded Avro record."""
        return cls(r["layer"], r["kind"], r["item_id"], tuple(r.get("fields", ())))


@dataclass(frozen=True, slots=True)
class MemoryChanged:
    """What the event at ``source`` changed in the committed memory of one owner (one part of it)."""

    SCHEMA: ClassVar[str] = "adamem.events.MemoryChanged"

    event_id: str
    user_id: str
    source_topic: str
    source_partition: int
    source_offset: int
    causation_id: str
    occurred_at: int
    changes: tuple[ItemChange, ...]
    part: int = 0
    view: str = ""
    tenant: str = "default"
    schema_version: int = 1

    @property
    def owner_id(self) -> str:
        """The memory owner's key, ``tenant:user_id`` (see ``adamem.owners``)."""
        return owner_key(self.tenant, self.user_id)

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event."""
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "tenant": self.tenant,
            "user_id": self.user_id,
            "view": self.view,
            "source": {"topic": self.source_topic, "partition": self.source_partition, "offset": self.source_offset},
            "causation_id": self.causation_id,
            "occurred_at": self.occurred_at,
            "part": self.part,
            "changes": [c.to_record() for c in self.changes],
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> MemoryChanged:
        """Build from a decoded Avro record."""
        source = r["source"]
        return cls(
            event_id=str(r["event_id"]),
            tenant=r["tenant"],
            user_id=r["user_id"],
            view=r.get("view", ""),
            source_topic=source["topic"],
            source_partition=int(source["partition"]),
            source_offset=int(source["offset"]),
            causation_id=r["causation_id"],
            occurred_at=_ms(r["occurred_at"]),
            part=int(r.get("part", 0)),
            changes=tuple(ItemChange.from_record(c) for c in r["changes"]),
            schema_version=int(r.get("schema_version", 1)),
        )

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready form (the server-sent events' data): the Avro record without its schema version."""
        return {k: v for k, v in self.to_record().items() if k != "schema_version"}
