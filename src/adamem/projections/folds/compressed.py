"""Folding ``MemoryCompressed``: a summary record in place of a cluster of episodic records.

The compression event names its source records; the fold writes one episodic row of
``type='summary'`` (``key`` = the cluster's label, ``content`` = the distilled text,
``source_message_ids`` = the union of the sources' messages, ``origin_event_id`` = the compression
event, ``router='COMPRESS'``, ``valid_from`` / ``event_time`` = the first / last source time) and
marks every source ``status='compressed'`` with ``superseded_by`` = the summary (its graph node
inactive). Nothing is deleted: the sources stay reachable from the summary (the event and the
``superseded_by`` links) and through them their messages.

A compression applies whole or not at all. It changes nothing when it is shredded (sealed under
its source messages' keys and one of them destroyed: ``schemas.sealing``), when a source record is
missing or no longer active (superseded, corrected, forgotten, or compressed by another event since
the compressor looked), or when one of its messages is not archived (forgotten, or shredded on
replay): a summary never speaks for what is gone, and live and replay agree. Applying it twice
changes nothing. Forgetting the summary (``control.forget``) makes its sources active again.
"""

from __future__ import annotations

from adamem.events import MemoryCompressed
from adamem.projections.folds import graph
from adamem.projections.folds.ids import record_id
from adamem.projections.folds.rows import EpisodicRow, episodic_row, evolve, float32_vector
from adamem.projections.folds.state import Transaction

__all__ = ["SUMMARY", "compress", "restore_sources", "summary_id"]

SUMMARY = "summary"
"""The ``type`` of a summary record in the episodic table."""


def summary_id(owner_id: str, event: MemoryCompressed) -> str:
    """The id of the summary record a compression event writes."""
    return record_id(owner_id, event.event_id, SUMMARY, event.key)


def compress(tx: Transaction, event: MemoryCompressed) -> bool:
    """Write the summary of ``event`` and mark its sources compressed (True), or change nothing (see the module)."""
    state = tx.state
    sid = summary_id(state.owner_id, event)
    if event.shredded or state.record(sid) is not None or not event.source_record_ids:
        return False
    sources = [state.record(i) for i in event.source_record_ids]
    active = [r for r in sources if r is not None and r.status == "active"]
    if len(active) != len(sources):
        return False
    owner = state.owner
    forgotten = set(owner.forgotten_message_ids) if owner is not None else set()
    if any(m in forgotten or state.message(m) is None for m in event.source_message_ids):
        return False
    latest = max(active, key=lambda r: (r.occurred_at, r.id))
    vector = float32_vector(event.vector) if event.vector else latest.vector
    if len(vector) != len(latest.vector):  # the table's vector column has one width
        vector = latest.vector
    entities = sorted({e for r in active for e in r.entities})
    summary = episodic_row(
        id=sid,
        owner_id=state.owner_id,
        type=SUMMARY,
        key=event.key,
        content=event.content,
        confidence=round(min(r.confidence for r in active), 6),
        source_message_ids=list(event.source_message_ids),
        speaker=latest.speaker,
        speaker_role=latest.speaker_role,
        conversation_id=latest.conversation_id,
        occurred_at=event.occurred_at,
        valid_from=event.span_from,
        valid_to=-1,
        superseded_by="",
        supersedes="",
        status="active",
        router="COMPRESS",
        vector=vector,
        event_time=event.span_to,
        fact_type="",
        attribute_key="",
        attribute_value="",
        entities=entities,
        origin_event_id=event.event_id,
    )
    tx.put(summary)
    for record in active:
        compressed = evolve(record, status="compressed", superseded_by=sid)
        tx.put(compressed)
        graph.set_record_node_active(tx, compressed)
    return True


def restore_sources(tx: Transaction, summary: EpisodicRow) -> None:
    """Make the records a summary compressed active again (the summary is being removed)."""
    for record in sorted(
        (
            r
            for r in tx.state.tables["episodic"].values()
            if isinstance(r, EpisodicRow) and r.status == "compressed" and r.superseded_by == summary.id
        ),
        key=lambda r: r.id,
    ):
        restored = evolve(record, status="active", superseded_by="")
        tx.put(restored)
        graph.set_record_node_active(tx, restored)
