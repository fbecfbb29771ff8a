"""Memory health of one owner, from the rows the projections already have (design 7.3).

Pure functions of an owner's rows: no clock (an owner's "now" is its newest event time, the
``owners`` row's ``last_event_time``), no randomness, so the figures of a replayed view equal the
live ones. The query service aggregates them per tenant (``adamem_memory_*`` metrics).

* **Fragmentation rate** — of the owner's *consolidated* messages whose recorded analysis
  extracted at least one fact, attribute or event, the share that no episodic record cites in its
  ``source_message_ids``: what the Memory Agent saw but never reached the structured memory
  (ignored as low-confidence or less reliable). 0 is ideal; a rising rate means extraction and
  routing drift apart.
* **Repeat-explanation rate** — of the same messages, the share cited only as a *later* source
  of records that an earlier message created (the router's IGNORE "redundant" appends the message
  to the record it restates) and that created or changed no record of their own: the user
  explained again what memory already held. A good system keeps it under 5 %.
* **Persona stability index** — ``projections.folds.persona.stability_index`` over the week that
  ends at the owner's newest event: the share of core traits (active stable traits, plus traits
  that changed) whose value, stability or dispute flag changed during that week. Healthy: 15–30 %.

The retrieval precision proxy is measured at answer time, not from rows (``adamem.metrics``:
``adamem_answers_top_in_window_total / adamem_answers_windowed_total``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from adamem.projections.folds.persona import stability_index
from adamem.projections.folds.rows import EpisodicRow, MessageRow, OwnerRow, Row

__all__ = ["WEEK_MS", "OwnerHealth", "owner_health"]

WEEK_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class OwnerHealth:
    """Counts behind an owner's health figures; sums of them aggregate owners into a tenant."""

    extracted: int  # consolidated messages whose analysis extracted at least one item
    fragmented: int  # of those, cited by no episodic record
    repeated: int  # of those, only a later source of records an earlier message created
    stability: float  # the persona stability index of the owner's last week
    has_persona: bool  # whether the owner has any persona trait (the index means something)

    @property
    def fragmentation_rate(self) -> float:
        """``fragmented / extracted`` (0.0 without extracted messages)."""
        return self.fragmented / self.extracted if self.extracted else 0.0

    @property
    def repeat_rate(self) -> float:
        """``repeated / extracted`` (0.0 without extracted messages)."""
        return self.repeated / self.extracted if self.extracted else 0.0


def _has_items(message: MessageRow) -> bool:
    try:
        extraction = json.loads(message.extraction_json or "{}")
    except ValueError:
        return False
    return isinstance(extraction, dict) and any(
        extraction.get(k) for k in ("facts", "attributes", "events") if isinstance(extraction.get(k), list)
    )


def owner_health(rows: Iterable[Row]) -> OwnerHealth:
    """The health counts of one owner's rows (every table; other rows are ignored)."""
    rows = list(rows)
    now = max((r.last_event_time for r in rows if isinstance(r, OwnerRow)), default=-1)
    first_source: set[str] = set()
    later_source: set[str] = set()
    changed_by: set[str] = set()
    for r in rows:
        if isinstance(r, EpisodicRow) and r.source_message_ids:
            first_source.add(r.source_message_ids[0])
            later_source.update(r.source_message_ids[1:])
            if r.router in ("UPDATE", "CORRECT"):
                changed_by.add(r.source_message_ids[0])
    extracted = fragmented = repeated = 0
    for r in rows:
        if not isinstance(r, MessageRow) or not r.consolidated or not _has_items(r):
            continue
        extracted += 1
        if r.id not in first_source and r.id not in later_source:
            fragmented += 1
        elif r.id in later_source and r.id not in first_source and r.id not in changed_by:
            repeated += 1
    has_persona = any(r.TABLE == "persona" for r in rows)
    stability = stability_index(rows, now - WEEK_MS, now + 1) if has_persona and now >= 0 else 0.0
    return OwnerHealth(extracted, fragmented, repeated, stability, has_persona)
